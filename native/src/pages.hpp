// Fresh anonymous pages for the tracer's big tables (the block map's leaves, the call tree's
// chunks, the holders' seen-bitmap): zero without being zero-filled, and costing memory only
// where written. mmap, not malloc: callable from inside the allocator hooks (memlens's own
// module is not interposed), and never a block of the heap that calloc would have to clear.
#pragma once

#include <sys/mman.h>

#include <cstddef>

namespace memlens {

// `bytes` of fresh zero pages, or nullptr.
inline void* fresh_pages(size_t bytes) {
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return m == MAP_FAILED ? nullptr : m;
}

// Gives back what fresh_pages(bytes) returned (nothing for nullptr).
inline void free_pages(void* p, size_t bytes) {
    if (p) {
        munmap(p, bytes);
    }
}

}  // namespace memlens
