// Native memory: the C allocator calls of the process's shared libraries (C extensions, SQLite,
// libxml2, BLAS, libstdc++'s operator new...) reach our hooks (hooks.cpp) by patching the
// libraries' relocation slots (GOT entries) for malloc, calloc, realloc, free, the aligned
// allocators and anonymous mmap/munmap/mremap, in every library loaded now and in those loaded
// later (dlopen is patched too). It works in a running process: no LD_PRELOAD. Not patched:
// memlens's own module, the C library itself and the dynamic loader. ctypes and cffi look C
// functions up with dlsym: their dlsym returns our hooks for the allocator's names, so
// `ctypes.CDLL(None).malloc` is traced too.
#pragma once

namespace memlens::native {

// Patches every loaded library (and, through dlopen, every later one). Returns false where
// this is not supported (not ELF x86-64 or AArch64). Requires the GIL (start()).
bool install();
// Puts every patched slot back (libraries still loaded). Requires the GIL (stop()).
void uninstall();
bool installed();
// Why install() returned false (one line), or nullptr.
const char* problem();

}  // namespace memlens::native
