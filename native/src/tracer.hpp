// The tracer: the single entry point of the native side.
//
// It installs PEP 445 hooks on the RAW, MEM and OBJ allocator domains (chaining to the
// allocators it found) and a numpy data-memory handler, charges each allocation to the
// call-tree node of the Python stack that made it, and keeps per-node figures: allocated
// (bytes, count), live (bytes, count) and live at the moment the total traced memory peaked
// (exact, O(1) per event). In sampling mode only allocations hit by a Poisson process of mean
// interval I bytes are recorded, with unbiased weights. Nothing in a hook does file I/O,
// creates Python objects or keeps one alive; snapshot() copies what a run needs.
//
// The units: hooks.cpp (the PEP 445, arena and numpy hooks), blocks (where tracked blocks are
// remembered), stack (which node the current stack is), calltree (nodes and figures), codes
// (code objects without references), snapshot (building a run's figures), timeline (memory
// over time), compat.hpp (every CPython version branch).
#pragma once

#include <Python.h>
#include <pthread.h>

#include <cstdint>
#include <string>
#include <vector>

namespace memlens {

enum class Mode : int { Exact = 0, Sampling = 1 };

struct Options {
    Mode mode = Mode::Exact;
    uint64_t sample_interval = 0;  // mean bytes between samples (sampling mode)
    uint64_t seed = 0;             // 0: seed from the clock
    double timeline_interval_ms = 10.0;
    bool watch_exits = true;       // 3.12+: sys.monitoring frame exits keep stack reads short
    bool native = true;            // trace the C allocator calls of other libraries
    bool track_reuse = true;       // 3.13+: objects made in reused blocks go to the line making them
};

struct SnapshotData;  // snapshot.hpp

// Starts tracing. Returns an empty string on success, else why it could not start.
// Requires the GIL. In a child forked while its parent traced, the child's own run starts:
// none of the parent's figures are in it.
std::string start(const Options& options);
// Stops tracing: restores the allocators found at start when ours are still the current
// ones; otherwise (someone hooked on top of us) leaves ours installed as pass-through.
// Recorded data stays available to snapshot() until reset(). Requires the GIL.
void stop();
// The program has ended: the run's duration, peak RSS and timeline end now. Allocations are
// still tracked (the block tables stay exact, for holders.hpp) until stop(). Requires the GIL.
void finish();
// After finish(), before the run's last snapshot: the call tree's index, which only served to
// add call paths, is freed (a big tree's peak memory is at that snapshot: 2^17 call paths
// on 3.10, 16 MB less). Blocks are still tracked until stop() (the block tables stay exact
// for the holders' search), but a call path no thread's cache knows goes to the root. The
// next snapshot is the run's last: once it has read the moments' log, nothing is logged and
// the log is freed (later snapshots say their moments were dropped), and each chunk of the
// call tree is given back to the system once copied (calltree::give_back; later snapshots
// have no call tree). Requires the GIL.
void freeze();
bool is_active();
// True when any domain's current allocator is one of our hooks.
bool hooks_installed();
// True in a child process forked while tracing, until the child starts a run of its own.
bool is_forked_child();
// Which hooks the current (or last) run installed: "exact-pymalloc" (pymalloc block map),
// "exact" (address table only), "sampling" (any allocator) or "sampling-pymalloc" (no MEM/OBJ
// free hooks; see hooks.cpp). "" before any run.
const char* hook_kind();
// Whether objects made in reused blocks (CPython's free lists) are charged to the line making
// them: "tracked", "lost", "unavailable" or "" (see hooks.hpp). Requires the GIL.
const char* object_reuse();
// Whether this run reads only the changed part of stacks (sys.monitoring frame exits, 3.12+).
bool watches_exits();
// The sys.monitoring tool id this run holds for that (-1: none).
int monitoring_tool();
// The program asks for our tool id `tool`: ours moves to another free one (-1: none left,
// whole stacks are read from now on). Returns the id we hold now. Requires the GIL.
int move_monitoring(int tool);
// Stops watching frame exits for the rest of the run (whole stacks are read from now on).
void stop_watching();
// Whether this run traces the C allocator calls of other libraries (native.hpp).
bool traces_native();
const char* native_problem();
// Routes numpy's array-data allocations (which bypass PEP 445) through the tracer by chaining
// a handler of ours onto numpy's default handler, in every thread. `api_capsule` is numpy's
// `_multiarray_umath._ARRAY_API`. Returns "" or why it could not. Requires the GIL.
std::string numpy_attach(void* api_capsule);
// What of the tracer is still installed in the process once stopped (none after a clean stop(); memlens
// attach reports anything else): allocator or arena hooks left below another tool's hook,
// numpy's handler when the program set one of its own, the C allocator interposition, the
// sys.monitoring tool. While tracing: the tracer itself. Requires the GIL.
std::vector<std::string> leftovers();
// Copies the recorded figures. Requires the GIL. Safe while tracing (the calling thread's
// own allocations are not tracked meanwhile).
void snapshot(SnapshotData& out);
// Drops recorded data. Requires the GIL, not active.
void reset();

// Current and peak traced bytes (racy read, for progress displays).
void totals(int64_t* current, int64_t* peak);
// How many call-tree nodes the run has so far.
uint32_t node_count();
// Current traced bytes, the largest total since the window was last reset (per-test peaks:
// the pytest plugin resets it when a test starts), and the bytes allocated since start (all
// estimates in sampling mode); `reset` starts a new window at the current total. Requires
// the GIL (so that GIL events cannot interleave).
void window(bool reset, int64_t* current, int64_t* peak, int64_t* allocated);

// Ends the process by `signum` with its default action, from any thread, whatever Python's
// handler for it (which only the main thread may change). For a followed child whose main
// thread cannot take memlens's handler in time (stuck in a C call): it dies as plain Python
// would have. Does not return.
[[noreturn]] void die_by_signal(int signum);

// A script's code from its bytes (NUL-free), compiled as builtins.compile(source, filename,
// "exec", dont_inherit=True) compiles them, without its AST set-up (compat::compile_script):
// a new reference, or nullptr with the error set. GIL held.
PyObject* compile_script(const char* source, PyObject* filename);

// The program starts now (sampling mode): the countdowns of the shared stream and of the
// calling thread, the one that started the run, are drawn afresh from the seed, as at start.
// What memlens did on this thread in between (its own work, not recorded, still counts down
// the shared countdown, and may vary from run to run: paths, times, process ids) then moves
// no sample. Requires the GIL.
void restart_sampling();

// Turns address-space layout randomisation off for the programs this process executes from
// now on (Linux: the ADDR_NO_RANDOMIZE personality, as gdb and `setarch -R` do). True when it
// was on and is now off for them; false when it was off already, or cannot be changed here.
bool disable_address_randomization();

// Names the calling thread (as `top -H` and /proc/self/task/*/comm show it; at most 15
// bytes kept). memlens's own threads are named "memlens-..." so that they can be told from
// the program's (memlens.runner: Python 3.12+'s warning at fork counts threads). Linux only.
void name_thread(const char* name);
// ... of another thread (named by its creator: a fork right after sees it named).
void name_thread(pthread_t thread, const char* name);

// Whether the calling thread's allocations are not tracked (frees always are).
bool thread_paused();
void set_thread_paused(bool paused);

// While a PauseScope lives, allocations of the calling thread are not tracked (frees are).
struct PauseScope {
    PauseScope();
    ~PauseScope();
    PauseScope(const PauseScope&) = delete;
    PauseScope& operator=(const PauseScope&) = delete;
    bool previous;
};

}  // namespace memlens
