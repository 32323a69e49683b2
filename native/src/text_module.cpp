// The memlens._text extension: formatting for the readers of big runs (memlens.diff's
// `diff --json`), apart from the tracer (memlens._tracer): the core of memlens may import it.
// Bindings only; the formatting is textrows.cpp's.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "textrows.hpp"

#include <thread>
#ifdef __linux__
#include <sched.h>
#endif

namespace nb = nanobind;

namespace {

// What format_rows makes at a time (a block of rows, given to write() when there is one), at
// most: small enough to stay in a core's cache while write() copies it on (a str, then its
// UTF-8), large enough that its calls cost nothing.
constexpr size_t kWriteBytes = size_t{1} << 20;

// The threads that make rows at once: the CPUs this process may run on, at most 4.
size_t usable_cpus() {
    size_t n = 1;
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        n = static_cast<size_t>(CPU_COUNT(&set));
    }
#else
    n = std::thread::hardware_concurrency();
#endif
    return std::clamp<size_t>(n, 1, 4);
}

// A buffer (array.array, bytes) held while a call reads it, as `count` items of `itemsize`.
class Buffer {
public:
    Buffer(nb::handle h, Py_ssize_t itemsize, const char* what) {
        if (PyObject_GetBuffer(h.ptr(), &view_, PyBUF_ND) != 0) {
            throw nb::python_error();
        }
        if (view_.itemsize != itemsize) {
            PyBuffer_Release(&view_);
            throw nb::type_error((std::string(what) + ": wrong item size").c_str());
        }
    }
    ~Buffer() { PyBuffer_Release(&view_); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    template <typename T>
    const T* data() const { return static_cast<const T*>(view_.buf); }
    size_t count() const { return static_cast<size_t>(view_.len / view_.itemsize); }

private:
    Py_buffer view_{};
};

std::string_view utf8_of(nb::handle h) {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(h.ptr(), &size);  // (kept by the str)
    if (utf8 == nullptr) {
        throw nb::python_error();
    }
    return {utf8, static_cast<size_t>(size)};
}

// memlens.diff's rows of JSON text (see textrows.hpp): every index and length checked here (a
// row's place in its column where the figures are gathered, in order), so that no call reads
// outside what it was given.
nb::object format_rows(const std::vector<std::string>& parts, nb::list fields, nb::list sources, nb::tuple at,
                       size_t tables, size_t n, std::optional<std::string> sep, nb::object write,
                       const std::string& lead, bool binary) {
    namespace tr = memlens::textrows;
    std::vector<std::unique_ptr<Buffer>> held;
    std::vector<size_t> rows_of(tables, SIZE_MAX);  // per table: the fewest rows an array has
    auto hold = [&](nb::handle h, Py_ssize_t itemsize, const char* what) {
        held.push_back(std::make_unique<Buffer>(h, itemsize, what));
        return held.back().get();
    };
    // Per table, one array a row's index reads (its length bounds the index).
    auto per_table = [&](nb::handle list, Py_ssize_t itemsize, const char* what, bool none_ok) {
        nb::list l = nb::cast<nb::list>(list);
        if (l.size() != tables) {
            throw nb::value_error((std::string(what) + ": not one per table").c_str());
        }
        std::vector<const Buffer*> out;
        for (size_t t = 0; t < tables; ++t) {
            if (none_ok && l[t].is_none()) {
                out.push_back(nullptr);
                continue;
            }
            const Buffer* b = hold(l[t], itemsize, what);
            out.push_back(b);
        }
        return out;
    };
    auto indexed = [&](const std::vector<const Buffer*>& arrays) {
        for (size_t t = 0; t < tables; ++t) {
            rows_of[t] = std::min(rows_of[t], arrays[t]->count());
        }
    };
    std::vector<tr::Source> srcs;
    for (nb::handle item : sources) {
        nb::tuple s = nb::cast<nb::tuple>(item);
        if (s.size() != 2) {
            throw nb::value_error("a source is (columns, rows), one of each per table");
        }
        auto columns = per_table(s[0], 8, "columns", true);
        auto rows = per_table(s[1], 8, "rows", false);
        indexed(rows);
        tr::Source src;
        for (size_t t = 0; t < tables; ++t) {
            src.columns.push_back(columns[t] ? columns[t]->data<int64_t>() : nullptr);
            src.sizes.push_back(columns[t] ? columns[t]->count() : 0);
            src.rows.push_back(rows[t]->data<int64_t>());
        }
        srcs.push_back(std::move(src));
    }
    std::vector<tr::Field> fs;
    std::map<std::tuple<int, size_t, size_t>, size_t> made;  // a change or ratio: its first field
    for (nb::handle item : fields) {
        nb::tuple t = nb::cast<nb::tuple>(item);
        std::string kind = nb::cast<std::string>(t[0]);
        tr::Field f;
        auto source = [&](size_t k) {
            size_t i = nb::cast<size_t>(t[k]);
            if (i >= srcs.size()) {
                throw nb::value_error("a field names an unknown source");
            }
            return i;
        };
        auto ints = [&](size_t k, std::vector<const int64_t*>& into) {
            auto arrays = per_table(t[k], 8, "values", false);
            indexed(arrays);
            for (const Buffer* b : arrays) {
                into.push_back(b->data<int64_t>());
            }
        };
        auto bytes = [&](size_t k) {
            auto arrays = per_table(t[k], 1, "sides", false);
            indexed(arrays);
            for (const Buffer* b : arrays) {
                f.sides.push_back(b->data<uint8_t>());
            }
        };
        if (kind == "v" && t.size() == 2) {
            f.kind = tr::Field::Value;
            f.a = source(1);
        } else if ((kind == "c" || kind == "r") && t.size() == 3) {
            f.kind = kind == "c" ? tr::Field::Change : tr::Field::Ratio;
            f.a = source(1);
            f.b = source(2);
            auto [first, fresh] = made.emplace(std::make_tuple(int(f.kind), f.a, f.b), fs.size());
            if (!fresh) {  // the same figure's again: its text is copied, not made twice
                f.kind = tr::Field::Again;
                f.a = first->second;
            }
        } else if (kind == "m" && t.size() == 4) {
            f.kind = tr::Field::Masked;
            ints(1, f.values);
            bytes(2);
            f.bit = nb::cast<uint8_t>(t[3]);
        } else if (kind == "s" && t.size() == 5) {
            f.kind = tr::Field::Status;
            bytes(1);
            ints(2, f.values);
            ints(3, f.others);
            nb::list texts = nb::cast<nb::list>(t[4]);
            if (texts.size() != 4) {
                throw nb::value_error("a status has four texts");
            }
            for (nb::handle h : texts) {
                f.texts.push_back(utf8_of(h));
            }
        } else if (kind == "t" && t.size() == 2) {
            f.kind = tr::Field::RowText;
            nb::list texts = nb::cast<nb::list>(t[1]);
            if (texts.size() < n) {
                throw nb::value_error("texts are fewer than the rows");
            }
            for (size_t i = 0; i < n; ++i) {
                f.texts.push_back(utf8_of(texts[i]));
            }
        } else if (kind == "f" && t.size() == 2) {
            f.kind = tr::Field::TableText;
            nb::list texts = nb::cast<nb::list>(t[1]);
            if (texts.size() != tables) {
                throw nb::value_error("a table's text: not one per table");
            }
            for (nb::handle h : texts) {
                f.texts.push_back(utf8_of(h));
            }
        } else {
            throw nb::value_error("unknown field");
        }
        fs.push_back(std::move(f));
    }
    if (at.size() != 2) {
        throw nb::value_error("at is (tables, indexes)");
    }
    const Buffer* which = hold(at[0], 8, "tables");
    const Buffer* index = hold(at[1], 8, "indexes");
    if (which->count() < n || index->count() < n) {
        throw nb::value_error("fewer tables or indexes than rows");
    }
    tr::At where{which->data<int64_t>(), index->data<int64_t>()};
    for (size_t i = 0; i < n; ++i) {
        int64_t t = where.table[i];
        int64_t x = where.index[i];
        if (t < 0 || static_cast<size_t>(t) >= tables || x < 0 || static_cast<size_t>(x) >= rows_of[t]) {
            throw nb::value_error("a row's table or index is out of range");
        }
    }
    std::string text;
    std::vector<size_t> ends;
    if (!write.is_none()) {
        if (!sep) {
            throw nb::value_error("write needs sep");
        }
        if (n == 0) {
            return nb::none();
        }
        text = lead;
        std::function<void(std::string_view)> emit = [&](std::string_view made) {
            if (binary) {
                write(nb::bytes(made.data(), made.size()));
            } else {
                write(nb::str(made.data(), made.size()));
            }
        };
        tr::format(parts, fs, srcs, where, n, text, nullptr, *sep, kWriteBytes, emit, usable_cpus());
        return nb::none();
    }
    tr::format(parts, fs, srcs, where, n, text, sep ? nullptr : &ends, sep ? *sep : std::string(), kWriteBytes,
               nullptr, usable_cpus());
    if (sep) {
        return nb::str(text.data(), text.size());
    }
    nb::list out;
    size_t start = 0;
    for (size_t end : ends) {
        out.append(nb::str(text.data() + start, end - start));
        start = end;
    }
    return out;
}

// An array('q') of `values`.
nb::object int64_array(const std::vector<int64_t>& values) {
    static nb::object array = nb::module_::import_("array").attr("array");
    nb::object a = array("q");
    a.attr("frombytes")(nb::bytes(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
    return a;
}

// array('q') of the positions of `keys` (an int64 buffer) by increasing key, stably.
nb::object order(nb::handle keys) {
    Buffer b(keys, 8, "keys");
    return int64_array(memlens::textrows::order(b.data<int64_t>(), b.count()));
}

// The table and the index in it of each of `positions` (an int64 buffer) among tables of
// `counts` rows laid end to end: two array('q').
nb::tuple locate(nb::handle positions, const std::vector<size_t>& counts) {
    Buffer b(positions, 8, "positions");
    std::vector<size_t> starts{0};
    for (size_t c : counts) {
        starts.push_back(starts.back() + c);
    }
    const int64_t* p = b.data<int64_t>();
    std::vector<int64_t> tables(b.count());
    std::vector<int64_t> indexes(b.count());
    for (size_t i = 0; i < b.count(); ++i) {
        if (p[i] < 0 || static_cast<size_t>(p[i]) >= starts.back()) {
            throw nb::value_error("a position beyond the tables");
        }
        size_t at = static_cast<size_t>(p[i]);
        size_t t = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), at) - starts.begin()) - 1;
        tables[i] = static_cast<int64_t>(t);
        indexes[i] = static_cast<int64_t>(at - starts[t]);
    }
    return nb::make_tuple(int64_array(tables), int64_array(indexes));
}

// The figure of rows 0 .. counts[t] - 1 of each table t, from one side's (columns, rows),
// each checked: a row beyond its column is refused.
std::vector<int64_t> side_values(nb::tuple side, const std::vector<size_t>& counts) {
    if (side.size() != 2) {
        throw nb::value_error("a side is (columns, rows), one of each per table");
    }
    nb::list columns = nb::cast<nb::list>(side[0]);
    nb::list rows = nb::cast<nb::list>(side[1]);
    if (columns.size() != counts.size() || rows.size() != counts.size()) {
        throw nb::value_error("columns and rows: not one per table");
    }
    std::vector<int64_t> out;
    for (size_t t = 0; t < counts.size(); ++t) {
        Buffer r(rows[t], 8, "rows");
        if (r.count() < counts[t]) {
            throw nb::value_error("rows are fewer than the table's");
        }
        std::unique_ptr<Buffer> c;
        if (!columns[t].is_none()) {
            c = std::make_unique<Buffer>(columns[t], 8, "column");
        }
        // (One table's source: a row beyond its column is refused as format_rows refuses it.)
        const memlens::textrows::Source one{{c ? c->data<int64_t>() : nullptr}, {c ? c->count() : 0},
                                            {r.data<int64_t>()}};
        for (size_t x = 0; x < counts[t]; ++x) {
            out.push_back(one.at(0, x));
        }
    }
    return out;
}

// The pairs of all tables, in table order, by decreasing absolute change from side a to side
// b (equal changes in their order): memlens.diff's ranking.
nb::object order_of_changes(nb::tuple a, nb::tuple b, const std::vector<size_t>& counts) {
    std::vector<int64_t> keys = side_values(a, counts);
    std::vector<int64_t> to = side_values(b, counts);
    for (size_t i = 0; i < keys.size(); ++i) {
        int64_t d;
        if (__builtin_sub_overflow(to[i], keys[i], &d) || d == INT64_MIN) {
            throw std::overflow_error("a change does not fit in 64 bits");
        }
        keys[i] = d < 0 ? d : -d;  // -|d|
    }
    return int64_array(memlens::textrows::order(keys.data(), keys.size()));
}

}  // namespace

NB_MODULE(_text, m) {
    m.doc() = "memlens text formatting for big runs (memlens.diff's JSON), native.";
    m.def("format_rows", &format_rows, nb::arg("parts"), nb::arg("fields"), nb::arg("sources"), nb::arg("at"),
          nb::arg("tables"), nb::arg("n"), nb::arg("sep") = nb::none(), nb::arg("write") = nb::none(),
          nb::arg("lead") = "", nb::arg("binary") = false,
          "Rows of text from typed columns of several tables (memlens.diff's JSON): `n` rows, each the "
          "`parts` with the `fields` between them; row i reads table at[0][i] at index at[1][i]. A source is "
          "(columns, rows), each a list of one int64 array per table: columns[t][rows[t][index]], 0 where "
          "the row is negative or the column None. Fields: ('v', source), ('c', a, b): b - a, ('r', a, b): "
          "(b - a) / a as Python writes it (null where a is 0 and b is not), ('m', values, sides, bit): the "
          "value or null, ('s', sides, lines_a, lines_b, [gone, new, same, moved]), ('f', texts): the "
          "table's, ('t', texts): the row's. A list of the rows, or with `sep` one str of them joined by it, "
          "or with `write` (and `sep`) None: `lead` and the rows joined by `sep` given to write() a block "
          "of rows at a time (with `binary`, as bytes: the text's UTF-8). OverflowError, before anything is written, where Python's result "
          "would differ.");
    m.def("order", &order, nb::arg("keys"),
          "array('q') of the positions of `keys` (int64) by increasing key, equal keys in their order.");
    m.def("locate", &locate, nb::arg("positions"), nb::arg("counts"),
          "(tables, indexes), two array('q'): the table of each of `positions` (int64) among tables of "
          "`counts` rows laid end to end, and its index in that table. ValueError for a position beyond them.");
    m.def("order_of_changes", &order_of_changes, nb::arg("a"), nb::arg("b"), nb::arg("counts"),
          "array('q') of the positions of the pairs of all tables (rows 0 .. counts[t] - 1 of table t, "
          "in table order) by decreasing absolute change from side a to side b, equal changes in their "
          "order. A side is (columns, rows), one int64 array each per table (a column None: 0; a row "
          "below 0: 0). OverflowError for a change beyond 64 bits.");
}
