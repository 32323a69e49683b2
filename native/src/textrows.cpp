// Rows of JSON text from typed columns (memlens.diff's `diff --json`: a million line pairs of
// 48 numbers each). Not part of the tracer: it runs in the reading processes (the CLI, the
// servers), with the GIL held, and touches no allocator hook.
#include "textrows.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <functional>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

namespace memlens::textrows {

namespace {

constexpr int64_t kExactDouble = int64_t{1} << 53;

constexpr size_t kIntWidth = 21;    // "-9223372036854775808" and one spare
constexpr size_t kFloatWidth = 32;  // "-2.2250738585072014e-308" and spares
constexpr size_t kAgainWidth = 64;  // the longest text a field repeats
constexpr size_t kBlocksPerThread = 4;  // blocks a thread makes in a round
constexpr size_t kRowsPerThread = 16384;  // the fewest rows worth a thread's gathering
constexpr size_t kRatiosKept = 8;  // a row's ratios whose text is kept for the next ones

// Writers into a buffer the caller has made room in (kIntWidth, kFloatWidth).
char* put_int(char* p, int64_t v) {
    return std::to_chars(p, p + kIntWidth, v).ptr;
}

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

// work(0) .. work(workers - 1), work(0) on this thread and each other on one of its own; the
// first failure (by worker) is thrown once all are done.
template <typename Work>
void in_parallel(size_t workers, const Work& work) {
    if (workers <= 1) {
        work(0);
        return;
    }
    std::vector<std::exception_ptr> failed(workers);
    std::vector<std::thread> helpers;
    for (size_t w = 1; w < workers; ++w) {
        helpers.emplace_back([&, w] {
            try {
                work(w);
            } catch (...) {
                failed[w] = std::current_exception();
            }
        });
    }
    try {
        work(0);
    } catch (...) {
        failed[0] = std::current_exception();
    }
    for (std::thread& h : helpers) {
        h.join();
    }
    for (const std::exception_ptr& e : failed) {
        if (e) {
            std::rethrow_exception(e);
        }
    }
}

}  // namespace

void format(const std::vector<std::string>& parts, const std::vector<Field>& fields,
            const std::vector<Source>& sources, At at, size_t n, std::string& text, std::vector<size_t>* ends,
            const std::string& sep, size_t chunk, const std::function<void(std::string_view)>& emit,
            size_t threads) {
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
    // The rows by table and index (each row's position kept): a sort of plain keys.
    std::vector<std::pair<uint64_t, size_t>> visit(n);
    bool narrow = true;  // every table and index below 2**32: one key holds both
    for (size_t i = 0; i < n; ++i) {
        narrow = narrow && static_cast<uint64_t>(at.table[i]) >> 32 == 0 && static_cast<uint64_t>(at.index[i]) >> 32 == 0;
        visit[i] = {static_cast<uint64_t>(at.table[i]) << 32 | static_cast<uint64_t>(at.index[i]), i};
    }
    if (!narrow) {
        std::stable_sort(visit.begin(), visit.end(), [&](const auto& l, const auto& r) {
            size_t i = l.second, j = r.second;
            return at.table[i] != at.table[j] ? at.table[i] < at.table[j] : at.index[i] < at.index[j];
        });
    } else if (!std::is_sorted(visit.begin(), visit.end())) {
        std::sort(visit.begin(), visit.end());
    }
    std::vector<const Field*> changes;  // (checked as each row's values are gathered)
    for (const Field& f : fields) {
        if (f.kind == Field::Change || f.kind == Field::Ratio) {
            changes.push_back(&f);
        }
    }
    // Several threads at once where there are many rows, each a stretch of `visit`: the first
    // failure in `visit` order is the one thrown, as one thread would have thrown it.
    const size_t gatherers = n >= kRowsPerThread * 2 ? std::min(threads, n / kRowsPerThread) : 1;
    in_parallel(gatherers, [&](size_t w) {
        const size_t lo = n * w / gatherers;
        const size_t hi = n * (w + 1) / gatherers;
        for (size_t v = lo; v < hi; ++v) {
            const size_t i = visit[v].second;
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
    });
    visit = {};
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
    // One row's text at p (room for row_max made by the caller); `starts`: where each field's
    // text starts, relative to `base` (a field may repeat an earlier one's).
    auto write_row = [&](size_t i, char* const base, char* p, std::vector<size_t>& starts) {
        if (i > 0 && ends == nullptr) {
            p = put_bytes(p, sep.data(), sep.size());
        }
        const size_t t = static_cast<size_t>(at.table[i]);
        const int64_t* row = got.data() + i * width_s;
        // The ratios made so far in this row (a line's inclusive figures often change as its
        // self figures do: the same ratio's text is copied, not made again).
        double ratios[kRatiosKept];
        size_t ratio_at[kRatiosKept];
        size_t ratio_len[kRatiosKept];
        size_t kept = 0;
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
                        const double v = static_cast<double>(d) / static_cast<double>(a);
                        size_t r = 0;
                        while (r < kept && std::memcmp(&ratios[r], &v, sizeof v) != 0) {
                            ++r;
                        }
                        if (r < kept) {
                            p = put_bytes(p, base + ratio_at[r], ratio_len[r]);
                        } else {
                            char* from = p;
                            p = put_float(p, v);
                            if (kept < kRatiosKept) {
                                ratios[kept] = v;
                                ratio_at[kept] = static_cast<size_t>(from - base);
                                ratio_len[kept++] = static_cast<size_t>(p - from);
                            }
                        }
                    }
                    break;
                }
            }
            p = put_bytes(p, parts[k + 1].data(), parts[k + 1].size());
            starts[k + 1] = static_cast<size_t>(p - base);
        }
        return p;
    };
    // Rows lo .. hi - 1 appended to `out` (the end of each to `row_ends`, when given).
    auto write_block = [&](size_t lo, size_t hi, std::string& out, std::vector<size_t>* row_ends) {
        std::vector<size_t> starts(fields.size() + 1);
        size_t used = out.size();
        for (size_t i = lo; i < hi; ++i) {
            if (used + row_max > out.size()) {
                out.resize(std::max(out.size() * 2, used + row_max));
            }
            char* const base = out.data();
            used = static_cast<size_t>(write_row(i, base, base + used, starts) - base);
            if (row_ends != nullptr) {
                row_ends->push_back(used);
            }
        }
        out.resize(used);
    };
    // Blocks of rows of about `chunk` bytes (emit: each handed to it as it comes), made by
    // several threads at once where there are enough of them: a round of blocks, each thread
    // its own, then the round's blocks in order.
    const size_t block = std::max<size_t>(64, std::min(n, chunk / row_max + 1));
    const size_t blocks = (n + block - 1) / block;
    const size_t workers = blocks >= 4 ? std::min<size_t>(threads, blocks / 2) : 1;
    const size_t round = workers * kBlocksPerThread;
    std::vector<std::string> made(std::min(blocks, round));
    std::vector<std::vector<size_t>> made_ends(ends != nullptr ? made.size() : 0);
    if (ends != nullptr) {
        ends->reserve(ends->size() + n);
    }
    for (size_t first = 0; first < blocks; first += round) {
        const size_t count = std::min(round, blocks - first);
        auto work = [&](size_t w) {
            for (size_t b = w; b < count; b += workers) {
                const size_t lo = (first + b) * block;
                made[b].clear();
                if (ends != nullptr) {
                    made_ends[b].clear();
                }
                write_block(lo, std::min(n, lo + block), made[b], ends != nullptr ? &made_ends[b] : nullptr);
            }
        };
        in_parallel(workers, work);
        for (size_t b = 0; b < count; ++b) {
            if (ends != nullptr) {
                for (size_t e : made_ends[b]) {
                    ends->push_back(text.size() + e);
                }
            }
            if (emit) {
                if (!text.empty()) {  // (what the caller put first: with the first block)
                    text += made[b];
                    emit(text);
                    text.clear();
                } else {
                    emit(made[b]);
                }
            } else {
                text += made[b];
            }
        }
    }
}

}  // namespace memlens::textrows
