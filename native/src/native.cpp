// See native.hpp. The dynamic linker resolves a library's calls to malloc & co. through
// relocation slots (the GOT: R_*_JUMP_SLOT for calls through the PLT, R_*_GLOB_DAT for calls
// and references that load the address directly). Overwriting those slots with our hooks'
// addresses reroutes the library's calls; putting the saved values back undoes it. Libraries
// that keep the allocator in a function pointer (libxml2's xmlMalloc = malloc, and many
// "pluggable allocator" tables) get an absolute relocation (R_*_64) for it: such a word is
// rerouted too when it still holds exactly the real function.
#include "native.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__linux__)  // ELF: the relocation slots, dl_iterate_phdr, dladdr1
#include <elf.h>
#include <link.h>
#endif

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "hooks.hpp"
#include "state.hpp"

namespace memlens::native {
namespace {

#if !defined(__linux__)
#define MEMLENS_NO_NATIVE 1
#elif defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_X86_64_GLOB_DAT;
constexpr uint32_t kAbs64 = R_X86_64_64;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_AARCH64_GLOB_DAT;
constexpr uint32_t kAbs64 = R_AARCH64_ABS64;
#else
#define MEMLENS_NO_NATIVE 1
#endif

using DlopenFn = void* (*)(const char*, int);
using DlcloseFn = int (*)(void*);
using DlsymFn = void* (*)(void*, const char*);

void* g_real_dlopen = nullptr;
void* g_real_dlclose = nullptr;
void* g_real_dlsym = nullptr;

struct Patch {
    uintptr_t base;  // the library's load address (identifies it while it is loaded)
    void** slot;
    void* saved;
    void* hook;
};

std::mutex* g_mutex = new std::mutex;  // never destroyed (fork, exit)
std::vector<Patch>* g_patches = nullptr;
std::vector<uintptr_t>* g_done = nullptr;  // load addresses of the libraries patched
bool g_installed = false;
uintptr_t g_self = 0;  // our own module's load address

void* ml_dlopen(const char* file, int mode);
int ml_dlclose(void* handle);
void* ml_dlsym(void* handle, const char* name);

// Every symbol we take over: the allocator's (hooks.cpp) and the dynamic loader's.
struct Target {
    const char* symbol;
    void* hook;
    void* real;   // the function itself
    void* alias;  // what the program's references hold instead, or nullptr (see resolve)
    bool lookup_only;  // patched only in the libraries whose lookups we reroute (dlsym)
    bool allocator;    // one of the allocator's functions (hooks.cpp), not the loader's
    bool is_real(const void* p) const { return p == real || (alias && p == alias); }
};
std::vector<Target>* g_targets = nullptr;
// The first letters of the targets' names: most names a library's relocations carry (C++'s
// `_Z...`, CPython's `Py...`, `_Py...`) are turned down on their first byte, without a
// string comparison per target (libstdc++ and libpython carry tens of thousands of them).
bool g_first_letter[256];

const Target* find_target(const char* name) {
    const auto first = static_cast<unsigned char>(name[0]);
    if (!g_first_letter[first]) {
        return nullptr;
    }
    for (const Target& t : *g_targets) {
        if (static_cast<unsigned char>(t.symbol[0]) == first && std::strcmp(t.symbol, name) == 0) {
            return &t;
        }
    }
    return nullptr;
}

// Writes `value` into a relocation slot, making its page writable for the time of the write
// when it is in the read-only-after-relocation (RELRO) region.
void write_slot(void** slot, void* value, uintptr_t relro_start, uintptr_t relro_end) {
    uintptr_t a = uintptr_t(slot);
    if (a >= relro_start && a < relro_end) {
        uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
        void* start = reinterpret_cast<void*>(a & ~(page - 1));
        if (mprotect(start, page, PROT_READ | PROT_WRITE) != 0) {
            return;
        }
        __atomic_store_n(slot, value, __ATOMIC_RELEASE);
        mprotect(start, page, PROT_READ);
        return;
    }
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
}

bool skipped(const char* name) {
    // The C library and the dynamic loader call their own allocator internally; our module
    // calls the real functions. The vDSO has no relocations.
    const char* base = std::strrchr(name, '/');
    base = base ? base + 1 : name;
    return std::strncmp(base, "libc.so", 7) == 0 || std::strncmp(base, "ld-linux", 8) == 0 ||
           std::strncmp(base, "ld64.so", 7) == 0 || std::strncmp(base, "linux-vdso", 10) == 0 ||
           std::strncmp(base, "linux-gate", 10) == 0;
}

// Only these libraries get their dlsym answers rerouted: they look C functions up by name for
// Python code (ctypes, cffi) and never ask for RTLD_NEXT, whose answer depends on the caller.
bool reroutes_lookups(const char* name) {
    return std::strstr(name, "_ctypes") != nullptr || std::strstr(name, "_cffi_backend") != nullptr;
}

#ifndef MEMLENS_NO_NATIVE
template <typename T>
T dyn_ptr(uintptr_t base, ElfW(Addr) value) {
    // Most dynamic entries hold addresses already relocated by the loader; some (the vDSO,
    // some loaders) keep them relative to the load address.
    return reinterpret_cast<T>(value < base ? base + value : value);
}

void patch_object(const dl_phdr_info* info, bool lookups) {
    uintptr_t base = info->dlpi_addr;
    const ElfW(Dyn)* dyn = nullptr;
    uintptr_t relro_start = 0, relro_end = 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_DYNAMIC) {
            dyn = reinterpret_cast<const ElfW(Dyn)*>(base + ph.p_vaddr);
        } else if (ph.p_type == PT_GNU_RELRO) {
            relro_start = base + ph.p_vaddr;
            relro_end = relro_start + ph.p_memsz;
        }
    }
    if (!dyn) {
        return;
    }
    const ElfW(Sym)* symtab = nullptr;
    const char* strtab = nullptr;
    size_t strsz = 0;
    const ElfW(Rela)* jmprel = nullptr;
    size_t jmprel_size = 0;
    const ElfW(Rela)* rela = nullptr;
    size_t rela_size = 0;
    size_t relative = 0;  // DT_RELACOUNT: the leading R_*_RELATIVE entries of DT_RELA
    ElfW(Sxword) pltrel = 0;
    for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
        switch (d->d_tag) {
            case DT_SYMTAB:
                symtab = dyn_ptr<const ElfW(Sym)*>(base, d->d_un.d_ptr);
                break;
            case DT_STRTAB:
                strtab = dyn_ptr<const char*>(base, d->d_un.d_ptr);
                break;
            case DT_STRSZ:
                strsz = d->d_un.d_val;
                break;
            case DT_JMPREL:
                jmprel = dyn_ptr<const ElfW(Rela)*>(base, d->d_un.d_ptr);
                break;
            case DT_PLTRELSZ:
                jmprel_size = d->d_un.d_val;
                break;
            case DT_PLTREL:
                pltrel = ElfW(Sxword)(d->d_un.d_val);
                break;
            case DT_RELA:
                rela = dyn_ptr<const ElfW(Rela)*>(base, d->d_un.d_ptr);
                break;
            case DT_RELASZ:
                rela_size = d->d_un.d_val;
                break;
            case DT_RELACOUNT:
                relative = d->d_un.d_val;
                break;
            default:
                break;
        }
    }
    if (!symtab || !strtab || (jmprel && pltrel != DT_RELA)) {
        return;  // no symbols, or REL relocations (not used on x86-64 and AArch64)
    }
    // `skip`: entries known to be relative relocations (an address plus the load address,
    // never a symbol's), which the linker puts first and counts (most of a library's).
    auto scan = [&](const ElfW(Rela)* table, size_t bytes, size_t skip) {
        if (!table) {
            return;
        }
        for (size_t i = skip; i < bytes / sizeof(ElfW(Rela)); ++i) {
            const ElfW(Rela)& r = table[i];
            uint32_t type = uint32_t(ELF64_R_TYPE(r.r_info));
            if (type != kJumpSlot && type != kGlobDat && !(type == kAbs64 && r.r_addend == 0)) {
                continue;
            }
            size_t sym = ELF64_R_SYM(r.r_info);
            if (sym == 0 || symtab[sym].st_name >= strsz) {
                continue;
            }
            const Target* t = find_target(strtab + symtab[sym].st_name);
            if (!t || (t->lookup_only && !lookups)) {
                continue;
            }
            auto** slot = reinterpret_cast<void**>(base + r.r_offset);
            void* current = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
            if (current == t->hook || (type == kAbs64 && !t->is_real(current))) {
                continue;  // done already, or a pointer the library has changed since
            }
            g_patches->push_back(Patch{base, slot, current, t->hook});
            write_slot(slot, t->hook, relro_start, relro_end);
        }
    };
    scan(jmprel, jmprel_size, 0);
    scan(rela, rela_size, relative);
}

// Patches the loaded libraries not patched yet. Under g_mutex, with our hooks not counting.
int patch_new(dl_phdr_info* info, size_t, void*) {
    const char* name = info->dlpi_name ? info->dlpi_name : "";
    uintptr_t base = info->dlpi_addr;
    if (base == g_self || skipped(name)) {
        return 0;
    }
    for (uintptr_t done : *g_done) {
        if (done == base) {
            return 0;
        }
    }
    g_done->push_back(base);
    patch_object(info, reroutes_lookups(name));
    return 0;
}

// Puts back the slots of a library that is still loaded.
int restore_loaded(dl_phdr_info* info, size_t, void*) {
    uintptr_t base = info->dlpi_addr;
    uintptr_t relro_start = 0, relro_end = 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_GNU_RELRO) {
            relro_start = base + ph.p_vaddr;
            relro_end = relro_start + ph.p_memsz;
        }
    }
    for (const Patch& p : *g_patches) {
        // (a slot the library has changed since is left as it is)
        if (p.base == base && __atomic_load_n(p.slot, __ATOMIC_ACQUIRE) == p.hook) {
            write_slot(p.slot, p.saved, relro_start, relro_end);
        }
    }
    return 0;
}

// Forgets the libraries that were unloaded (their slots are gone with them).
int mark_loaded(dl_phdr_info* info, size_t, void* data) {
    static_cast<std::vector<uintptr_t>*>(data)->push_back(info->dlpi_addr);
    return 0;
}
void forget_unloaded() {
    std::vector<uintptr_t> loaded;
    dl_iterate_phdr(mark_loaded, &loaded);
    auto gone = [&](uintptr_t base) {
        for (uintptr_t b : loaded) {
            if (b == base) {
                return false;
            }
        }
        return true;
    };
    std::vector<Patch> kept;
    for (const Patch& p : *g_patches) {
        if (!gone(p.base)) {
            kept.push_back(p);
        }
    }
    g_patches->swap(kept);
    std::vector<uintptr_t> done;
    for (uintptr_t b : *g_done) {
        if (!gone(b)) {
            done.push_back(b);
        }
    }
    g_done->swap(done);
}

void patch_all() {
    PauseScope pause;  // our vectors' memory is ours, not the program's
    InHook hook(t_state, t_state.in_hook);
    dl_iterate_phdr(patch_new, nullptr);
}
#endif

void* ml_dlopen(const char* file, int mode) {
    void* handle = reinterpret_cast<DlopenFn>(g_real_dlopen)(file, mode);
#ifndef MEMLENS_NO_NATIVE
    if (handle) {
        std::lock_guard<std::mutex> lk(*g_mutex);
        if (g_installed) {
            patch_all();  // the library and whatever it brought in
        }
    }
#endif
    return handle;
}

int ml_dlclose(void* handle) {
    int r = reinterpret_cast<DlcloseFn>(g_real_dlclose)(handle);
#ifndef MEMLENS_NO_NATIVE
    std::lock_guard<std::mutex> lk(*g_mutex);
    if (g_patches) {
        PauseScope pause;
        InHook hook(t_state, t_state.in_hook);
        forget_unloaded();
    }
#endif
    return r;
}

// ctypes' and cffi's dlsym: the allocator's names answer with our hooks, so that Python code
// calling libc's malloc through them is traced like any library.
void* ml_dlsym(void* handle, const char* name) {
    void* found = reinterpret_cast<DlsymFn>(g_real_dlsym)(handle, name);
    if (found && g_installed) {
        for (const Target& t : *g_targets) {
            if (t.allocator && t.is_real(found)) {
                return t.hook;  // only when it is the very function we wrap
            }
        }
    }
    return found;
}

}  // namespace

#ifndef MEMLENS_NO_NATIVE
// The object whose segments hold `p` (its load address and name), found by walking them.
struct Owner {
    const void* p;
    uintptr_t base = 0;
    bool found = false;
};
int find_owner(dl_phdr_info* info, size_t, void* data) {
    auto* o = static_cast<Owner*>(data);
    uintptr_t a = uintptr_t(o->p);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && a >= start && a < start + ph.p_memsz) {
            o->base = info->dlpi_addr;
            o->found = true;
            return 1;
        }
    }
    return 0;
}

// Whether `p` is where a function is defined: the start of a defined symbol. Not so for a
// canonical PLT entry, the stub a non-PIE executable (Debian's, Ubuntu's, conda's statically
// linked pythons) gets for a library function whose address it takes: its symbol is undefined
// (SHN_UNDEF) with the stub's address as value, and every reference in the process, the
// answer of dlsym(RTLD_DEFAULT) included, is that stub, which jumps through the executable's
// own relocation slot.
bool defines(const void* p) {
    Dl_info info{};
    void* entry = nullptr;
    if (!dladdr1(p, &info, &entry, RTLD_DL_SYMENT) || !entry) {
        return false;
    }
    return info.dli_saddr == p && static_cast<const ElfW(Sym)*>(entry)->st_shndx != SHN_UNDEF;
}

int list_names(dl_phdr_info* info, size_t, void* data) {
    if (info->dlpi_name && info->dlpi_name[0] == '/') {
        static_cast<std::vector<std::pair<uintptr_t, std::string>>*>(data)->emplace_back(info->dlpi_addr,
                                                                                        info->dlpi_name);
    }
    return 0;
}

// The function `symbol` names, as the dynamic loader binds references to it, and the address
// the process's references hold for it when that differs (a canonical PLT entry: `*alias`).
// For a stub, the definition is the first one in load order (the loader's search order for
// the objects loaded at start) outside the stub's object and ours. nullptr: not found, or
// found only where we cannot tell a definition from a stub.
void* resolve(const char* symbol, void** alias) {
    *alias = nullptr;
    void* p = dlsym(RTLD_DEFAULT, symbol);
    if (!p || defines(p)) {
        return p;
    }
    Owner stub{p};
    dl_iterate_phdr(find_owner, &stub);
    std::vector<std::pair<uintptr_t, std::string>> objects;
    dl_iterate_phdr(list_names, &objects);  // (no dlopen inside dl_iterate_phdr's lock)
    for (const auto& [base, name] : objects) {
        if (base == g_self || (stub.found && base == stub.base)) {
            continue;
        }
        void* handle = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
        if (!handle) {
            continue;
        }
        void* q = dlsym(handle, symbol);  // searched in the object, then in what it needs
        dlclose(handle);
        Owner def{q};
        if (q && defines(q) && (dl_iterate_phdr(find_owner, &def), def.found) && def.base == base) {
            *alias = p;
            return q;
        }
    }
    return nullptr;
}

const char* g_problem = nullptr;  // why install() did not patch, for the one warning line
#endif

bool install() {
#ifdef MEMLENS_NO_NATIVE
    return false;
#else
    std::lock_guard<std::mutex> lk(*g_mutex);
    if (g_installed) {
        return true;
    }
    PauseScope pause;
    Dl_info self{};
    if (!dladdr(reinterpret_cast<void*>(&install), &self)) {
        g_problem = "memlens's own module is not found by the dynamic loader";
        return false;
    }
    g_self = uintptr_t(self.dli_fbase);
    size_t n = 0;
    const hooks::Interposer* ip = hooks::interposers(&n);
    if (!g_targets) {
        auto* targets = new std::vector<Target>();
        auto add = [&](const char* symbol, void* hook, bool lookup_only, bool allocator) {
            void* alias = nullptr;
            void* real = resolve(symbol, &alias);
            if (real) {
                targets->push_back(Target{symbol, hook, real, alias, lookup_only, allocator});
            }
            return real;
        };
        for (size_t i = 0; i < n; ++i) {
            *ip[i].real = add(ip[i].symbol, ip[i].hook, false, true);
        }
        g_real_dlopen = add("dlopen", reinterpret_cast<void*>(ml_dlopen), false, false);
        g_real_dlclose = add("dlclose", reinterpret_cast<void*>(ml_dlclose), false, false);
        g_real_dlsym = add("dlsym", reinterpret_cast<void*>(ml_dlsym), true, false);
        bool allocator_found = true;  // a block from one allocator must not reach another's free
        for (size_t i = 0; i < n; ++i) {
            for (const char* core : {"malloc", "calloc", "realloc", "free"}) {
                allocator_found &= std::strcmp(ip[i].symbol, core) != 0 || *ip[i].real != nullptr;
            }
        }
        if (!g_real_dlopen || !g_real_dlclose || !g_real_dlsym || !allocator_found) {
            g_problem = "the C allocator's or the dynamic loader's functions were not found";
            delete targets;
            for (size_t i = 0; i < n; ++i) {
                *ip[i].real = nullptr;
            }
            return false;
        }
        g_targets = targets;
        for (const Target& t : *g_targets) {
            g_first_letter[static_cast<unsigned char>(t.symbol[0])] = true;
        }
    }
    g_patches = new std::vector<Patch>();
    g_done = new std::vector<uintptr_t>();
    g_installed = true;
    patch_all();
    return true;
#endif
}

void uninstall() {
#ifndef MEMLENS_NO_NATIVE
    std::lock_guard<std::mutex> lk(*g_mutex);
    if (!g_installed) {
        return;
    }
    PauseScope pause;
    g_installed = false;
    dl_iterate_phdr(restore_loaded, nullptr);
    delete g_patches;
    delete g_done;
    g_patches = nullptr;
    g_done = nullptr;
#endif
}

bool installed() { return g_installed; }

const char* problem() {
#ifdef MEMLENS_NO_NATIVE
    return "native memory is traced on Linux (x86-64 and AArch64) only";
#else
    return g_problem;
#endif
}

}  // namespace memlens::native
