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

void put_int(std::string& out, int64_t v) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, static_cast<size_t>(r.ptr - buf));
}

}  // namespace

void put_float_repr(std::string& out, double v) {
    // The shortest digits that read back as v (what Python's repr finds too), then laid out
    // as repr does: positional when the decimal point falls within 4 zeros before the first
    // digit and 16 digits after it, exponential otherwise ("1e-05", "1.5e+16").
    char buf[40];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    const char* p = buf;
    const char* end = r.ptr;
    if (p < end && *p == '-') {
        out.push_back('-');
        ++p;
    }
    char digits[24];
    size_t nd = 0;
    while (p < end && *p != 'e') {
        if (*p != '.' && nd < sizeof digits) {
            digits[nd++] = *p;
        }
        ++p;
    }
    int exp = 0;
    if (p < end) {
        std::from_chars(p + (p[1] == '+' ? 2 : 1), end, exp);
    }
    int decpt = exp + 1;  // digits d1 d2 ... stand for 0.d1d2... * 10^decpt
    if (decpt <= -4 || decpt > 16) {
        out.push_back(digits[0]);
        if (nd > 1) {
            out.push_back('.');
            out.append(digits + 1, nd - 1);
        }
        out.push_back('e');
        out.push_back(exp < 0 ? '-' : '+');
        int mag = exp < 0 ? -exp : exp;
        if (mag < 10) {
            out.push_back('0');
        }
        put_int(out, mag);
    } else if (decpt <= 0) {
        out.append("0.");
        out.append(static_cast<size_t>(-decpt), '0');
        out.append(digits, nd);
    } else if (static_cast<size_t>(decpt) >= nd) {
        out.append(digits, nd);
        out.append(static_cast<size_t>(decpt) - nd, '0');
        out.append(".0");
    } else {
        out.append(digits, static_cast<size_t>(decpt));
        out.push_back('.');
        out.append(digits + decpt, nd - static_cast<size_t>(decpt));
    }
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
            const std::string& sep, size_t chunk, const std::function<void(std::string&)>& emit) {
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
    for (size_t i : visit) {
        const size_t t = static_cast<size_t>(at.table[i]);
        const size_t x = static_cast<size_t>(at.index[i]);
        for (size_t s = 0; s < width_s; ++s) {
            got[i * width_s + s] = sources[s].at(t, x);
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
    for (const Field& f : fields) {
        if (f.kind == Field::Change || f.kind == Field::Ratio) {
            for (size_t i = 0; i < n; ++i) {
                check_change(got[i * width_s + f.a], got[i * width_s + f.b], f.kind == Field::Ratio);
            }
        }
    }
    text.reserve(text.size() + std::min(n, chunk) * (width + sep.size() + 12 * fields.size()));
    if (ends != nullptr) {
        ends->reserve(ends->size() + n);
    }
    std::vector<size_t> starts(fields.size() + 1);  // where each field's text starts in the row
    for (size_t i = 0; i < n; ++i) {
        if (emit && i > 0 && i % chunk == 0) {
            emit(text);
            text.clear();
        }
        if (i > 0 && ends == nullptr) {
            text.append(sep);
        }
        const size_t t = static_cast<size_t>(at.table[i]);
        const int64_t* row = got.data() + i * width_s;
        text.append(parts[0]);
        for (size_t k = 0; k < fields.size(); ++k) {
            const Field& f = fields[k];
            starts[k] = text.size();
            switch (f.kind) {
                case Field::Again: {
                    size_t from = starts[f.a];
                    size_t len = starts[f.a + 1] - from - parts[f.a + 1].size();
                    char again[64];
                    if (f.a >= k || len > sizeof again) {
                        throw std::invalid_argument("a field repeats one after it or too long");
                    }
                    std::memcpy(again, text.data() + from, len);
                    text.append(again, len);
                    break;
                }
                case Field::Value:
                    put_int(text, row[f.a]);
                    break;
                case Field::Masked:
                    if (picked[k].sides[i] & f.bit) {
                        put_int(text, picked[k].values[i]);
                    } else {
                        text.append("null");
                    }
                    break;
                case Field::Status: {
                    uint8_t side = picked[k].sides[i];
                    size_t which = side == 1   ? 0
                                   : side == 2 ? 1
                                   : picked[k].values[i] == picked[k].others[i] ? 2
                                                                                 : 3;
                    text.append(f.texts[which]);
                    break;
                }
                case Field::TableText:
                    text.append(f.texts[t]);
                    break;
                case Field::RowText:
                    text.append(f.texts[i]);
                    break;
                case Field::Change:
                case Field::Ratio: {
                    int64_t a = row[f.a];
                    int64_t b = row[f.b];
                    int64_t d = b - a;  // (checked above)
                    if (f.kind == Field::Change) {
                        put_int(text, d);
                    } else if (a == 0) {
                        text.append(b != 0 ? "null" : "0.0");
                    } else {
                        put_float_repr(text, static_cast<double>(d) / static_cast<double>(a));
                    }
                    break;
                }
            }
            text.append(parts[k + 1]);
            starts[k + 1] = text.size();
        }
        if (ends != nullptr) {
            ends->push_back(text.size());
        }
    }
    if (emit && !text.empty()) {
        emit(text);
        text.clear();
    }
}

}  // namespace memlens::textrows
