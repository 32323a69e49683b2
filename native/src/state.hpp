// State shared by the tracer's units: the run's options, the per-thread state the hooks read
// first, the locks, and the running totals that drive exact peak attribution.
//
// Threading model. MEM/OBJ allocator hooks run with the GIL held, and so do RAW and numpy
// hooks most of the time: every event made with the GIL held ("GIL events") updates the
// call-tree figures and the pymalloc block map without any lock, serialised by the GIL.
// Events made without the GIL (RAW allocations of threads that released it) are rare; they
// take g_table_lock and update a separate set of figures (Figures::nogil), summed with the
// GIL figures at snapshot time, so the two never write the same memory. The address table of
// blocks that are not in the pymalloc block map is shared by both and always under
// g_table_lock. Interning new call-tree nodes takes g_intern_lock; finding existing ones is
// lock-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <sched.h>

#include "tracer.hpp"

// Hooks run on every allocation: initial-exec TLS avoids a __tls_get_addr call per access.
#define MEMLENS_TLS __attribute__((tls_model("initial-exec"))) thread_local

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

inline SpinLock g_table_lock;   // the address table, the no-GIL figures and totals
inline SpinLock g_intern_lock;  // adding call-tree nodes and code records

inline std::atomic<bool> g_active{false};
// Events made without the GIL (RAW allocations of threads that released it, the C allocator's
// calls from other libraries) that are between their check of g_active and their last touch of
// the tables: stop() waits for them, so that the tables a run kept can be freed while the
// program's threads go on (memlens attach detaches from a program that keeps running).
inline std::atomic<int> g_nogil_events{0};
inline Options g_opts;
inline bool g_sampling = false;
inline uint64_t g_generation = 0;  // bumps at each start and reset: invalidates thread state

// Running totals (bytes; estimates in sampling mode). g_total is written by GIL events only
// (or under g_table_lock in sampling mode, where every tracked event takes the lock);
// g_total_nogil under g_table_lock. The peak is the largest sum of the two seen by an event;
// g_epoch increases with each new peak (see calltree.hpp).
inline int64_t g_total = 0;
inline int64_t g_total_nogil = 0;
inline int64_t g_peak = 0;
inline int64_t g_window_peak = 0;  // the largest total since window() last reset it (<= g_peak)
inline uint64_t g_epoch = 1;
inline uint64_t g_allocations = 0;  // allocation events seen (sampled or not; GIL events)
// Bytes allocated so far (estimates in sampling mode): by GIL events (no lock), and by events
// without the GIL (under g_table_lock), as the totals.
inline int64_t g_alloc_bytes = 0;
inline int64_t g_alloc_bytes_nogil = 0;
inline uint64_t g_samples = 0;      // allocation events recorded
// Stack reads (GIL events; racy counts, for benchmarks and tests): reads, and frames read.
inline uint64_t g_stack_reads = 0;
inline uint64_t g_frames_read = 0;

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
};
inline MEMLENS_TLS ThreadState t_state;

inline int64_t traced_total() {
    return __atomic_load_n(&g_total, __ATOMIC_RELAXED) + __atomic_load_n(&g_total_nogil, __ATOMIC_RELAXED);
}

}  // namespace memlens
