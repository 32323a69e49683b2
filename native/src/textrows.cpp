// Rows of JSON text from typed columns (memlens.diff's `diff --json`: a million line pairs of
// 48 numbers each). Not part of the tracer: it runs in the reading processes (the CLI, the
// servers), with the GIL held, and touches no allocator hook.
#include "textrows.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

namespace memlens::textrows {

namespace {

constexpr int64_t kExactDouble = int64_t{1} << 53;

// Writers into a buffer the caller has made room in (at most 21 and 24 characters).
char* put_int(char* p, int64_t v) {
    return std::to_chars(p, p + 21, v).ptr;
}

constexpr size_t kIntWidth = 21;    // "-9223372036854775808" and one spare
constexpr size_t kFloatWidth = 32;  // "-2.2250738585072014e-308" and spares
constexpr size_t kAgainWidth = 64;  // the longest text a field repeats

char* put_bytes(char* p, const char* s, size_t n) {
    std::memcpy(p, s, n);
    return p + n;
}

char* put_float(char* p, double v) {
    // The shortest digits that read back as v (what Python's repr finds too), then laid out
    // as repr does: positional when the decimal point falls within 4 zeros before the first
    // digit and 16 digits after it, exponential otherwise ("1e-05", "1.5e+16").
    char buf[40];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    const char* q = buf;
    const char* end = r.ptr;
    if (q < end && *q == '-') {
        *p++ = '-';
        ++q;
    }
    char digits[24];
    size_t nd = 0;
    while (q < end && *q != 'e') {
        if (*q != '.' && nd < sizeof digits) {
            digits[nd++] = *q;
        }
        ++q;
    }
    int exp = 0;
    if (q < end) {
        std::from_chars(q + (q[1] == '+' ? 2 : 1), end, exp);
    }
    int decpt = exp + 1;  // digits d1 d2 ... stand for 0.d1d2... * 10^decpt
    if (decpt <= -4 || decpt > 16) {
        *p++ = digits[0];
        if (nd > 1) {
            *p++ = '.';
            p = put_bytes(p, digits + 1, nd - 1);
        }
        *p++ = 'e';
        *p++ = exp < 0 ? '-' : '+';
        int mag = exp < 0 ? -exp : exp;
        if (mag < 10) {
            *p++ = '0';
        }
        p = put_int(p, mag);
    } else if (decpt <= 0) {
        p = put_bytes(p, "0.", 2);
        std::memset(p, '0', static_cast<size_t>(-decpt));
        p += -decpt;
        p = put_bytes(p, digits, nd);
    } else if (static_cast<size_t>(decpt) >= nd) {
        p = put_bytes(p, digits, nd);
        std::memset(p, '0', static_cast<size_t>(decpt) - nd);
        p += static_cast<size_t>(decpt) - nd;
        p = put_bytes(p, ".0", 2);
    } else {
        p = put_bytes(p, digits, static_cast<size_t>(decpt));
        *p++ = '.';
        p = put_bytes(p, digits + decpt, nd - static_cast<size_t>(decpt));
    }
    return p;
}

}  // namespace

void put_float_repr(std::string& out, double v) {
    char buf[kFloatWidth];
    out.append(buf, static_cast<size_t>(put_float(buf, v) - buf));
}

std::vector<int64_t> order(const int64_t* keys, size_t n) {
    std::vector<int64_t> out(n);
    for (size_t i = 0; i < n; ++i) {
        out[i] = static_cast<int64_t>(i);
    }
    std::stable_sort(out.begin(), out.end(), [keys](int64_t i, int64_t j) { return keys[i] < keys[j]; });
    return out;
}

namespace {

// What Change and Ratio fields make of a and b, or why they cannot make it as Python does.
void check_change(int64_t a, int64_t b, bool ratio) {
    int64_t d;
    if (__builtin_sub_overflow(b, a, &d)) {
        throw std::overflow_error("a change does not fit in 64 bits");
    }
    if (ratio && a != 0 && (a > kExactDouble || a < -kExactDouble || d > kExactDouble || d < -kExactDouble)) {
        // Python divides big integers exactly; doubles would round twice.
        throw std::overflow_error("a ratio of integers beyond 2**53");
    }
}

}  // namespace

void format(const std::vector<std::string>& parts, const std::vector<Field>& fields,
            const std::vector<Source>& sources, At at, size_t n, std::string& text, std::vector<size_t>* ends,
            const std::string& sep, size_t chunk, const std::function<void(std::string_view)>& emit) {
    if (parts.size() != fields.size() + 1) {
        throw std::invalid_argument("a row's text parts are not one more than its fields");
    }
    size_t width = 0;
    for (const std::string& p : parts) {
        width += p.size();
    }
    for (const Field& f : fields) {
        if (f.kind == Field::Again && f.a >= fields.size()) {
            throw std::invalid_argument("a field repeats one that does not exist");
        }
    }
    // First every value the rows read, gathered in table and index order (rows in rank order
    // read their figures from all over the tables: in that order the tables are swept, and each
    // row's values end up side by side), and checked: nothing is written for a call that fails.
    const size_t width_s = sources.size();
    std::vector<int64_t> got(n * width_s);
    struct Picked {
        std::vector<int64_t> values, others;
        std::vector<uint8_t> sides;
    };
    std::vector<Picked> picked(fields.size());
    for (size_t k = 0; k < fields.size(); ++k) {
        if (fields[k].kind == Field::Masked || fields[k].kind == Field::Status) {
            picked[k].values.resize(n);
            picked[k].sides.resize(n);
            if (fields[k].kind == Field::Status) {
                picked[k].others.resize(n);
            }
        }
    }
    std::vector<size_t> visit(n);
    for (size_t i = 0; i < n; ++i) {
        visit[i] = i;
    }
    auto before = [&](size_t i, size_t j) {
        return at.table[i] != at.table[j] ? at.table[i] < at.table[j] : at.index[i] < at.index[j];
    };
    if (!std::is_sorted(visit.begin(), visit.end(), before)) {
        std::stable_sort(visit.begin(), visit.end(), before);
    }
    std::vector<const Field*> changes;  // (checked as each row's values are gathered)
    for (const Field& f : fields) {
        if (f.kind == Field::Change || f.kind == Field::Ratio) {
            changes.push_back(&f);
        }
    }
    for (size_t i : visit) {
        const size_t t = static_cast<size_t>(at.table[i]);
        const size_t x = static_cast<size_t>(at.index[i]);
        int64_t* row = got.data() + i * width_s;
        for (size_t s = 0; s < width_s; ++s) {
            row[s] = sources[s].at(t, x);
        }
        for (const Field* f : changes) {
            check_change(row[f->a], row[f->b], f->kind == Field::Ratio);
        }
        for (size_t k = 0; k < fields.size(); ++k) {
            const Field& f = fields[k];
            if (f.kind == Field::Masked || f.kind == Field::Status) {
                picked[k].sides[i] = f.sides[t][x];
                picked[k].values[i] = f.values[t][x];
                if (f.kind == Field::Status) {
                    picked[k].others[i] = f.others[t][x];
                }
            }
        }
    }
    // The most one row can take: its parts, the separator and each field's widest text. Rows are
    // written through a pointer into `text`, made long enough for one more row before each.
    size_t row_max = width + sep.size();
    for (const Field& f : fields) {
        size_t widest = 0;
        switch (f.kind) {
            case Field::Value:
            case Field::Change:
            case Field::Masked:
                widest = kIntWidth;
                break;
            case Field::Ratio:
                widest = kFloatWidth;
                break;
            case Field::Again:
                widest = kAgainWidth;
                break;
            case Field::Status:
            case Field::TableText:
            case Field::RowText:
                for (std::string_view t : f.texts) {
                    widest = std::max(widest, t.size());
                }
                break;
        }
        row_max += widest;
    }
    size_t used = text.size();
    if (ends != nullptr) {
        ends->reserve(ends->size() + n);
    }
    std::vector<size_t> starts(fields.size() + 1);  // where each field's text starts in the row
    for (size_t i = 0; i < n; ++i) {
        if (emit && used >= chunk) {
            emit(std::string_view(text.data(), used));
            used = 0;
        }
        if (used + row_max > text.size()) {
            text.resize(std::max(text.size() * 2, used + row_max));
        }
        char* const base = text.data();
        char* p = base + used;
        if (i > 0 && ends == nullptr) {
            p = put_bytes(p, sep.data(), sep.size());
        }
        const size_t t = static_cast<size_t>(at.table[i]);
        const int64_t* row = got.data() + i * width_s;
        p = put_bytes(p, parts[0].data(), parts[0].size());
        for (size_t k = 0; k < fields.size(); ++k) {
            const Field& f = fields[k];
            starts[k] = static_cast<size_t>(p - base);
            switch (f.kind) {
                case Field::Again: {
                    size_t from = starts[f.a];
                    size_t len = starts[f.a + 1] - from - parts[f.a + 1].size();
                    if (f.a >= k || len > kAgainWidth) {
                        throw std::invalid_argument("a field repeats one after it or too long");
                    }
                    p = put_bytes(p, base + from, len);
                    break;
                }
                case Field::Value:
                    p = put_int(p, row[f.a]);
                    break;
                case Field::Masked:
                    if (picked[k].sides[i] & f.bit) {
                        p = put_int(p, picked[k].values[i]);
                    } else {
                        p = put_bytes(p, "null", 4);
                    }
                    break;
                case Field::Status: {
                    uint8_t side = picked[k].sides[i];
                    size_t which = side == 1   ? 0
                                   : side == 2 ? 1
                                   : picked[k].values[i] == picked[k].others[i] ? 2
                                                                                 : 3;
                    p = put_bytes(p, f.texts[which].data(), f.texts[which].size());
                    break;
                }
                case Field::TableText:
                    p = put_bytes(p, f.texts[t].data(), f.texts[t].size());
                    break;
                case Field::RowText:
                    p = put_bytes(p, f.texts[i].data(), f.texts[i].size());
                    break;
                case Field::Change:
                case Field::Ratio: {
                    int64_t a = row[f.a];
                    int64_t b = row[f.b];
                    int64_t d = b - a;  // (checked above)
                    if (f.kind == Field::Change) {
                        p = put_int(p, d);
                    } else if (a == 0) {
                        p = b != 0 ? put_bytes(p, "null", 4) : put_bytes(p, "0.0", 3);
                    } else {
                        p = put_float(p, static_cast<double>(d) / static_cast<double>(a));
                    }
                    break;
                }
            }
            p = put_bytes(p, parts[k + 1].data(), parts[k + 1].size());
            starts[k + 1] = static_cast<size_t>(p - base);
        }
        used = static_cast<size_t>(p - base);
        if (ends != nullptr) {
            ends->push_back(used);
        }
    }
    if (emit && used > 0) {
        emit(std::string_view(text.data(), used));
        used = 0;
    }
    text.resize(used);
}

}  // namespace memlens::textrows
