#include "compat.hpp"  // first: Py_BUILD_CORE before Python.h (3.12 internal headers)
#include "codes.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "compat.hpp"
#include "state.hpp"

namespace memlens::codes {

uint64_t g_deaths = 0;

namespace {

struct Record {
    PyCodeObject* code;  // borrowed while alive; nullptr once dead
    // Copied when the code object died.
    char* filename;
    char* qualname;
    uint8_t* table;
    uint32_t table_len;
    int32_t first_line;
    uint8_t flags;
    // The file of rebuilt code (see id_of), owned; nullptr for every other code object.
    char* file;
};

constexpr int kChunkBits = 12;
constexpr uint32_t kChunkSize = uint32_t{1} << kChunkBits;
constexpr uint32_t kChunks = uint32_t{1} << 16;

Record* g_records[kChunks];
uint32_t g_count = 0;
uint32_t g_tag = 0;         // this run's tag in co_extra values (never 0 during a run)
Py_ssize_t g_index = -1;    // our co_extra slot, requested once per process

Record& record(uint32_t id) { return g_records[id >> kChunkBits][id & (kChunkSize - 1)]; }

// Static code objects (see compat.hpp) by address: they never die, so addresses are unique.
struct StaticIds {
    uintptr_t* keys = nullptr;
    uint32_t* ids = nullptr;
    size_t mask = 0, count = 0;
    size_t slot(uintptr_t k) const {
        size_t i = size_t((uint64_t(k) >> 4) * 0x9E3779B97F4A7C15ULL >> 32) & mask;
        while (keys[i] && keys[i] != k) {
            i = (i + 1) & mask;
        }
        return i;
    }
    bool find(uintptr_t k, uint32_t* id) const {
        if (!keys) {
            return false;
        }
        size_t i = slot(k);
        if (!keys[i]) {
            return false;
        }
        *id = ids[i];
        return true;
    }
    bool add(uintptr_t k, uint32_t id) {
        if ((count + 1) * 2 > mask + 1) {
            StaticIds bigger;
            bigger.mask = mask ? mask * 2 + 1 : 63;
            bigger.keys = static_cast<uintptr_t*>(std::calloc(bigger.mask + 1, sizeof(uintptr_t)));
            bigger.ids = static_cast<uint32_t*>(std::calloc(bigger.mask + 1, sizeof(uint32_t)));
            if (!bigger.keys || !bigger.ids) {
                bigger.clear();
                return false;
            }
            for (size_t j = 0; keys && j <= mask; ++j) {
                if (keys[j]) {
                    size_t i = bigger.slot(keys[j]);
                    bigger.keys[i] = keys[j];
                    bigger.ids[i] = ids[j];
                }
            }
            bigger.count = count;
            clear();
            *this = bigger;
        }
        size_t i = slot(k);
        keys[i] = k;
        ids[i] = id;
        ++count;
        return true;
    }
    void clear() {
        std::free(keys);
        std::free(ids);
        *this = StaticIds{};
    }
};
StaticIds g_static;

inline void* extra_value(uint32_t id) {
    return reinterpret_cast<void*>(uintptr_t((uint64_t(g_tag) << 32) | id));
}

// UTF-8 copy of a str without creating objects or caches (a dying code's names, hooks).
char* utf8_copy(PyObject* s) {
    std::string out;
    if (s && PyUnicode_Check(s)) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(s);
        int kind = PyUnicode_KIND(s);
        const void* data = PyUnicode_DATA(s);
        out.reserve(size_t(n));
        for (Py_ssize_t i = 0; i < n; ++i) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (c < 0x80) {
                out.push_back(char(c));
            } else if (c < 0x800) {
                out.push_back(char(0xC0 | (c >> 6)));
                out.push_back(char(0x80 | (c & 0x3F)));
            } else if (c < 0x10000) {
                if (c >= 0xD800 && c <= 0xDFFF) {
                    c = 0xFFFD;  // a lone surrogate: the replacement character
                }
                out.push_back(char(0xE0 | (c >> 12)));
                out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
                out.push_back(char(0x80 | (c & 0x3F)));
            } else {
                out.push_back(char(0xF0 | (c >> 18)));
                out.push_back(char(0x80 | ((c >> 12) & 0x3F)));
                out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
                out.push_back(char(0x80 | (c & 0x3F)));
            }
        }
    }
    char* copy = static_cast<char*>(std::malloc(out.size() + 1));
    if (copy) {
        std::memcpy(copy, out.data(), out.size());
        copy[out.size()] = 0;
    }
    return copy;
}

std::string utf8(PyObject* s) {
    char* c = utf8_copy(s);
    std::string out = c ? c : "";
    std::free(c);
    return out;
}

void line_table(PyCodeObject* co, const uint8_t** data, size_t* len) {
    PyObject* t = co->co_linetable;
    if (t && PyBytes_Check(t)) {
        *data = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(t));
        *len = size_t(PyBytes_GET_SIZE(t));
    } else {
        *data = nullptr;
        *len = 0;
    }
}

uint8_t initial_flags(PyCodeObject* co, const char* file) {
    if (file) {
        return 0;
    }
    PyObject* f = co->co_filename;
    bool angle = f && PyUnicode_Check(f) && PyUnicode_GET_LENGTH(f) > 0 &&
                 PyUnicode_READ_CHAR(f, 0) == '<';
    return angle ? kTransparent : 0;
}

// cloudpickle (3.1 and later) rebuilds the functions it ships by value (those of __main__, of
// notebooks, of modules registered for pickling by value) with this file name, so that its
// output does not depend on where they were defined; it keeps their first line, line table and
// qualified name, and the module's `__file__` in their globals.
constexpr char kRebuiltMarker[] = "<dynamic-code>";

bool is_ascii(PyObject* s, const char* text, Py_ssize_t len) {
    return s && PyUnicode_Check(s) && PyUnicode_GET_LENGTH(s) == len && PyUnicode_IS_ASCII(s) &&
           std::memcmp(PyUnicode_DATA(s), text, size_t(len)) == 0;
}

// The file of rebuilt code: its globals' `__file__` (a non-empty str), copied with libc; or
// nullptr. Reads the dictionary's entries only (PyDict_Next: no Python code, no allocation).
char* rebuilt_file(PyCodeObject* co, PyObject* globals) {
    // (the marker first: the globals of other code are never looked at)
    if (!is_ascii(co->co_filename, kRebuiltMarker, Py_ssize_t(sizeof(kRebuiltMarker) - 1)) ||
        !globals || !PyDict_Check(globals)) {
        return nullptr;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(globals, &pos, &key, &value)) {
        if (is_ascii(key, "__file__", 8)) {
            if (!value || !PyUnicode_Check(value) || PyUnicode_GET_LENGTH(value) == 0) {
                return nullptr;
            }
            char* file = utf8_copy(value);
            if (file && file[0] == '<') {  // (no file either)
                std::free(file);
                return nullptr;
            }
            return file;
        }
    }
    return nullptr;
}

// CPython calls this when a code object that has our co_extra slot set is deallocated, before
// it releases the code's fields. The GIL is held.
void on_code_freed(void* extra) {
    uint64_t v = uint64_t(reinterpret_cast<uintptr_t>(extra));
    uint32_t id = uint32_t(v);
    if (v == 0 || g_tag == 0 || uint32_t(v >> 32) != g_tag || id >= g_count) {
        return;  // not ours, or from an earlier run
    }
    Record& r = record(id);
    PyCodeObject* co = r.code;
    if (!co) {
        return;
    }
    if (r.flags & kTransparent) {  // never shown: nothing to keep
        r.code = nullptr;
        __atomic_store_n(&g_deaths, g_deaths + 1, __ATOMIC_RELEASE);
        stacks_stale();
        return;
    }
    r.filename = utf8_copy(co->co_filename);
    r.qualname = utf8_copy(compat::code_qualname(co));
    r.first_line = co->co_firstlineno;
    const uint8_t* table = nullptr;
    size_t len = 0;
    line_table(co, &table, &len);
    r.table = len ? static_cast<uint8_t*>(std::malloc(len)) : nullptr;
    if (r.table) {
        std::memcpy(r.table, table, len);
        r.table_len = uint32_t(len);
    }
    r.code = nullptr;
    __atomic_store_n(&g_deaths, g_deaths + 1, __ATOMIC_RELEASE);
    stacks_stale();
}

void free_record(Record& r) {
    std::free(r.file);
    std::free(r.filename);
    std::free(r.qualname);
    std::free(r.table);
    r = Record{};
}

// 3.11+ location table (see CPython's InternalDocs/locations.md): entries start with a byte
// whose top bit is set; bits 3-6 are the entry's kind, bits 0-2 its length in code units - 1.
int read_varint(const uint8_t* p, const uint8_t* end) {
    unsigned int read = p < end ? *p : 0;
    unsigned int val = read & 63;
    int shift = 0;
    while ((read & 64) && ++p < end) {
        read = *p;
        shift += 6;
        if (shift < 30) {
            val |= (read & 63) << shift;
        }
    }
    return int(val);
}
int read_svarint(const uint8_t* p, const uint8_t* end) {
    unsigned int uval = unsigned(read_varint(p, end));
    return (uval & 1) ? -int(uval >> 1) : int(uval >> 1);
}

}  // namespace

int decode_line_table(const uint8_t* table, size_t len, int first_line,
                      std::vector<std::pair<uint32_t, int32_t>>* out) {
    int last = first_line;
    int line = first_line;
    uint32_t addr = 0;  // bytes
    const uint8_t* p = table;
    const uint8_t* end = table + len;
    if constexpr (compat::kLineTable >= 311) {
        while (p < end) {
            uint8_t first = *p;
            int kind = (first >> 3) & 15;
            uint32_t length = uint32_t((first & 7) + 1) * 2;
            bool none = false;
            switch (kind) {
                case 15:
                    none = true;
                    break;
                case 14:
                case 13:
                    line += read_svarint(p + 1, end);
                    break;
                case 12:
                case 11:
                case 10:
                    line += kind - 10;
                    break;
                default:
                    break;
            }
            // Line 0 is no line either: a module's first instruction (RESUME, 3.11+), where a
            // tracer's or debugger's call event allocates; charged to the code's first line.
            if (!none && line > 0) {
                out->emplace_back(addr, line);
                if (line > last) {
                    last = line;
                }
            }
            addr += length;
            do {
                ++p;
            } while (p < end && (*p & 128) == 0);
        }
    } else {
        // 3.10 (PEP 626): (byte delta, signed line delta) pairs; -128 means no line.
        while (p + 1 < end) {
            uint32_t delta = p[0];
            int ldelta = static_cast<int8_t>(p[1]);
            p += 2;
            if (ldelta != -128) {
                line += ldelta;
                if (delta && line > 0) {
                    out->emplace_back(addr, line);
                    if (line > last) {
                        last = line;
                    }
                }
            }
            addr += delta;
        }
    }
    return last;
}

bool start() {
    reset();
    if (g_index < 0) {
        g_index = compat::request_code_extra_index(on_code_freed);
        if (g_index < 0) {
            PyErr_Clear();
            return false;
        }
    }
    static uint32_t tags = 0;
    g_tag = ++tags ? tags : ++tags;  // never 0
    return true;
}

void reset() {
    for (uint32_t i = 0; i < g_count; ++i) {
        free_record(record(i));
    }
    // Chunks are made in order (the next id's): the first missing one ends them.
    for (Record*& chunk : g_records) {
        if (!chunk) {
            break;
        }
        std::free(chunk);
        chunk = nullptr;
    }
    g_count = 0;
    g_tag = 0;
    g_static.clear();
}

uint32_t id_of(PyCodeObject* code, bool may_allocate, PyObject* globals) {
    if (g_tag == 0) {
        return kNone;
    }
    const bool is_static = compat::code_is_static(code);
    uint32_t found = kNone;
    if (is_static) {
        Guard g(g_intern_lock);
        if (g_static.find(uintptr_t(code), &found)) {
            return found;
        }
    } else {
        void* extra = nullptr;
        if (compat::code_get_extra(reinterpret_cast<PyObject*>(code), g_index, &extra) == 0 && extra) {
            uint64_t v = uint64_t(reinterpret_cast<uintptr_t>(extra));
            if (uint32_t(v >> 32) == g_tag && uint32_t(v) < g_count) {
                return uint32_t(v);
            }
        }
    }
    Guard g(g_intern_lock);
    uint32_t id = g_count;
    if ((id >> kChunkBits) >= kChunks) {
        return kNone;
    }
    Record*& chunk = g_records[id >> kChunkBits];
    if (!chunk && !(chunk = static_cast<Record*>(std::calloc(kChunkSize, sizeof(Record))))) {
        return kNone;
    }
    if (is_static) {
        if (!g_static.add(uintptr_t(code), id)) {
            return kNone;
        }
        record(id) = Record{code, nullptr, nullptr, nullptr, 0, code->co_firstlineno, initial_flags(code, nullptr), nullptr};
        __atomic_store_n(&g_count, id + 1, __ATOMIC_RELEASE);
        return id;
    }
    if (!may_allocate) {
        return kNone;
    }
    // Writing co_extra may allocate (PyMem_Realloc: our hooks pass it through) and, on failure,
    // set an exception: the program's own pending exception is kept.
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int err = compat::code_set_extra(reinterpret_cast<PyObject*>(code), g_index, extra_value(id));
    if (err) {
        PyErr_Clear();
    }
    PyErr_Restore(type, value, tb);
    if (err) {
        return kNone;
    }
    char* file = rebuilt_file(code, globals);
    record(id) = Record{code, nullptr, nullptr, nullptr, 0, code->co_firstlineno, initial_flags(code, file), file};
    __atomic_store_n(&g_count, id + 1, __ATOMIC_RELEASE);
    return id;
}

PyCodeObject* live_code(uint32_t id) { return id < g_count ? record(id).code : nullptr; }

uint8_t* flags(uint32_t id) { return id < __atomic_load_n(&g_count, __ATOMIC_ACQUIRE) ? &record(id).flags : nullptr; }

void Lines::load() {
    infos_.clear();
    first_range_.clear();
    ranges_.clear();
    infos_.resize(g_count);
    first_range_.reserve(g_count + 1);
    std::vector<std::pair<uint32_t, int32_t>> decoded;
    for (uint32_t id = 0; id < g_count; ++id) {
        const Record& r = record(id);
        Info& info = infos_[id];
        const uint8_t* table = nullptr;
        size_t len = 0;
        if (r.code) {
            info.filename = utf8(r.code->co_filename);
            info.qualname = utf8(compat::code_qualname(r.code));
            info.first_line = r.code->co_firstlineno;
            line_table(r.code, &table, &len);
        } else {
            info.filename = r.filename ? r.filename : "";
            info.qualname = r.qualname ? r.qualname : "";
            info.first_line = r.first_line;
            table = r.table;
            len = r.table_len;
        }
        if (r.file) {
            info.filename = r.file;  // rebuilt code (see id_of)
        }
        decoded.clear();
        info.last_line = table ? decode_line_table(table, len, info.first_line, &decoded) : info.first_line;
        first_range_.push_back(uint32_t(ranges_.size()));
        for (const auto& d : decoded) {
            ranges_.push_back(Range{d.first, d.second});
        }
    }
    first_range_.push_back(uint32_t(ranges_.size()));
}

int Lines::line(uint32_t code, int32_t offset) const {
    if (code >= infos_.size()) {
        return 0;
    }
    uint32_t lo = first_range_[code], hi = first_range_[code + 1];
    uint32_t addr = uint32_t(offset < 0 ? 0 : offset) * 2;
    // The last range starting at or before addr.
    int line = infos_[code].first_line;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ranges_[mid].start <= addr) {
            line = ranges_[mid].line;
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return line;
}

int line_of(PyCodeObject* code, int32_t offset) {
    const uint8_t* table = nullptr;
    size_t len = 0;
    line_table(code, &table, &len);
    std::vector<std::pair<uint32_t, int32_t>> decoded;
    decode_line_table(table, len, code->co_firstlineno, &decoded);
    int line = code->co_firstlineno;
    uint32_t addr = uint32_t(offset < 0 ? 0 : offset) * 2;
    for (const auto& d : decoded) {
        if (d.first > addr) {
            break;
        }
        line = d.second;
    }
    return line;
}

}  // namespace memlens::codes
