// See tracer.hpp for what this does. Notes on the design choices that are not obvious:
//
// * Reentrancy: a thread-local flag is checked first in every hook. An OBJ allocation above
//   512 bytes falls through pymalloc into the RAW domain: it is counted once, at the outermost
//   hook. Frees inside a hook are allocator internals and pass straight through.
// * Locking: MEM/OBJ hooks run with the GIL held; RAW hooks may run without it, from any
//   thread. One spinlock guards the tables (uncontended unless GIL-less RAW traffic exists).
//   Frame capture happens outside the lock; it reads only the calling thread's frames.
//   GIL-less RAW allocations are charged to the root node 0 ("no Python frame").
// * Call tree: a stack is interned as a path of nodes (parent, code, offset). Each thread
//   caches its last path, so an allocation re-interns only the frames that changed since the
//   previous one (usually just the innermost).
// * Exact peak in O(1): a global epoch increases whenever the total reaches a new maximum;
//   before a node changes, if it has not changed since the latest maximum (its epoch is
//   older), its current live bytes are its live bytes at that maximum, so they are saved.
//   At snapshot, nodes untouched since the maximum take their current live bytes.
// * Sampling: a per-thread countdown drawn from an exponential distribution of mean I; the
//   unsampled path is one subtraction and a compare. A sampled block of size s stands for
//   s / p bytes and 1 / p blocks, p = 1 - exp(-s / I). Only sampled blocks enter the address
//   table; a counting filter keeps the free path of unsampled blocks to one load.
// * All memory of the tracer comes from libc (malloc/calloc), never from the hooked domains.
#include "tracer.hpp"

#include <Python.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "frames.hpp"

#if PY_VERSION_HEX >= 0x030D0000
// Still exported by 3.13, but Python.h no longer declares it.
extern "C" const char* _PyMem_GetCurrentAllocatorName(void);
#endif

// Hooks run on every allocation: initial-exec TLS avoids a __tls_get_addr call per access.
#define MEMLENS_TLS __attribute__((tls_model("initial-exec"))) thread_local

namespace memlens {
namespace {

constexpr int kMaxDepthLimit = 512;
constexpr uint32_t kNoParent = UINT32_MAX;
constexpr uint64_t kSizeBits = 36;
constexpr uint64_t kSizeMask = (uint64_t{1} << kSizeBits) - 1;
constexpr uint64_t kMaxNode = (uint64_t{1} << (64 - kSizeBits)) - 1;
constexpr int kFilterBits = 16;  // 64 KiB of counters: stays in cache
constexpr size_t kTimelineCap = 4096;

inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}
inline uint64_t hash_ptr(uintptr_t p) { return (uint64_t(p) >> 4) * 0x9E3779B97F4A7C15ULL; }

// ---------------------------------------------------------------------------------------
// Spinlock (no allocation, fork-safe with the atfork handlers below).
std::atomic_flag g_lock = ATOMIC_FLAG_INIT;
inline void lock() {
    int spins = 0;
    while (g_lock.test_and_set(std::memory_order_acquire)) {
        if (++spins > 64) {
            sched_yield();
            spins = 0;
        }
    }
}
inline void unlock() { g_lock.clear(std::memory_order_release); }
struct LockGuard {
    LockGuard() { lock(); }
    ~LockGuard() { unlock(); }
};

// ---------------------------------------------------------------------------------------
// Address table: ptr -> (node, size), open addressing, linear probing, backward-shift delete.
struct Slot {
    uintptr_t key;  // 0 = empty
    uint64_t val;   // node << kSizeBits | size
};

struct AddressTable {
    Slot* slots = nullptr;
    size_t mask = 0;
    size_t count = 0;

    bool init(size_t cap) {
        slots = static_cast<Slot*>(std::calloc(cap, sizeof(Slot)));
        mask = slots ? cap - 1 : 0;
        count = 0;
        return slots != nullptr;
    }
    void destroy() {
        std::free(slots);
        slots = nullptr;
        mask = 0;
        count = 0;
    }
    size_t index(uintptr_t key) const { return (hash_ptr(key) >> 20) & mask; }
    bool grow() {
        AddressTable bigger;
        if (!bigger.init((mask + 1) * 2)) {
            return false;
        }
        for (size_t i = 0; i <= mask; ++i) {
            if (slots[i].key) {
                bigger.put_new(slots[i].key, slots[i].val);
            }
        }
        std::free(slots);
        *this = bigger;
        return true;
    }
    void put_new(uintptr_t key, uint64_t val) {
        size_t i = index(key);
        while (slots[i].key) {
            i = (i + 1) & mask;
        }
        slots[i] = {key, val};
        ++count;
    }
    // Inserts; if the key was present returns true and its previous value in *old.
    bool put(uintptr_t key, uint64_t val, uint64_t* old) {
        // Grow at 75% load: linear probing with a strong hash stays short there, and the table
        // is the tracer's main memory cost (16 bytes a slot, 21 to 43 bytes per live block).
        if ((count + 1) * 4 > (mask + 1) * 3 && !grow()) {
            return false;  // out of memory: the block stays untracked
        }
        size_t i = index(key);
        while (slots[i].key) {
            if (slots[i].key == key) {
                *old = slots[i].val;
                slots[i].val = val;
                return true;
            }
            i = (i + 1) & mask;
        }
        slots[i] = {key, val};
        ++count;
        return false;
    }
    bool take(uintptr_t key, uint64_t* val) {
        if (!slots) {
            return false;
        }
        size_t i = index(key);
        while (slots[i].key) {
            if (slots[i].key == key) {
                *val = slots[i].val;
                // Backward-shift deletion keeps probe chains intact without tombstones.
                size_t hole = i;
                size_t j = i;
                for (;;) {
                    j = (j + 1) & mask;
                    if (!slots[j].key) {
                        break;
                    }
                    size_t home = index(slots[j].key);
                    // Move slot j into the hole if its home is not cyclically in (hole, j].
                    bool movable = (hole <= j) ? (home <= hole || home > j) : (home <= hole && home > j);
                    if (movable) {
                        slots[hole] = slots[j];
                        hole = j;
                    }
                }
                slots[hole] = {0, 0};
                --count;
                return true;
            }
            i = (i + 1) & mask;
        }
        return false;
    }
};

// ---------------------------------------------------------------------------------------
// Call-tree nodes and their interning table.
struct Node {
    void* code;  // PyCodeObject*, strong reference held in g_codes
    uint32_t parent;
    int32_t offset;
    int64_t alloc_bytes, alloc_count, live_bytes, live_count, peak_bytes;
    uint64_t epoch;
    double alloc_var, live_var, peak_var;
};

struct NodeStore {
    Node* nodes = nullptr;
    size_t size = 0, cap = 0;
    uint32_t* index = nullptr;  // open addressing over node ids + 1 (0 = empty)
    size_t index_mask = 0;

    bool init() {
        cap = 1024;
        nodes = static_cast<Node*>(std::calloc(cap, sizeof(Node)));
        index_mask = 2047;
        index = static_cast<uint32_t*>(std::calloc(index_mask + 1, sizeof(uint32_t)));
        if (!nodes || !index) {
            destroy();
            return false;
        }
        nodes[0] = Node{};
        nodes[0].parent = kNoParent;
        size = 1;
        return true;
    }
    void destroy() {
        std::free(nodes);
        std::free(index);
        nodes = nullptr;
        index = nullptr;
        size = cap = 0;
        index_mask = 0;
    }
    static uint64_t key_hash(uint32_t parent, void* code, int32_t offset) {
        return mix(uint64_t(parent) * 0x100000001b3ULL ^ uint64_t(uintptr_t(code)) ^
                   (uint64_t(uint32_t(offset)) << 40));
    }
    bool grow_index() {
        size_t new_mask = index_mask * 2 + 1;
        auto* fresh = static_cast<uint32_t*>(std::calloc(new_mask + 1, sizeof(uint32_t)));
        if (!fresh) {
            return false;
        }
        for (size_t id = 1; id < size; ++id) {
            const Node& n = nodes[id];
            size_t i = key_hash(n.parent, n.code, n.offset) & new_mask;
            while (fresh[i]) {
                i = (i + 1) & new_mask;
            }
            fresh[i] = uint32_t(id + 1);
        }
        std::free(index);
        index = fresh;
        index_mask = new_mask;
        return true;
    }
    // Returns the node id, creating it when needed; *created tells whether it is new.
    // Returns 0 (the root) when out of memory or ids.
    uint32_t intern(uint32_t parent, void* code, int32_t offset, bool* created) {
        *created = false;
        size_t i = key_hash(parent, code, offset) & index_mask;
        while (uint32_t slot = index[i]) {
            const Node& n = nodes[slot - 1];
            if (n.parent == parent && n.code == code && n.offset == offset) {
                return slot - 1;
            }
            i = (i + 1) & index_mask;
        }
        if (size >= kMaxNode) {
            return 0;
        }
        if (size == cap) {
            auto* bigger = static_cast<Node*>(std::realloc(nodes, cap * 2 * sizeof(Node)));
            if (!bigger) {
                return 0;
            }
            nodes = bigger;
            cap *= 2;
        }
        uint32_t id = uint32_t(size++);
        nodes[id] = Node{};
        nodes[id].code = code;
        nodes[id].parent = parent;
        nodes[id].offset = offset;
        index[i] = id + 1;
        *created = true;
        if ((size + 1) * 2 > index_mask + 1) {
            grow_index();
        }
        return id;
    }
};

// Set of code objects we hold a strong reference to (so their addresses stay unique).
struct CodeSet {
    void** slots = nullptr;
    size_t mask = 0, count = 0;
    bool init() {
        mask = 1023;
        slots = static_cast<void**>(std::calloc(mask + 1, sizeof(void*)));
        return slots != nullptr;
    }
    void destroy() {
        std::free(slots);
        slots = nullptr;
        mask = count = 0;
    }
    // Returns true when newly added.
    bool add(void* p) {
        if ((count + 1) * 2 > mask + 1) {
            size_t new_mask = mask * 2 + 1;
            auto* fresh = static_cast<void**>(std::calloc(new_mask + 1, sizeof(void*)));
            if (!fresh) {
                return false;
            }
            for (size_t i = 0; i <= mask; ++i) {
                if (slots[i]) {
                    size_t j = hash_ptr(uintptr_t(slots[i])) >> 20 & new_mask;
                    while (fresh[j]) {
                        j = (j + 1) & new_mask;
                    }
                    fresh[j] = slots[i];
                }
            }
            std::free(slots);
            slots = fresh;
            mask = new_mask;
        }
        size_t i = hash_ptr(uintptr_t(p)) >> 20 & mask;
        while (slots[i]) {
            if (slots[i] == p) {
                return false;
            }
            i = (i + 1) & mask;
        }
        slots[i] = p;
        ++count;
        return true;
    }
};

// ---------------------------------------------------------------------------------------
// Global state.
struct Domain {
    PyMemAllocatorDomain id;
    PyMemAllocatorEx original;
    PyMemAllocatorEx ours;
    bool installed;
};

Domain g_domains[3] = {{PYMEM_DOMAIN_RAW, {}, {}, false},
                       {PYMEM_DOMAIN_MEM, {}, {}, false},
                       {PYMEM_DOMAIN_OBJ, {}, {}, false}};

std::atomic<bool> g_active{false};
Options g_opts;
bool g_sampling = false;
bool g_pymalloc_fast = false;  // sampling mode's hooks for pymalloc are installed
double g_interval = 0;  // as double, sampling mode
uint64_t g_generation = 0;  // bumps at each start: invalidates per-thread caches
bool g_forked_child = false;
pid_t g_owner_pid = 0;

AddressTable g_addrs;
NodeStore g_nodes;
CodeSet g_codes;
// Sampling mode: counting filter of tracked addresses. Static, so that the free path can
// read it without a null check even after a run ended (hooks may outlive a run, see stop()).
uint8_t g_filter[size_t{1} << kFilterBits];

int64_t g_total = 0;  // traced live bytes (exact) or estimated (sampling); under g_lock
int64_t g_peak = 0;
uint64_t g_epoch = 1;
uint64_t g_allocations = 0;
uint64_t g_samples = 0;
std::atomic<uint64_t> g_thread_counter{0};

std::chrono::steady_clock::time_point g_start_time;
double g_duration = 0;
int64_t g_peak_rss = 0;

// Timeline (written by the sampler thread only, read after it stopped).
TimelineOut* g_timeline = nullptr;
size_t g_timeline_len = 0;
std::thread* g_sampler = nullptr;
// Heap objects that are never destroyed: a child forked while the sampler thread waits would
// otherwise hang at exit destroying a condition variable that has a (now absent) waiter.
// The child gets fresh ones (atfork_child).
std::mutex* g_sampler_mutex = new std::mutex;
std::condition_variable* g_sampler_cv = new std::condition_variable;
bool g_sampler_stop = false;

// Per-thread path cache: the last stack seen (root first) and its node ids. Heap-allocated
// on a thread's first attributed allocation, freed by a pthread key destructor at exit.
struct PathCache {
    int path_len;
    void* path_code[kMaxDepthLimit];
    int32_t path_off[kMaxDepthLimit];
    uint32_t path_node[kMaxDepthLimit];
    FrameRec frames[kMaxDepthLimit];
};
pthread_key_t g_cache_key;
pthread_once_t g_cache_key_once = PTHREAD_ONCE_INIT;
void free_cache(void* cache);
void make_cache_key() { pthread_key_create(&g_cache_key, free_cache); }

// Per-thread state. A few words of plain data, zero-initialised, in static TLS (cheap
// access from the hooks; a dlopen'ed module only gets a small static TLS block).
struct ThreadState {
    bool in_hook;
    bool paused;
    uint64_t generation;
    int64_t countdown;
    uint64_t rng;
    PathCache* cache;
};
MEMLENS_TLS ThreadState t_state;

void free_cache(void* cache) {
    t_state.cache = nullptr;  // a hook running later in this thread's exit makes a new one
    std::free(cache);
}

// ---------------------------------------------------------------------------------------
// Sampling helpers.
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
inline void thread_refresh(ThreadState& ts) {
    if (ts.generation == g_generation) {
        return;
    }
    ts.generation = g_generation;
    if (ts.cache) {
        ts.cache->path_len = 0;
    }
    if (g_sampling) {
        uint64_t idx = g_thread_counter.fetch_add(1, std::memory_order_relaxed);
        ts.rng = mix(g_opts.seed + 0x9E3779B97F4A7C15ULL * (idx + 1)) | 1;
        ts.countdown = draw_countdown(ts.rng);
    }
}
struct Weight {
    int64_t bytes;
    int64_t count;
    double var;
};
inline Weight sample_weight(uint64_t size) {
    if (!g_sampling) {
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
inline size_t filter_index(uintptr_t p) { return hash_ptr(p) >> (64 - kFilterBits); }
// Counting filter updates, under the lock (read without it). A saturated counter stays set:
// it only costs false positives.
inline void filter_add(uintptr_t p) {
    uint8_t& c = g_filter[filter_index(p)];
    if (c != UINT8_MAX) {
        __atomic_store_n(&c, uint8_t(c + 1), __ATOMIC_RELAXED);
    }
}
inline void filter_remove(uintptr_t p) {
    uint8_t& c = g_filter[filter_index(p)];
    if (c != UINT8_MAX && c > 0) {
        __atomic_store_n(&c, uint8_t(c - 1), __ATOMIC_RELAXED);
    }
}

// ---------------------------------------------------------------------------------------
// Attribution.

// Current thread's leaf node; requires the GIL, called without the lock; takes the lock only
// to intern frames that changed since the previous allocation of this thread.
uint32_t current_node(ThreadState& t) {
    if (!t.cache) {
        t.cache = static_cast<PathCache*>(std::calloc(1, sizeof(PathCache)));
        if (!t.cache) {
            return 0;
        }
        pthread_setspecific(g_cache_key, t.cache);
    }
    PathCache& ts = *t.cache;
    int depth = g_opts.max_depth;
    int n = capture_stack(ts.frames, depth);
    if (n == 0) {
        return 0;
    }
    // Common prefix from the root side with the cached path.
    int k = 0;
    int cached = ts.path_len;
    while (k < cached && k < n) {
        const FrameRec& f = ts.frames[n - 1 - k];
        if (ts.path_code[k] != f.code || ts.path_off[k] != f.offset) {
            break;
        }
        ++k;
    }
    if (k == n && cached == n) {
        return ts.path_node[n - 1];
    }
    if (k < n) {
        LockGuard g;
        uint32_t parent = k ? ts.path_node[k - 1] : 0;
        for (int i = k; i < n; ++i) {
            const FrameRec& f = ts.frames[n - 1 - i];
            bool created = false;
            uint32_t id = g_nodes.intern(parent, f.code, f.offset, &created);
            if (created && g_codes.add(f.code)) {
                Py_INCREF(static_cast<PyObject*>(f.code));  // keep the address unique
            }
            ts.path_code[i] = f.code;
            ts.path_off[i] = f.offset;
            ts.path_node[i] = id;
            parent = id;
        }
    }
    ts.path_len = n;
    return ts.path_node[n - 1];
}

// Saves a node's live figures as its live-at-peak figures if it has not changed since the
// latest maximum of the total. Under the lock.
inline void touch(Node& node) {
    if (node.epoch != g_epoch) {
        node.peak_bytes = node.live_bytes;
        node.peak_var = node.live_var;
        node.epoch = g_epoch;
    }
}

inline uint64_t pack(uint32_t node, uint64_t size) {
    return (uint64_t(node) << kSizeBits) | (size > kSizeMask ? kSizeMask : size);
}

// Removes a tracked block's figures from its node. Under the lock.
void forget_block(uint64_t val) {
    uint32_t node_id = uint32_t(val >> kSizeBits);
    uint64_t size = val & kSizeMask;
    Weight w = sample_weight(size);
    Node& node = g_nodes.nodes[node_id];
    touch(node);
    node.live_bytes -= w.bytes;
    node.live_count -= w.count;
    node.live_var -= w.var;
    g_total -= w.bytes;
}

// Records a new block at a node. Under the lock.
void record_block(uintptr_t ptr, uint64_t size, uint32_t node_id) {
    Weight w = sample_weight(size);
    uint64_t old = 0;
    if (g_addrs.put(ptr, pack(node_id, size), &old)) {
        forget_block(old);  // a stale entry for a reused address (freed untracked)
    } else if (g_sampling) {
        filter_add(ptr);
    }
    Node& node = g_nodes.nodes[node_id];
    touch(node);
    node.alloc_bytes += w.bytes;
    node.alloc_count += w.count;
    node.alloc_var += w.var;
    node.live_bytes += w.bytes;
    node.live_count += w.count;
    node.live_var += w.var;
    g_total += w.bytes;
    ++g_samples;
    if (g_total > g_peak) {
        g_peak = g_total;
        ++g_epoch;
    }
}

// Tracks an allocation just made by the original allocator. In sampling mode the caller
// has already decided that this allocation is sampled (see sampled()).
__attribute__((noinline)) void on_alloc(void* ptr, size_t size, bool gil_known) {
    ThreadState& ts = t_state;
    thread_refresh(ts);
    bool gil = gil_known || thread_holds_gil();
    uint32_t node = gil ? current_node(ts) : 0;
    LockGuard g;
    ++g_allocations;
    record_block(uintptr_t(ptr), size, node);
}

// A countdown (per thread, or the GIL holders' one) expired on an allocation: draws the next
// one and says whether that allocation is sampled (not in a paused thread, not after the run).
inline bool rearm(int64_t& left, uint64_t& rng) {
    left = draw_countdown(rng);
    return !t_state.paused && g_active.load(std::memory_order_relaxed);
}

// Sampling mode: called when this thread's countdown reached 0 or below after counting an
// allocation of `size` bytes. Draws the next countdown; says whether that allocation is sampled.
__attribute__((noinline)) bool countdown_expired(ThreadState& ts, size_t size) {
    if (ts.generation != g_generation) {
        // The thread's first allocation in this run (its countdown is 0, or left from an
        // earlier run): a fresh seed and countdown, and this allocation counted against it.
        thread_refresh(ts);
        ts.countdown -= int64_t(size);
        if (ts.countdown > 0) {
            return false;
        }
    }
    return rearm(ts.countdown, ts.rng);
}

// Counts an allocation against the countdown; true when it is sampled.
inline bool sampled(ThreadState& ts, size_t size) {
    ts.countdown -= int64_t(size);
    if (__builtin_expect(ts.countdown > 0, 1)) {
        return false;
    }
    return countdown_expired(ts, size);
}

inline bool filter_hit(const void* ptr) {
    return __atomic_load_n(&g_filter[filter_index(uintptr_t(ptr))], __ATOMIC_RELAXED) != 0;
}

// Forgets a block about to be freed. Returns the tracked value through *val when known.
inline bool on_free(void* ptr, uint64_t* val) {
    if (g_sampling && !filter_hit(ptr)) {
        return false;
    }
    LockGuard g;
    if (!g_addrs.take(uintptr_t(ptr), val)) {
        return false;
    }
    if (g_sampling) {
        filter_remove(uintptr_t(ptr));
    }
    forget_block(*val);
    return true;
}

// A realloc failed: the old block (forgotten before the call) is still alive, put it back.
__attribute__((noinline)) void restore_block(void* ptr, uint64_t old) {
    LockGuard g;
    uint32_t node = uint32_t(old >> kSizeBits);
    Weight w = sample_weight(old & kSizeMask);
    uint64_t ignored = 0;
    if (!g_addrs.put(uintptr_t(ptr), old, &ignored) && g_sampling) {
        filter_add(uintptr_t(ptr));
    }
    Node& n = g_nodes.nodes[node];
    touch(n);
    n.live_bytes += w.bytes;
    n.live_count += w.count;
    n.live_var += w.var;
    g_total += w.bytes;
}

// ---------------------------------------------------------------------------------------
// The hooks. Every hook checks the reentrancy flag first. The helpers below are shared by the
// PEP 445 hooks (both modes) and numpy's data-memory hooks; `call` performs the real operation.

// The tracked part of an allocation: the real call under the reentrancy flag (the allocator's
// own allocations inside it are not counted), then the block recorded when `take`.
template <typename Call>
inline void* alloc_tracked(size_t size, bool gil_known, bool take, Call call) {
    ThreadState& ts = t_state;
    ts.in_hook = true;
    void* p = call();
    if (p && take) {
        on_alloc(p, size, gil_known);
    }
    ts.in_hook = false;
    return p;
}

// The tracked part of a reallocation: the old block forgotten before the call (the allocator
// may hand its address to another thread at once), the new one recorded when `take`, the old
// one put back if the call failed. `call(take)` performs it.
template <typename Call>
inline void* realloc_tracked(void* ptr, size_t size, bool gil_known, bool take, Call call) {
    ThreadState& ts = t_state;
    ts.in_hook = true;
    uint64_t old = 0;
    bool had = ptr && on_free(ptr, &old);
    void* p = call(take);
    if (p) {
        if (take) {
            on_alloc(p, size, gil_known);
        }
    } else if (had) {
        restore_block(ptr, old);
    }
    ts.in_hook = false;
    return p;
}

template <typename Call>
inline void* traced_alloc(size_t size, bool gil_known, Call call) {
    ThreadState& ts = t_state;
    if (ts.in_hook || ts.paused || !g_active.load(std::memory_order_relaxed)) {
        return call();
    }
    return alloc_tracked(size, gil_known, true, call);
}

// Exact mode, and sampling mode's general hooks when the old block may be tracked.
template <typename Call>
inline void* traced_realloc(void* ptr, size_t size, bool gil_known, Call call) {
    ThreadState& ts = t_state;
    if (ts.in_hook || !g_active.load(std::memory_order_relaxed)) {
        return call();
    }
    bool take = !ts.paused && (!g_sampling || sampled(ts, size));
    return realloc_tracked(ptr, size, gil_known, take, [&](bool) { return call(); });
}

// Frees need no reentrancy flag of their own: on_free never calls an allocator. A free made
// inside another hook (the allocator's internals) is skipped.
inline void traced_free(void* ptr) {
    if (ptr && !t_state.in_hook && g_active.load(std::memory_order_relaxed)) {
        uint64_t val = 0;
        on_free(ptr, &val);
    }
}

// Sampling mode's hot paths. An unsampled allocation costs a countdown subtraction and the
// reentrancy flag around the real call; an unsampled free one filter load. Everything else
// (the thread's first allocation in a run, a paused thread, the end of a run) is decided
// on the slow path, when the countdown expires or the filter says the block may be tracked.
template <typename Call>
__attribute__((noinline)) void* sample_alloc_slow(size_t size, bool gil_known, Call call) {
    return alloc_tracked(size, gil_known, countdown_expired(t_state, size), call);
}

template <typename Call>
inline void* sample_alloc(size_t size, bool gil_known, Call call) {
    ThreadState& ts = t_state;
    if (ts.in_hook) {
        return call();
    }
    int64_t left = ts.countdown - int64_t(size);
    ts.countdown = left;
    if (__builtin_expect(left <= 0, 0)) {
        return sample_alloc_slow(size, gil_known, call);
    }
    ts.in_hook = true;  // allocations the allocator makes inside this one are not counted
    void* p = call();
    ts.in_hook = false;
    return p;
}

template <typename Call>
inline void* sample_realloc(void* ptr, size_t size, bool gil_known, Call call) {
    ThreadState& ts = t_state;
    if (ts.in_hook) {
        return call();
    }
    int64_t left = ts.countdown - int64_t(size);
    if (__builtin_expect(left > 0 && !filter_hit(ptr), 1)) {
        ts.countdown = left;
        ts.in_hook = true;
        void* p = call();
        ts.in_hook = false;
        return p;
    }
    return traced_realloc(ptr, size, gil_known, call);  // the old block may be tracked
}

// Forgets a block that may be tracked, then frees it with `call`.
template <typename Call>
__attribute__((noinline)) void sample_free_slow(void* ptr, Call call) {
    if (ptr && !t_state.in_hook && g_active.load(std::memory_order_relaxed)) {
        uint64_t val = 0;
        on_free(ptr, &val);
    }
    call();
}

// Both paths end in a tail call: the unsampled free needs no stack frame.
template <typename Call>
inline void sample_free(void* ptr, Call call) {
    if (__builtin_expect(filter_hit(ptr), 0)) {
        return sample_free_slow(ptr, call);
    }
    return call();
}

// PEP 445 hooks; D is the domain (0 = RAW, which may run without the GIL), S the mode
// (sampling or exact: the hooks installed are chosen at start).
template <int D, bool S>
void* hook_malloc(void* ctx, size_t size) {
    Domain& d = *static_cast<Domain*>(ctx);
    auto call = [&] { return d.original.malloc(d.original.ctx, size); };
    return S ? sample_alloc(size, D != 0, call) : traced_alloc(size, D != 0, call);
}

template <int D, bool S>
void* hook_calloc(void* ctx, size_t nelem, size_t elsize) {
    Domain& d = *static_cast<Domain*>(ctx);
    auto call = [&] { return d.original.calloc(d.original.ctx, nelem, elsize); };
    return S ? sample_alloc(nelem * elsize, D != 0, call) : traced_alloc(nelem * elsize, D != 0, call);
}

template <int D, bool S>
void* hook_realloc(void* ctx, void* ptr, size_t size) {
    Domain& d = *static_cast<Domain*>(ctx);
    auto call = [&] { return d.original.realloc(d.original.ctx, ptr, size); };
    return S ? sample_realloc(ptr, size, D != 0, call) : traced_realloc(ptr, size, D != 0, call);
}

template <int D, bool S>
void hook_free(void* ctx, void* ptr) {
    Domain& d = *static_cast<Domain*>(ctx);
    auto call = [&d, ptr] { d.original.free(d.original.ctx, ptr); };
    if (S) {
        return sample_free(ptr, call);
    }
    traced_free(ptr);
    call();
}

// Sampling mode over pymalloc (the usual allocator; not with debug hooks or PYTHONMALLOC=malloc):
// no MEM/OBJ free hook at all. pymalloc serves requests above kPymallocSmall from the RAW
// domain and its free hands any block outside its arenas to PyMem_RawFree. So a sampled MEM/OBJ
// block is requested with at least kPymallocSmall + 1 bytes: it comes from the RAW domain, and
// its free reaches our RAW free hook. Unsampled blocks are never seen again: their frees cost
// nothing. And a small request never re-enters the hooks (pymalloc serves it from its pools),
// so it needs no reentrancy flag: an unsampled small allocation is a countdown subtraction and
// a tail call. (The one exception, pymalloc growing its arena table through the RAW domain,
// is rare and small: it is counted like any RAW allocation.)
constexpr size_t kPymallocSmall = 512;  // pymalloc's SMALL_REQUEST_THRESHOLD (3.8 to 3.13)

// MEM/OBJ allocations hold the GIL, so they share one countdown (a plain global: no TLS
// access on the fast path). Sampling stays exact in law: the bytes of MEM/OBJ (this countdown)
// and those of RAW and numpy (per-thread countdowns) form separate streams, each sampled at
// rate 1/I by its own exponential countdown.
struct GilCountdown {
    int64_t left;
    uint64_t rng;
};
GilCountdown g_gil_countdown;

// Counts `size` MEM/OBJ bytes (unless `counted`); true when the allocation is sampled.
inline bool gil_sampled(size_t size, bool counted) {
    if (!counted) {
        g_gil_countdown.left -= int64_t(size);
        if (g_gil_countdown.left > 0) {
            return false;
        }
    }
    return rearm(g_gil_countdown.left, g_gil_countdown.rng);
}

// The slow path of a MEM/OBJ allocation: large, or the countdown expired (`counted`: the
// size was already taken off the countdown).
__attribute__((noinline)) void* pym_alloc_slow(Domain& d, size_t nelem, size_t elsize, bool zero,
                                               bool counted) {
    ThreadState& ts = t_state;
    const PyMemAllocatorEx& o = d.original;
    size_t size = nelem * elsize;
    if (ts.in_hook) {  // not reached with pymalloc; kept as every hook's guard
        return zero ? o.calloc(o.ctx, nelem, elsize) : o.malloc(o.ctx, size);
    }
    bool take = gil_sampled(size, counted);
    // Under the reentrancy flag: large requests go through the RAW domain, not counted twice.
    return alloc_tracked(size, true, take, [&] {
        if (take && size <= kPymallocSmall) {
            return zero ? o.calloc(o.ctx, 1, kPymallocSmall + 1) : o.malloc(o.ctx, kPymallocSmall + 1);
        }
        return zero ? o.calloc(o.ctx, nelem, elsize) : o.malloc(o.ctx, size);
    });
}

// The four below take the domain from D, not from ctx: one RIP-relative load each for the
// original allocator's function and context.
template <int D>
void* pym_malloc(void*, size_t size) {
    Domain& d = g_domains[D];
    if (__builtin_expect(size <= kPymallocSmall, 1)) {
        g_gil_countdown.left -= int64_t(size);
        if (__builtin_expect(g_gil_countdown.left > 0, 1)) {
            return d.original.malloc(d.original.ctx, size);
        }
        return pym_alloc_slow(d, 1, size, false, true);
    }
    return pym_alloc_slow(d, 1, size, false, false);
}

template <int D>
void* pym_calloc(void*, size_t nelem, size_t elsize) {
    Domain& d = g_domains[D];
    size_t size = 0;
    if (__builtin_expect(!__builtin_mul_overflow(nelem, elsize, &size) && size <= kPymallocSmall, 1)) {
        g_gil_countdown.left -= int64_t(size);
        if (__builtin_expect(g_gil_countdown.left > 0, 1)) {
            return d.original.calloc(d.original.ctx, nelem, elsize);
        }
        return pym_alloc_slow(d, nelem, elsize, true, true);
    }
    return pym_alloc_slow(d, nelem, elsize, true, false);
}

template <int D>
void* pym_realloc(void*, void* ptr, size_t size) {
    Domain& d = g_domains[D];
    const PyMemAllocatorEx& o = d.original;
    ThreadState& ts = t_state;
    if (ts.in_hook || !g_active.load(std::memory_order_relaxed)) {
        return o.realloc(o.ctx, ptr, size);
    }
    // A sampled old block is forgotten first (its RAW realloc inside pymalloc passes through).
    return realloc_tracked(ptr, size, true, gil_sampled(size, false), [&](bool take) {
        return o.realloc(o.ctx, ptr, take && size <= kPymallocSmall ? kPymallocSmall + 1 : size);
    });
}

template <int D>
void pym_free(void*, void* ptr) {
    Domain& d = g_domains[D];
    d.original.free(d.original.ctx, ptr);  // a tail call: sampled blocks are seen as RAW frees
}

// numpy allocates array data through its own handler (plain malloc by default), never
// through PEP 445. numpy >= 1.22 lets a handler be set (PyDataMem_SetHandler, NEP 49); ours
// chains to the handler that was current. The struct layout is numpy's version-1 ABI.
struct NumpyAllocator {
    void* ctx;
    void* (*malloc)(void* ctx, size_t size);
    void* (*calloc)(void* ctx, size_t nelem, size_t elsize);
    void* (*realloc)(void* ctx, void* ptr, size_t new_size);
    void (*free)(void* ctx, void* ptr, size_t size);
};
struct NumpyHandler {
    char name[127];
    uint8_t version;
    NumpyAllocator allocator;
};
NumpyAllocator g_np_original;
NumpyHandler g_np_handler;
bool g_np_attached = false;

// numpy's handler stays installed for the life of the process: the mode is read per call.
// Outside a run the sampling paths only count down; their slow paths check g_active.
void* np_malloc(void* ctx, size_t size) {
    auto* o = static_cast<NumpyAllocator*>(ctx);
    auto call = [&] { return o->malloc(o->ctx, size); };
    return g_sampling ? sample_alloc(size, false, call) : traced_alloc(size, false, call);
}
void* np_calloc(void* ctx, size_t nelem, size_t elsize) {
    auto* o = static_cast<NumpyAllocator*>(ctx);
    auto call = [&] { return o->calloc(o->ctx, nelem, elsize); };
    return g_sampling ? sample_alloc(nelem * elsize, false, call) : traced_alloc(nelem * elsize, false, call);
}
void* np_realloc(void* ctx, void* ptr, size_t size) {
    auto* o = static_cast<NumpyAllocator*>(ctx);
    auto call = [&] { return o->realloc(o->ctx, ptr, size); };
    return g_sampling ? sample_realloc(ptr, size, false, call) : traced_realloc(ptr, size, false, call);
}
void np_free(void* ctx, void* ptr, size_t size) {
    auto* o = static_cast<NumpyAllocator*>(ctx);
    auto call = [o, ptr, size] { o->free(o->ctx, ptr, size); };
    if (g_sampling) {
        return sample_free(ptr, call);
    }
    traced_free(ptr);
    call();
}

template <int D, bool S>
void set_hooks(Domain& d) {
    d.ours.ctx = &d;
    d.ours.malloc = hook_malloc<D, S>;
    d.ours.calloc = hook_calloc<D, S>;
    d.ours.realloc = hook_realloc<D, S>;
    d.ours.free = hook_free<D, S>;
}

template <int D>
void set_pymalloc_hooks(Domain& d) {
    static_assert(D != 0, "the RAW domain keeps the sampling hooks");
    d.ours.ctx = &d;
    d.ours.malloc = pym_malloc<D>;
    d.ours.calloc = pym_calloc<D>;
    d.ours.realloc = pym_realloc<D>;
    d.ours.free = pym_free<D>;
}

// True when the MEM and OBJ domains are plain pymalloc (checked before our hooks go in).
bool pymalloc_in_use() {
    const char* name = _PyMem_GetCurrentAllocatorName();
    return name != nullptr && std::strcmp(name, "pymalloc") == 0;
}

bool is_ours(const PyMemAllocatorEx& a, const Domain& d) {
    return a.malloc == d.ours.malloc && a.ctx == &d;
}

// ---------------------------------------------------------------------------------------
// Timeline sampler thread: reads the total and the RSS; touches no Python state.
int64_t read_rss() {
    static long page = sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    char buf[128];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = 0;
    char* p = buf;
    while (*p && *p != ' ') {
        ++p;
    }
    return int64_t(std::strtoll(p, nullptr, 10)) * page;
}

void sampler_main(double interval_ms) {
    std::unique_lock<std::mutex> lk(*g_sampler_mutex);
    size_t stride = 1, tick = 0;
    for (;;) {
        if (g_sampler_stop) {
            break;
        }
        if (tick++ % stride == 0) {
            if (g_timeline_len == kTimelineCap) {
                // Bounded however long the run: keep every other point, halve the rate.
                for (size_t i = 0; i < kTimelineCap / 2; ++i) {
                    g_timeline[i] = g_timeline[2 * i];
                }
                g_timeline_len = kTimelineCap / 2;
                stride *= 2;
            }
            double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start_time).count();
            int64_t total = __atomic_load_n(&g_total, __ATOMIC_RELAXED);
            g_timeline[g_timeline_len++] = TimelineOut{t, total, read_rss()};
        }
        g_sampler_cv->wait_for(lk, std::chrono::duration<double, std::milli>(interval_ms));
    }
}

// ---------------------------------------------------------------------------------------
// fork: the child is not traced. Hooks stay as pass-through; the parent's data is kept
// untouched in the child's copy and never reported by it.
void atfork_prepare() { lock(); }
void atfork_parent() { unlock(); }
void atfork_child() {
    unlock();
    if (g_active.load()) {
        g_active.store(false);
        g_forked_child = true;
        g_sampler = nullptr;  // the thread does not exist in the child (leaked on purpose)
        g_sampler_mutex = new std::mutex;  // the parent's may be held or waited on
        g_sampler_cv = new std::condition_variable;
    }
}

void free_tables() {
    g_addrs.destroy();
    g_nodes.destroy();
    g_codes.destroy();
    std::free(g_timeline);
    g_timeline = nullptr;
    g_timeline_len = 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Public API.

std::string start(const Options& options) {
    static bool atfork_registered = false;
#ifdef Py_GIL_DISABLED
    // The hooks rely on the GIL serialising MEM/OBJ allocations and frame reads.
    return "free-threaded Python builds are not supported yet";
#endif
    if (g_active.load()) {
        return "memlens is already tracing this process";
    }
    if (g_forked_child) {
        return "cannot trace in a child forked while its parent was tracing";
    }
    if (options.mode == Mode::Sampling && options.sample_interval == 0) {
        return "sampling mode needs a sampling interval above 0";
    }
    for (Domain& d : g_domains) {
        if (d.installed) {
            return "memlens hooks from an earlier run are still installed below another "
                   "allocator hook; restart the process to trace again";
        }
    }
    reset();
    g_opts = options;
    if (g_opts.max_depth < 1) {
        g_opts.max_depth = 1;
    }
    if (g_opts.max_depth > kMaxDepthLimit) {
        g_opts.max_depth = kMaxDepthLimit;
    }
    g_sampling = options.mode == Mode::Sampling;
    g_interval = double(options.sample_interval);
    if (g_opts.seed == 0) {
        g_opts.seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    if (!g_addrs.init(4096) || !g_nodes.init() || !g_codes.init()) {
        free_tables();
        return "out of memory";
    }
    std::memset(g_filter, 0, sizeof(g_filter));
    g_timeline = static_cast<TimelineOut*>(std::calloc(kTimelineCap, sizeof(TimelineOut)));
    if (!g_timeline) {
        free_tables();
        return "out of memory";
    }
    g_total = g_peak = 0;
    g_epoch = 1;
    g_allocations = g_samples = 0;
    g_duration = 0;
    g_peak_rss = 0;
    ++g_generation;
    g_thread_counter.store(0);  // per-thread seeds are seed + thread order: reproducible
    thread_refresh(t_state);     // the starting thread first
    g_gil_countdown.rng = mix(g_opts.seed ^ 0xD1B54A32D192ED03ULL) | 1;
    g_gil_countdown.left = g_sampling ? draw_countdown(g_gil_countdown.rng) : 0;
    g_owner_pid = getpid();
    pthread_once(&g_cache_key_once, make_cache_key);
    if (!atfork_registered) {
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
        atfork_registered = true;
    }
    g_pymalloc_fast = g_sampling && pymalloc_in_use();
    if (g_pymalloc_fast) {
        set_hooks<0, true>(g_domains[0]);
        set_pymalloc_hooks<1>(g_domains[1]);
        set_pymalloc_hooks<2>(g_domains[2]);
    } else if (g_sampling) {
        set_hooks<0, true>(g_domains[0]);
        set_hooks<1, true>(g_domains[1]);
        set_hooks<2, true>(g_domains[2]);
    } else {
        set_hooks<0, false>(g_domains[0]);
        set_hooks<1, false>(g_domains[1]);
        set_hooks<2, false>(g_domains[2]);
    }
    for (Domain& d : g_domains) {
        PyMem_GetAllocator(d.id, &d.original);
    }
    g_start_time = std::chrono::steady_clock::now();
    g_active.store(true);
    for (Domain& d : g_domains) {
        PyMem_SetAllocator(d.id, &d.ours);
        d.installed = true;
    }
    if (options.timeline_interval_ms > 0) {
        g_sampler_stop = false;
        g_sampler = new std::thread(sampler_main, options.timeline_interval_ms);
    }
    return {};
}

void stop() {
    if (!g_active.load()) {
        return;
    }
    g_active.store(false);
    g_duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start_time).count();
    if (g_sampler) {
        {
            std::lock_guard<std::mutex> lk(*g_sampler_mutex);
            g_sampler_stop = true;
        }
        g_sampler_cv->notify_all();
        Py_BEGIN_ALLOW_THREADS
        g_sampler->join();
        Py_END_ALLOW_THREADS
        delete g_sampler;
        g_sampler = nullptr;
        if (g_timeline && g_timeline_len < kTimelineCap) {  // the state at stop, always
            g_timeline[g_timeline_len++] = TimelineOut{g_duration, g_total, read_rss()};
        }
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        g_peak_rss = int64_t(ru.ru_maxrss) * 1024;
    }
    for (Domain& d : g_domains) {
        PyMemAllocatorEx current;
        PyMem_GetAllocator(d.id, &current);
        if (is_ours(current, d)) {
            PyMem_SetAllocator(d.id, &d.original);
            d.installed = false;
        }
        // Otherwise another hook sits on top of ours and calls into it: ours stays
        // installed as a pass-through (g_active is false) for the life of the process.
    }
}

bool is_active() { return g_active.load(); }

bool hooks_installed() {
    for (const Domain& d : g_domains) {
        PyMemAllocatorEx current;
        PyMem_GetAllocator(d.id, &current);
        if (d.installed || is_ours(current, d)) {
            return true;
        }
    }
    return false;
}

bool is_forked_child() { return g_forked_child; }

const char* hook_kind() {
    if (g_domains[0].ours.malloc == nullptr) {
        return "";
    }
    return g_pymalloc_fast ? "sampling-pymalloc" : g_sampling ? "sampling" : "exact";
}

std::string numpy_attach(void* api_capsule) {
    PyObject* capsule = static_cast<PyObject*>(api_capsule);
    void** api = static_cast<void**>(PyCapsule_GetPointer(capsule, nullptr));
    if (api == nullptr) {
        PyErr_Clear();
        return "numpy's C API capsule is not readable";
    }
    using GetHandler = PyObject* (*)();
    using SetHandler = PyObject* (*)(PyObject*);
    PyObject* current = reinterpret_cast<GetHandler>(api[305])();
    if (current == nullptr) {
        PyErr_Clear();
        return "numpy gave no memory handler";
    }
    auto* h = static_cast<NumpyHandler*>(PyCapsule_GetPointer(current, "mem_handler"));
    if (h == nullptr || h->version != 1) {
        PyErr_Clear();
        Py_DECREF(current);
        return "numpy's memory handler has an unknown layout";
    }
    if (h == &g_np_handler) {  // already ours (in this context)
        Py_DECREF(current);
        return {};
    }
    if (!g_np_attached) {
        g_np_original = h->allocator;
        std::memset(&g_np_handler, 0, sizeof(g_np_handler));
        std::strncpy(g_np_handler.name, "memlens", sizeof(g_np_handler.name) - 1);
        g_np_handler.version = 1;
        g_np_handler.allocator = NumpyAllocator{&g_np_original, np_malloc, np_calloc, np_realloc, np_free};
        g_np_attached = true;
    }
    Py_DECREF(current);
    PyObject* ours = PyCapsule_New(&g_np_handler, "mem_handler", nullptr);
    if (ours == nullptr) {
        PyErr_Clear();
        return "out of memory";
    }
    PyObject* old = reinterpret_cast<SetHandler>(api[304])(ours);
    Py_DECREF(ours);
    if (old == nullptr) {
        PyErr_Clear();
        return "numpy refused the memory handler";
    }
    Py_DECREF(old);
    return {};
}

void snapshot(SnapshotData& out) {
    PauseScope pause;
    out = SnapshotData{};
    if (!g_nodes.nodes) {
        return;
    }
    {
        LockGuard g;
        out.nodes.reserve(g_nodes.size);
        for (size_t id = 0; id < g_nodes.size; ++id) {
            const Node& n = g_nodes.nodes[id];
            bool at_peak_now = n.epoch != g_epoch;
            NodeOut o{};
            o.parent = n.parent;
            o.offset = n.offset;
            o.code_index = -1;
            o.alloc_bytes = n.alloc_bytes;
            o.alloc_count = n.alloc_count;
            o.live_bytes = n.live_bytes;
            o.live_count = n.live_count;
            o.peak_bytes = at_peak_now ? n.live_bytes : n.peak_bytes;
            o.alloc_var = n.alloc_var;
            o.live_var = n.live_var;
            o.peak_var = at_peak_now ? n.live_var : n.peak_var;
            out.nodes.push_back(o);
        }
        out.peak_traced_bytes = g_peak;
        out.current_traced_bytes = g_total;
        out.allocations = g_allocations;
        out.samples = g_samples;
    }
    // Number the code objects (GIL held; no lock needed for reading node codes: nodes are
    // only added by GIL holders).
    for (size_t i = 0; i <= g_codes.mask; ++i) {
        if (g_codes.slots[i]) {
            out.codes.push_back(g_codes.slots[i]);
        }
    }
    // Map code pointer -> index with a temporary open-addressing table.
    size_t mask = 1;
    while (mask < out.codes.size() * 2 + 2) {
        mask = mask * 2 + 1;
    }
    std::vector<std::pair<void*, int64_t>> map(mask + 1, {nullptr, -1});
    for (size_t c = 0; c < out.codes.size(); ++c) {
        size_t i = hash_ptr(uintptr_t(out.codes[c])) >> 20 & mask;
        while (map[i].first) {
            i = (i + 1) & mask;
        }
        map[i] = {out.codes[c], int64_t(c)};
    }
    for (size_t id = 1; id < out.nodes.size(); ++id) {
        void* code = g_nodes.nodes[id].code;
        size_t i = hash_ptr(uintptr_t(code)) >> 20 & mask;
        while (map[i].first && map[i].first != code) {
            i = (i + 1) & mask;
        }
        out.nodes[id].code_index = map[i].first ? map[i].second : -1;
    }
    out.duration_s = g_active.load()
                         ? std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start_time).count()
                         : g_duration;
    out.peak_rss_bytes = g_peak_rss;
    out.max_depth = g_opts.max_depth;
    out.mode = int(g_opts.mode);
    out.sample_interval = g_opts.sample_interval;
    if (!g_sampler && g_timeline) {  // the sampler thread has stopped: the buffer is stable
        out.timeline.assign(g_timeline, g_timeline + g_timeline_len);
    }
}

void reset() {
    if (g_active.load()) {
        return;
    }
    // Drop our references to code objects (may run deallocators: GIL held, not tracing).
    if (g_codes.slots) {
        void** slots = g_codes.slots;
        size_t n = g_codes.mask + 1;
        g_codes.slots = nullptr;
        for (size_t i = 0; i < n; ++i) {
            if (slots[i]) {
                Py_DECREF(static_cast<PyObject*>(slots[i]));
            }
        }
        std::free(slots);
        g_codes.mask = g_codes.count = 0;
    }
    free_tables();
    ++g_generation;
}

void totals(int64_t* current, int64_t* peak) {
    *current = __atomic_load_n(&g_total, __ATOMIC_RELAXED);
    *peak = __atomic_load_n(&g_peak, __ATOMIC_RELAXED);
}

bool thread_paused() { return t_state.paused; }
void set_thread_paused(bool paused) { t_state.paused = paused; }

PauseScope::PauseScope() : previous(t_state.paused) { t_state.paused = true; }
PauseScope::~PauseScope() { t_state.paused = previous; }

}  // namespace memlens
