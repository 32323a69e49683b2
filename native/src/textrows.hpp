// Rows of JSON text from typed columns, for the readers of big runs (memlens.diff's
// `diff --json`); see textrows.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace memlens::textrows {

// Where each row's figures are: its table (a file's, 0-based among those given) and its
// position in that table's row arrays.
struct At {
    const int64_t* table = nullptr;
    const int64_t* index = nullptr;
};

// An integer per row: in the row's table, column[rows[index]], or 0 where that row is
// negative or the table has no such column; std::invalid_argument for a row beyond its column.
struct Source {
    std::vector<const int64_t*> columns;  // per table (nullptr: 0 on every row)
    std::vector<size_t> sizes;            // per table: its column's length
    std::vector<const int64_t*> rows;     // per table
    int64_t at(size_t t, size_t k) const {
        int64_t r = rows[t][k];
        const int64_t* c = columns[t];
        if (c == nullptr || r < 0) {
            return 0;
        }
        if (static_cast<size_t>(r) >= sizes[t]) {
            throw std::invalid_argument("a row beyond its column");
        }
        return c[r];
    }
};

// What one field of a row holds.
struct Field {
    enum Kind { Value, Change, Ratio, Masked, Status, TableText, RowText, Again };
    Kind kind = Value;
    size_t a = 0;  // Value: this source; Change, Ratio: from source a to source b; Again: the
    size_t b = 0;  // text of field a (an earlier one) of the same row
    // Masked: per table, values[index] where sides[index] & bit, else null. Status: per table,
    // texts[0] where sides[index] is 1, texts[1] where 2, else texts[2] where the two lines
    // (values, others) are equal, texts[3] where not.
    std::vector<const int64_t*> values;
    std::vector<const int64_t*> others;
    std::vector<const uint8_t*> sides;
    uint8_t bit = 0;
    std::vector<std::string_view> texts;  // TableText: per table; RowText: per row; Status: the four
};

// The positions of `keys` in increasing order of their key, equal keys in their order.
std::vector<int64_t> order(const int64_t* keys, size_t n);

// Python's repr of a finite double (what json.dumps writes for a float).
void put_float_repr(std::string& out, double v);

// n rows, each parts[0] field0 parts[1] ... parts[k], appended to `text`, the end of each
// row appended to `ends`, or (with `ends` null) `sep` between rows. Made in blocks of about
// `chunk` bytes, by up to `threads` threads at once (none of them calls anything but this
// code); with `emit`, each block is handed to it in order as it comes, the first after what
// `text` held, and `text` is left empty. A Change is b - a; a Ratio
// is (b - a) / a as Python computes it, null where a is 0 and b is not, 0.0 where both are.
// std::overflow_error, before anything is made, where a result would differ from Python's (a
// change beyond 64 bits, a ratio of integers beyond 2**53). Every index must have been
// checked by the caller.
void format(const std::vector<std::string>& parts, const std::vector<Field>& fields,
            const std::vector<Source>& sources, At at, size_t n, std::string& text, std::vector<size_t>* ends,
            const std::string& sep, size_t chunk = SIZE_MAX,
            const std::function<void(std::string_view)>& emit = nullptr, size_t threads = 1);

}  // namespace memlens::textrows
