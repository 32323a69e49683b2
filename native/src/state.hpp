// State shared by the tracer's units: the run's state in one object (g_run: its options,
// counters and the running totals that drive exact peak attribution), the per-thread state the
// hooks read first (t_state; an InHook sets its reentrancy flag for a hook's extent), and
// the locks.
//
// Threading model. MEM/OBJ allocator hooks run with the GIL held, and so do RAW and numpy
// hooks most of the time: every event made with the GIL held ("GIL events") updates the
// call-tree figures and the pymalloc block map without any lock, serialised by the GIL.
// Events made without the GIL (RAW allocations of threads that released it) are rare; they
// take g_table_lock and update a separate set of figures (Figures::nogil), summed with the
// GIL figures at snapshot time, so the two never write the same memory. The address table of
// blocks that are not in the pymalloc block map is shared by both and always under
// g_table_lock. Interning new call-tree nodes takes g_intern_lock; finding existing ones is
// lock-free. Each of g_run's members says which events write it and under what.
#pragma once

#include <atomic>
#include <cstdint>
#include <sched.h>

#include "tracer.hpp"

// Hooks run on every allocation: initial-exec TLS avoids a __tls_get_addr call per access.
#define MEMLENS_TLS __attribute__((tls_model("initial-exec"))) thread_local

// The functions of the hooks' common paths: placed together (GCC's .text.hot), so that the
// interpreter's calls into them touch a few pages of code, not a page per function.
#define MEMLENS_HOT __attribute__((hot))

namespace memlens {

// A spinlock that never allocates (fork-safe with the atfork handlers in tracer.cpp).
struct SpinLock {
    std::atomic_flag flag = ATOMIC_FLAG_INIT;
    void lock() {
        int spins = 0;
        while (flag.test_and_set(std::memory_order_acquire)) {
            if (++spins > 64) {
                sched_yield();
                spins = 0;
            }
        }
    }
    void unlock() { flag.clear(std::memory_order_release); }
};
struct Guard {
    explicit Guard(SpinLock& l) : lock(l) { lock.lock(); }
    ~Guard() { lock.unlock(); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    SpinLock& lock;
};

// A 64-bit finaliser (MurmurHash3's fmix64): the call tree's hash and the samplers' seeds.
inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

// The locks stay apart from the run's state: they are not a run's (the fork handlers take
// them, run or not), and a thread spinning on one would keep taking the cache line that every
// hook reads g_run.active from.
inline SpinLock g_table_lock;   // the address table, the no-GIL figures and totals
inline SpinLock g_intern_lock;  // adding call-tree nodes and code records

// The run's state: its options and counters, and the running totals that drive exact peak
// attribution. One plain object, initialised at compile time like the globals it replaces.
struct Run {
    std::atomic<bool> active{false};
    // Events made without the GIL (RAW allocations of threads that released it, the C
    // allocator's calls from other libraries) that are between their check of `active` and
    // their last touch of the tables: stop() waits for them, so that the tables a run kept can
    // be freed while the program's threads go on (memlens attach detaches from a program that
    // keeps running).
    std::atomic<int> nogil_events{0};
    Options opts;
    bool sampling = false;
    uint64_t generation = 0;  // bumps at each start and reset: invalidates thread state

    // Running totals (bytes; estimates in sampling mode). `total` is written by GIL events only
    // (or under g_table_lock in sampling mode, where every tracked event takes the lock);
    // `total_nogil` under g_table_lock. The peak is the largest sum of the two seen by an
    // event; `epoch` increases with each new peak (see calltree.hpp).
    int64_t total = 0;
    int64_t total_nogil = 0;
    int64_t peak = 0;
    int64_t window_peak = 0;  // the largest total since window() last reset it (<= peak)
    uint64_t epoch = 1;
    uint64_t allocations = 0;  // allocation events seen (sampled or not; GIL events)
    // Bytes allocated so far (estimates in sampling mode): by GIL events (no lock), and by
    // events without the GIL (under g_table_lock), as the totals.
    int64_t alloc_bytes = 0;
    int64_t alloc_bytes_nogil = 0;
    // Stack reads (GIL events; racy counts, for benchmarks and tests): reads, and frames read.
    // Not side by side, nor `allocations` and `samples`: GCC would vectorise the two increments
    // made together into more instructions.
    uint64_t stack_reads = 0;
    uint64_t samples = 0;  // allocation events recorded
    uint64_t frames_read = 0;
    uint64_t exit_watches_dropped = 0;  // code objects whose exits cost more than they saved
};
inline Run g_run;

// Bumped whenever every thread's cached stack may be stale at once: a run starts or is reset,
// a code object dies, frame-exit monitoring starts, stops or moves. A thread's stack fast path
// (stack.cpp) holds only while the value it saw at its last full look is current: one load
// and compare instead of one per cause.
inline uint64_t g_stack_epoch = 1;
inline void stacks_stale() { __atomic_fetch_add(&g_stack_epoch, 1, __ATOMIC_RELEASE); }

struct ThreadStack;  // stack.hpp

// Per-thread state: a few words of plain data, zero-initialised, in static TLS (cheap access
// from the hooks; a dlopen'ed module only gets a small static TLS block).
struct ThreadState {
    bool in_hook;  // inside one of our hooks: nested allocator calls are the allocator's own
    bool paused;   // this thread's allocations are not tracked (frees always are)
    uint64_t generation;
    int64_t countdown;  // sampling: bytes left before the next sample (RAW and numpy)
    uint64_t rng;
    ThreadStack* stack;
    // The block this thread's last tracked allocation returned, until an object is made in it
    // (3.13+: an object made in another block was reused, e.g. from a free list; hooks.cpp).
    uintptr_t last_block;
    // This thread's instance of the interpreter's current-state variable (a PyThreadState**,
    // the one its stack cache reads: stack.cpp), or nullptr: ask the interpreter.
    void* tstate_slot;
};
inline MEMLENS_TLS ThreadState t_state;

// While an InHook lives, its thread is inside one of our hooks (ThreadState::in_hook: the
// allocator's calls made meanwhile are its own); at its end the flag is `was` again: false
// where the caller has just seen it clear, or the flag as it was (`t.in_hook`) where the
// caller may run inside a hook. On the hot paths, what runs under one is noexcept (nothing
// may unwind through a hook into the allocator's callers): with no unwind path to clean up,
// the guard compiles to the two stores of a flag set by hand.
struct InHook {
    explicit InHook(ThreadState& thread, bool before = false) : t(thread), was(before) { t.in_hook = true; }
    ~InHook() { t.in_hook = was; }
    InHook(const InHook&) = delete;
    InHook& operator=(const InHook&) = delete;
    ThreadState& t;
    bool was;
};

inline int64_t traced_total() {
    return __atomic_load_n(&g_run.total, __ATOMIC_RELAXED) + __atomic_load_n(&g_run.total_nogil, __ATOMIC_RELAXED);
}

}  // namespace memlens
