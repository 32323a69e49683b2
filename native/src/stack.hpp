// Where the current thread is: the call-tree node of its Python stack.
//
// Each thread caches its last stack as levels from the root (frame, code, instruction
// position, node). An allocation re-reads the frames and re-interns only the levels that
// changed, but reading the frames is linear in the depth of the stack. On 3.12+ the tracer
// also knows which root-side levels cannot have changed: a level can only change after the
// frame above it returned (or yielded, or unwound), and sys.monitoring reports those exits for
// code objects we ask it to watch. The levels below the lowest watched exit are "trusted", and
// an allocation reads only the frames above them. Code objects are watched only once their
// frames have stayed in place over several allocations (the outer frames of a program), so
// that call-heavy leaf functions pay nothing. Without sys.monitoring (3.10, 3.11) every
// allocation reads the whole stack, with no depth limit.
#pragma once

#include <cstdint>

#include "state.hpp"

namespace memlens::stack {

// Returned by leaf_node for an allocation that is the interpreter's bookkeeping for our own
// frame-exit monitoring (3.12+ instruments each code object at its RESUME instruction after
// the set of monitored events changed, allocating per-code data): not the program's.
constexpr uint32_t kNotTheProgram = UINT32_MAX;

// The node of the calling thread's current stack (the root when it has no Python frame), or
// kNotTheProgram. With `gil` false (a thread that released the GIL, reading its own frames),
// code objects that this run has not seen yet cannot be registered: the stack is cut above
// them. So it is with `may_allocate` false (see codes::id_of), for code objects whose
// registration would allocate.
uint32_t leaf_node(ThreadState& t, bool gil, bool may_allocate);

// Where a thread's Python code was at a moment (with the GIL): its innermost frame, that
// frame's position, what it executes (a code object, checked by node_at()) and its globals,
// the frame below it with its position, what it executes and its globals, and the frame below
// that one with its position. Read with a few loads (hooks.cpp), for a place whose node may be
// wanted a moment later (node_at). Opaque here (compat::Frame, PyObject).
struct Place {
    const void* frame;
    uintptr_t pos;
    void* executable;
    void* globals;
    const void* caller;
    uintptr_t caller_pos;
    bool caller_entry;  // the caller is an entry frame (C code called the frame), not a level
    void* caller_executable;
    void* caller_globals;
    const void* grand;  // the caller's caller (nullptr: none, or an entry frame)
    uintptr_t grand_pos;
};

// The node of `place`, taken by the calling thread (with the GIL) a moment ago, as leaf_node()
// would have answered then, the frames below as they are now (the cache is brought up to
// date first). Its frame may have returned since (it is not read again): then the place is
// interned under its caller's level, while that one is on the stack. Valid only while no
// Python object has died since the place was taken, so that its code object and globals are
// alive (the reference tracer's events tell; see ScheduleHold). UINT32_MAX where neither frame
// is on the stack; always on 3.10, where a position is an offset (the reference tracer that
// asks exists from 3.13 on).
uint32_t node_at(ThreadState& t, const Place place);

// While one lives (with the GIL), the frame-exit watches that stack lookups ask for are queued,
// and the pending call that sets them is asked for when it ends: asking (Py_AddPendingCall)
// may wait for a lock with the GIL released, and another thread could then end objects that
// the caller holds borrowed (node_at's code and globals, hooks.cpp's pending dict).
struct ScheduleHold {
    ScheduleHold();
    ~ScheduleHold();
    ScheduleHold(const ScheduleHold&) = delete;
    ScheduleHold& operator=(const ScheduleHold&) = delete;
};

// Finds where the interpreter keeps the calling thread's current thread state (its own
// thread-local variable), so that every thread's allocations read it with one load instead of
// a call into the interpreter (see stack.cpp). Requires the GIL; releases it for a moment.
// Once found, it stays known for the process; on other platforms, or when the variable is
// not found unambiguously, the interpreter is asked as before.
void find_thread_state();
// Whether the calling thread reads its current thread state with one load (its stack cache
// holds its instance of the variable find_thread_state() found).
bool reads_thread_state();

// Sets up frame-exit monitoring (3.12+) for a run; returns false when it is not available
// (the tracer then reads whole stacks). Requires the GIL, before the hooks go in.
bool start_monitoring();
// Removes every watch and our sys.monitoring tool. Requires the GIL, after the hooks are out.
void stop_monitoring();
// Whether this run watches frame exits.
bool monitoring();
// The sys.monitoring tool id this run holds (-1: none).
int monitoring_tool();
// Gives up our tool id `avoid` (a program asks for it) and takes another free one, if any;
// returns it (-1: none, whole stacks are read from now on). Requires the GIL; the hooks may be
// in (the calling thread is paused meanwhile).
int move_monitoring(int avoid);
// move_monitoring(kNoTool) gives up watching frame exits for the rest of the run.
constexpr int kNoTool = -2;

// Frees the calling thread's cache (thread exit).
void free_thread(ThreadState& t);

}  // namespace memlens::stack
