// Code objects, identified without owning references.
//
// The tracer must not keep any object alive: a code object seen in a stack gets an id (its
// record in this run's registry) stored in one of its co_extra slots. When the code object is
// deallocated, CPython calls our co_extra free function (with the code object still intact):
// we copy what line resolution needs (file name, qualified name, first line, line table) into
// the record, mark it dead and bump a death counter, so that per-thread caches that compare
// code pointers never match a new code object that reuses the address. Line numbers are
// resolved from line tables at snapshot time, never in a hook.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

namespace memlens::codes {

constexpr uint32_t kNone = UINT32_MAX;

// Prepares the registry of a new run; false when out of memory. Requires the GIL.
bool start();
// Frees the registry (not while tracing). Requires the GIL.
void reset();

// The id of a code object in this run, registering it when needed (GIL held: registration
// writes the code's co_extra). kNone when it cannot be registered, or when registering it
// would allocate and `may_allocate` is false.
//
// Writing co_extra the first time allocates through Python's allocators (PyMem_Realloc), which
// pass through our own hooks but not through another tool's hooks installed around ours. Events
// of the RAW domain and of the C allocator may be that tool's own bookkeeping, made while it
// holds its lock (tracemalloc allocates its tracebacks so): an allocation from there would wait
// for that lock forever. Those events only name code objects already registered.
//
// `globals` (borrowed, may be null) are those of a frame running `code`: a code object rebuilt
// by cloudpickle, whose file name is the marker "<dynamic-code>", is charged to the file its
// globals' `__file__` names (cloudpickle keeps it), with the code's own first line and line
// table, as if it had not been shipped. The globals are read without calling Python code and
// without allocating through Python (PyDict_Next; keys compared as strings), once per code.
uint32_t id_of(PyCodeObject* code, bool may_allocate, PyObject* globals);
// The live code object of an id, or nullptr once it died. Requires the GIL.
PyCodeObject* live_code(uint32_t id);
// A byte of flags kept for the tracer with each code record of this run (stack.cpp's watch
// state, low bits); nullptr for an unknown id. Stays valid until reset().
uint8_t* flags(uint32_t id);
// Set in flags() for code objects whose file name starts with "<" (exec'd strings, generated
// code, frozen modules): they are never charged (there is no source to show), so their frames
// are transparent from the start and they get no call-tree nodes of their own. Not set for
// rebuilt code whose file is known from its globals (see id_of).
constexpr uint8_t kTransparent = 0x80;
inline bool transparent(uint32_t id) {
    uint8_t* f = flags(id);
    return f && (*f & kTransparent);
}

// Incremented each time a registered code object dies (readers compare it with a copy).
extern uint64_t g_deaths;

// What a snapshot needs of one code object.
struct Info {
    std::string filename;
    std::string qualname;
    int first_line = 0;
    int last_line = 0;
};

// Resolves code ids and offsets to lines. Built at snapshot time (GIL held): copies what it
// needs of live code objects, so it stays valid after they die.
class Lines {
public:
    // Copies the information of every registered code object.
    void load();
    size_t count() const { return infos_.size(); }
    const Info& info(uint32_t code) const { return infos_[code]; }
    // The line of instruction `offset` (code units) of `code`; the previous line with a number
    // for instructions that have none (or line 0: a module's RESUME); the first line when
    // there is none before.
    int line(uint32_t code, int32_t offset) const;

private:
    struct Range {
        uint32_t start;  // bytes
        int32_t line;
    };
    std::vector<Info> infos_;
    std::vector<uint32_t> first_range_;  // per code, index into ranges_ (and one past the end)
    std::vector<Range> ranges_;
};

// Decodes a line table (the interpreter's co_linetable format) into (start byte, line) ranges
// with a line number; returns the largest line (at least first_line). Exposed for tests.
int decode_line_table(const uint8_t* table, size_t len, int first_line,
                      std::vector<std::pair<uint32_t, int32_t>>* out);

// Test hook: the line of `offset` in a live code object, through the same decoder.
int line_of(PyCodeObject* code, int32_t offset);

}  // namespace memlens::codes
