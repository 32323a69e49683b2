// A thread's cached stack (stack.cpp), and the common case of finding its node, inline
// where the hooks look it up for every allocation and reused block (hooks.cpp): there it costs
// no call, and the hook saves registers only on the paths that need more (stack.cpp's).
// Private to the tracer's stack lookups: stack.hpp is the interface.
#pragma once

#include "compat.hpp"  // first: Py_BUILD_CORE before Python.h
#include "stack.hpp"
#include "state.hpp"

namespace memlens::stack {

using compat::Frame;

// One level of a thread's cached stack, from the root.
struct Level {
    Frame* frame;
    PyCodeObject* code;
    uintptr_t pos;
    uint32_t code_id;
    uint32_t node;
    uint64_t since;    // the thread's walk count when this level's frame appeared (or its
                       // code's watch state was last found set: see update_trust)
    bool transparent;  // codes::transparent(code_id), kept here for the fast path
    uint32_t tag;      // the path tag walk() computed for the level's node (valid only between its passes)
};

}  // namespace memlens::stack

namespace memlens {

// The nodes of the places the innermost frame allocated from lately: (instruction position,
// code id, parent node) -> node, direct-mapped. A function that allocates at a few places in a
// loop finds each place's node here instead of in the call tree's index.
struct LeafCache {
    static constexpr int kSize = 64;
    struct Entry {
        uintptr_t pos;
        uint32_t code_id;
        uint32_t parent;
        uint32_t node;
    };
    Entry entries[kSize];
    // Fibonacci hashing of the instruction's index: the allocating positions of one loop
    // (a few dozen code units apart) spread over the slots instead of pairing up.
    static int slot(uintptr_t pos) { return int((uint32_t(pos >> 1) * 0x9E3779B1u) >> 26); }
};

struct ThreadStack {
    stack::Level* levels;
    int cap;
    int len;
    int trusted;  // levels [0, trusted) cannot have changed since the last walk (3.12+)
    // Levels [0, code_known) hold a code object and its id that still go together (those
    // above `len` too, left by frames that returned): no code died since they were set, so a
    // frame running that code object again is given the id without a lookup.
    int code_known;
    uint64_t deaths;
    uint64_t generation;
    compat::Frame** scratch;
    int scratch_cap;
    uint64_t walks;
    uint64_t watch_look;  // `walks` when update_trust() next looks for levels to watch
    LeafCache leaf_cache;  // valid for this generation and death count (cleared with them)
    uint64_t trust_epoch;  // g_trust_epoch when its trusted levels were last extended
    PyThreadState** tstate;  // this thread's instance of the interpreter's current-state
                             // variable (find_thread_state), or nullptr: ask the interpreter
    // 3.12+, what leaf_node()'s fast path needs to know that only the innermost frame's
    // position can have moved, kept from the last full look: valid while `hot_epoch` is
    // g_stack_epoch (0: not valid). Then every level but the innermost is trusted, the
    // innermost frame is `hot_frame`, called from `hot_caller` (kAnyCaller: the innermost level
    // is the only one), and the thread reads its current state with one load. A frame exit
    // that takes trust away clears it (on_frame_exit).
    uint64_t hot_epoch;
    compat::Frame* hot_frame;
    compat::Frame* hot_caller;
    stack::Level* hot_leaf;  // the innermost level (levels move only in a walk, then kept anew)
    uint32_t hot_parent;     // the node of the level below it (kRootNode: none), trusted
    // 3.12+, what the watched frames' exits cost and what trusting levels saves, over the
    // thread's latest exits (on_frame_exit): exits reported, frames the stack lookups since
    // the window began did not read (each lookup counted with the levels trusted at the next
    // exit), and `walks` at the last exit.
    uint32_t window_exits;
    uint64_t window_saved;
    uint64_t walks_at_exit;
    // The path tags of the levels a walk is about to intern, to fetch their nodes at once
    // (last: the fields above are read on every allocation, these only by walk()).
    static constexpr int kWarmed = 32;
    uint32_t tags[kWarmed];
};

}  // namespace memlens

namespace memlens::stack {

// ThreadStack::hot_caller when the innermost level is the only one (its caller is not checked).
inline Frame* const kAnyCaller = reinterpret_cast<Frame*>(uintptr_t{1});

// Whether a leaf cache entry holds the node of position `pos` in code `code_id` under node
// `parent`. (From 3.11 a position is a pointer into its code object, which the cache is
// cleared with when it dies, and never 0: an empty entry never matches. The code id still
// counts: two functions taking turns in one level's frame under one caller. Before 3.11 a
// position is an offset, which may be 0: an empty entry has node 0, the root, never cached.)
inline bool leaf_entry_matches(const LeafCache::Entry& e, uintptr_t pos, uint32_t parent, uint32_t code_id) {
    return e.pos == pos && e.parent == parent && e.code_id == code_id && (compat::kLineTable >= 311 || e.node);
}

// leaf_node() past its common case (stack.cpp): the cache brought up to date.
uint32_t leaf_node_full(ThreadState& t, bool gil, bool may_allocate);

// 3.12+: the common case of leaf_node(), with nothing to bring up to date and no call: the
// innermost frame is the cached one, called from the cached caller, every level below it
// trusted (the facts its last full look kept, still current: ThreadStack::hot_epoch), at the
// position of its level or one the leaf cache knows under the kept parent node. True with the
// node in `*node` (counted as a lookup); false where leaf_node_full() must be asked (nothing
// counted), and always on 3.10 and 3.11. With the GIL.
inline bool leaf_node_known(ThreadState& t, uint32_t* node) {
    if constexpr (compat::kMonitoring) {
        ThreadStack* s = t.stack;
        const uint64_t epoch = __atomic_load_n(&g_stack_epoch, __ATOMIC_ACQUIRE);
        if (__builtin_expect(s && s->hot_epoch == epoch, 1)) {
            Frame* hot = s->hot_frame;
            PyThreadState* ts = *s->tstate;
            Frame* f = ts ? compat::current_frame(ts) : nullptr;
            if (__builtin_expect(f == hot, 1)) {
                // The frame is read through `hot` from here, whose address the cache holds, so
                // those reads wait for the predicted branch only, not for the current frame's
                // own chain of loads (thread state, then frame): opaque to the compiler, which
                // would otherwise read through `f`, equal after the test.
                asm("" : "+r"(hot));
                if (compat::frame_prev(hot) == s->hot_caller || s->hot_caller == kAnyCaller) {
                    Level& leaf = *s->hot_leaf;
                    const uintptr_t pos = compat::frame_pos(hot);
                    if (pos == leaf.pos) {
                        ++s->walks;
                        *node = leaf.node;
                        return true;
                    }
                    if (!leaf.transparent) {
                        const LeafCache::Entry& e = s->leaf_cache.entries[LeafCache::slot(pos)];
                        if (leaf_entry_matches(e, pos, s->hot_parent, leaf.code_id)) {
                            ++s->walks;
                            leaf.pos = pos;
                            leaf.node = e.node;
                            *node = e.node;
                            return true;
                        }
                    }
                }
            }
        }
    }
    return false;
}

// leaf_node(): its common case inline (leaf_node_known, with the GIL), the rest in stack.cpp.
inline uint32_t leaf_node_inline(ThreadState& t, bool gil, bool may_allocate) {
    uint32_t node;
    if (gil && leaf_node_known(t, &node)) {
        return node;
    }
    return leaf_node_full(t, gil, may_allocate);
}

}  // namespace memlens::stack
