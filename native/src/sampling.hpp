// Sampling mode's arithmetic: a byte countdown drawn from an exponential distribution of mean
// I (a Poisson process over allocated bytes), and the unbiased weight of a sampled block: a
// block of size s is sampled with probability p = 1 - exp(-s / I) and stands for s / p bytes
// and 1 / p blocks (the estimator tcmalloc and Go use), with variance w^2 (1 - p).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>

#include "state.hpp"

namespace memlens::sampling {

inline double g_interval = 0;  // mean bytes between samples
inline std::atomic<uint64_t> g_thread_counter{0};

inline uint64_t next_random(uint64_t& rng) {  // xorshift64*
    uint64_t x = rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

inline int64_t draw_countdown(uint64_t& rng) {
    // Exponential with mean g_interval: -ln(U) * I, U uniform in (0, 1].
    double u = double((next_random(rng) >> 11) + 1) * (1.0 / 9007199254740992.0);
    double d = -std::log(u) * g_interval;
    return d < 1.0 ? 1 : int64_t(d);
}

struct Weight {
    int64_t bytes;
    int64_t count;
    double var;
};

inline Weight weight(uint64_t size) {
    if (!g_run.sampling) {
        return {int64_t(size), 1, 0.0};
    }
    double s = double(size);
    double p = -std::expm1(-s / g_interval);  // 1 - exp(-s/I), accurate for small s
    if (p <= 0) {
        p = 1e-300;
    }
    double w = s / p;
    return {int64_t(std::llround(w)), int64_t(std::llround(1.0 / p)), w * w * (1.0 - p)};
}

// The per-thread state of the thread that came `idx`-th in this run (0: the starting one).
inline void thread_seed(ThreadState& ts, uint64_t idx) {
    ts.rng = mix(g_run.opts.seed + 0x9E3779B97F4A7C15ULL * (idx + 1)) | 1;
    ts.countdown = draw_countdown(ts.rng);
}

// A thread's first event in a run: fresh per-thread state (seeds are the run's seed + the
// thread's order, so runs are reproducible).
inline void thread_refresh(ThreadState& ts) {
    if (ts.generation == g_run.generation) {
        return;
    }
    ts.generation = g_run.generation;
    if (g_run.sampling) {
        thread_seed(ts, g_thread_counter.fetch_add(1, std::memory_order_relaxed));
    }
}

}  // namespace memlens::sampling
