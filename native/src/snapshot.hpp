// A snapshot of a run and the one way a run's figures are built from it.
//
// snapshot() (tracer.hpp) copies the call tree's figures and what line resolution needs of
// every code object. build() then collapses the tree onto source lines: the caller says, per
// code object, which file it is charged to (or -1: transparent, its allocations go to the
// innermost calling frame that is charged) and which function it is; build() computes the
// collapsed tree (node = caller's node, file, line), self figures per line, and inclusive
// figures per line and per function, counting each subtree once per line (and per function)
// on its path even under recursion; and each site's and function's live bytes at each moment,
// collapsed the same way from the nodes' moment entries. Native blocks (the C allocator's, on a child node of their
// line's node) count in their line's self figures and, apart, in its native figures. Time and
// memory are linear in the number of nodes (for moments: in the entries, times the depth of
// the collapsed nodes that changed).
#pragma once

#include <cstdint>
#include <vector>

#include "codes.hpp"
#include "moments.hpp"

namespace memlens {

// Frees a vector's memory now (clear() keeps it).
template <typename T>
void free_now(std::vector<T>& v) {
    std::vector<T>().swap(v);
}

// Figures of one node, line or function: allocated, live and live at the peak, in the layout
// of the Python side's model.SUMS.
struct Sums {
    int64_t alloc_bytes = 0, alloc_count = 0, live_bytes = 0, live_count = 0, peak_bytes = 0;
    void add(const Sums& o) {
        alloc_bytes += o.alloc_bytes;
        alloc_count += o.alloc_count;
        live_bytes += o.live_bytes;
        live_count += o.live_count;
        peak_bytes += o.peak_bytes;
    }
    void subtract(const Sums& o) {
        alloc_bytes -= o.alloc_bytes;
        alloc_count -= o.alloc_count;
        live_bytes -= o.live_bytes;
        live_count -= o.live_count;
        peak_bytes -= o.peak_bytes;
    }
};

// The variances of sampling mode's estimates of alloc, live and peak bytes.
struct SumVars {
    double alloc = 0, live = 0, peak = 0;
    void add(const SumVars& o) {
        alloc += o.alloc;
        live += o.live;
        peak += o.peak;
    }
};

// A node's place in the call tree (its figures are apart: SnapshotData::sums).
struct SnapshotNode {
    uint32_t parent;
    uint32_t code;
    int32_t offset;
};

struct TimelinePoint {
    double t;  // seconds since start
    int64_t traced_bytes;
    int64_t rss_bytes;
};

struct SnapshotData {
    std::vector<SnapshotNode> nodes;
    std::vector<Sums> sums;     // per node (apart: build(release) turns them into its own)
    size_t released_nodes = 0;  // how many nodes a build() with `release` freed (0: none)
    std::vector<SumVars> vars;  // per node, sampling mode only
    codes::Lines lines;
    int64_t peak_traced_bytes = 0;
    int64_t current_traced_bytes = 0;
    int64_t peak_rss_bytes = 0;
    uint64_t allocations = 0;
    uint64_t samples = 0;
    uint64_t stack_reads = 0;
    uint64_t frames_read = 0;
    uint64_t exit_watches_dropped = 0;
    double duration_s = 0;
    int mode = 0;
    uint64_t sample_interval = 0;
    std::vector<TimelinePoint> timeline;
    moments::Snapshot moments;  // with each node's pending entry added
};

// The collapsed run, column by column.
struct Built {
    // The collapsed call tree: node i's caller is parent[i] (-1 for a root).
    std::vector<int32_t> parent, file, line, function;
    std::vector<Sums> self;
    // Per (file, line): self figures and inclusive figures.
    std::vector<int32_t> site_file, site_line;
    std::vector<Sums> site_self, site_incl;
    std::vector<Sums> site_native;   // the part of site_self from the C allocator
    std::vector<SumVars> site_vars;  // sampling mode only
    // Per function id given by the caller: inclusive figures (zero when never reached).
    std::vector<Sums> function_incl;
    // Moments (kept boundaries, in time order): when each began and the traced total then;
    // per moment, the live bytes (self and inclusive) of each site that changed since the
    // moment before, and the inclusive live bytes of each function that did.
    std::vector<double> moment_t;
    std::vector<int64_t> moment_traced;
    std::vector<int32_t> msite_moment, msite_site;
    std::vector<int64_t> msite_live, msite_incl;
    std::vector<int32_t> mfunc_moment, mfunc_function;
    std::vector<int64_t> mfunc_live;
    // Per node of the snapshot: the site its blocks count for (-1: none).
    std::vector<int32_t> node_site;
};

// `file_of_code[c]` (-1: transparent) and `function_of_code[c]` for every code id of the
// snapshot; `functions` is the number of distinct function ids.
// With `release`, the snapshot's nodes (and variances) are freed as soon as they are summed:
// the snapshot cannot be built again, and a big call tree's peak memory is ~20% lower.
void build(SnapshotData& snap, const std::vector<int32_t>& file_of_code,
           const std::vector<int32_t>& function_of_code, int32_t functions, Built& out, bool release = false);

}  // namespace memlens
