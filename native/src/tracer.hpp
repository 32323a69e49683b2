// The tracer: the single entry point of the native side.
//
// It installs PEP 445 hooks on the RAW, MEM and OBJ allocator domains (chaining to the
// allocators it found), attributes each allocation to the call-tree node of the Python stack
// that made it, and keeps per-node figures: allocated (bytes, count), live (bytes, count) and
// live at the moment the total traced memory peaked (exact, O(1) per event, see tracer.cpp).
// In sampling mode only allocations hit by a Poisson process of mean interval I bytes are
// recorded, with unbiased weights. Nothing here does file I/O or creates Python objects in
// a hook; snapshot() copies figures into plain vectors for the binding layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memlens {

enum class Mode : int { Exact = 0, Sampling = 1 };

struct Options {
    Mode mode = Mode::Exact;
    uint64_t sample_interval = 0;  // mean bytes between samples (sampling mode)
    uint64_t seed = 0;             // 0: seed from the clock
    int max_depth = 128;           // frames kept per stack (innermost ones)
    double timeline_interval_ms = 10.0;
};

struct NodeOut {
    uint32_t parent;  // UINT32_MAX for the root node 0
    int32_t offset;
    int64_t code_index;  // index into SnapshotData::codes, -1 for the root
    int64_t alloc_bytes, alloc_count, live_bytes, live_count, peak_bytes;
    double alloc_var, live_var, peak_var;  // variance of the estimates (0 in exact mode)
};

struct TimelineOut {
    double t;  // seconds since start
    int64_t traced_bytes;
    int64_t rss_bytes;
};

struct SnapshotData {
    std::vector<void*> codes;  // PyCodeObject*, borrowed (kept alive by the tracer until reset)
    std::vector<NodeOut> nodes;
    int64_t peak_traced_bytes = 0;
    int64_t current_traced_bytes = 0;
    int64_t peak_rss_bytes = 0;
    uint64_t allocations = 0;  // allocation events seen (sampled or not)
    uint64_t samples = 0;      // allocation events recorded
    double duration_s = 0;
    int max_depth = 0;
    int mode = 0;
    uint64_t sample_interval = 0;
    std::vector<TimelineOut> timeline;
};

// Starts tracing. Returns an empty string on success, else why it could not start.
// Requires the GIL.
std::string start(const Options& options);
// Stops tracing: restores the allocators found at start when ours are still the current
// ones; otherwise (someone hooked on top of us) leaves ours installed as pass-through.
// Recorded data stays available to snapshot() until reset(). Requires the GIL.
void stop();
bool is_active();
// True when any domain's current allocator is one of our hooks.
bool hooks_installed();
// True in a child process forked while tracing (the child is not traced).
bool is_forked_child();
// Which hooks the current (or last) run installed: "exact", "sampling" (any allocator) or
// "sampling-pymalloc" (no MEM/OBJ free hooks; see tracer.cpp). "" before any run.
const char* hook_kind();
// Routes numpy's array-data allocations (which bypass PEP 445) through the tracer by setting
// a numpy memory handler that chains to the current one. `api_capsule` is numpy's
// `_multiarray_umath._ARRAY_API`. The handler stays set (as a pass-through when not tracing)
// because arrays keep the handler that allocated them. Returns "" or why it could not.
// Requires the GIL.
std::string numpy_attach(void* api_capsule);
// Copies the recorded figures. Requires the GIL. Safe while tracing (the calling thread's
// own allocations are not tracked meanwhile).
void snapshot(SnapshotData& out);
// Drops recorded data and the references to code objects. Requires the GIL, not active.
void reset();

// Current and peak traced bytes (racy read, for progress displays).
void totals(int64_t* current, int64_t* peak);

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
