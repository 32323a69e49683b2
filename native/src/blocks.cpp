#include "blocks.hpp"

#include <cstdlib>
#include <cstring>

#include "pages.hpp"

namespace memlens::blocks {

uintptr_t* g_top[size_t{1} << kTopBits];
uint32_t g_reciprocal[33];
uint8_t g_filter[size_t{1} << 16];

namespace {

constexpr size_t kLeafEntries = size_t{1} << (kLeafBits - kPageBits);
constexpr size_t kLeafBytes = kLeafEntries * sizeof(uintptr_t);
constexpr size_t kTopEntries = size_t{1} << kTopBits;
// A leaf's entries fill 512 pages of its own; a bitmap in one more page after them says which
// of those pages an entry was ever set in, so destroy() reads those only: reading all 2 MiB
// (most of it never written) faulted in 512 pages and scanned 2^18 entries per leaf, at the
// end of every run.
constexpr size_t kEntriesPerPage = 4096 / sizeof(uintptr_t);
constexpr size_t kLeafMapBytes = kLeafBytes + 4096;
inline uint64_t* written_pages(uintptr_t* leaf) { return reinterpret_cast<uint64_t*>(leaf + kLeafEntries); }

// Which entries of g_top hold a leaf, a bit each: destroy() (at every start and reset) visits
// the few leaves a run made instead of all 2^18 entries.
uint64_t g_top_used[kTopEntries / 64];

inline uintptr_t* leaf_of(uintptr_t p, bool create) {
    uintptr_t*& leaf = g_top[p >> kLeafBits];
    if (!leaf && create) {
        // 2 MiB of address space; only the pages that are written cost memory.
        leaf = static_cast<uintptr_t*>(fresh_pages(kLeafMapBytes));
        if (leaf) {
            g_top_used[(p >> kLeafBits) / 64] |= uint64_t{1} << ((p >> kLeafBits) % 64);
        }
    }
    return leaf;
}

inline size_t side_entries(uint32_t k) { return 255 / k + 1; }

// Where the block map keeps block `p`'s page: its leaf (made if need be) and the page's entry
// in it; no leaf where `p` cannot be a pymalloc block of `size` bytes, or memory ran out.
struct PageEntry {
    uintptr_t* leaf;
    size_t at;
};
inline PageEntry page_entry(uintptr_t p, size_t size) {
    if (p >= kAddressLimit || size == 0 || size > compat::kPymallocSmall) {
        return {nullptr, 0};
    }
    return {leaf_of(p, true), (p >> kPageBits) & (kLeafEntries - 1)};
}

// An entry of a page whose class was guessed (page_adopt), not known from an allocation in it.
constexpr uintptr_t kGuessedClass = 32;

// A page's side array for class k (zeros), in entry `at` of `leaf`.
bool new_side(uintptr_t* leaf, size_t at, uint32_t k, bool guessed) {
    size_t bytes = (side_entries(k) * sizeof(uint32_t) + 63) & ~size_t(63);
    void* side = std::aligned_alloc(64, bytes);
    if (!side) {
        return false;
    }
    std::memset(side, 0, bytes);
    leaf[at] = reinterpret_cast<uintptr_t>(side) | (k - 1) | (guessed ? kGuessedClass : 0);
    written_pages(leaf)[at / kEntriesPerPage / 64] |= uint64_t{1} << ((at / kEntriesPerPage) % 64);
    return true;
}

// Whether a page's side array (its leaf entry `e`) tracks no block.
bool all_free(uintptr_t e) {
    const auto* side = reinterpret_cast<const uint32_t*>(e & ~uintptr_t(63));
    const size_t n = side_entries(uint32_t(e & 31) + 1);
    for (size_t i = 0; i < n; ++i) {
        if (side[i] != 0) {
            return false;
        }
    }
    return true;
}

// Block `p` of `size` bytes charged to `node`, in its page's side array (leaf entry `e`).
void put_at(uintptr_t e, uintptr_t p, size_t size, uint32_t node) {
    const uint32_t k = uint32_t(e & 31) + 1;
    auto* side = reinterpret_cast<uint32_t*>(e & ~uintptr_t(63));
    const uint32_t idx = (uint32_t((p & 4095) >> 4) * g_reciprocal[k]) >> 16;
    side[idx] = ((node + 1) << 4) | uint32_t(k * 16 - size);
}

// ---------------------------------------------------------------------------------------
// Address table.
struct Slot {
    uintptr_t key;  // 0 = empty
    uint64_t val;   // node << kSizeBits | size
};

struct Table {
    Slot* slots = nullptr;
    size_t mask = 0;
    size_t count = 0;
};
Table g_table;

inline uint64_t hash_ptr(uintptr_t p) { return (uint64_t(p) >> 4) * 0x9E3779B97F4A7C15ULL; }
inline size_t home(const Table& t, uintptr_t key) { return (hash_ptr(key) >> 20) & t.mask; }

bool table_init(Table& t, size_t cap) {
    t.slots = static_cast<Slot*>(std::calloc(cap, sizeof(Slot)));
    t.mask = t.slots ? cap - 1 : 0;
    t.count = 0;
    return t.slots != nullptr;
}

void put_new(Table& t, uintptr_t key, uint64_t val) {
    size_t i = home(t, key);
    while (t.slots[i].key) {
        i = (i + 1) & t.mask;
    }
    t.slots[i] = {key, val};
    ++t.count;
}

bool table_grow(Table& t) {
    Table bigger;
    if (!table_init(bigger, (t.mask + 1) * 2)) {
        return false;
    }
    for (size_t i = 0; i <= t.mask; ++i) {
        if (t.slots[i].key) {
            put_new(bigger, t.slots[i].key, t.slots[i].val);
        }
    }
    std::free(t.slots);
    t = bigger;
    return true;
}

inline void filter_add(uintptr_t p) {
    uint8_t& c = g_filter[filter_index(p)];
    if (c != UINT8_MAX) {
        __atomic_store_n(&c, uint8_t(c + 1), __ATOMIC_RELAXED);
    }
}
inline void filter_remove(uintptr_t p) {
    uint8_t& c = g_filter[filter_index(p)];
    if (c != UINT8_MAX && c > 0) {  // a saturated counter stays set: only false positives
        __atomic_store_n(&c, uint8_t(c - 1), __ATOMIC_RELAXED);
    }
}

}  // namespace

bool init() {
    destroy();
    for (uint32_t k = 1; k <= 32; ++k) {
        g_reciprocal[k] = (65536 + k - 1) / k;
        for (uint32_t x = 0; x < 256; ++x) {  // the fast division must be exact
            if (((x * g_reciprocal[k]) >> 16) != x / k) {
                return false;
            }
        }
    }
    std::memset(g_filter, 0, sizeof(g_filter));
    return table_init(g_table, 4096);
}

void destroy() {
    for (size_t w = 0; w < kTopEntries / 64; ++w) {
        for (uint64_t bits = g_top_used[w]; bits != 0; bits &= bits - 1) {
            uintptr_t*& leaf = g_top[w * 64 + size_t(__builtin_ctzll(bits))];
            const uint64_t* written = written_pages(leaf);
            for (size_t pw = 0; pw < kLeafEntries / kEntriesPerPage / 64; ++pw) {
                for (uint64_t pages = written[pw]; pages != 0; pages &= pages - 1) {
                    uintptr_t* entries = leaf + (pw * 64 + size_t(__builtin_ctzll(pages))) * kEntriesPerPage;
                    for (size_t i = 0; i < kEntriesPerPage; ++i) {
                        if (entries[i]) {
                            std::free(reinterpret_cast<void*>(entries[i] & ~uintptr_t(63)));
                        }
                    }
                }
            }
            free_pages(leaf, kLeafMapBytes);
            leaf = nullptr;
        }
        g_top_used[w] = 0;
    }
    std::free(g_table.slots);
    g_table = Table{};
}

bool page_put_new(uintptr_t p, size_t size, uint32_t node) {
    const auto [leaf, at] = page_entry(p, size);
    if (!leaf) {
        return false;
    }
    uint32_t k = uint32_t((size + 15) / 16);
    uintptr_t& e = leaf[at];
    if (!e || (e & 31) + 1 != k) {
        // A page seen for the first time, or a pool that pymalloc emptied and gave another
        // size class: all its tracked blocks were freed (their entries are 0). Not so where
        // the page's class was a guess (page_adopt) that this block, of the pool's own class,
        // shows wrong while blocks adopted under it live: they keep the page (this block goes
        // in the table).
        if (e) {
            if ((e & kGuessedClass) && !all_free(e)) {
                return false;
            }
            std::free(reinterpret_cast<void*>(e & ~uintptr_t(63)));
            e = 0;
        }
        if (!new_side(leaf, at, k, false)) {
            return false;
        }
    }
    put_at(e, p, size, node);
    return true;
}

bool page_adopt(uintptr_t p, size_t* size_io, uint32_t node) {
    const size_t size = *size_io;
    const auto [leaf, at] = page_entry(p, size);
    if (!leaf) {
        return false;
    }
    const uint32_t k = uint32_t((size + 15) / 16);
    uintptr_t& e = leaf[at];
    if (e && all_free(e)) {
        // A page whose class came from blocks that were all freed since: its pool may have
        // been emptied and given another class by allocations not traced (a paused thread's),
        // so that class is not trusted.
        std::free(reinterpret_cast<void*>(e & ~uintptr_t(63)));
        e = 0;
    }
    if (!e) {
        // Nothing known of the page: its class is guessed from the object (a block is never
        // of a smaller class than what it holds, so the guess sets no two of the page's
        // blocks on one entry, and frees of its other blocks find none of the adopted ones).
        if (!new_side(leaf, at, k, true)) {
            return false;
        }
    }
    const uint32_t class_k = uint32_t(e & 31) + 1;
    if (class_k == k) {
        put_at(e, p, size, node);
        return true;
    }
    if (!(e & kGuessedClass) && class_k > k) {
        // The page's class, from a block allocated in it and still tracked (the pool's: a
        // pool holding a block keeps its class): the whole block is charged, its request
        // size being unknown.
        *size_io = class_k * 16;
        put_at(e, p, *size_io, node);
        return true;
    }
    return false;  // (a guess of another object's, or a class too small to hold it: stale)
}

void arena_freed(uintptr_t p, size_t size) {
    for (uintptr_t page = p & ~uintptr_t(4095); page < p + size; page += 4096) {
        uintptr_t* leaf = page < kAddressLimit ? leaf_of(page, false) : nullptr;
        if (leaf) {
            uintptr_t& e = leaf[(page >> kPageBits) & (kLeafEntries - 1)];
            if (e) {
                std::free(reinterpret_cast<void*>(e & ~uintptr_t(63)));
                e = 0;
            }
        }
    }
}

bool table_put(uintptr_t p, uint32_t node, uint64_t size, bool* replaced, Entry* old) {
    Table& t = g_table;
    *replaced = false;
    // Grow at 75% load: linear probing with a strong hash stays short there.
    if ((t.count + 1) * 4 > (t.mask + 1) * 3 && !table_grow(t)) {
        return false;
    }
    uint64_t val = (uint64_t(node) << kSizeBits) | (size > kSizeMask ? kSizeMask : size);
    size_t i = home(t, p);
    while (t.slots[i].key) {
        if (t.slots[i].key == p) {
            *replaced = true;
            *old = Entry{uint32_t(t.slots[i].val >> kSizeBits), t.slots[i].val & kSizeMask};
            t.slots[i].val = val;
            return true;
        }
        i = (i + 1) & t.mask;
    }
    t.slots[i] = {p, val};
    ++t.count;
    filter_add(p);
    return true;
}

bool table_take(uintptr_t p, Entry* out) {
    Table& t = g_table;
    if (!t.slots) {
        return false;
    }
    size_t i = home(t, p);
    while (t.slots[i].key) {
        if (t.slots[i].key == p) {
            *out = Entry{uint32_t(t.slots[i].val >> kSizeBits), t.slots[i].val & kSizeMask};
            // Backward-shift deletion keeps probe chains intact without tombstones.
            size_t hole = i;
            size_t j = i;
            for (;;) {
                j = (j + 1) & t.mask;
                if (!t.slots[j].key) {
                    break;
                }
                size_t h = home(t, t.slots[j].key);
                // Move slot j into the hole if its home is not cyclically in (hole, j].
                bool movable = (hole <= j) ? (h <= hole || h > j) : (h <= hole && h > j);
                if (movable) {
                    t.slots[hole] = t.slots[j];
                    hole = j;
                }
            }
            t.slots[hole] = {0, 0};
            --t.count;
            filter_remove(p);
            return true;
        }
        i = (i + 1) & t.mask;
    }
    return false;
}

bool table_get(uintptr_t p, Entry* out) {
    const Table& t = g_table;
    if (!t.slots) {
        return false;
    }
    for (size_t i = home(t, p); t.slots[i].key; i = (i + 1) & t.mask) {
        if (t.slots[i].key == p) {
            *out = Entry{uint32_t(t.slots[i].val >> kSizeBits), t.slots[i].val & kSizeMask};
            return true;
        }
    }
    return false;
}

size_t table_count() { return g_table.count; }

void table_nodes(void (*visit)(uint32_t node, void* arg), void* arg) {
    const Table& t = g_table;
    for (size_t i = 0; t.slots && i <= t.mask; ++i) {
        if (t.slots[i].key) {
            visit(uint32_t(t.slots[i].val >> kSizeBits), arg);
        }
    }
}

}  // namespace memlens::blocks
