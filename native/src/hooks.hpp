// The allocator hooks: PEP 445 hooks on the RAW, MEM and OBJ domains, pymalloc's arena
// allocator (exact mode over pymalloc) and numpy's data-memory handler. Every hook checks the
// thread's reentrancy flag first; nothing in a hook allocates through the hooked allocators or
// creates Python objects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace memlens::hooks {

// Chooses the hooks for the run's mode and the allocators in use, and installs them.
// Requires the GIL; g_run.opts is set.
void install();
// Restores the allocators found at start where ours are still the current ones (otherwise
// ours stay installed below the other hook, as pass-throughs), and numpy's default handler's
// own functions. Requires the GIL.
void uninstall();
// True when any domain's current allocator is one of our hooks.
bool installed();
// True while pymalloc's arena allocator is ours (a run, or below another tool's hook).
bool arena_hook_installed();
// True while numpy's data-memory handler routes through ours: during a run, or for good when
// the program had set a handler of its own (arrays keep the handler they were made with).
bool numpy_hooked();
// True when a domain still has our hooks from an earlier run below another hook.
bool left_below();
// See tracer.hpp.
const char* kind();
// Whether the pymalloc block map is in use this run.
bool pymalloc_map();
// Whether objects made in reused blocks (CPython's free lists) are charged to the line making
// them, in the current or last run: "tracked" (3.13+), "lost" (another tool replaced memlens's
// reference tracer during the run), "off" (the run was started without it), "unavailable"
// (before 3.13), "" before any run. Requires
// the GIL.
const char* object_reuse();
std::string numpy_attach(void* api_capsule);
// What the tracked blocks that CPython's free lists hold now (free_lists.h: dead objects kept
// for reuse) weigh on a node's live figures (sampling mode: their estimate and its variance).
struct FreeListed {
    uint32_t node;
    int64_t bytes;
    int64_t count;
    double var;
};
// The blocks CPython's free lists hold now (free_lists.h). With the GIL.
std::vector<uintptr_t> free_listed_blocks();
// What those of `listed` that are tracked weigh, by node (in node order, one entry a node),
// into `out`, which has room for one entry a block of `listed`: nothing is allocated or freed
// here, where a free would take g_table_lock again. Their blocks stay tracked: the next
// object made in one is charged to its line. With the GIL and g_table_lock held.
void free_listed(const std::vector<uintptr_t>& listed, std::vector<FreeListed>& out);
// Draws the MEM/OBJ sampling countdown of a new run.
void start_run();
// Frees what a run kept (not while tracing).
void reset();

// A C library function whose calls from other libraries the native hooks take over:
// native.cpp resolves `*real` and patches `hook` into the libraries' relocation slots.
struct Interposer {
    const char* symbol;
    void* hook;
    void** real;
};
const Interposer* interposers(size_t* count);

}  // namespace memlens::hooks
