// The call tree: interned stacks and their figures.
//
// A stack is a path of nodes; a node is (parent node, code id, instruction offset). Node 0 is
// the root ("no Python frame"). Nodes live in fixed-size chunks that never move, so a node's
// address stays valid while other threads add nodes. Finding a node is lock-free (the index is
// published with release stores and old index arrays are retired, not freed, until reset);
// adding one takes g_intern_lock.
//
// Figures per node: allocated (bytes, count), live (bytes, count) and live at the moment the
// total traced memory peaked, exact in O(1) per event: a global epoch increases whenever the
// total reaches a new maximum; before a node's figures change, if they have not changed since
// the latest maximum (their epoch is older), their live bytes are their live bytes at that
// maximum, so they are saved. At snapshot, figures untouched since the maximum take their
// current live bytes. Moments (moments.hpp) work the same way: before a node's live bytes
// change in a later moment than they last did, their value is logged for that moment.
#pragma once

#include <cstddef>
#include <cstdint>

#include "moments.hpp"
#include "state.hpp"

namespace memlens {

constexpr uint32_t kRootNode = 0;
constexpr uint32_t kNoParent = UINT32_MAX;
constexpr uint32_t kNoCode = UINT32_MAX;
// The code id of the child node that native (C allocator) blocks of a line are charged to.
constexpr uint32_t kNativeCode = UINT32_MAX - 1;
// Node ids fit in 28 bits (the pymalloc block map packs them with a 4-bit size).
constexpr uint32_t kMaxNodes = (uint32_t{1} << 28) - 2;

struct Figures {
    int64_t alloc_bytes, alloc_count, live_bytes, live_count, peak_bytes;
    uint64_t epoch;
};

struct Node {
    uint32_t parent;
    uint32_t code;  // code id (codes.hpp), kNoCode for the root
    int32_t offset;
    uint32_t moment;  // the raw moment fig.live_bytes last changed in (moments::touch)
    Figures fig;  // GIL events (all events in sampling mode)
};
static_assert(sizeof(Node) == 64, "a node is one cache line");

// The figures of a node's events made without the GIL, and the raw moment their live bytes
// last changed in.
struct NogilFigures {
    Figures fig;
    uint32_t moment;
    uint32_t reserved;
};

// Variances of the sampling estimates (sampling mode only).
struct Variances {
    double alloc, live, peak;
};

namespace calltree {

constexpr int kChunkBits = 14;
constexpr uint32_t kChunkSize = uint32_t{1} << kChunkBits;
constexpr uint32_t kChunks = (kMaxNodes >> kChunkBits) + 1;

struct Chunk {
    Node nodes[kChunkSize];
    uint32_t tags[kChunkSize];  // each node's path tag (below)
    NogilFigures* nogil;  // figures of events made without the GIL (allocated on first use)
    Variances* vars;   // sampling mode
};

extern Chunk* g_chunks[kChunks];
extern std::atomic<uint32_t> g_size;

inline Node& node(uint32_t id) { return g_chunks[id >> kChunkBits]->nodes[id & (kChunkSize - 1)]; }

// Creates the root; false when out of memory.
bool init(bool sampling);
// Frees every chunk and index (not while tracing).
void destroy();
inline uint32_t size() { return g_size.load(std::memory_order_acquire); }

// A node's path tag: a 32-bit hash of its whole path (its parent's tag, its code, its offset;
// the root's is kRootTag). The index places nodes by tag, so a walk that re-interns many
// levels knows where each of their nodes sits before it knows any of their ids: it fetches
// them all at once (warm()) instead of paying one cache miss after another, each level's
// lookup waiting on its parent's id. (Tags only place nodes: a node is found by comparing
// its parent, code and offset, so equal tags cost a probe, never a wrong node.)
constexpr uint32_t kRootTag = 0x6a09e667u;
inline uint32_t child_tag(uint32_t parent_tag, uint32_t code, int32_t offset) {
    return uint32_t(mix((uint64_t(parent_tag) << 32 | code) ^ (uint64_t(uint32_t(offset)) * 0x9E3779B97F4A7C15ULL)));
}
inline uint32_t tag_of(uint32_t id) { return g_chunks[id >> kChunkBits]->tags[id & (kChunkSize - 1)]; }
// Fetches node `id`'s tag into the cache ahead of tag_of() (in a big tree, a miss).
inline void prefetch_tag(uint32_t id) { __builtin_prefetch(&g_chunks[id >> kChunkBits]->tags[id & (kChunkSize - 1)]); }

// The node (parent, code, offset), created when needed. Returns the root when out of memory
// or ids, or once the tree is frozen. Lock-free when the node exists.
uint32_t intern_tagged(uint32_t parent, uint32_t tag, uint32_t code, int32_t offset);
inline uint32_t intern(uint32_t parent, uint32_t code, int32_t offset) {
    return intern_tagged(parent, child_tag(tag_of(parent), code, offset), code, offset);
}
// Starts fetching the index slots, then the nodes, of the paths with these tags (prefetches
// only: any tag may be wrong or absent).
void warm(const uint32_t* tags, int n);

// Freezing the tree for a run that is over (before its last snapshot: tracer.hpp, freeze): from
// unpublish_index() on no node is added (intern() answers the root); once no event that may
// have read the index is running, free_unpublished() frees it (it only served to add nodes).
void unpublish_index();
void free_unpublished();

// The run's last snapshot (tracer.hpp, snapshot) hands chunk `c`'s memory back to the system
// once it has copied it (its nodes, tags, no-GIL figures and variances read as zeros from then
// on; the chunk stays mapped until destroy()). Nothing that runs until stop() depends on what
// a node holds: the holders' search reads the block map, not nodes; a stack walk reads a tag
// and gets the root (the tree is frozen); an event that still charges a node (a free, another
// thread's allocation on a cached path) updates figures nobody reads again and logs nothing
// (moments are off), at the cost of the page it writes. Chunk 0 (the root's) is kept.
void give_back(uint32_t c);

// The no-GIL figures of a node (created on first use). Under g_table_lock.
NogilFigures* nogil(uint32_t id);
// The variances of a node (sampling mode).
inline Variances& vars(uint32_t id) { return g_chunks[id >> kChunkBits]->vars[id & (kChunkSize - 1)]; }
// How many nodes may have no-GIL figures: those of the chunks that have them (snapshot).
uint32_t nogil_capacity();
// The no-GIL figures if any were created (snapshot).
inline const NogilFigures* nogil_if_any(uint32_t id) {
    NogilFigures* f = g_chunks[id >> kChunkBits]->nogil;
    return f ? &f[id & (kChunkSize - 1)] : nullptr;
}

// Saves a node's live bytes as its live-at-peak bytes if it has not changed since the latest
// maximum of the total.
inline bool touch(Figures& f) {
    if (f.epoch != g_run.epoch) {
        f.peak_bytes = f.live_bytes;
        f.epoch = g_run.epoch;
        return true;
    }
    return false;
}

// Records a new maximum of the total, if it is one.
inline void check_peak() {
    int64_t total = traced_total();
    if (total > __atomic_load_n(&g_run.window_peak, __ATOMIC_RELAXED)) {
        __atomic_store_n(&g_run.window_peak, total, __ATOMIC_RELAXED);
        if (total > __atomic_load_n(&g_run.peak, __ATOMIC_RELAXED)) {
            __atomic_store_n(&g_run.peak, total, __ATOMIC_RELAXED);
            __atomic_store_n(&g_run.epoch, g_run.epoch + 1, __ATOMIC_RELAXED);
        }
    }
}

// A live block moved to figures `f` from other figures (which on_free took it from): live
// again, not allocated again. `total` is the running total those figures belong to.
inline void on_move_in(Figures& f, int64_t& total, int64_t bytes, int64_t count) {
    touch(f);
    f.live_bytes += bytes;
    f.live_count += count;
    __atomic_store_n(&total, total + bytes, __ATOMIC_RELAXED);
    check_peak();
}

// An allocation of `bytes` (standing for `count` allocations) charged to figures `f`: counted
// as allocated, then live as a moved-in block is (touch() reads only the live figures).
inline void on_alloc(Figures& f, int64_t& total, int64_t bytes, int64_t count) {
    int64_t& allocated = &total == &g_run.total ? g_run.alloc_bytes : g_run.alloc_bytes_nogil;
    __atomic_store_n(&allocated, allocated + bytes, __ATOMIC_RELAXED);
    f.alloc_bytes += bytes;
    f.alloc_count += count;
    on_move_in(f, total, bytes, count);
}

// A tracked block of `bytes` (`count` allocations) freed.
inline void on_free(Figures& f, int64_t& total, int64_t bytes, int64_t count) {
    touch(f);
    f.live_bytes -= bytes;
    f.live_count -= count;
    __atomic_store_n(&total, total - bytes, __ATOMIC_RELAXED);
}

// The same, at node `id`: its GIL figures (all figures in sampling mode), with the node's
// moment kept. These three are always inlined: as a call from the allocation hook alloc_at
// cost ~15 instructions of register saving per allocation, a quarter of its work.
__attribute__((always_inline)) inline void alloc_at(uint32_t id, int64_t bytes, int64_t count) {
    Node& n = node(id);
    moments::touch(n.moment, id, n.fig.live_bytes, moments::g_log);
    on_alloc(n.fig, g_run.total, bytes, count);
}
__attribute__((always_inline)) inline void free_at(uint32_t id, int64_t bytes, int64_t count) {
    Node& n = node(id);
    moments::touch(n.moment, id, n.fig.live_bytes, moments::g_log);
    on_free(n.fig, g_run.total, bytes, count);
}
// A live block moved to node `id` (free_at took it from its old node), with the node's moment
// kept.
__attribute__((always_inline)) inline void move_in_at(uint32_t id, int64_t bytes, int64_t count) {
    Node& n = node(id);
    moments::touch(n.moment, id, n.fig.live_bytes, moments::g_log);
    on_move_in(n.fig, g_run.total, bytes, count);
}
// ... and its no-GIL figures `f` (under g_table_lock).
inline void alloc_nogil(uint32_t id, NogilFigures& f, int64_t bytes, int64_t count) {
    moments::touch(f.moment, id, f.fig.live_bytes, moments::g_log_nogil);
    on_alloc(f.fig, g_run.total_nogil, bytes, count);
}
inline void free_nogil(uint32_t id, NogilFigures& f, int64_t bytes, int64_t count) {
    moments::touch(f.moment, id, f.fig.live_bytes, moments::g_log_nogil);
    on_free(f.fig, g_run.total_nogil, bytes, count);
}

}  // namespace calltree
}  // namespace memlens
