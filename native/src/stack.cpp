#include "compat.hpp"  // first: Py_BUILD_CORE before Python.h (3.12 internal headers)
#include "stack.hpp"

#include <pthread.h>
#if defined(__linux__) && defined(__x86_64__)
#include <link.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "calltree.hpp"
#include "codes.hpp"
#include "compat.hpp"
#include "stack_cache.hpp"

namespace memlens {

namespace stack {
namespace {

// A frame that stayed in place over this many walks of its thread gets its code watched.
constexpr uint64_t kWatchAfter = 16;
// How often (in stack lookups of its thread) update_trust() looks for levels to watch.
constexpr uint64_t kWatchLook = 4;

// Whether a frame is at the same place as a cached level. From 3.11 on the instruction
// position is a pointer into the code object itself, so it names the code too (a code object
// that died and whose memory was reused is handled by the death counter).
inline bool same_place(const Level& lv, Frame* f) {
    if (lv.pos != compat::frame_pos(f)) {
        return false;
    }
    return compat::kLineTable >= 311 || lv.code == compat::frame_code(f);
}

pthread_key_t g_key;
pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

// The interpreter's current thread state is a thread-local variable of libpython (or of the
// executable, when it is linked in), not exported: reading it through the interpreter's
// accessor costs a call and the dynamic loader's __tls_get_addr per allocation (~20
// instructions, ~9% of exact mode's cost 60 frames deep on 3.12). find_thread_state() finds
// the variable in that module's thread-local block once (the one word holding the calling
// thread's state that PyEval_SaveThread clears); a thread's own instance is then found once,
// when its stack cache is made (__tls_get_addr with the module and the offset, as compiled
// code does), and read with one load. x86-64 Linux (glibc) only; elsewhere the accessor.
#if defined(__linux__) && defined(__x86_64__)
#define MEMLENS_TSTATE_SLOT 1
struct TlsIndex {
    unsigned long module;
    unsigned long offset;
};
extern "C" void* __tls_get_addr(TlsIndex*);
TlsIndex g_tstate_index{0, 0};  // module 0: not found
#endif

PyThreadState** thread_state_slot() {
#ifdef MEMLENS_TSTATE_SLOT
    if (g_tstate_index.module == 0) {
        return nullptr;
    }
    auto** slot = static_cast<PyThreadState**>(__tls_get_addr(&g_tstate_index));
    // Both read the same variable: a mismatch means it was not that one (never seen).
    return slot && *slot == compat::unchecked_tstate() ? slot : nullptr;
#else
    return nullptr;
#endif
}

void destroy_stack(void* p) {
    auto* s = static_cast<ThreadStack*>(p);
    if (t_state.stack == s) {
        t_state.stack = nullptr;  // a hook running later in this thread's exit makes a new one
    }
    std::free(s->levels);
    std::free(s->scratch);
    std::free(s);
}
void make_key() { pthread_key_create(&g_key, destroy_stack); }

ThreadStack* new_stack(ThreadState& t) {
    pthread_once(&g_key_once, make_key);
    auto* s = static_cast<ThreadStack*>(std::calloc(1, sizeof(ThreadStack)));
    if (!s) {
        return nullptr;
    }
    s->cap = s->scratch_cap = 128;
    s->levels = static_cast<Level*>(std::calloc(size_t(s->cap), sizeof(Level)));
    s->scratch = static_cast<Frame**>(std::calloc(size_t(s->scratch_cap), sizeof(Frame*)));
    if (!s->levels || !s->scratch) {
        destroy_stack(s);
        return nullptr;
    }
    s->tstate = thread_state_slot();
    t.tstate_slot = s->tstate;
    t.stack = s;
    pthread_setspecific(g_key, s);
    return s;
}

template <typename T>
bool grow(T*& array, int& cap, int need) {
    int n = cap;
    while (n < need) {
        n *= 2;
    }
    auto* bigger = static_cast<T*>(std::realloc(array, size_t(n) * sizeof(T)));
    if (!bigger) {
        return false;
    }
    std::memset(static_cast<void*>(bigger + cap), 0, size_t(n - cap) * sizeof(T));
    array = bigger;
    cap = n;
    return true;
}

// ---------------------------------------------------------------------------------------
// Frame-exit monitoring (3.12+).

constexpr uint8_t kWatched = 1;
constexpr uint8_t kRequested = 2;
// Its exits cost more than trusting its frames saves: not watched again in this run.
constexpr uint8_t kDropped = 4;

// A watched exit costs about as much as reading this many frames (CPython's instrumentation
// calling on_frame_exit: ~265 instructions on 3.12; a frame of a walk, ~8).
constexpr uint64_t kExitCost = 32;
// Exits of a thread between two looks at their cost.
constexpr uint32_t kExitWindow = 4096;

bool g_monitoring = false;
int g_tool = -1;
// Bumps when monitoring stopped while the run goes on (our tool moved to another id): frame
// exits were not reported meanwhile, so no thread's levels are trusted any more.
uint64_t g_trust_epoch = 0;
PyObject* g_set_local_events = nullptr;  // sys.monitoring.set_local_events
long g_exit_events = 0;                  // PY_RETURN | PY_YIELD
std::vector<uint32_t>* g_requests = nullptr;  // code ids to watch, under g_intern_lock
std::vector<uint32_t>* g_drops = nullptr;     // code ids to stop watching, under g_intern_lock
bool g_pending = false;  // a pending call is scheduled (under g_intern_lock)

// Non-zero for a code object watched, asked for or dropped (not to be asked for).
inline uint8_t watch_state(uint32_t code) {
    uint8_t* f = codes::flags(code);
    return f ? uint8_t(__atomic_load_n(f, __ATOMIC_ACQUIRE) & (kWatched | kRequested | kDropped)) : kRequested;
}
inline bool watched(uint32_t code) { return watch_state(code) & kWatched; }

int apply_requests(void*);

// Every thread's trusted levels are taken back (each extends them again, over the codes still
// watched, at its next stack read), and every stack fast path closed: for when some exits
// went, or will go, unreported.
void untrust_all() {
    __atomic_fetch_add(&g_trust_epoch, 1, __ATOMIC_RELEASE);
    stacks_stale();
}

// Sets our local events on a live code object (`events`: g_exit_events, or 0 for none).
// Returns whether sys.monitoring took them.
bool set_exit_events(PyCodeObject* co, long events) {
    PyObject* r = PyObject_CallFunction(g_set_local_events, "iOl", g_tool, reinterpret_cast<PyObject*>(co), events);
    Py_XDECREF(r);
    if (!r) {
        PyErr_Clear();
    }
    return r != nullptr;
}

// Schedules apply_requests() unless it is scheduled already. Not under g_intern_lock: from 3.13
// Py_AddPendingCall takes a mutex that, when contended, waits with the GIL released, and a
// thread holding the spinlock while it waits for the GIL again would stall every other one.
// While above 0 (ScheduleHold, with the GIL), the pending call is not asked for: owed instead.
int g_schedule_held = 0;
bool g_schedule_owed = false;

void schedule_requests() {
    if (g_schedule_held > 0) {
        g_schedule_owed = true;
        return;
    }
    {
        Guard g(g_intern_lock);
        if (g_pending) {
            return;
        }
        g_pending = true;
    }
    if (Py_AddPendingCall(apply_requests, nullptr) != 0) {
        Guard g(g_intern_lock);
        g_pending = false;  // (the queue was full: the next request tries again)
    }
}

// Asks for `code` to be watched (the pending call does it outside the hooks).
void request_watch(uint32_t code) {
    {
        Guard g(g_intern_lock);
        uint8_t* f = codes::flags(code);
        if (!f || (*f & (kWatched | kRequested | kDropped)) || !g_requests) {
            return;
        }
        __atomic_fetch_or(f, kRequested, __ATOMIC_RELEASE);
        g_requests->push_back(code);  // libc memory: never the hooked allocators
    }
    schedule_requests();
}

// Asks for a watched `code` to be watched no more, for the rest of the run (the pending call).
void request_drop(uint32_t code) {
    {
        Guard g(g_intern_lock);
        uint8_t* f = codes::flags(code);
        if (!f || !(*f & kWatched) || (*f & kDropped) || !g_drops) {
            return;
        }
        __atomic_fetch_or(f, kDropped, __ATOMIC_RELEASE);
        g_drops->push_back(code);
    }
    schedule_requests();
}

// A pending call (main thread, GIL held, between bytecodes): sets local PY_RETURN and PY_YIELD
// events on the requested code objects that are still alive, and clears them on the dropped
// ones.
int apply_requests(void*) {
    std::vector<uint32_t> todo, drops;
    {
        Guard g(g_intern_lock);
        g_pending = false;
        if (!g_monitoring || !g_requests || !g_drops) {
            return 0;
        }
        todo.swap(*g_requests);
        drops.swap(*g_drops);
    }
    PauseScope pause;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (!drops.empty()) {
        // No level of a dropped code may stay trusted once its exits go unreported: every
        // thread's trust is taken back first (no other thread runs meanwhile: the GIL), and
        // extended again only over codes still watched.
        for (uint32_t code : drops) {
            __atomic_fetch_and(codes::flags(code), uint8_t(~(kWatched | kRequested)), __ATOMIC_RELEASE);
        }
        g_run.exit_watches_dropped += drops.size();
        untrust_all();
        for (uint32_t code : drops) {
            PyCodeObject* co = codes::live_code(code);
            if (co && g_monitoring) {
                set_exit_events(co, 0);
            }
        }
    }
    for (uint32_t code : todo) {
        PyCodeObject* co = codes::live_code(code);
        if (!co || !g_monitoring) {
            continue;
        }
        if (set_exit_events(co, g_exit_events)) {
            __atomic_fetch_or(codes::flags(code), uint8_t(kWatched | kRequested), __ATOMIC_RELEASE);
        }
    }
    PyErr_Restore(type, value, tb);
    return 0;
}

// Every kExitWindow exits of a thread: whether watching `code` (the one exiting now, the
// likeliest to exit often) costs more than trusting its levels saves. What trust saved in the
// window is shared out by the trusted levels, of which those from the one below the code's
// lowest level up are the ones its watch makes trusted; when its exits cost more than that share, it is
// dropped (a recursive descent whose frames come and go with an allocation or two each: there
// the walk reads the few frames above the other trusted levels for less than the exits cost).
__attribute__((noinline)) void weigh_exits(ThreadStack* s, PyObject* code) {
    uint64_t exits = s->window_exits, saved = s->window_saved;
    s->window_exits = 0;
    s->window_saved = 0;
    int lowest = -1;
    for (int i = 0; i < s->len; ++i) {
        if (reinterpret_cast<PyObject*>(s->levels[i].code) == code) {
            lowest = i;
            break;
        }
    }
    // Trusting levels [0, t) needs the exits of levels 0 to t watched: the code's watch is what
    // trusts levels from the one below its lowest (or level 0) up.
    if (lowest < 0 || lowest > s->trusted || s->trusted == 0 || !watched(s->levels[lowest].code_id)) {
        return;  // not a watched code that this stack's trust rests on: nothing to weigh
    }
    int from = lowest > 0 ? lowest - 1 : 0;
    uint64_t share = saved / uint64_t(s->trusted) * uint64_t(s->trusted - from);
    if (exits * kExitCost > share) {
        // (The list may grow: libc memory, which the native hooks must not trace here, under
        // the lock that a traced allocation would take again.)
        InHook hook(t_state, t_state.in_hook);
        request_drop(s->levels[lowest].code_id);
    }
}

// sys.monitoring callback for PY_RETURN, PY_YIELD and PY_UNWIND: the current frame is leaving
// the stack. If it is the watched frame just above the trusted levels, the level below it is
// about to resume: it is no longer trusted. (args[0]: the code object.)
PyObject* on_frame_exit(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    ThreadStack* s = t_state.stack;
    if (!s || s->generation != g_run.generation) {
        Py_RETURN_NONE;
    }
    s->window_saved += (s->walks - s->walks_at_exit) * uint64_t(s->trusted);
    s->walks_at_exit = s->walks;
    if (++s->window_exits >= kExitWindow && nargs > 0) {
        weigh_exits(s, args[0]);
    }
    if (s->trusted > 0) {
        PyThreadState* ts = s->tstate ? *s->tstate : compat::unchecked_tstate();
        Frame* f = ts ? compat::current_frame(ts) : nullptr;
        if (f && f == s->levels[s->trusted].frame) {
            --s->trusted;
            s->hot_epoch = 0;
        }
    }
    Py_RETURN_NONE;
}
PyMethodDef g_exit_def = {"memlens_frame_exit", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(on_frame_exit)),
                          METH_FASTCALL, nullptr};

// After a walk of `depth` levels (levels below `from` were trusted before it): extends the
// trusted levels over watched code objects and asks for watches on frames that stay in place.
void update_trust(ThreadStack* s, int from, int depth) {
    // Trusting t levels (keeping levels [0, t) unchanged) needs the exits of levels 0..t
    // watched: the exit of level t makes level t - 1 resume, and so on down.
    int t = s->trusted < depth ? s->trusted : depth - 1;
    if (t <= 0) {
        t = depth > 0 && watched(s->levels[0].code_id) ? 0 : -1;
    }
    while (t >= 0 && t + 1 < depth && watched(s->levels[t + 1].code_id)) {
        ++t;
    }
    s->trusted = t > 0 ? t : 0;
    // Levels in place long enough get their code watched. A level whose code is watched,
    // asked for or dropped already is looked at again only kWatchAfter walks later (a
    // recursive descent, whose watch was dropped, had each of its levels' codes looked up at
    // every allocation). The levels are looked at once in kWatchLook of the thread's stack
    // lookups at most (`walks` counts them all; a watch is asked for a few lookups late): a
    // stack whose top changes at every allocation is walked as often as it allocates, and the
    // look cost as much as the rest of walk_near().
    if (s->walks < s->watch_look) {
        return;
    }
    s->watch_look = s->walks + kWatchLook;
    for (int i = from; i < depth; ++i) {
        Level& lv = s->levels[i];
        if (s->walks - lv.since >= kWatchAfter) {
            if (watch_state(lv.code_id) == 0) {
                request_watch(lv.code_id);
            } else {
                lv.since = s->walks;
            }
        }
    }
}

// sys.monitoring's own attributes, as they were when the first run started: memlens.tracing
// wraps some of them while tracing (the program may claim our tool id), and the tracer's own
// calls must not go through those wrappers (nor show up in the program's events).
PyObject* g_real_monitoring = nullptr;  // a dict, kept for the process's life

PyObject* monitoring_attr(const char* name) {
    if (!g_real_monitoring) {
        PyObject* sys = PyImport_ImportModule("sys");
        PyObject* mon = sys ? PyObject_GetAttrString(sys, "monitoring") : nullptr;
        Py_XDECREF(sys);
        PyObject* dict = PyDict_New();
        bool ok = mon && dict;
        for (const char* n : {"get_tool", "use_tool_id", "free_tool_id", "register_callback", "set_events",
                              "events", "set_local_events"}) {
            PyObject* v = ok ? PyObject_GetAttrString(mon, n) : nullptr;
            ok = v && PyDict_SetItemString(dict, n, v) == 0;
            Py_XDECREF(v);
        }
        Py_XDECREF(mon);
        if (!ok) {
            Py_XDECREF(dict);
            return nullptr;
        }
        g_real_monitoring = dict;
    }
    PyObject* attr = PyDict_GetItemString(g_real_monitoring, name);  // borrowed
    Py_XINCREF(attr);
    return attr;
}

long event_bit(PyObject* events, const char* name) {
    PyObject* v = PyObject_GetAttrString(events, name);
    long bit = v ? PyLong_AsLong(v) : -1;
    Py_XDECREF(v);
    return bit;
}

}  // namespace

namespace {

// Claims a free sys.monitoring tool id other than `avoid` and sets up our callbacks on it.
bool claim_tool(int avoid) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    bool ok = false;
    PyObject* get_tool = monitoring_attr("get_tool");
    PyObject* use_tool_id = monitoring_attr("use_tool_id");
    PyObject* register_callback = monitoring_attr("register_callback");
    PyObject* set_events = monitoring_attr("set_events");
    PyObject* events = monitoring_attr("events");
    PyObject* set_local = monitoring_attr("set_local_events");
    PyObject* cb = PyCFunction_New(&g_exit_def, nullptr);
    if (get_tool && use_tool_id && register_callback && set_events && events && set_local && cb) {
        long ret = event_bit(events, "PY_RETURN"), yld = event_bit(events, "PY_YIELD"),
             unwind = event_bit(events, "PY_UNWIND");
        // 0-2 and 5 are conventionally the debugger's, coverage's, profilers', optimizers': taken
        // last. Whichever we hold, a program that asks for it gets it (memlens.tracing.tracer
        // moves us to another one first: move_monitoring).
        for (int tool : {4, 3, 5, 2, 1, 0}) {
            if (tool == avoid) {
                continue;
            }
            PyObject* owner = PyObject_CallFunction(get_tool, "i", tool);
            bool free_id = owner == Py_None;
            Py_XDECREF(owner);
            if (!free_id) {
                PyErr_Clear();
                continue;
            }
            PyObject* r = PyObject_CallFunction(use_tool_id, "is", tool, "memlens");
            if (!r) {
                PyErr_Clear();
                continue;
            }
            Py_DECREF(r);
            g_tool = tool;
            bool registered = true;
            for (long ev : {ret, yld, unwind}) {
                r = PyObject_CallFunction(register_callback, "ilO", tool, ev, cb);
                registered = registered && r != nullptr;
                Py_XDECREF(r);
            }
            r = registered ? PyObject_CallFunction(set_events, "il", tool, unwind) : nullptr;
            ok = r != nullptr;
            Py_XDECREF(r);
            break;
        }
        g_exit_events = ret | yld;
    }
    if (ok) {
        g_set_local_events = set_local;
        set_local = nullptr;
        g_requests = new std::vector<uint32_t>();
        g_drops = new std::vector<uint32_t>();
        g_monitoring = true;
        stacks_stale();
    }
    Py_XDECREF(get_tool);
    Py_XDECREF(use_tool_id);
    Py_XDECREF(register_callback);
    Py_XDECREF(set_events);
    Py_XDECREF(events);
    Py_XDECREF(set_local);
    Py_XDECREF(cb);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    if (!ok && g_tool >= 0) {
        stop_monitoring();
    }
    return ok;
}

}  // namespace

#ifdef MEMLENS_TSTATE_SLOT
namespace {
// The module whose code holds `fn`: its TLS module id and the calling thread's block.
struct TlsOwner {
    uintptr_t fn;
    size_t module = 0;
    uintptr_t block = 0;
    size_t size = 0;
};
int find_tls_owner(dl_phdr_info* info, size_t size, void* data) {
    auto* o = static_cast<TlsOwner*>(data);
    if (size < offsetof(dl_phdr_info, dlpi_tls_data) + sizeof(info->dlpi_tls_data)) {
        return 1;  // an old C library: no thread-local block to read
    }
    bool holds = false;
    size_t tls_size = 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && o->fn >= start && o->fn < start + ph.p_memsz) {
            holds = true;
        } else if (ph.p_type == PT_TLS) {
            tls_size = ph.p_memsz;
        }
    }
    if (!holds) {
        return 0;
    }
    o->module = info->dlpi_tls_modid;
    o->block = reinterpret_cast<uintptr_t>(info->dlpi_tls_data);
    o->size = tls_size;
    return 1;
}
}  // namespace
#endif

void find_thread_state() {
#ifdef MEMLENS_TSTATE_SLOT
    if (g_tstate_index.module != 0) {
        return;
    }
    PyThreadState* ts = compat::unchecked_tstate();
    TlsOwner owner{reinterpret_cast<uintptr_t>(&PyEval_SaveThread)};
    dl_iterate_phdr(find_tls_owner, &owner);
    if (!ts || owner.module == 0 || owner.block == 0 || owner.size < sizeof(void*) || owner.size > 4096) {
        return;
    }
    auto* words = reinterpret_cast<PyThreadState* volatile*>(owner.block);
    size_t n = owner.size / sizeof(void*), candidates[8], count = 0;
    for (size_t i = 0; i < n; ++i) {
        if (words[i] == ts && count < 8) {
            candidates[count++] = i;
        }
    }
    if (count == 0) {
        return;
    }
    // The current-state variable is cleared while the thread does not hold the GIL; another
    // word holding the same pointer (the GIL-state's own, on some versions) is not.
    PyThreadState* saved = PyEval_SaveThread();
    size_t cleared = 0, found = 0;
    for (size_t k = 0; k < count; ++k) {
        if (words[candidates[k]] == nullptr) {
            ++cleared;
            found = candidates[k];
        }
    }
    PyEval_RestoreThread(saved);
    if (cleared == 1 && words[found] == ts) {
        g_tstate_index = TlsIndex{owner.module, found * sizeof(void*)};
        if (__tls_get_addr(&g_tstate_index) != &words[found]) {
            g_tstate_index = TlsIndex{0, 0};  // the loader disagrees: leave it alone
        }
    }
#endif
}

bool reads_thread_state() { return t_state.stack != nullptr && t_state.stack->tstate != nullptr; }

bool start_monitoring() {
    if constexpr (!compat::kMonitoring) {
        return false;
    }
    if (!g_run.opts.watch_exits) {
        return false;
    }
    stop_monitoring();
    return claim_tool(-1);
}

int monitoring_tool() { return g_monitoring ? g_tool : -1; }

int move_monitoring(int avoid) {
    if constexpr (!compat::kMonitoring) {
        return -1;
    }
    if (!g_monitoring) {
        return -1;
    }
    PauseScope pause;  // the calls below allocate: memlens's work, not the program's
    untrust_all();
    stop_monitoring();
    return avoid == kNoTool ? -1 : (claim_tool(avoid) ? g_tool : -1);
}

void stop_monitoring() {
    if constexpr (!compat::kMonitoring) {
        return;
    }
    if (g_tool < 0) {
        return;
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    std::vector<uint32_t>* requests = nullptr;
    std::vector<uint32_t>* drops = nullptr;
    {
        Guard g(g_intern_lock);
        g_monitoring = false;
        stacks_stale();
        requests = g_requests;
        g_requests = nullptr;
        drops = g_drops;
        g_drops = nullptr;
    }
    delete requests;
    delete drops;
    if (g_set_local_events) {
        for (uint32_t code = 0; uint8_t* f = codes::flags(code); ++code) {
            PyCodeObject* co = (*f & kWatched) ? codes::live_code(code) : nullptr;
            if (co) {
                set_exit_events(co, 0);
            }
            *f = uint8_t(*f & ~(kWatched | kRequested));  // (kDropped holds for the run)
        }
    }
    PyObject* set_events = monitoring_attr("set_events");
    PyObject* register_callback = monitoring_attr("register_callback");
    PyObject* events = monitoring_attr("events");
    PyObject* free_tool_id = monitoring_attr("free_tool_id");
    if (set_events) {
        Py_XDECREF(PyObject_CallFunction(set_events, "ii", g_tool, 0));
    }
    if (register_callback && events) {
        for (const char* name : {"PY_RETURN", "PY_YIELD", "PY_UNWIND"}) {
            Py_XDECREF(PyObject_CallFunction(register_callback, "ilO", g_tool, event_bit(events, name), Py_None));
        }
    }
    if (free_tool_id) {
        Py_XDECREF(PyObject_CallFunction(free_tool_id, "i", g_tool));
    }
    Py_XDECREF(set_events);
    Py_XDECREF(register_callback);
    Py_XDECREF(events);
    Py_XDECREF(free_tool_id);
    Py_CLEAR(g_set_local_events);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    g_tool = -1;
}

bool monitoring() { return g_monitoring; }

namespace {

// A level found unchanged (at its place) in frame `fr`: the frame is kept, which the checks of
// later allocations compare (a new one restarts the level's count towards a watch).
inline void keep_frame(ThreadStack* s, Level& lv, Frame* fr) {
    if (lv.frame != fr) {
        lv.frame = fr;
        lv.since = s->walks;
    }
}

// The first of re-interning a level's two passes (walk(), walk_near()): level `lv` for frame
// `fr`, running `co`, gets its code id (kept when `known`: the level's cached code is `co`
// and still named; without the GIL an unknown code gets none) and its transparency, and,
// unless transparent, its path tag (`tag` extended with it, which needs no node), queued in
// s->tags so that the index slots and nodes of all the levels are fetched at once. Returns
// the code id, codes::kNone for a code object that cannot be named (the levels stop below it).
inline uint32_t tag_level(ThreadStack* s, Level& lv, bool known, Frame* fr, PyCodeObject* co, bool gil, bool may_allocate,
                          uint32_t& tag, int& warming) {
    uint32_t code = known ? lv.code_id
                    : gil ? codes::id_of(co, may_allocate, compat::frame_globals(fr))
                          : codes::kNone;
    if (code == codes::kNone) {
        return code;
    }
    // A transparent frame (see codes::kTransparent) shares its caller's node. (A code's flag
    // never changes: a level whose code id is kept keeps it too.)
    if (!known) {
        lv.transparent = codes::transparent(code);
    }
    lv.code_id = code;  // (lv.code, compared by the caller, is set by place_level())
    if (!lv.transparent) {
        int off = compat::frame_offset(fr, co);
        tag = calltree::child_tag(tag, code, off < 0 ? 0 : off);
        lv.tag = tag;
        s->tags[warming++] = tag;
        if (warming == ThreadStack::kWarmed) {
            calltree::warm(s->tags, warming);
            warming = 0;
        }
    }
    return code;
}

// The second pass: level `lv` (`was_level`: it was within the stack's depth) gets frame `fr`,
// running `co`, and its node under `parent`, which is returned. (Interning fails only out of
// memory or ids, or once the tree is frozen, answering the root: `interned` turns false, and
// the levels after it go under the root, whose tag intern() finds itself.)
inline uint32_t place_level(ThreadStack* s, Level& lv, bool was_level, Frame* fr, PyCodeObject* co, uint32_t parent,
                            bool& interned) {
    uint32_t node = parent;
    if (!lv.transparent) {
        int off = compat::frame_offset(fr, co);
        off = off < 0 ? 0 : off;
        node = interned ? calltree::intern_tagged(parent, lv.tag, lv.code_id, off) : calltree::intern(parent, lv.code_id, off);
        interned = interned && node != kRootNode;
    }
    if (!was_level || lv.frame != fr || lv.code != co) {
        lv.since = s->walks;
    }
    lv.frame = fr;
    lv.code = co;
    lv.pos = compat::frame_pos(fr);
    lv.node = node;
    return node;
}

// The node of the current stack by reading the frames above the trusted levels (all of them
// on 3.10 and 3.11), re-interning the levels that changed.
__attribute__((noinline)) uint32_t walk(ThreadStack* s, PyThreadState* ts, bool gil, bool may_allocate) {
    const bool watching = compat::kMonitoring && g_monitoring && gil;
    int base = watching ? s->trusted : 0;
    Frame* stop = base ? s->levels[base - 1].frame : nullptr;
    int n = 0;
    bool innermost = true;
    // Without trusted levels (3.10, 3.11) the whole stack is read on every allocation: the
    // frames are compared with the cached levels in the same pass, assuming the depth did not
    // change (the usual case), so each frame costs a couple of loads.
    const int len = s->len;
    int differs = INT32_MAX;  // lowest level found to differ, when the depth is `len`
    Frame* f = compat::current_frame(ts);
    for (; f && f != stop; f = compat::frame_prev(f)) {
        if (compat::frame_shim(f)) {
            continue;
        }
        if (innermost) {
            innermost = false;
            if (compat::frame_incomplete(f)) {
                continue;
            }
            if (watching && compat::frame_at_resume(f)) {
                return kNotTheProgram;
            }
        }
        if (!compat::frame_code(f)) {
            continue;
        }
        if (n == s->scratch_cap && !grow(s->scratch, s->scratch_cap, n + 1)) {
            break;  // out of memory: the outermost frames are lost
        }
        s->scratch[n] = f;
        if constexpr (!compat::kMonitoring) {
            int level = len - 1 - n;
            if (level >= 0 && !same_place(s->levels[level], f)) {
                differs = level;  // levels are met from the top: the last one set is the lowest
            }
        }
        ++n;
    }
    if (stop && (!f || compat::frame_code(f) != s->levels[base - 1].code ||
                 compat::frame_pos(f) != s->levels[base - 1].pos)) {
        // The last trusted frame is not on this stack (its frames were switched wholesale, as
        // greenlets do) or it moved on (an exit we were not told of, e.g. an exception that C
        // code caught): read the whole stack.
        s->trusted = 0;
        return walk(s, ts, gil, may_allocate);
    }
    int depth = base + n;
    if (gil) {
        ++g_run.stack_reads;
        g_run.frames_read += uint64_t(n);
    }
    if (depth > s->cap && !grow(s->levels, s->cap, depth)) {
        return kRootNode;
    }
    // The levels that are unchanged, from the root side.
    int k = base;
    if (!compat::kMonitoring && depth == len) {
        k = differs == INT32_MAX ? depth : differs;
        // The levels at their places may be in other frames now (another generator's, another
        // task's): their frames are kept, which callers_unchanged() compares.
        for (int i = 0; i < k; ++i) {
            Frame* fr = s->scratch[depth - 1 - i];
            Level& lv = s->levels[i];
            keep_frame(s, lv, fr);
        }
    } else {
        int same = depth < len ? depth : len;
        while (k < same) {
            Frame* fr = s->scratch[depth - 1 - k];
            Level& lv = s->levels[k];
            if (!same_place(lv, fr)) {
                break;
            }
            keep_frame(s, lv, fr);
            ++k;
        }
    }
    if (k < depth || len != depth) {
        uint32_t parent = k ? s->levels[k - 1].node : kRootNode;
        // First every changed level's code id and path tag, which need no node (each tag is
        // its parent's mixed with the level's code and offset), so that the index slots and
        // nodes of all of them are fetched at once (calltree::warm); then the levels are
        // interned one after the other, each under its parent's node, from cache.
        uint32_t tag = k < depth ? calltree::tag_of(parent) : 0;  // (none to intern: a shorter stack)
        int warming = 0;
        const int frames = depth;  // (scratch holds them innermost first; depth may drop below)
        for (int i = k; i < depth; ++i) {
            Frame* fr = s->scratch[frames - 1 - i];
            PyCodeObject* co = compat::frame_code(fr);
            Level& lv = s->levels[i];
            const bool known = i < s->code_known && lv.code == co;
            if (tag_level(s, lv, known, fr, co, gil, may_allocate, tag, warming) == codes::kNone) {
                depth = i;  // a code object we cannot name: charge its caller
                break;
            }
        }
        if (warming > 1) {
            calltree::warm(s->tags, warming);
        }
        bool interned = true;  // every level so far got its node (tags computed above hold)
        for (int i = k; i < depth; ++i) {
            Frame* fr = s->scratch[frames - 1 - i];
            parent = place_level(s, s->levels[i], i < len, fr, compat::frame_code(fr), parent, interned);
        }
        s->len = depth;
        if (s->code_known < depth) {
            s->code_known = depth;
        }
        if (s->trusted >= depth) {
            s->trusted = depth > 0 ? depth - 1 : 0;
        }
    }
    if (watching) {
        update_trust(s, base, depth);
    }
    return depth ? s->levels[depth - 1].node : kRootNode;
}

// at_leaf_position() where the leaf cache does not know the place: interned, and cached.
__attribute__((noinline)) uint32_t leaf_interned(ThreadStack* s, Level& leaf, Frame* f, uintptr_t pos, uint32_t parent) {
    int off = compat::frame_offset(f, leaf.code);
    uint32_t node = calltree::intern(parent, leaf.code_id, off < 0 ? 0 : off);
    if (node != kRootNode) {
        s->leaf_cache.entries[LeafCache::slot(pos)] = LeafCache::Entry{pos, leaf.code_id, parent, node};
    }
    leaf.pos = pos;
    leaf.node = node;
    return node;
}

// The innermost level's node at its frame's position now, the frame and every level below it
// being known unchanged: the cached node, or the thread's leaf cache's for that position,
// without reading other frames.
inline uint32_t at_leaf_position(ThreadStack* s, Level& leaf, Frame* f) {
    uintptr_t pos = compat::frame_pos(f);
    if (pos == leaf.pos) {
        return leaf.node;
    }
    if (compat::frame_at_resume(f)) {
        return kNotTheProgram;  // (see walk)
    }
    uint32_t parent = s->len >= 2 ? s->levels[s->len - 2].node : kRootNode;
    uint32_t node = parent;
    if (!leaf.transparent) {
        const LeafCache::Entry& e = s->leaf_cache.entries[LeafCache::slot(pos)];
        if (!leaf_entry_matches(e, pos, parent, leaf.code_id)) {
            return leaf_interned(s, leaf, f, pos, parent);  // (a tail call: the cached
        }                                                   // places cost no call)
        node = e.node;
    }
    leaf.pos = pos;
    leaf.node = node;
    return node;
}

// Without frame-exit events (3.10, 3.11): whether the frames from `f` (the innermost frame's
// caller) to the root are the cached levels' frames below the innermost one, at their places,
// one frame per level, as walk() would find them. Each level's frame is compared with what its
// caller's frame says came before it: the address of every load is in the cache, so the loads
// do not wait for each other, as a walk down `f`'s chain would (each frame's address read from
// the last: 60 frames deep, that chain was the cost). A frame is read only once its caller's
// check found it in the chain (alive); what the processor reads ahead meanwhile faults nowhere.
// Any difference (a call, a return, a moved caller, a skipped frame) leaves it to walk().
inline bool callers_unchanged(const ThreadStack* s, Frame* f) {
    const Level* lv = s->levels;
    int i = s->len - 2;
    if (i < 0) {
        return f == nullptr;
    }
    if (lv[i].frame != f) {
        return false;
    }
    // Level i's frame is at its place, called by level i - 1's.
    auto in_place = [&](int i) {
        Frame* fr = lv[i].frame;
        return same_place(lv[i], fr) && compat::frame_prev(fr) == lv[i - 1].frame;
    };
    for (; i >= 2; i -= 2) {  // two frames a turn: half the loop's own tests
        if (!in_place(i) || !in_place(i - 1)) {
            return false;
        }
    }
    if (i == 1 && !in_place(1)) {
        return false;
    }
    return same_place(lv[0], lv[0].frame) && compat::frame_prev(lv[0].frame) == nullptr;
}

// 3.12+: whether every level but the innermost is trusted and the innermost frame `f` is the
// cached one, with its caller: then only its position can have moved.
inline bool only_position_moved(const ThreadStack* s, Frame* f, bool gil) {
    return g_monitoring && gil && s->len > 0 && s->trusted == s->len - 1 && f && f == s->levels[s->len - 1].frame &&
           (s->len == 1 || compat::frame_prev(f) == s->levels[s->len - 2].frame);
}

// After a full look at the stack (levels brought up to date for g_stack_epoch `epoch`, read
// before them): the fast path's facts, if only_position_moved() can hold from now on.
void keep_hot(ThreadStack* s, uint64_t epoch) {
    if (g_monitoring && s->tstate && s->len > 0 && s->trusted == s->len - 1) {
        s->hot_leaf = &s->levels[s->len - 1];
        s->hot_frame = s->hot_leaf->frame;
        s->hot_caller = s->len >= 2 ? s->levels[s->len - 2].frame : kAnyCaller;
        s->hot_parent = s->len >= 2 ? s->levels[s->len - 2].node : kRootNode;
        s->hot_epoch = epoch;
    } else {
        s->hot_epoch = 0;
    }
}

// walk(), then keep_hot().
__attribute__((noinline)) uint32_t walk_kept(ThreadStack* s, PyThreadState* ts, bool gil, bool may_allocate,
                                             uint64_t epoch) {
    uint32_t node = walk(s, ts, gil, may_allocate);
    keep_hot(s, epoch);
    return node;
}

// How many cached levels below the innermost one walk_near() looks through for a caller, and
// how many frames it takes above the one found.
constexpr int kNearLevels = 32;
constexpr int kNearFrames = 32;

// The frame below `fr` in its chain that walk() would make the next level (entry frames and
// frames without code are skipped), or nullptr. `fr` must be alive: in the current chain.
inline Frame* caller_frame(Frame* fr) {
    Frame* p = compat::frame_prev(fr);
    while (p && (compat::frame_shim(p) || !compat::frame_code(p))) {
        p = compat::frame_prev(p);
    }
    return p;
}

// Whether the caller of `fr` (alive) is `expected`, as walk() would find it: one compare when
// they are adjacent, the usual case.
inline bool called_from(Frame* fr, Frame* expected) {
    return compat::frame_prev(fr) == expected || caller_frame(fr) == expected;
}

// The level among [lowest, s->len) whose frame is `fr`, from the innermost; or lowest - 1.
inline int level_of(const ThreadStack* s, Frame* fr, int lowest) {
    int c = s->len - 1;
    while (c >= lowest && s->levels[c].frame != fr) {
        --c;
    }
    return c;
}

// walk() where the stack changed near its top only: the current frame `f`, or a caller of it
// a few frames down, was called by the frame of one of the cached levels near the innermost
// one (level c: after calls, a return, or a return and calls), and every level below it is in
// place. Those levels are checked with one compare each against the cached addresses (as
// callers_unchanged() does), instead of reading the chain down to the trusted levels and
// comparing afterwards; only level c (at its position now) and the frames above it get their
// nodes. Anything else is left to walk(): false. Otherwise sets `*out` and returns true.
//
// A level's frame is read only once it was found in the chain (alive): level c's is the
// caller of the lowest new frame, and each level's frame is found as the caller of the one
// above it. The trusted levels (3.12+, watching exits) are not read, but the highest of them
// must be in place and the caller of the lowest checked one (as walk() checks); without
// trusted levels, the chain must end below level 0.
__attribute__((noinline)) bool walk_near(ThreadStack* s, Frame* f, bool may_allocate, uint32_t* out) {
    if (!f || compat::frame_shim(f) || compat::frame_incomplete(f) || !compat::frame_code(f)) {
        return false;
    }
    const bool watching = compat::kMonitoring && g_monitoring;
    const int base = watching ? s->trusted : 0;
    const int lowest = std::max(base - 1, std::max(s->len - 1 - kNearLevels, 0));
    // The new frames above level c, innermost first.
    Frame* fresh[kNearFrames];
    int n = 0;
    Frame* g = f;
    int c;
    do {
        if (n == kNearFrames) {
            return false;
        }
        fresh[n++] = g;
        if (!(g = caller_frame(g))) {
            return false;
        }
    } while ((c = level_of(s, g, lowest)) < lowest);
    Level* lv = s->levels;
    if (!compat::frame_runs(g, lv[c].code)) {
        return false;
    }
    // (The tags the path of level c starts from: fetched while the levels below are checked.)
    calltree::prefetch_tag(c ? lv[c - 1].node : kRootNode);
    calltree::prefetch_tag(lv[c].node);
    if (watching && compat::frame_at_resume(f)) {
        *out = kNotTheProgram;  // (as walk(): nothing is kept)
        return true;
    }
    // Levels [base, c) in place, each the caller of the one above it; level c is `g`.
    for (int i = c; i > base; --i) {
        if (!called_from(lv[i].frame, lv[i - 1].frame) || !same_place(lv[i - 1], lv[i - 1].frame)) {
            return false;
        }
    }
    if (base > 0) {
        Frame* top = lv[base - 1].frame;
        if (c >= base ? !called_from(lv[base].frame, top) || !same_place(lv[base - 1], top) : !same_place(lv[c], g)) {
            return false;
        }
    } else if (caller_frame(lv[0].frame) != nullptr) {
        return false;
    }
    if (c + 1 + n > s->cap && !grow(s->levels, s->cap, c + 1 + n)) {
        return false;
    }
    lv = s->levels;
    ++g_run.stack_reads;
    const int len = s->len;
    // First the code ids and path tags of level c (at its position now, if it moved) and of
    // the new frames, so that their index slots and nodes are fetched at once (as walk()
    // does: in a big tree each is a cache miss); then they are interned in order.
    Level& caller = lv[c];
    const uintptr_t pos = compat::frame_pos(g);
    const bool moved = pos != caller.pos && !caller.transparent;
    const uint32_t below = c ? lv[c - 1].node : kRootNode;
    int warming = 0;
    uint32_t tag = moved ? calltree::tag_of(below) : calltree::tag_of(caller.node);
    if (moved) {
        int off = compat::frame_offset(g, caller.code);
        tag = calltree::child_tag(tag, caller.code_id, off < 0 ? 0 : off);
        caller.tag = tag;
        s->tags[warming++] = tag;
    }
    int depth = c + 1;
    for (int j = n - 1; j >= 0; --j, ++depth) {
        Frame* fr = fresh[j];
        PyCodeObject* co = compat::frame_code(fr);
        Level& level = lv[depth];
        const bool known = depth < s->code_known && level.code == co;
        if (tag_level(s, level, known, fr, co, true, may_allocate, tag, warming) == codes::kNone) {
            break;  // a code object we cannot name: charge its caller (as walk())
        }
    }
    if (warming > 1) {
        calltree::warm(s->tags, warming);
    }
    bool interned = true;  // (see place_level())
    uint32_t parent = caller.node;
    if (pos != caller.pos) {
        parent = below;
        if (!caller.transparent) {
            int off = compat::frame_offset(g, caller.code);
            parent = calltree::intern_tagged(below, caller.tag, caller.code_id, off < 0 ? 0 : off);
            interned = parent != kRootNode;
        }
        caller.pos = pos;
        caller.node = parent;
    }
    for (int i = c + 1, j = n - 1; i < depth; ++i, --j) {
        parent = place_level(s, lv[i], i < len, fresh[j], compat::frame_code(fresh[j]), parent, interned);
    }
    if (s->code_known < depth) {
        s->code_known = depth;
    }
    g_run.frames_read += uint64_t(depth - base);
    s->len = depth;
    if (s->trusted >= depth) {
        s->trusted = depth - 1;
    }
    if (watching) {
        update_trust(s, base, depth);
    }
    *out = parent;
    return true;
}

// at_moved_position() where neither the level nor the leaf cache knows the position: the code
// and completeness are checked (a full walk if they changed), out of line.
__attribute__((noinline)) uint32_t at_unknown_position(ThreadStack* s, PyThreadState* ts, Frame* f, bool gil,
                                                       bool may_allocate, uint64_t epoch) {
    Level& leaf = s->levels[s->len - 1];
    if (compat::frame_runs(f, leaf.code) && !compat::frame_incomplete(f)) {
        return at_leaf_position(s, leaf, f);
    }
    return walk_kept(s, ts, gil, may_allocate, epoch);
}

// ... and then its node. At the cached position it runs the cached code (a position names its
// code), complete; so it does at a position the leaf cache knows in the level's code under the
// same caller's node (the cache holds only positions of complete frames past RESUME, each in
// the code it names, which is alive: a code's death clears the cache; the level's code stays
// its frame's). Elsewhere, at_unknown_position(). (The known positions save no register: the
// rest is a tail call.)
inline uint32_t at_moved_position(ThreadStack* s, PyThreadState* ts, Frame* f, bool gil, bool may_allocate,
                                  uint64_t epoch) {
    Level& leaf = s->levels[s->len - 1];
    uintptr_t pos = compat::frame_pos(f);
    if (pos == leaf.pos) {
        return leaf.node;
    }
    if (compat::kLineTable >= 311 && !leaf.transparent) {  // (always so where this runs: 3.12+)
        uint32_t parent = s->len >= 2 ? s->levels[s->len - 2].node : kRootNode;
        const LeafCache::Entry& e = s->leaf_cache.entries[LeafCache::slot(pos)];
        if (leaf_entry_matches(e, pos, parent, leaf.code_id)) {
            leaf.pos = pos;
            leaf.node = e.node;
            return e.node;
        }
    }
    return at_unknown_position(s, ts, f, gil, may_allocate, epoch);
}

}  // namespace

// leaf_node() from the start: the thread's cache brought up to date, then the checks below.
__attribute__((noinline)) uint32_t leaf_node_full(ThreadState& t, bool gil, bool may_allocate) {
    ThreadStack* s = t.stack;
    if (!s && !(s = new_stack(t))) {
        return kRootNode;
    }
    // (Read before what it covers: a change meanwhile leaves the fast path closed.)
    const uint64_t epoch = __atomic_load_n(&g_stack_epoch, __ATOMIC_ACQUIRE);
    if (s->generation != g_run.generation) {
        s->generation = g_run.generation;
        s->len = s->trusted = s->code_known = 0;
        s->walks = s->walks_at_exit = s->window_saved = s->watch_look = 0;
        s->window_exits = 0;
        std::memset(&s->leaf_cache, 0, sizeof(s->leaf_cache));
    }
    if (uint64_t trust = __atomic_load_n(&g_trust_epoch, __ATOMIC_ACQUIRE); s->trust_epoch != trust) {
        s->trust_epoch = trust;
        s->trusted = 0;
    }
    uint64_t deaths = __atomic_load_n(&codes::g_deaths, __ATOMIC_ACQUIRE);
    if (s->deaths != deaths) {
        // A code object died: cached levels above the trusted ones may name its address, and
        // so may cached positions.
        s->deaths = deaths;
        s->len = s->code_known = s->trusted;
        std::memset(&s->leaf_cache, 0, sizeof(s->leaf_cache));
    }
    // With the GIL, the current thread state is the caller's. Without it (a thread that
    // released the GIL and runs C code), the interpreter's current state is another thread's:
    // the caller's own is found through its thread-specific key (none for threads that never
    // ran Python, such as a C library's worker threads: their allocations go to the root).
    PyThreadState* ts = !gil ? PyGILState_GetThisThreadState() : s->tstate ? *s->tstate : compat::unchecked_tstate();
    if (!ts) {
        return kRootNode;
    }
    ++s->walks;
    if (s->len > 0) {
        Level& leaf = s->levels[s->len - 1];
        Frame* f = compat::current_frame(ts);
        if constexpr (compat::kMonitoring) {
            if (only_position_moved(s, f, gil)) {
                uint32_t node = at_moved_position(s, ts, f, gil, may_allocate, epoch);
                keep_hot(s, epoch);
                return node;
            }
        } else if (f == leaf.frame && compat::frame_runs(f, leaf.code) && !compat::frame_incomplete(f) &&
                   callers_unchanged(s, compat::frame_prev(f))) {
            return at_leaf_position(s, leaf, f);
        }
        uint32_t node;
        if (gil && walk_near(s, f, may_allocate, &node)) {
            if constexpr (compat::kMonitoring) {
                keep_hot(s, epoch);
            }
            return node;
        }
    }
    if constexpr (compat::kMonitoring) {
        return walk_kept(s, ts, gil, may_allocate, epoch);
    }
    return walk(s, ts, gil, may_allocate);  // (3.10, 3.11: nothing to keep)
}

MEMLENS_HOT uint32_t leaf_node(ThreadState& t, bool gil, bool may_allocate) {
    return leaf_node_inline(t, gil, may_allocate);
}

namespace {

// The node of level `i` at position `pos` of its code (UINT32_MAX: not a position in it),
// through the thread's leaf cache (a program that keeps making dicts at one place asks for it
// again and again).
uint32_t level_node_at(ThreadStack* s, int i, uintptr_t pos) {
    const Level& lv = s->levels[i];
    if (lv.pos == pos) {
        return lv.node;
    }
    const int off = compat::pos_offset(lv.code, pos);
    if (off < 0) {
        return UINT32_MAX;  // another code runs in that frame's place now
    }
    const uint32_t parent = i ? s->levels[i - 1].node : kRootNode;
    if (lv.transparent) {
        return parent;
    }
    LeafCache::Entry& e = s->leaf_cache.entries[LeafCache::slot(pos)];
    if (leaf_entry_matches(e, pos, parent, lv.code_id)) {
        return e.node;
    }
    const uint32_t node = calltree::intern(parent, lv.code_id, off);
    if (node != kRootNode) {
        e = LeafCache::Entry{pos, lv.code_id, parent, node};
    }
    return node;
}

// The node of `pos` in code `co` (globals `globals`: alive, as node_at's place) under `parent`
// (`parent` itself for transparent code), or UINT32_MAX.
uint32_t interned_at(uint32_t parent, PyCodeObject* co, uintptr_t pos, void* globals) {
    const int off = compat::pos_offset(co, pos);
    if (off < 0) {
        return UINT32_MAX;
    }
    const uint32_t code = codes::id_of(co, true, static_cast<PyObject*>(globals));
    if (code == codes::kNone || codes::transparent(code)) {
        return parent;
    }
    return calltree::intern(parent, code, off);
}

// node_at() where the place's caller returned too: its node, under its own caller's level (on
// the stack, at the position it had), or UINT32_MAX.
uint32_t returned_caller_node(ThreadStack* s, const Place& place) {
    auto* ex = static_cast<PyObject*>(place.caller_executable);
    if (!place.grand || !ex || !PyCode_Check(ex)) {
        return UINT32_MAX;
    }
    const int g = level_of(s, static_cast<Frame*>(const_cast<void*>(place.grand)), 0);
    const uint32_t parent = g >= 0 ? level_node_at(s, g, place.grand_pos) : UINT32_MAX;
    return parent == UINT32_MAX ? UINT32_MAX
                                : interned_at(parent, reinterpret_cast<PyCodeObject*>(ex), place.caller_pos,
                                              place.caller_globals);
}

}  // namespace

ScheduleHold::ScheduleHold() { ++g_schedule_held; }

ScheduleHold::~ScheduleHold() {
    if (--g_schedule_held == 0 && g_schedule_owed) {
        g_schedule_owed = false;
        schedule_requests();
    }
}

uint32_t node_at(ThreadState& t, const Place place) {
    if constexpr (compat::kLineTable < 311) {
        return UINT32_MAX;
    }
    auto* ex = place.frame ? static_cast<PyObject*>(place.executable) : nullptr;
    if (!ex || !PyCode_Check(ex) || leaf_node(t, true, true) == kNotTheProgram || !t.stack) {
        return UINT32_MAX;
    }
    auto* co = reinterpret_cast<PyCodeObject*>(ex);
    ThreadStack* s = t.stack;
    // (The frames are compared with the levels' frames, which are on the stack: never read.)
    const Level* lv = s->levels;
    // Whether the level below `level` is `frame` at `pos` (it called the frame at `level` from
    // there), as the place was kept.
    auto level_below_is = [&](int level, const void* frame, uintptr_t pos) {
        return level > 0 && lv[level - 1].frame == frame && lv[level - 1].pos == pos;
    };
    const int i = level_of(s, static_cast<Frame*>(const_cast<void*>(place.frame)), 0);
    // The frame still on the stack, running the code: the same call, unless the maker returned
    // and a later call of the same code took its place, which its caller shows (the level below
    // is not the recorded caller, or is at another position: another call site), or its
    // caller's caller does (the same caller called again from elsewhere).
    const bool maker_here =
        i >= 0 && lv[i].code == co && (i == 0 || place.caller_entry || level_below_is(i, place.caller, place.caller_pos));
    // (A caller's caller that was not kept, an entry frame, is not checked.)
    if (maker_here && (i == 0 || place.caller_entry || !place.grand || level_below_is(i - 1, place.grand, place.grand_pos))) {
        return level_node_at(s, i, place.pos);
    }
    // The frame returned to its caller, which is on the stack at level c: the place goes under
    // that level at the position it had (its call), as walk() would have put it. Unless that
    // caller returned too and another frame took its place (another code, or the same code
    // called from elsewhere, which the level below shows): then under the caller's caller.
    const int c = place.caller ? level_of(s, static_cast<Frame*>(const_cast<void*>(place.caller)), 0) : -1;
    const bool caller_here = c >= 0 && (c == 0 || !place.grand || level_below_is(c, place.grand, place.grand_pos));
    uint32_t parent = caller_here ? level_node_at(s, c, place.caller_pos) : UINT32_MAX;
    if (parent == UINT32_MAX) {
        parent = returned_caller_node(s, place);
    }
    // Neither found as the place was kept (a generator resumed from elsewhere since, say): the
    // levels holding its frames now.
    if (parent == UINT32_MAX && maker_here) {
        return level_node_at(s, i, place.pos);
    }
    if (parent == UINT32_MAX && c >= 0 && !caller_here) {
        parent = level_node_at(s, c, place.caller_pos);
    }
    return parent == UINT32_MAX ? UINT32_MAX : interned_at(parent, co, place.pos, place.globals);
}

void free_thread(ThreadState& t) {
    if (t.stack) {
        pthread_setspecific(g_key, nullptr);
        destroy_stack(t.stack);
    }
}

}  // namespace stack
}  // namespace memlens
