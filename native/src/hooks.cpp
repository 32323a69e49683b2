// The allocator hooks. Notes on the choices that are not obvious:
//
// * Reentrancy: a thread-local flag is checked first in every allocating hook. An OBJ
//   allocation above 512 bytes falls through pymalloc into the RAW domain: it is counted once,
//   at the outermost hook. Frees never call an allocator, so they need no flag of their own.
// * GIL events (MEM/OBJ always; RAW and numpy when PyGILState_Check says so) update the
//   figures and the pymalloc block map without a lock; see state.hpp for the rest.
// * Exact mode over pymalloc remembers small blocks in the pymalloc block map (blocks.hpp) and
//   hooks pymalloc's arena allocator to forget the pages of released arenas. Any other
//   allocator (debug hooks, PYTHONMALLOC=malloc, another hook below ours) uses the address
//   table for everything.
// * Sampling mode: an unsampled allocation costs a countdown subtraction and the reentrancy
//   flag around the real call; an unsampled free one filter load. Over plain pymalloc the
//   MEM/OBJ domains have no free hook at all (see the pym_* hooks).
#include "hooks.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstring>
#include <map>
#include <new>

#include "blocks.hpp"
#include "calltree.hpp"
#include "compat.hpp"
#include "free_lists.h"
#include "sampling.hpp"
#include "stack.hpp"
#include "stack_cache.hpp"
#include "state.hpp"

namespace memlens::hooks {
namespace {

using compat::kPymallocSmall;

struct Domain {
    PyMemAllocatorDomain id;
    PyMemAllocatorEx original;
    PyMemAllocatorEx ours;
    bool installed;
};

Domain g_domains[3] = {{PYMEM_DOMAIN_RAW, {}, {}, false},
                       {PYMEM_DOMAIN_MEM, {}, {}, false},
                       {PYMEM_DOMAIN_OBJ, {}, {}, false}};

enum class Kind { None, ExactPymalloc, Exact, Sampling, SamplingPymalloc };
Kind g_kind = Kind::None;
bool g_map = false;     // exact mode over pymalloc: small MEM/OBJ blocks in the block map
bool g_native = false;  // the C allocator's calls from other libraries are traced

PyObjectArenaAllocator g_arena_original;
PyObjectArenaAllocator g_arena_ours;
bool g_arena_installed = false;

// ---------------------------------------------------------------------------------------
// Recording. `gil`: the event is made with the GIL held.

// An event made without the GIL, counted in g_run.nogil_events while it lives: it goes on only
// if the run is still active once counted (stop() clears g_run.active, then waits for the count
// to fall to 0: either it sees this event, or this event sees the run stopped). GIL events
// need no count: stop() holds the GIL.
struct NogilEvent {
    bool counted;
    explicit NogilEvent(bool gil) : counted(!gil) {
        if (counted) {
            g_run.nogil_events.fetch_add(1, std::memory_order_seq_cst);
        }
    }
    bool live() const { return !counted || g_run.active.load(std::memory_order_seq_cst); }
    ~NogilEvent() {
        if (counted) {
            g_run.nogil_events.fetch_sub(1, std::memory_order_release);
        }
    }
    NogilEvent(const NogilEvent&) = delete;
    NogilEvent& operator=(const NogilEvent&) = delete;
};

// Adds or removes figures of a block (w.count allocations of w.bytes in all) at `node`.
// GIL events in exact mode need no lock; the others hold g_table_lock.
// Sampling mode: a node's variances, once its figures are brought to the current peak (the
// live variance at the node's own peak is kept as the peak's), before they change.
inline Variances& sampled_vars(uint32_t node) {
    Variances& v = calltree::vars(node);
    if (calltree::touch(calltree::node(node).fig)) {
        v.peak = v.live;
    }
    return v;
}

inline void count_alloc(uint32_t node, const sampling::Weight& w, bool gil) {
    if (g_run.sampling) {
        Variances& v = sampled_vars(node);
        v.alloc += w.var;
        v.live += w.var;
    }
    if (g_run.sampling || gil) {
        calltree::alloc_at(node, w.bytes, w.count);
    } else if (NogilFigures* f = calltree::nogil(node)) {
        calltree::alloc_nogil(node, *f, w.bytes, w.count);
    }
}

inline void count_free(uint32_t node, const sampling::Weight& w, bool gil) {
    if (g_run.sampling) {
        sampled_vars(node).live -= w.var;
    }
    if (g_run.sampling || gil) {
        calltree::free_at(node, w.bytes, w.count);
    } else if (NogilFigures* f = calltree::nogil(node)) {
        calltree::free_nogil(node, *f, w.bytes, w.count);
    }
}

// A live block returns to its node without counting an allocation (a failed realloc).
inline void count_restore(uint32_t node, const sampling::Weight& w, bool gil) {
    count_alloc(node, w, gil);
    NogilFigures* nf = g_run.sampling || gil ? nullptr : calltree::nogil(node);
    Figures* f = g_run.sampling || gil ? &calltree::node(node).fig : nf ? &nf->fig : nullptr;
    if (f) {
        f->alloc_bytes -= w.bytes;
        f->alloc_count -= w.count;
    }
    if (g_run.sampling) {
        calltree::vars(node).alloc -= w.var;
    }
}

// Puts a block in the address table (g_table_lock held) and takes back the figures of a
// stale entry for the same address (a block freed where we could not see it).
inline void table_put_locked(uintptr_t p, uint32_t node, uint64_t size, bool gil) {
    bool replaced = false;
    blocks::Entry old{};
    if (blocks::table_put(p, node, size, &replaced, &old) && replaced) {
        count_free(old.node, sampling::weight(old.size), gil);
    }
}

// Puts a block of exact mode, made or adopted with the GIL held, where frees look for it: in
// the block map when it is a pymalloc block (`in_map`) the map takes, else in the table.
inline void put_exact(uintptr_t p, size_t size, bool in_map, uint32_t node) {
    if (!(in_map && blocks::page_put(p, size, node))) {
        Guard g(g_table_lock);
        table_put_locked(p, node, size, true);
    }
}

// What a tracked block is: a pymalloc block (it may go in the block map), another block of
// Python's MEM and OBJ domains (or numpy's), a block of the RAW domain, or a block of the C
// allocator (native: charged to a child node of the line's node, so that lines tell native
// bytes from Python's). RAW and native events may come from inside another tool's allocator
// hook: they name no new code object (see codes::id_of).
enum class Block { Python, Pymalloc, Raw, Native };

// What a block of Python's allocator domain D is (before the block map is considered).
constexpr Block domain_block(int domain) { return domain == 0 ? Block::Raw : Block::Python; }

// The node a block made now is charged to, or stack::kNotTheProgram. `known_missed`: the
// caller, holding the GIL, asked stack::leaf_node_known() already, which had no answer (its
// checks are not made twice).
inline uint32_t node_for(ThreadState& t, bool gil, Block kind, bool known_missed = false) {
    const bool may_allocate = kind == Block::Python || kind == Block::Pymalloc;
    uint32_t node = known_missed ? stack::leaf_node_full(t, gil, may_allocate)
                                 : stack::leaf_node_inline(t, gil, may_allocate);
    if (kind == Block::Native && node != stack::kNotTheProgram) {
        node = calltree::intern(node, kNativeCode, 0);
    }
    return node;
}

// A block recorded at `node` in exact mode, with the GIL (no lock). `in_map`: a pymalloc block.
inline void record_exact(uintptr_t p, size_t size, bool in_map, uint32_t node) {
    ++g_run.allocations;
    ++g_run.samples;
    put_exact(p, size, in_map, node);
    calltree::alloc_at(node, int64_t(size), 1);
}

// record() past its common case (`known_missed`: as for node_for()).
__attribute__((noinline)) void record_full(ThreadState& t, uintptr_t p, size_t size, bool gil, Block kind, bool known_missed) {
    NogilEvent event(gil);
    if (!event.live()) {
        return;
    }
    sampling::thread_refresh(t);
    uint32_t node = node_for(t, gil, kind, known_missed);
    if (node == stack::kNotTheProgram) {
        return;
    }
    if (gil && !g_run.sampling) {  // the common case: no lock
        record_exact(p, size, kind == Block::Pymalloc, node);
        return;
    }
    sampling::Weight w = sampling::weight(size);
    Guard g(g_table_lock);
    ++g_run.allocations;
    ++g_run.samples;
    table_put_locked(p, node, size, gil);
    count_alloc(node, w, gil);
}

// record_exact() of a pymalloc block, out of line (record()'s tail call).
__attribute__((noinline)) void record_at(uintptr_t p, size_t size, uint32_t node) { record_exact(p, size, true, node); }

// Records a block just allocated (or the new block of a realloc). Its common case first: exact
// mode, with the GIL, a pymalloc block of a page the block map knows, the node known to the
// thread's stack cache without a lookup, the node's moment current. That path calls nothing,
// so it saves no registers; the rest is a tail call.
MEMLENS_HOT void record(ThreadState& t, uintptr_t p, size_t size, bool gil, Block kind) {
    uint32_t node;
    if (gil && kind == Block::Pymalloc && !g_run.sampling && t.generation == g_run.generation) {
        if (!stack::leaf_node_known(t, &node)) {
            return record_full(t, p, size, gil, kind, true);
        }
        auto& n = calltree::node(node);
        if (moments::current(n.moment) && blocks::page_put_known(p, size, node)) {
            ++g_run.allocations;
            ++g_run.samples;
            calltree::on_alloc(n.fig, g_run.total, int64_t(size), 1);
            return;
        }
        return record_at(p, size, node);  // (the node is known: not looked up again)
    }
    record_full(t, p, size, gil, kind, false);
}

struct Forgotten {
    bool tracked;
    bool in_map;
    uint32_t node;
    uint64_t size;
};

// forget() for a block in the address table, out of line (the lock, sampling's counts); with
// the caller's NogilEvent alive.
__attribute__((noinline)) Forgotten forget_in_table(uintptr_t p, bool gil) {
    blocks::Entry e{};
    {
        Guard g(g_table_lock);
        if (!blocks::table_take(p, &e)) {
            return {};
        }
        if (g_run.sampling || !gil) {
            count_free(e.node, sampling::weight(e.size), gil);
        }
    }
    if (!g_run.sampling && gil) {
        calltree::free_at(e.node, int64_t(e.size), 1);
    }
    return {true, false, e.node, e.size};
}

// Forgets a block about to be freed (or reallocated), if it is tracked. `mapped`: the block
// may be in the pymalloc block map (a MEM/OBJ block). Always inlined into the hooks: a block
// of the map (the common free) or one the filter rules out costs no call.
__attribute__((always_inline)) inline Forgotten forget(uintptr_t p, bool gil, bool mapped) {
    NogilEvent event(gil);
    if (!event.live()) {
        return {};
    }
    if (mapped && g_map) {
        uint32_t node = 0;
        size_t size = 0;
        if (blocks::page_take(p, &node, &size)) {
            calltree::free_at(node, int64_t(size), 1);
            return {true, true, node, size};
        }
    }
    if (!blocks::filter_hit(p)) {
        return {};
    }
    return forget_in_table(p, gil);
}

// A realloc failed: the old block (forgotten before the call) is still alive.
__attribute__((noinline)) void restore(uintptr_t p, const Forgotten& old, bool gil) {
    NogilEvent event(gil);
    if (!event.live()) {
        return;
    }
    sampling::Weight w = sampling::weight(old.size);
    if (old.in_map && blocks::page_put(p, old.size, old.node)) {
        count_restore(old.node, w, gil);
        return;
    }
    Guard g(g_table_lock);
    table_put_locked(p, old.node, old.size, gil);
    count_restore(old.node, w, gil);
}

// The allocator's call under the reentrancy flag, untracked (the allocations it makes are its
// own), then the flag back to `was`.
template <typename Call>
inline auto untracked(ThreadState& t, Call call, bool was = false) noexcept {
    InHook hook(t, was);
    return call();
}

// The tracked part of an allocation: the real call under the reentrancy flag (the
// allocator's own allocations inside it are not counted), then the block recorded if `take`.
template <typename Call>
inline void* alloc_tracked(ThreadState& t, size_t size, bool gil, Block kind, bool take, Call call) noexcept {
    InHook hook(t);
    void* p = call();
    if (p && take) {
        record(t, uintptr_t(p), size, gil, kind);
        t.last_block = uintptr_t(p);
    }
    return p;
}

// The tracked part of a reallocation: the old block forgotten before the call (the allocator
// may hand its address to another thread at once), the new one recorded if `take`, the old
// one put back if the call failed. `call(take)` performs it; `kind(p)` says what the new
// block is.
template <typename Call, typename Kind>
inline void* realloc_tracked(ThreadState& t, void* ptr, size_t size, bool gil, bool mapped, bool take, Call call,
                             Kind kind) noexcept {
    InHook hook(t);
    Forgotten old = ptr ? forget(uintptr_t(ptr), gil, mapped) : Forgotten{};
    void* p = call(take);
    if (p) {
        if (take) {
            record(t, uintptr_t(p), size, gil, kind(p));
            t.last_block = uintptr_t(p);
        }
    } else if (old.tracked) {
        restore(uintptr_t(ptr), old, gil);
    }
    return p;
}

inline bool gil_held(int domain) { return domain != 0 || PyGILState_Check(); }

// ---------------------------------------------------------------------------------------
// Exact mode. D is the domain (0 = RAW, which may run without the GIL).

inline Block kind_of(int domain, size_t size) {
    return domain != 0 && g_map && size - 1 < kPymallocSmall ? Block::Pymalloc : domain_block(domain);  // 1..512
}

template <int D>
MEMLENS_HOT void* ex_malloc(void*, size_t size) {
    Domain& d = g_domains[D];
    ThreadState& t = t_state;
    if (t.in_hook | t.paused | !g_run.active.load(std::memory_order_relaxed)) {
        return d.original.malloc(d.original.ctx, size);
    }
    return alloc_tracked(t, size, gil_held(D), kind_of(D, size), true,
                         [&] { return d.original.malloc(d.original.ctx, size); });
}

template <int D>
MEMLENS_HOT void* ex_calloc(void*, size_t nelem, size_t elsize) {
    Domain& d = g_domains[D];
    ThreadState& t = t_state;
    size_t size = 0;
    if (t.in_hook | t.paused | !g_run.active.load(std::memory_order_relaxed) ||
        __builtin_mul_overflow(nelem, elsize, &size)) {
        return d.original.calloc(d.original.ctx, nelem, elsize);
    }
    return alloc_tracked(t, size, gil_held(D), kind_of(D, size), true,
                         [&] { return d.original.calloc(d.original.ctx, nelem, elsize); });
}

template <int D>
MEMLENS_HOT void* ex_realloc(void*, void* ptr, size_t size) {
    Domain& d = g_domains[D];
    ThreadState& t = t_state;
    if (t.in_hook || !g_run.active.load(std::memory_order_relaxed)) {
        return d.original.realloc(d.original.ctx, ptr, size);
    }
    // A moved or resized pymalloc block goes back in the block map only where the map knows
    // its page holds blocks of its class (a shrunk large block stays a libc block).
    auto kind = [&](void* p) {
        Block k = kind_of(D, size);
        return k != Block::Pymalloc || (!ptr || blocks::page_fits(uintptr_t(p), size)) ? k : Block::Python;
    };
    return realloc_tracked(t, ptr, size, gil_held(D), D != 0, !t.paused,
                           [&](bool) { return d.original.realloc(d.original.ctx, ptr, size); }, kind);
}

// The common free of exact mode: a tracked block of the pymalloc map (a MEM/OBJ block, with
// the GIL) whose node's live bytes last changed in the current moment, forgotten and its
// node's figures taken back with no call (the hook then saves no register on its way to the
// allocator's free). False, with nothing done, for any other block: forget() then does it all.
__attribute__((always_inline)) inline bool forget_mapped(uintptr_t p) {
    blocks::PageBlock b = blocks::page_block(p);
    if (!b) {
        return false;
    }
    Node& n = calltree::node(b.node());
    if (moments::raw_of(n.moment) != __atomic_load_n(&moments::g_moment, __ATOMIC_RELAXED)) {
        return false;  // (the moment's log first: forget()'s way)
    }
    b.clear();
    calltree::on_free(n.fig, g_run.total, int64_t(b.size()), 1);
    return true;
}

// ex_free() for every block but those forget_mapped() takes: out of line.
template <int D>
__attribute__((noinline)) void ex_free_other(void* ptr) {
    forget(uintptr_t(ptr), gil_held(D), D != 0);
    g_domains[D].original.free(g_domains[D].original.ctx, ptr);
}

template <int D>
MEMLENS_HOT void ex_free(void*, void* ptr) {
    Domain& d = g_domains[D];
    // A RAW free inside another hook is the allocator's own (pymalloc releasing a large block
    // that the OBJ hook already forgot).
    if (ptr && g_run.active.load(std::memory_order_relaxed) && !(D == 0 && t_state.in_hook)) {
        if (D == 0 || !g_map || !forget_mapped(uintptr_t(ptr))) {
            return ex_free_other<D>(ptr);
        }
    }
    d.original.free(d.original.ctx, ptr);
}

// pymalloc's arena allocator: the pages of a released arena are forgotten by the block map,
// and the arenas' own mappings (made through libpython's mmap) are not native allocations.
void* arena_alloc(void*, size_t size) {
    ThreadState& t = t_state;
    return untracked(t, [&] { return g_arena_original.alloc(g_arena_original.ctx, size); }, t.in_hook);
}
void arena_free(void*, void* ptr, size_t size) {
    if (ptr && g_map) {
        blocks::arena_freed(uintptr_t(ptr), size);
    }
    ThreadState& t = t_state;
    untracked(t, [&] { g_arena_original.free(g_arena_original.ctx, ptr, size); }, t.in_hook);
}

// ---------------------------------------------------------------------------------------
// Objects made in blocks the allocator did not just hand out (3.13+). CPython keeps freed
// tuples, floats, dicts, lists... on free lists and makes new objects in them without calling
// the allocator: their block would stay charged to the line that first allocated it (in code
// that streams objects through, the wrong line gets everything). The reference tracer reports
// every object made (_Py_NewReference, free-listed ones included): when the object's block is
// not the one this thread's last tracked allocation returned, the block moves to the line
// making the object now: its live and peak figures leave the old line (not an allocation:
// allocation figures stay what the allocator was asked for, as tracemalloc counts them). Only one reference tracer can be set: one found at start is chained to (called
// from ours) and put back at stop; one set during the run replaces ours (tracemalloc.start()
// does), which stop() reports.

compat::RefTracer g_prev_tracer = nullptr;
void* g_prev_tracer_data = nullptr;
bool g_ref_tracing = false;  // ours was set by this run
bool g_ref_lost = false;     // ... and replaced by someone else before the run stopped

// The bytes a free-listed object of a builtin type took from the allocator when it was made
// (an untracked block, allocated before the run started, is taken in at that size), or 0.
size_t free_listed_size(PyObject* op) {
    PyTypeObject* tp = Py_TYPE(op);
    if (tp == &PyTuple_Type) {
        size_t n = size_t(tp->tp_basicsize) + size_t(Py_SIZE(op)) * size_t(tp->tp_itemsize);
        return compat::preheader(tp) + ((n + sizeof(void*) - 1) & ~(sizeof(void*) - 1));
    }
    if (tp == &PyFloat_Type || tp == &PyList_Type || tp == &PyDict_Type || tp == &PySlice_Type) {
        return compat::preheader(tp) + size_t(tp->tp_basicsize);
    }
    return tp == &PyLong_Type ? compat::free_listed_int_size(op) : 0;
}

// A tracked block whose object now belongs to `node`: its live (and peak) figures move there,
// without an allocation (the allocator was not called). Its old node's figures were taken back
// by forget(). `in_map`: it is a pymalloc block (it goes in the block map).
// `guessed`: an untracked block, whose size is its object's (blocks::page_adopt).
void adopt(uintptr_t block, size_t size, bool in_map, uint32_t node, bool guessed = false) {
    if (!g_run.sampling) {
        // (A guessed block the map does not take goes in the table, as put_exact() puts it.)
        if (!(guessed && in_map && blocks::page_adopt(block, &size, node))) {
            put_exact(block, size, in_map && !guessed, node);
        }
        calltree::move_in_at(node, int64_t(size), 1);
        return;
    }
    sampling::Weight w = sampling::weight(size);
    Guard g(g_table_lock);
    table_put_locked(block, node, size, true);
    sampled_vars(node).live += w.var;
    Node& n = calltree::node(node);
    moments::touch(n.moment, node, n.fig.live_bytes, moments::g_log);
    calltree::on_move_in(n.fig, g_run.total, w.bytes, w.count);
}

// reused() for a block that is not a tracked block of the block map (or is one that an
// object not the program's is made in: `not_program`): forgotten where it was tracked; taken
// in where it is an untracked builtin object's (exact mode).
__attribute__((noinline)) int reused_elsewhere(ThreadState& t, PyObject* op, uintptr_t block, bool not_program) noexcept {
    InHook hook(t);
    Forgotten old = forget(block, true, true);
    size_t listed = g_run.sampling ? 0 : free_listed_size(op);
    size_t size = old.tracked ? old.size : listed;
    const bool mapped = old.tracked && old.in_map;  // (its size is then its block's own)
    if (size && !t.paused && !not_program) {
        uint32_t node = node_for(t, true, Block::Python);
        if (node != stack::kNotTheProgram) {
            // A builtin free-listed object was made by the object allocator, so over pymalloc
            // its block is a pymalloc block even when it was untracked (allocated before the
            // run) or in the table: in the map, its next reuse takes the fast path of reused().
            // (Its size is then its object's, or what the table had: not its block's class.)
            adopt(block, size, mapped || (g_map && listed != 0), node, !mapped);
        }
    }
    return 0;
}

// An object made in `block`, which this thread did not just allocate: a reused block. A
// tracked one moves to the line making the object now (or, for a paused thread, whose work is
// not traced, leaves the run); an untracked builtin object's block is taken in (exact mode).
// Returns 0 (the reference tracer's answer: ref_event's tail call).
__attribute__((noinline)) int reused_mapped(ThreadState& t, PyObject* op, uintptr_t block, blocks::PageBlock b) noexcept;

// A reused block of the pymalloc map charged to `node` from now on: its live figures move.
__attribute__((noinline)) int recharged(ThreadState& t, blocks::PageBlock b, uint32_t node) noexcept {
    InHook hook(t);
    uint32_t was = b.node();
    b.charge(node);
    calltree::free_at(was, int64_t(b.size()), 1);
    calltree::move_in_at(node, int64_t(b.size()), 1);
    return 0;
}

// Its common case first: a block of the pymalloc map reused where the thread's stack cache
// knows the node without a lookup (stack::leaf_node_known), which calls nothing, so this path
// saves no registers; the others are tail calls.
__attribute__((noinline)) MEMLENS_HOT int reused(ThreadState& t, PyObject* op, uintptr_t block) noexcept {
    if (!g_run.sampling && !t.paused && g_map) {
        if (blocks::PageBlock b = blocks::page_block(block)) {
            uint32_t node;
            if (!stack::leaf_node_known(t, &node)) {
                return reused_mapped(t, op, block, b);
            }
            return b.node() != node ? recharged(t, b, node) : 0;
        }
    }
    return reused_elsewhere(t, op, block, false);
}

// reused() for a block of the pymalloc map whose node needs a stack lookup.
__attribute__((noinline)) int reused_mapped(ThreadState& t, PyObject* op, uintptr_t block, blocks::PageBlock b) noexcept {
    // A block of the pymalloc map (the common case: a free list handing back a tuple, a float,
    // a dict): its slot is charged to the line making the object now, in place. (The slot
    // stays valid meanwhile: its arena holds the object being made.)
    uint32_t node;
    {
        InHook hook(t);
        node = node_for(t, true, Block::Python, true);  // (reused() asked leaf_node_known())
    }
    if (node == stack::kNotTheProgram) {
        return reused_elsewhere(t, op, block, true);
    }
    return b.node() != node ? recharged(t, b, node) : 0;
}

// A tracked block's node and size (the block stays tracked): false when it is not tracked.
// The address table is read under g_table_lock, taken here unless the caller holds it.
bool find_tracked(uintptr_t p, blocks::Entry* out, bool locked) {
    if (blocks::PageBlock b = g_map ? blocks::page_block(p) : blocks::PageBlock{}) {
        *out = blocks::Entry{b.node(), b.size()};
        return true;
    }
    if (!blocks::filter_hit(p)) {
        return false;
    }
    if (locked) {
        return blocks::table_get(p, out);
    }
    Guard g(g_table_lock);
    return blocks::table_get(p, out);
}

// The node a tracked block is charged to (the block stays tracked), or UINT32_MAX.
uint32_t node_of_block(uintptr_t p) {
    blocks::Entry e{};
    return find_tracked(p, &e, false) ? e.node : UINT32_MAX;
}

void collect_block(void* arg, uintptr_t block) { static_cast<std::vector<uintptr_t>*>(arg)->push_back(block); }

// The dict made last (by any thread: object events hold the GIL) and the run it was made
// in, until the next object event looks at its keys table (set right after the dict is made,
// before any other object event can happen). Its destruction clears it, whichever thread
// destroys it, so it is alive whenever it is looked at.
PyObject* g_pending_dict = nullptr;
uint64_t g_pending_generation = 0;
// Sampling: where the pending dict was made (the thread, its frame and position then). Its
// block is rarely a sampled one, so when its keys table is, the table's line is found from
// these (stack::node_at), not from the dict's block.
const ThreadState* g_pending_thread = nullptr;
stack::Place g_pending_place{};

// The pending dict's own keys table (its address), or 0: none, or the dict is a past run's.
inline uintptr_t pending_keys() {
    return g_pending_generation == g_run.generation ? compat::own_keys(g_pending_dict) : 0;
}

// A dict made just before (its keys table is set now): a table of its own that CPython took
// from its free list of keys (no object, no event of its own) moves to the dict's line.
// Tables shared with other dicts (split tables: a class's instances) stay where they are.
__attribute__((noinline)) void dict_made() noexcept {
    stack::ScheduleHold hold;  // (the GIL stays held until the table is moved)
    PyObject* mp = g_pending_dict;
    uintptr_t keys = pending_keys();
    g_pending_dict = nullptr;
    if (!keys) {
        return;
    }
    uint32_t there = node_of_block(keys);
    if (there == UINT32_MAX) {
        return;  // (sampling: nearly always)
    }
    uint32_t here = node_of_block(compat::block_of(mp));
    if (here == UINT32_MAX && g_run.sampling && g_pending_thread == &t_state) {
        // (Not the thread's node at this event: it may be another frame's, e.g. a generator's
        // that the dict's maker resumed. The frame the dict was made in, if still on the
        // stack, is at the place it was made.)
        here = stack::node_at(t_state, g_pending_place);
    }
    if (here == UINT32_MAX || here == there) {  // (UINT32_MAX: also kNotTheProgram)
        return;
    }
    Forgotten old = forget(keys, true, true);
    if (old.tracked) {
        adopt(keys, old.size, old.in_map, here);
    }
}

// Sampling: the place where the calling thread makes a dict now, kept for dict_made() (read
// through the thread's current-state slot, with loads only: no call, so that ref_event() saves
// no registers; a thread whose stack cache has no slot yet keeps no place).
inline void keep_dict_place(ThreadState& t) {
    g_pending_thread = &t;
    auto** slot = static_cast<PyThreadState**>(t.tstate_slot);
    PyThreadState* ts = slot ? *slot : nullptr;
    compat::Frame* f = ts ? compat::current_frame(ts) : nullptr;
    stack::Place& place = g_pending_place;
    place.frame = f;
    if (f) {
        compat::Frame* caller = compat::frame_prev(f);
        place.pos = compat::frame_pos(f);
        place.executable = compat::frame_executable(f);
        place.globals = compat::frame_globals(f);
        place.caller = caller;
        place.caller_pos = caller ? compat::frame_pos(caller) : 0;
        place.caller_entry = caller && compat::frame_shim(caller);
        // (The caller's caller: for a maker and its caller that both returned by then.)
        compat::Frame* grand = caller && !place.caller_entry ? compat::frame_prev(caller) : nullptr;
        if (grand && compat::frame_shim(grand)) {
            grand = nullptr;
        }
        place.caller_executable = caller ? compat::frame_executable(caller) : nullptr;
        place.caller_globals = caller ? compat::frame_globals(caller) : nullptr;
        place.grand = grand;
        place.grand_pos = grand ? compat::frame_pos(grand) : 0;
    }
}

// An object made (the reference tracer's event; for the others, nothing): a dict waits for its
// keys table (checked at the next event); an object made where this thread's last allocation
// was has its block charged right already; any other block is a reuse (a tail call).
inline int on_ref_event(PyObject* op, compat::RefEvent event) {
    ThreadState& t = t_state;
    if (event != compat::kRefCreate || t.in_hook || !g_run.active.load(std::memory_order_relaxed)) {
        return 0;
    }
    // (Set before reused() runs: it runs under an InHook, with the GIL and no Python code, so
    // no event it causes looks at the pending dict, and only a later event does.)
    if (Py_IS_TYPE(op, &PyDict_Type) && !t.paused) {
        g_pending_dict = op;
        g_pending_generation = g_run.generation;
        if (g_run.sampling) {
            keep_dict_place(t);
        }
    }
    uintptr_t block = compat::block_of(op);
    if (block == t.last_block) {
        t.last_block = 0;  // made where it was just allocated; a second object there is a reuse
        return 0;
    }
    // (Sampling tracks only sampled blocks, all in the table: the filter rules out nearly
    // every reuse at the cost of one load.)
    return !g_run.sampling || blocks::filter_hit(block) ? reused(t, op, block) : 0;
}

// ref_event() when a dict made just before waits for its keys table, or another tracer is
// chained to.
__attribute__((noinline)) int ref_event_full(PyObject* op, compat::RefEvent event, void* data) noexcept {
    ThreadState& t = t_state;
    if (g_pending_dict) {  // (also while in_hook or inactive: a dict's end always clears it)
        if (g_pending_dict == op) {
            g_pending_dict = nullptr;  // destroyed already (or made again: handled below)
        } else if (!t.in_hook && g_run.active.load(std::memory_order_relaxed)) {
            InHook hook(t);
            dict_made();
        } else {
            g_pending_thread = nullptr;  // (its place holds only until the next event)
        }
    }
    on_ref_event(op, event);
    (void)data;
    return g_prev_tracer ? g_prev_tracer(op, event, g_prev_tracer_data) : 0;
}

// CPython's reference tracer: every object made and destroyed. Its common events (an object's
// end, an object made in the block just allocated) take a few instructions and save no
// registers.
MEMLENS_HOT int ref_event(PyObject* op, compat::RefEvent event, void* data) {
    if (__builtin_expect(g_pending_dict != nullptr || g_prev_tracer != nullptr, 0)) {
        if (g_run.sampling && !g_prev_tracer && g_pending_dict != op && !t_state.in_hook &&
            g_run.active.load(std::memory_order_relaxed)) {
            // Sampling: dict_made() would look the keys table up only to find it untracked,
            // unless the sample filter has its address (one load here instead of that path,
            // ~100 instructions a dict).
            uintptr_t keys = pending_keys();
            if (!keys || !blocks::filter_hit(keys)) {
                g_pending_dict = nullptr;
                return on_ref_event(op, event);
            }
        }
        return ref_event_full(op, event, data);
    }
    return on_ref_event(op, event);
}

void install_ref_tracer() {
    if (!g_run.opts.track_reuse) {
        return;
    }
    if constexpr (compat::kRefTracer) {
        void* data = nullptr;
        compat::RefTracer current = compat::get_ref_tracer(&data);
        if (current != ref_event) {
            g_prev_tracer = current;
            g_prev_tracer_data = data;
        }
        compat::set_ref_tracer(ref_event, nullptr);
        g_ref_tracing = true;
        g_ref_lost = false;
    }
}

void uninstall_ref_tracer() {
    g_pending_dict = nullptr;
    if (!g_ref_tracing) {
        return;
    }
    void* data = nullptr;
    if (compat::get_ref_tracer(&data) == ref_event) {
        compat::set_ref_tracer(g_prev_tracer, g_prev_tracer_data);
    } else {
        g_ref_lost = true;  // another tool's tracer replaced ours: it stays
    }
    g_prev_tracer = nullptr;
    g_prev_tracer_data = nullptr;
    g_ref_tracing = false;
}

// ---------------------------------------------------------------------------------------
// Sampling mode (general hooks: any allocator).

// Called when this thread's countdown reached 0 or below after counting an allocation of
// `size` bytes. Draws the next countdown; says whether that allocation is sampled (not in a
// paused thread, not after the run).
inline bool rearm(int64_t& left, uint64_t& rng) {
    left = sampling::draw_countdown(rng);
    return !t_state.paused && g_run.active.load(std::memory_order_relaxed);
}

__attribute__((noinline)) bool countdown_expired(ThreadState& ts, size_t size) {
    if (ts.generation != g_run.generation) {
        // The thread's first allocation in this run: a fresh seed and countdown, and this
        // allocation counted against it.
        sampling::thread_refresh(ts);
        ts.countdown -= int64_t(size);
        if (ts.countdown > 0) {
            return false;
        }
    }
    return rearm(ts.countdown, ts.rng);
}

inline bool sampled(ThreadState& ts, size_t size) {
    ts.countdown -= int64_t(size);
    if (__builtin_expect(ts.countdown > 0, 1)) {
        return false;
    }
    return countdown_expired(ts, size);
}

template <typename Call>
__attribute__((noinline)) void* sample_alloc_slow(size_t size, bool gil, Block kind, Call call) {
    ThreadState& t = t_state;
    return alloc_tracked(t, size, gil, kind, countdown_expired(t, size), call);
}

template <typename Call>
inline void* sample_alloc(size_t size, bool gil, Block kind, Call call) {
    ThreadState& ts = t_state;
    if (ts.in_hook) {
        return call();
    }
    int64_t left = ts.countdown - int64_t(size);
    ts.countdown = left;
    if (__builtin_expect(left <= 0, 0)) {
        return sample_alloc_slow(size, gil, kind, call);
    }
    return untracked(ts, call);  // allocations the allocator makes inside this one are not counted
}

template <typename Call>
inline void* sample_realloc(void* ptr, size_t size, bool gil, Block kind, Call call) {
    ThreadState& ts = t_state;
    if (ts.in_hook) {
        return call();
    }
    int64_t left = ts.countdown - int64_t(size);
    if (__builtin_expect(left > 0 && !blocks::filter_hit(uintptr_t(ptr)), 1)) {
        ts.countdown = left;
        return untracked(ts, call);
    }
    if (!g_run.active.load(std::memory_order_relaxed)) {
        return call();
    }
    bool take = !ts.paused && sampled(ts, size);  // the old block may be tracked
    return realloc_tracked(ts, ptr, size, gil, false, take, [&](bool) { return call(); }, [kind](void*) { return kind; });
}

// Forgets a block that may be tracked, then frees it with `call`.
template <typename Call>
__attribute__((noinline)) void sample_free_slow(void* ptr, bool gil, Call call) {
    if (ptr && !t_state.in_hook && g_run.active.load(std::memory_order_relaxed)) {
        forget(uintptr_t(ptr), gil, false);
    }
    call();
}

// Both paths end in a tail call: the unsampled free needs no stack frame.
template <typename Call>
inline void sample_free(void* ptr, int domain, Call call) {
    if (__builtin_expect(blocks::filter_hit(uintptr_t(ptr)), 0)) {
        return sample_free_slow(ptr, gil_held(domain), call);
    }
    return call();
}

template <int D>
MEMLENS_HOT void* sm_malloc(void*, size_t size) {
    Domain& d = g_domains[D];
    return sample_alloc(size, D != 0, domain_block(D), [&] { return d.original.malloc(d.original.ctx, size); });
}

template <int D>
MEMLENS_HOT void* sm_calloc(void*, size_t nelem, size_t elsize) {
    Domain& d = g_domains[D];
    return sample_alloc(nelem * elsize, D != 0, domain_block(D),
                        [&] { return d.original.calloc(d.original.ctx, nelem, elsize); });
}

template <int D>
MEMLENS_HOT void* sm_realloc(void*, void* ptr, size_t size) {
    Domain& d = g_domains[D];
    return sample_realloc(ptr, size, D != 0, domain_block(D),
                          [&] { return d.original.realloc(d.original.ctx, ptr, size); });
}

template <int D>
MEMLENS_HOT void sm_free(void*, void* ptr) {
    Domain& d = g_domains[D];
    return sample_free(ptr, D, [&d, ptr] { d.original.free(d.original.ctx, ptr); });
}

// Sampling mode over pymalloc (the usual allocator; not with debug hooks or
// PYTHONMALLOC=malloc): the MEM/OBJ free hook looks at nothing (a tail call into pymalloc's
// free, `pym_free`). pymalloc serves requests above
// kPymallocSmall from the RAW domain and its free hands any block outside its arenas to
// PyMem_RawFree. So a sampled MEM/OBJ block is requested with at least kPymallocSmall + 1
// bytes: it comes from the RAW domain, and its free reaches our RAW free hook. Unsampled
// blocks are never seen again: their frees cost nothing. And a small request never re-enters
// the hooks (pymalloc serves it from its pools), so it needs no reentrancy flag: an unsampled
// small allocation is a countdown subtraction and a tail call. (The one exception, pymalloc
// growing its arena table through the RAW domain, is rare and small: it is counted like any
// RAW allocation.)
//
// MEM/OBJ allocations hold the GIL, so they share one countdown (a plain global: no TLS access
// on the fast path). Sampling stays exact in law: the bytes of MEM/OBJ (this countdown) and
// those of RAW and numpy (per-thread countdowns) form separate streams, each sampled at rate
// 1/I by its own exponential countdown.
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

// The slow path of a MEM/OBJ allocation: large, or the countdown expired (`counted`: the size
// was already taken off the countdown).
__attribute__((noinline)) void* pym_alloc_slow(Domain& d, size_t nelem, size_t elsize, bool zero, bool counted) {
    ThreadState& ts = t_state;
    const PyMemAllocatorEx& o = d.original;
    size_t size = nelem * elsize;
    if (ts.in_hook) {  // not reached with pymalloc; kept as every hook's guard
        return zero ? o.calloc(o.ctx, nelem, elsize) : o.malloc(o.ctx, size);
    }
    bool take = gil_sampled(size, counted);
    // Under the reentrancy flag: large requests go through the RAW domain, not counted twice.
    return alloc_tracked(ts, size, true, Block::Python, take, [&] {
        if (take && size <= kPymallocSmall) {
            return zero ? o.calloc(o.ctx, 1, kPymallocSmall + 1) : o.malloc(o.ctx, kPymallocSmall + 1);
        }
        return zero ? o.calloc(o.ctx, nelem, elsize) : o.malloc(o.ctx, size);
    });
}

// The four below take the domain from D, not from ctx: one RIP-relative load each for the
// original allocator's function and context.
template <int D>
MEMLENS_HOT void* pym_malloc(void*, size_t size) {
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
MEMLENS_HOT void* pym_calloc(void*, size_t nelem, size_t elsize) {
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
MEMLENS_HOT void* pym_realloc(void*, void* ptr, size_t size) {
    Domain& d = g_domains[D];
    const PyMemAllocatorEx& o = d.original;
    ThreadState& ts = t_state;
    if (ts.in_hook || !g_run.active.load(std::memory_order_relaxed)) {
        return o.realloc(o.ctx, ptr, size);
    }
    // A sampled old block is forgotten first (its RAW realloc inside pymalloc passes through).
    return realloc_tracked(
        ts, ptr, size, true, false, gil_sampled(size, false),
        [&](bool take) { return o.realloc(o.ctx, ptr, take && size <= kPymallocSmall ? kPymallocSmall + 1 : size); },
        [](void*) { return Block::Python; });
}

template <int D>
MEMLENS_HOT void pym_free(void*, void* ptr) {
    Domain& d = g_domains[D];
    d.original.free(d.original.ctx, ptr);  // a tail call: sampled blocks are seen as RAW frees
}

// ---------------------------------------------------------------------------------------
// numpy allocates array data through its own handler (plain malloc by default), never
// through PEP 445. numpy >= 1.22 lets a handler be set (NEP 49), but a handler set with
// PyDataMem_SetHandler holds only in the current context: threads start with numpy's default
// handler. So ours replaces the functions of numpy's default handler itself (a global of
// numpy's, shared by every thread and context), chaining to the ones it had. The struct
// layout is numpy's version-1 ABI.
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
NumpyHandler g_np_handler;  // when the current handler is not numpy's default: a handler of ours
NumpyHandler* g_np_patched = nullptr;

// numpy's default handler gets its own functions back (see above); ours, chained to a handler
// of the program's, stays.
void unpatch_numpy() {
    NumpyHandler* h = g_np_patched;
    if (h == nullptr || h == &g_np_handler) {
        return;
    }
    __atomic_store_n(&h->allocator.malloc, g_np_original.malloc, __ATOMIC_RELEASE);
    __atomic_store_n(&h->allocator.calloc, g_np_original.calloc, __ATOMIC_RELEASE);
    __atomic_store_n(&h->allocator.realloc, g_np_original.realloc, __ATOMIC_RELEASE);
    __atomic_store_n(&h->allocator.free, g_np_original.free, __ATOMIC_RELEASE);
    g_np_patched = nullptr;
}

// Arrays keep the handler that allocated them: numpy's default handler, patched in place, gets
// its own functions back when the run stops (a block allocated by either is freed by the same
// allocator, and a thread that read our function before that passes through); our own
// handler, chained when the program had set one, stays for the life of the process. The mode
// is read per call. Outside a run the sampling paths only count down; their slow paths check
// g_run.active. ctx is not relied on: a thread may read the patched functions with the
// context numpy had.
void* np_malloc(void*, size_t size) {
    auto call = [&] { return g_np_original.malloc(g_np_original.ctx, size); };
    if (g_run.sampling) {
        return sample_alloc(size, PyGILState_Check(), Block::Python, call);
    }
    ThreadState& t = t_state;
    if (t.in_hook | t.paused | !g_run.active.load(std::memory_order_relaxed)) {
        return call();
    }
    return alloc_tracked(t, size, PyGILState_Check(), Block::Python, true, call);
}
void* np_calloc(void*, size_t nelem, size_t elsize) {
    auto call = [&] { return g_np_original.calloc(g_np_original.ctx, nelem, elsize); };
    if (g_run.sampling) {
        return sample_alloc(nelem * elsize, PyGILState_Check(), Block::Python, call);
    }
    ThreadState& t = t_state;
    if (t.in_hook | t.paused | !g_run.active.load(std::memory_order_relaxed)) {
        return call();
    }
    return alloc_tracked(t, nelem * elsize, PyGILState_Check(), Block::Python, true, call);
}
void* np_realloc(void*, void* ptr, size_t size) {
    auto call = [&] { return g_np_original.realloc(g_np_original.ctx, ptr, size); };
    if (g_run.sampling) {
        return sample_realloc(ptr, size, PyGILState_Check(), Block::Python, call);
    }
    ThreadState& t = t_state;
    if (t.in_hook || !g_run.active.load(std::memory_order_relaxed)) {
        return call();
    }
    return realloc_tracked(t, ptr, size, PyGILState_Check(), false, !t.paused, [&](bool) { return call(); },
                           [](void*) { return Block::Python; });
}
void np_free(void*, void* ptr, size_t size) {
    auto call = [ptr, size] { g_np_original.free(g_np_original.ctx, ptr, size); };
    if (g_run.sampling) {
        return sample_free(ptr, 0, call);
    }
    if (ptr && g_run.active.load(std::memory_order_relaxed)) {
        forget(uintptr_t(ptr), PyGILState_Check(), false);
    }
    call();
}

// ---------------------------------------------------------------------------------------
// The C allocator, as other libraries call it (native.cpp patches these hooks into their
// relocation slots). Python's own calls to it (the RAW domain, pymalloc's arenas) are made
// under our reentrancy flag, so they are counted once, as Python allocations. Blocks are
// charged to a child node of the line's node (kNativeCode), so lines tell native bytes apart.

using MallocFn = void* (*)(size_t);
using CallocFn = void* (*)(size_t, size_t);
using ReallocFn = void* (*)(void*, size_t);
using ReallocArrayFn = void* (*)(void*, size_t, size_t);
using FreeFn = void (*)(void*);
using PosixMemalignFn = int (*)(void**, size_t, size_t);
using AlignedFn = void* (*)(size_t, size_t);
using MmapFn = void* (*)(void*, size_t, int, int, int, off_t);
using MunmapFn = int (*)(void*, size_t);
using MremapFn = void* (*)(void*, size_t, size_t, int, ...);

void* g_real_malloc = nullptr;
void* g_real_calloc = nullptr;
void* g_real_realloc = nullptr;
void* g_real_reallocarray = nullptr;
void* g_real_free = nullptr;
void* g_real_posix_memalign = nullptr;
void* g_real_aligned_alloc = nullptr;
void* g_real_memalign = nullptr;
void* g_real_valloc = nullptr;
void* g_real_pvalloc = nullptr;
void* g_real_mmap = nullptr;
void* g_real_mmap64 = nullptr;
void* g_real_munmap = nullptr;
void* g_real_mremap = nullptr;

template <typename F>
inline F real(void* p) {
    return reinterpret_cast<F>(p);
}

inline bool native_tracked(const ThreadState& t) {
    return g_native && !(t.in_hook | t.paused) && g_run.active.load(std::memory_order_relaxed);
}

template <typename Call>
inline void* native_alloc(size_t size, Call call) {
    ThreadState& t = t_state;
    if (!native_tracked(t)) {
        return call();
    }
    if (g_run.sampling) {
        return sample_alloc(size, PyGILState_Check(), Block::Native, call);
    }
    return alloc_tracked(t, size, PyGILState_Check(), Block::Native, true, call);
}

inline void native_forget(void* ptr) {
    if (ptr && blocks::filter_hit(uintptr_t(ptr)) && g_run.active.load(std::memory_order_relaxed) &&
        !t_state.in_hook) {
        forget(uintptr_t(ptr), PyGILState_Check(), false);
    }
}

void* ml_malloc(size_t size) {
    return native_alloc(size, [&] { return real<MallocFn>(g_real_malloc)(size); });
}
void* ml_calloc(size_t nelem, size_t elsize) {
    size_t size = 0;
    if (__builtin_mul_overflow(nelem, elsize, &size)) {
        return real<CallocFn>(g_real_calloc)(nelem, elsize);
    }
    return native_alloc(size, [&] { return real<CallocFn>(g_real_calloc)(nelem, elsize); });
}
// realloc and reallocarray: `call` is the real call, which makes the block `size` bytes.
template <typename Call>
inline void* native_realloc(void* ptr, size_t size, Call call) {
    ThreadState& t = t_state;
    if (t.in_hook || !g_native || !g_run.active.load(std::memory_order_relaxed)) {
        return call();
    }
    bool gil = PyGILState_Check();
    if (g_run.sampling) {
        return sample_realloc(ptr, size, gil, Block::Native, call);
    }
    return realloc_tracked(t, ptr, size, gil, false, !t.paused, [&](bool) { return call(); },
                           [](void*) { return Block::Native; });
}
void* ml_realloc(void* ptr, size_t size) {
    return native_realloc(ptr, size, [&] { return real<ReallocFn>(g_real_realloc)(ptr, size); });
}
void* ml_reallocarray(void* ptr, size_t nelem, size_t elsize) {
    size_t size = 0;
    if (__builtin_mul_overflow(nelem, elsize, &size)) {
        return real<ReallocArrayFn>(g_real_reallocarray)(ptr, nelem, elsize);  // sets ENOMEM
    }
    return native_realloc(
        ptr, size, [&] { return real<ReallocArrayFn>(g_real_reallocarray)(ptr, nelem, elsize); });
}
void ml_free(void* ptr) {
    native_forget(ptr);
    real<FreeFn>(g_real_free)(ptr);
}
int ml_posix_memalign(void** out, size_t align, size_t size) {
    int err = 0;
    native_alloc(size, [&]() -> void* {
        err = real<PosixMemalignFn>(g_real_posix_memalign)(out, align, size);
        return err == 0 ? *out : nullptr;
    });
    return err;
}
void* ml_aligned_alloc(size_t align, size_t size) {
    return native_alloc(size, [&] { return real<AlignedFn>(g_real_aligned_alloc)(align, size); });
}
void* ml_memalign(size_t align, size_t size) {
    return native_alloc(size, [&] { return real<AlignedFn>(g_real_memalign)(align, size); });
}
void* ml_valloc(size_t size) {
    return native_alloc(size, [&] { return real<MallocFn>(g_real_valloc)(size); });
}
void* ml_pvalloc(size_t size) {
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_t rounded = size ? (size + page - 1) / page * page : page;  // what pvalloc allocates
    return native_alloc(rounded, [&] { return real<MallocFn>(g_real_pvalloc)(size); });
}

// Anonymous mappings are tracked as address ranges (munmap may release part of one), under
// g_table_lock, and counted exactly in sampling mode too (they are page-sized or larger).
struct Mapping {
    uintptr_t end;
    uint32_t node;
};
std::map<uintptr_t, Mapping>* g_mappings = nullptr;  // by start address

void track_mapping(void* p, size_t len) noexcept {
    ThreadState& t = t_state;
    InHook hook(t);  // the map's own allocations are ours
    bool gil = PyGILState_Check();
    NogilEvent event(gil);
    uint32_t node = event.live() ? node_for(t, gil, Block::Native) : stack::kNotTheProgram;
    if (node != stack::kNotTheProgram) {
        Guard g(g_table_lock);
        if (g_mappings) {
            // (The map's node is the one allocation here that can fail: the mapping then stays
            // untracked, as its unmapping will find it, rather than the program ending.)
            try {
                (*g_mappings)[uintptr_t(p)] = Mapping{uintptr_t(p) + len, node};
            } catch (const std::bad_alloc&) {
                return;
            }
            ++g_run.allocations;
            ++g_run.samples;
            count_alloc(node, sampling::Weight{int64_t(len), 1, 0.0}, gil && !g_run.sampling);
        }
    }
}

// Forgets the tracked parts of [p, p + len).
void untrack_range(uintptr_t p, size_t len) noexcept {
    ThreadState& t = t_state;
    InHook hook(t, t.in_hook);
    bool gil = PyGILState_Check();
    uintptr_t end = p + len;
    NogilEvent event(gil);
    if (event.live()) {
        Guard g(g_table_lock);
        if (g_mappings && !g_mappings->empty()) {
            auto it = g_mappings->upper_bound(p);
            if (it != g_mappings->begin()) {
                --it;
            }
            while (it != g_mappings->end() && it->first < end) {
                uintptr_t start = it->first;
                Mapping m = it->second;
                if (m.end <= p) {
                    ++it;
                    continue;
                }
                uintptr_t lo = start > p ? start : p, hi = m.end < end ? m.end : end;
                bool whole = lo == start && hi == m.end;
                count_free(m.node, sampling::Weight{int64_t(hi - lo), whole ? 1 : 0, 0.0},
                           gil && !g_run.sampling);
                it = g_mappings->erase(it);
                if (start < lo) {
                    (*g_mappings)[start] = Mapping{lo, m.node};
                }
                if (hi < m.end) {
                    it = g_mappings->emplace(hi, Mapping{m.end, m.node}).first;
                    ++it;
                }
            }
        }
    }
}

inline bool anonymous(int flags, int fd) { return (flags & MAP_ANONYMOUS) && fd == -1; }

void* ml_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
    void* p = real<MmapFn>(g_real_mmap)(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED && anonymous(flags, fd) && native_tracked(t_state)) {
        if (flags & MAP_FIXED) {
            untrack_range(uintptr_t(p), len);  // it replaced whatever was there
        }
        track_mapping(p, len);
    }
    return p;
}
void* ml_mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
    void* p = real<MmapFn>(g_real_mmap64)(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED && anonymous(flags, fd) && native_tracked(t_state)) {
        if (flags & MAP_FIXED) {
            untrack_range(uintptr_t(p), len);
        }
        track_mapping(p, len);
    }
    return p;
}
int ml_munmap(void* addr, size_t len) {
    if (g_native && g_run.active.load(std::memory_order_relaxed) && !t_state.in_hook) {
        untrack_range(uintptr_t(addr), len);
    }
    return real<MunmapFn>(g_real_munmap)(addr, len);
}
#ifndef MREMAP_FIXED
// mremap is Linux's; elsewhere native tracing is not built in (native.cpp), so this function
// is never installed, but it must compile (macOS wheels).
#define MREMAP_FIXED 2
#endif
void* ml_mremap(void* old, size_t old_len, size_t new_len, int flags, ...) {
    void* new_addr = nullptr;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_addr = va_arg(ap, void*);
        va_end(ap);
    }
    bool tracking = g_native && g_run.active.load(std::memory_order_relaxed) && !t_state.in_hook;
    bool was_tracked = false;
    if (tracking) {
        Guard g(g_table_lock);
        was_tracked = g_mappings && g_mappings->count(uintptr_t(old));
    }
    void* p = real<MremapFn>(g_real_mremap)(old, old_len, new_len, flags, new_addr);
    if (p != MAP_FAILED && was_tracked) {
        untrack_range(uintptr_t(old), old_len);
        if (native_tracked(t_state)) {
            track_mapping(p, new_len);  // charged where it was resized, as a realloc is
        }
    }
    return p;
}

const Interposer g_interposers[] = {
    {"malloc", reinterpret_cast<void*>(ml_malloc), &g_real_malloc},
    {"calloc", reinterpret_cast<void*>(ml_calloc), &g_real_calloc},
    {"realloc", reinterpret_cast<void*>(ml_realloc), &g_real_realloc},
    {"reallocarray", reinterpret_cast<void*>(ml_reallocarray), &g_real_reallocarray},
    {"free", reinterpret_cast<void*>(ml_free), &g_real_free},
    {"posix_memalign", reinterpret_cast<void*>(ml_posix_memalign), &g_real_posix_memalign},
    {"aligned_alloc", reinterpret_cast<void*>(ml_aligned_alloc), &g_real_aligned_alloc},
    {"memalign", reinterpret_cast<void*>(ml_memalign), &g_real_memalign},
    {"valloc", reinterpret_cast<void*>(ml_valloc), &g_real_valloc},
    {"pvalloc", reinterpret_cast<void*>(ml_pvalloc), &g_real_pvalloc},
    {"mmap", reinterpret_cast<void*>(ml_mmap), &g_real_mmap},
    {"mmap64", reinterpret_cast<void*>(ml_mmap64), &g_real_mmap64},
    {"munmap", reinterpret_cast<void*>(ml_munmap), &g_real_munmap},
    {"mremap", reinterpret_cast<void*>(ml_mremap), &g_real_mremap},
};

// ---------------------------------------------------------------------------------------
// Installing.

template <int D>
void set_exact(Domain& d) {
    d.ours = PyMemAllocatorEx{&d, ex_malloc<D>, ex_calloc<D>, ex_realloc<D>, ex_free<D>};
}
template <int D>
void set_sampling(Domain& d) {
    d.ours = PyMemAllocatorEx{&d, sm_malloc<D>, sm_calloc<D>, sm_realloc<D>, sm_free<D>};
}
template <int D>
void set_pymalloc_sampling(Domain& d) {
    static_assert(D != 0, "the RAW domain keeps the sampling hooks");
    d.ours = PyMemAllocatorEx{&d, pym_malloc<D>, pym_calloc<D>, pym_realloc<D>, pym_free<D>};
}

// True when the MEM and OBJ domains are plain pymalloc (checked before our hooks go in).
bool pymalloc_in_use() {
    const char* name = compat::allocator_name();
    return name != nullptr && std::strcmp(name, "pymalloc") == 0;
}

bool is_ours(const PyMemAllocatorEx& a, const Domain& d) { return a.malloc == d.ours.malloc && a.ctx == &d; }

}  // namespace

std::vector<uintptr_t> free_listed_blocks() {
    std::vector<uintptr_t> out;
    memlens_free_listed_blocks(collect_block, &out);
    return out;
}

void free_listed(const std::vector<uintptr_t>& listed, std::vector<FreeListed>& out) {
    out.clear();
    for (uintptr_t block : listed) {
        blocks::Entry e{};
        if (find_tracked(block, &e, true)) {  // (untracked: made before the run, or not sampled)
            sampling::Weight w = sampling::weight(e.size);
            out.push_back(FreeListed{e.node, w.bytes, w.count, w.var});
        }
    }
    std::sort(out.begin(), out.end(), [](const FreeListed& a, const FreeListed& b) { return a.node < b.node; });
    size_t kept = 0;
    for (const FreeListed& f : out) {
        if (kept && out[kept - 1].node == f.node) {
            out[kept - 1].bytes += f.bytes;
            out[kept - 1].count += f.count;
            out[kept - 1].var += f.var;
        } else {
            out[kept++] = f;
        }
    }
    out.resize(kept);  // (shrinks: frees nothing)
}

void start_run() {
    g_gil_countdown.rng = mix(g_run.opts.seed ^ 0xD1B54A32D192ED03ULL) | 1;
    g_gil_countdown.left = g_run.sampling ? sampling::draw_countdown(g_gil_countdown.rng) : 0;
}

void install() {
    bool pymalloc = pymalloc_in_use();
    if (g_run.sampling) {
        g_kind = pymalloc ? Kind::SamplingPymalloc : Kind::Sampling;
        set_sampling<0>(g_domains[0]);
        if (pymalloc) {
            set_pymalloc_sampling<1>(g_domains[1]);
            set_pymalloc_sampling<2>(g_domains[2]);
        } else {
            set_sampling<1>(g_domains[1]);
            set_sampling<2>(g_domains[2]);
        }
    } else {
        g_kind = pymalloc ? Kind::ExactPymalloc : Kind::Exact;
        set_exact<0>(g_domains[0]);
        set_exact<1>(g_domains[1]);
        set_exact<2>(g_domains[2]);
    }
    g_map = g_kind == Kind::ExactPymalloc;
    g_native = g_run.opts.native;
    if (g_native && !g_mappings) {
        g_mappings = new std::map<uintptr_t, Mapping>();
    }
    for (Domain& d : g_domains) {
        PyMem_GetAllocator(d.id, &d.original);
    }
    if (g_map || g_native) {
        PyObject_GetArenaAllocator(&g_arena_original);
        g_arena_ours = PyObjectArenaAllocator{nullptr, arena_alloc, arena_free};
        PyObject_SetArenaAllocator(&g_arena_ours);
        g_arena_installed = true;
    }
    for (Domain& d : g_domains) {
        PyMem_SetAllocator(d.id, &d.ours);
        d.installed = true;
    }
    install_ref_tracer();
}

void uninstall() {
    uninstall_ref_tracer();
    for (Domain& d : g_domains) {
        PyMemAllocatorEx current;
        PyMem_GetAllocator(d.id, &current);
        if (is_ours(current, d)) {
            PyMem_SetAllocator(d.id, &d.original);
            d.installed = false;
        }
        // Otherwise another hook sits on top of ours and calls into it: ours stays installed
        // as a pass-through (g_run.active is false) for the life of the process.
    }
    unpatch_numpy();
    if (g_arena_installed) {
        PyObjectArenaAllocator current;
        PyObject_GetArenaAllocator(&current);
        if (current.free == arena_free) {
            PyObject_SetArenaAllocator(&g_arena_original);
            g_arena_installed = false;
        }
        // Otherwise ours stays below the other one; arena_freed() on an empty map is harmless.
    }
}

bool arena_hook_installed() { return g_arena_installed; }

bool numpy_hooked() { return g_np_patched != nullptr; }

bool installed() {
    for (const Domain& d : g_domains) {
        PyMemAllocatorEx current;
        PyMem_GetAllocator(d.id, &current);
        if (d.installed || (d.ours.malloc && is_ours(current, d))) {
            return true;
        }
    }
    return false;
}

bool left_below() {
    for (const Domain& d : g_domains) {
        if (d.installed) {
            return true;
        }
    }
    return false;
}

const char* kind() {
    switch (g_kind) {
        case Kind::ExactPymalloc:
            return "exact-pymalloc";
        case Kind::Exact:
            return "exact";
        case Kind::Sampling:
            return "sampling";
        case Kind::SamplingPymalloc:
            return "sampling-pymalloc";
        case Kind::None:
            break;
    }
    return "";
}

bool pymalloc_map() { return g_map; }

const char* object_reuse() {
    if constexpr (!compat::kRefTracer) {
        return "unavailable";
    }
    if (g_ref_lost) {
        return "lost";
    }
    if (g_ref_tracing) {
        void* data = nullptr;
        return compat::get_ref_tracer(&data) == ref_event ? "tracked" : "lost";
    }
    return g_kind == Kind::None ? "" : g_run.opts.track_reuse ? "tracked" : "off";
}

void reset() {
    Guard g(g_table_lock);
    delete g_mappings;
    g_mappings = nullptr;
}

const Interposer* interposers(size_t* count) {
    *count = sizeof(g_interposers) / sizeof(g_interposers[0]);
    return g_interposers;
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
    if (h == g_np_patched || h == &g_np_handler) {  // already ours
        Py_DECREF(current);
        return {};
    }
    if (g_np_patched) {
        Py_DECREF(current);
        return "numpy's memory handler was changed by the program; new arrays are not traced";
    }
    g_np_original = h->allocator;
    NumpyAllocator ours{nullptr, np_malloc, np_calloc, np_realloc, np_free};
    if (std::strncmp(h->name, "default_allocator", sizeof(h->name)) == 0) {
        // numpy's own default: patched in place, for every thread (see above).
        __atomic_store_n(&h->allocator.malloc, ours.malloc, __ATOMIC_RELEASE);
        __atomic_store_n(&h->allocator.calloc, ours.calloc, __ATOMIC_RELEASE);
        __atomic_store_n(&h->allocator.realloc, ours.realloc, __ATOMIC_RELEASE);
        __atomic_store_n(&h->allocator.free, ours.free, __ATOMIC_RELEASE);
        g_np_patched = h;
        Py_DECREF(current);
        return {};
    }
    // The program set its own handler: chain to it in this context.
    Py_DECREF(current);
    std::memset(&g_np_handler, 0, sizeof(g_np_handler));
    std::strncpy(g_np_handler.name, "memlens", sizeof(g_np_handler.name) - 1);
    g_np_handler.version = 1;
    g_np_handler.allocator = ours;
    g_np_patched = &g_np_handler;
    PyObject* cap = PyCapsule_New(&g_np_handler, "mem_handler", nullptr);
    if (cap == nullptr) {
        PyErr_Clear();
        return "out of memory";
    }
    PyObject* old = reinterpret_cast<SetHandler>(api[304])(cap);
    Py_DECREF(cap);
    if (old == nullptr) {
        PyErr_Clear();
        return "numpy refused the memory handler";
    }
    Py_DECREF(old);
    return {};
}

}  // namespace memlens::hooks
