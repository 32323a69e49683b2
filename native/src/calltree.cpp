#include "calltree.hpp"

#include <cstdlib>
#include <cstring>

#include "pages.hpp"

namespace memlens::calltree {

Chunk* g_chunks[kChunks];
std::atomic<uint32_t> g_size{0};

namespace {

// Open addressing by path tag (linear probing from the tag's low bits). A slot holds the node's
// id + 1 (0 = empty) in its low 28 bits and the tag's top 4 bits above them, which rule out
// most other nodes met while probing without reading them. Readers load the current index
// with acquire, then slots with acquire (a slot is stored after its node's fields). A full
// index is replaced by a bigger one; the old one is retired (kept readable) until destroy().
constexpr int kIdBits = 28;
static_assert(kMaxNodes < (uint32_t{1} << kIdBits), "a node id + 1 fits below a slot's tag bits");
inline uint32_t slot_value(uint32_t id, uint32_t tag) { return (tag >> kIdBits << kIdBits) | (id + 1); }
inline bool slot_may_be(uint32_t slot, uint32_t tag) { return (slot >> kIdBits) == (tag >> kIdBits); }
inline uint32_t slot_id(uint32_t slot) { return (slot & ((uint32_t{1} << kIdBits) - 1)) - 1; }

struct Index {
    size_t mask;
    Index* retired;  // the index this one replaced
    std::atomic<uint32_t> slots[1];
};

std::atomic<Index*> g_index{nullptr};
Index* g_unpublished = nullptr;  // taken by unpublish_index(), until free_unpublished()
bool g_sampling_vars = false;

void free_chain(Index* ix) {
    while (ix) {
        Index* older = ix->retired;
        std::free(ix);
        ix = older;
    }
}

Index* new_index(size_t cap) {
    size_t bytes = sizeof(Index) + (cap - 1) * sizeof(std::atomic<uint32_t>);
    auto* ix = static_cast<Index*>(std::calloc(1, bytes));
    if (ix) {
        ix->mask = cap - 1;
    }
    return ix;
}

uint32_t find_in(const Index* ix, uint32_t parent, uint32_t tag, uint32_t code, int32_t offset, size_t* empty) {
    size_t i = tag & ix->mask;
    for (;;) {
        uint32_t slot = ix->slots[i].load(std::memory_order_acquire);
        if (slot == 0) {
            *empty = i;
            return kNoParent;
        }
        if (slot_may_be(slot, tag)) {
            const Node& n = node(slot_id(slot));
            if (n.parent == parent && n.code == code && n.offset == offset) {
                return slot_id(slot);
            }
        }
        i = (i + 1) & ix->mask;
    }
}

bool grow_index(uint32_t count) {
    Index* old = g_index.load(std::memory_order_relaxed);
    Index* fresh = new_index((old->mask + 1) * 2);
    if (!fresh) {
        return false;
    }
    for (uint32_t id = 1; id < count; ++id) {
        uint32_t tag = tag_of(id);
        size_t i = tag & fresh->mask;
        while (fresh->slots[i].load(std::memory_order_relaxed)) {
            i = (i + 1) & fresh->mask;
        }
        fresh->slots[i].store(slot_value(id, tag), std::memory_order_relaxed);
    }
    fresh->retired = old;
    g_index.store(fresh, std::memory_order_release);
    return true;
}

// A chunk's arrays (its nodes, 1 MiB; their no-GIL figures and variances) are fresh pages
// (pages.hpp), not calloc's: calloc zero-fills what it takes from the heap, which glibc does
// for big blocks too once its mmap threshold has risen (a run's first chunk and first no-GIL
// event wrote 1.8 MiB).
template <typename T>
T* zeroed(size_t n) {
    return static_cast<T*>(fresh_pages(n * sizeof(T)));
}

template <typename T>
void release(T* p, size_t n) {
    free_pages(p, n * sizeof(T));
}

Chunk* new_chunk() {
    auto* c = zeroed<Chunk>(1);
    if (c && g_sampling_vars) {
        c->vars = zeroed<Variances>(kChunkSize);
        if (!c->vars) {
            release(c, 1);
            return nullptr;
        }
    }
    return c;
}

}  // namespace

bool init(bool sampling) {
    destroy();
    g_sampling_vars = sampling;
    g_chunks[0] = new_chunk();
    Index* ix = new_index(4096);
    if (!g_chunks[0] || !ix) {
        std::free(ix);
        destroy();
        return false;
    }
    Node& root = g_chunks[0]->nodes[0];
    root.parent = kNoParent;
    root.code = kNoCode;
    g_chunks[0]->tags[0] = kRootTag;
    g_index.store(ix, std::memory_order_release);
    g_size.store(1, std::memory_order_release);
    return true;
}

void destroy() {
    for (Chunk*& c : g_chunks) {
        if (c) {
            release(c->nogil, kChunkSize);
            release(c->vars, kChunkSize);
            release(c, 1);
            c = nullptr;
        }
    }
    free_chain(g_index.exchange(nullptr));
    free_unpublished();
    g_size.store(0);
}

void unpublish_index() {
    Guard g(g_intern_lock);  // (not while intern() adds a node: it reads the index again)
    Index* ix = g_index.exchange(nullptr, std::memory_order_seq_cst);
    if (ix) {
        free_chain(g_unpublished);
        g_unpublished = ix;
    }
}

void free_unpublished() {
    free_chain(g_unpublished);
    g_unpublished = nullptr;
}

void warm(const uint32_t* tags, int n) {
    // (seq_cst, as in intern_tagged(): no-GIL walks warm too, and freeze()'s wait for them
    // before freeing an unpublished index relies on it.)
    const Index* ix = g_index.load(std::memory_order_seq_cst);
    if (!ix) {
        return;
    }
    for (int i = 0; i < n; ++i) {
        __builtin_prefetch(&ix->slots[tags[i] & ix->mask]);
    }
    // The slots' loads overlap; then so do the nodes' (the first two that may be the one).
    for (int i = 0; i < n; ++i) {
        size_t at = tags[i] & ix->mask;
        for (int probe = 0; probe < 2; ++probe, at = (at + 1) & ix->mask) {
            uint32_t slot = ix->slots[at].load(std::memory_order_acquire);
            if (slot == 0) {
                break;
            }
            if (slot_may_be(slot, tags[i])) {
                __builtin_prefetch(&node(slot_id(slot)));
            }
        }
    }
}

uint32_t intern_tagged(uint32_t parent, uint32_t tag, uint32_t code, int32_t offset) {
    size_t empty = 0;
    // (seq_cst: ordered after an event's count of itself, as unpublish_index()'s waiter needs;
    // a plain load on x86-64.)
    Index* ix = g_index.load(std::memory_order_seq_cst);
    if (!ix) {
        return kRootNode;
    }
    uint32_t found = find_in(ix, parent, tag, code, offset, &empty);
    if (found != kNoParent) {
        return found;
    }
    Guard g(g_intern_lock);
    uint32_t id = g_size.load(std::memory_order_relaxed);
    ix = g_index.load(std::memory_order_relaxed);
    if (!ix) {
        return kRootNode;  // frozen meanwhile
    }
    if (size_t(id + 1) * 2 > ix->mask + 1 && grow_index(id)) {  // keep the load at most 1/2
        ix = g_index.load(std::memory_order_relaxed);
    }
    if (size_t(id + 1) * 8 > ix->mask * 7) {
        return kRootNode;  // could not grow: never fill the index up
    }
    found = find_in(ix, parent, tag, code, offset, &empty);  // someone may have added it meanwhile
    if (found != kNoParent) {
        return found;
    }
    if (id >= kMaxNodes) {
        return kRootNode;
    }
    Chunk*& chunk = g_chunks[id >> kChunkBits];
    if (!chunk && !(chunk = new_chunk())) {
        return kRootNode;
    }
    Node& n = chunk->nodes[id & (kChunkSize - 1)];
    n.parent = parent;
    n.code = code;
    n.offset = offset;
    chunk->tags[id & (kChunkSize - 1)] = tag;
    ix->slots[empty].store(slot_value(id, tag), std::memory_order_release);
    g_size.store(id + 1, std::memory_order_release);
    return id;
}

// A chunk's nodes and tags fill whole pages (mapped page-aligned), before its pointers.
static_assert(offsetof(Chunk, nogil) % 4096 == 0, "a chunk's nodes and tags end on a page");

void give_back(uint32_t c) {
    Chunk* chunk = c > 0 && c < kChunks ? g_chunks[c] : nullptr;
    if (!chunk) {
        return;
    }
    madvise(chunk, offsetof(Chunk, nogil), MADV_DONTNEED);
    if (chunk->nogil) {
        madvise(chunk->nogil, kChunkSize * sizeof(NogilFigures), MADV_DONTNEED);
    }
    if (chunk->vars) {
        madvise(chunk->vars, kChunkSize * sizeof(Variances), MADV_DONTNEED);
    }
}

uint32_t nogil_capacity() {
    uint32_t n = 0;
    for (uint32_t c = 0; c <= (size() >> kChunkBits) && c < kChunks; ++c) {
        if (g_chunks[c] && g_chunks[c]->nogil) {
            n += kChunkSize;
        }
    }
    return n;
}

NogilFigures* nogil(uint32_t id) {
    Chunk* c = g_chunks[id >> kChunkBits];
    if (!c->nogil) {
        c->nogil = zeroed<NogilFigures>(kChunkSize);
        if (!c->nogil) {
            return nullptr;
        }
    }
    return &c->nogil[id & (kChunkSize - 1)];
}

}  // namespace memlens::calltree
