// Where tracked blocks are remembered, so that a free finds the node and size to take back.
//
// * The pymalloc block map (exact mode over pymalloc, GIL events only, no lock): pymalloc
//   serves 1 to 512-byte requests from pools of one size class each, so a block's index
//   within its 4 KiB page is (address % 4096) / class. Each page that holds a tracked block
//   has a side array of 4-byte entries (node + 1) << 4 | (class - size), reached through a
//   two-level page table. Allocations that follow each other land next to each other in the
//   pools and in the side arrays, so the bookkeeping stays in cache even when the live set
//   does not (an address-keyed hash table scatters it: that cost 43% of a profiled run with a
//   large live set), and it costs 4 bytes per pymalloc slot, nothing per block elsewhere.
//   pymalloc's arena allocator is hooked so that the pages of a released arena are forgotten.
// * The address table (every other block: large, RAW, numpy, and every block when another
//   allocator is in use): open addressing on the address, backward-shift deletion, under
//   g_table_lock. A counting filter of its addresses keeps frees of untracked blocks to one
//   load.
#pragma once

#include <cstddef>
#include <cstdint>

#include "compat.hpp"
#include "state.hpp"

namespace memlens::blocks {

// ---------------------------------------------------------------------------------------
// pymalloc block map.

constexpr int kPageBits = 12;
constexpr int kLeafBits = 30;  // one leaf of the page table covers 1 GiB
constexpr int kTopBits = 48 - kLeafBits;
constexpr uintptr_t kAddressLimit = uintptr_t{1} << 48;

// A leaf entry: pointer to the page's side array (64-byte aligned) | (class / 16 - 1).
extern uintptr_t* g_top[size_t{1} << kTopBits];
// Exact division by the class (16 * k, k = 1..32) of an offset in 16-byte units (0..255).
extern uint32_t g_reciprocal[33];

bool init();
// Frees every side array and leaf (not while tracing).
void destroy();

// page_put() where the page has no side array for `size`'s class yet (or `p` is out of the
// map's range): makes it, out of line (the common case below stays a few instructions inside
// the hook, with no call).
bool page_put_new(uintptr_t p, size_t size, uint32_t node);

// Remembers a pymalloc block of `size` bytes (1..512) charged to `node`. Creates the page's
// side array when needed. False when out of memory (the caller then uses the table).
// page_put() where the block's page is known to hold blocks of its class already (no call):
// false, with nothing done, otherwise.
inline bool page_put_known(uintptr_t p, size_t size, uint32_t node) {
    if (p < kAddressLimit && size - 1 < compat::kPymallocSmall) {
        if (uintptr_t* leaf = g_top[p >> kLeafBits]) {
            uintptr_t e = leaf[(p >> kPageBits) & ((uintptr_t{1} << (kLeafBits - kPageBits)) - 1)];
            uint32_t k = uint32_t((size + 15) / 16);
            if (e && (e & 31) + 1 == k) {
                auto* side = reinterpret_cast<uint32_t*>(e & ~uintptr_t(63));
                side[(uint32_t((p & 4095) >> 4) * g_reciprocal[k]) >> 16] = ((node + 1) << 4) | uint32_t(k * 16 - size);
                return true;
            }
        }
    }
    return false;
}

// page_put() for a block CPython took from a free list, untracked until now: `size` is what
// its object takes, not what the allocator was asked for (a one-digit int may sit in a block
// made for a longer one), so its class is not known. Its page's is, from a block allocated
// in it (the block is then charged whole: *size becomes its class's); where none was, it is
// guessed from `size`, and marked so: a page_put() of another class then leaves the page as it
// is while blocks adopted under the guess are tracked (that block goes in the table), where a
// page of a known class would be given the new one (its blocks were all freed). False where
// neither fits (the caller uses the table). Before, a wrong guess replaced the page's side
// array, and the blocks tracked in it were forgotten while live: their frees were never taken
// back.
bool page_adopt(uintptr_t p, size_t* size, uint32_t node);

inline bool page_put(uintptr_t p, size_t size, uint32_t node) {
    return page_put_known(p, size, node) || page_put_new(p, size, node);
}

// Whether `p` lies in a page known to hold pymalloc blocks of `size`'s class (so a realloc's
// result can go in the block map).
inline bool page_fits(uintptr_t p, size_t size) {
    if (p >= kAddressLimit) {
        return false;
    }
    uintptr_t* leaf = g_top[p >> kLeafBits];
    if (!leaf) {
        return false;
    }
    uintptr_t e = leaf[(p >> kPageBits) & ((uintptr_t{1} << (kLeafBits - kPageBits)) - 1)];
    return e && (e & 31) + 1 == (size + 15) / 16;
}

// The block map's entry of the pymalloc slot `p` is in (nullptr: none), and its class.
inline uint32_t* page_slot(uintptr_t p, uint32_t* k) {
    if (p >= kAddressLimit) {
        return nullptr;
    }
    uintptr_t* leaf = g_top[p >> kLeafBits];
    if (!leaf) {
        return nullptr;
    }
    uintptr_t e = leaf[(p >> kPageBits) & ((uintptr_t{1} << (kLeafBits - kPageBits)) - 1)];
    if (!e) {
        return nullptr;
    }
    *k = uint32_t(e & 31) + 1;
    auto* side = reinterpret_cast<uint32_t*>(e & ~uintptr_t(63));
    return &side[(uint32_t((p & 4095) >> 4) * g_reciprocal[*k]) >> 16];
}

// A pymalloc block's entry in the block map: its slot (nullptr when `p` is in no page of the
// map), its size class and the slot's value (0: not tracked).
struct PageBlock {
    uint32_t* slot = nullptr;
    uint32_t k = 0;
    uint32_t value = 0;
    explicit operator bool() const { return value != 0; }
    uint32_t node() const { return (value >> 4) - 1; }
    size_t size() const { return size_t(k) * 16 - (value & 15); }
    // Charges the tracked block to `node` instead (its size stays).
    void charge(uint32_t to) { *slot = value = ((to + 1) << 4) | (value & 15); }
    // Forgets the tracked block.
    void clear() { *slot = 0; }
};

inline PageBlock page_block(uintptr_t p) {
    PageBlock b;
    b.slot = page_slot(p, &b.k);
    b.value = b.slot ? *b.slot : 0;
    return b;
}

// Forgets a tracked pymalloc block: true with its node and size if `p` was one.
inline bool page_take(uintptr_t p, uint32_t* node, size_t* size) {
    PageBlock b = page_block(p);
    if (b) {
        b.clear();
        *node = b.node();
        *size = b.size();
    }
    return bool(b);
}

// The node of a tracked pymalloc block (the block stays tracked): true if `p` is one.
inline bool page_get(uintptr_t p, uint32_t* node) {
    PageBlock b = page_block(p);
    if (b) {
        *node = b.node();
    }
    return bool(b);
}

// pymalloc released an arena: its pages hold no block anymore.
void arena_freed(uintptr_t p, size_t size);

// ---------------------------------------------------------------------------------------
// Address table (under g_table_lock).

constexpr uint64_t kSizeBits = 36;
constexpr uint64_t kSizeMask = (uint64_t{1} << kSizeBits) - 1;

struct Entry {
    uint32_t node;
    uint64_t size;
};

// Inserts (or replaces: a stale entry for a reused address, whose previous value is returned
// in *old). False when out of memory (the block stays untracked).
bool table_put(uintptr_t p, uint32_t node, uint64_t size, bool* replaced, Entry* old);
bool table_take(uintptr_t p, Entry* out);
// What the table holds for `p` (it stays there): false when nothing.
bool table_get(uintptr_t p, Entry* out);
size_t table_count();
// Calls visit(node, arg) for each block the table holds.
void table_nodes(void (*visit)(uint32_t node, void* arg), void* arg);

// Whether the table may hold `p` (one load; read without the lock).
extern uint8_t g_filter[size_t{1} << 16];
inline size_t filter_index(uintptr_t p) { return ((uint64_t(p) >> 4) * 0x9E3779B97F4A7C15ULL) >> 48; }
inline bool filter_hit(uintptr_t p) {
    return __atomic_load_n(&g_filter[filter_index(p)], __ATOMIC_RELAXED) != 0;
}

}  // namespace memlens::blocks
