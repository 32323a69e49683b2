// See tracer.hpp: the public API, run by run. The hooks are in hooks.cpp.
#include "compat.hpp"  // first: Py_BUILD_CORE before Python.h (3.12 internal headers)
#include "tracer.hpp"

#include <Python.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/personality.h>
#endif

#include <chrono>
#include <cstdio>

#include "blocks.hpp"
#include "calltree.hpp"
#include "codes.hpp"
#include "compat.hpp"
#include "hooks.hpp"
#include "moments.hpp"
#include "native.hpp"
#include "sampling.hpp"
#include "snapshot.hpp"
#include "stack.hpp"
#include "state.hpp"
#include "timeline.hpp"

namespace memlens {

namespace {

bool g_forked_child = false;
bool g_finished = false;  // finish() was called: the run's time, peak RSS and timeline are final
// freeze() was called: the next snapshot is the last (kFrozen): it takes the moments' log and
// the call tree's memory; it has been taken (kTaken).
enum class Frozen { kNo, kFrozen, kTaken } g_frozen = Frozen::kNo;
bool g_watching = false;
bool g_native_installed = false;
std::chrono::steady_clock::time_point g_start_time;
double g_duration = 0;
int64_t g_peak_rss = 0;

// fork: the child is not traced. Hooks stay as pass-through; the parent's data is kept
// untouched in the child's copy and never reported by it. The child may start a run of its
// own (start()): the parent's run is then taken down in the child first (leave_parent_run).
void atfork_prepare() {
    g_intern_lock.lock();
    g_table_lock.lock();
}
void atfork_parent() {
    g_table_lock.unlock();
    g_intern_lock.unlock();
}
void atfork_child() {
    g_table_lock.unlock();
    g_intern_lock.unlock();
    // The other threads' events without the GIL that were under way ended with the fork: left
    // counted, stop() in the child (a followed child writing its run) would wait for them
    // forever.
    g_run.nogil_events.store(0);
    if (g_run.active.load()) {
        g_run.active.store(false);
        g_forked_child = true;
        timeline::forget_thread();
        moments::after_fork_in_child();
    }
}

// In a child forked while its parent traced, before the child's own run starts: undo what
// the parent's run left in place, as stop() would have, so that start() begins from scratch
// (start() then drops the parent's tables with reset()). The C-library interposition stays
// (it is process-wide and idle while no run is active; start() finds it installed).
void leave_parent_run() {
    stack::stop_monitoring();  // while the parent's code records still name the watched codes
    hooks::uninstall();        // the allocators found by the parent's run are put back
    g_forked_child = false;
}

void free_tables() {
    hooks::reset();
    blocks::destroy();
    calltree::destroy();
    codes::reset();
    timeline::reset();
    moments::reset();
}

// The timeline's thread never takes the program's signals. A signal sent to the process goes
// to any thread that does not block it, and Python runs its handlers in the main thread only
// when that thread looks: a main thread waiting in a C call (a lock, a read) would then never
// see a SIGTERM that plain Python dies of (a multiprocessing pool worker waiting for a task).
bool start_timeline(double interval_ms) {
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &previous);  // inherited by the thread created now
    bool ok = timeline::start(interval_ms);
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    return ok;
}

// Events made without the GIL that saw the run active finish before stop() goes on (see
// g_run.nogil_events): after stop(), nothing touches the run's tables but snapshot() and
// reset().
void wait_for_nogil_events() {
    while (g_run.nogil_events.load(std::memory_order_seq_cst) != 0) {
        sched_yield();
    }
}

int64_t peak_rss() {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? int64_t(ru.ru_maxrss) * 1024 : 0;
}

double elapsed() { return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start_time).count(); }

}  // namespace

std::string start(const Options& options) {
    static bool atfork_registered = false;
    if (compat::kFreeThreaded) {
        // The hooks rely on the GIL serialising MEM/OBJ allocations and frame reads.
        return "free-threaded Python builds are not supported yet";
    }
    // First: it gives up the GIL for a moment (once per process), so another thread's start
    // may complete meanwhile; the check below then sees it.
    stack::find_thread_state();
    if (g_run.active.load()) {
        return "memlens is already tracing this process";
    }
    if (g_forked_child) {
        leave_parent_run();
    }
    if (options.mode == Mode::Sampling && options.sample_interval == 0) {
        return "sampling mode needs a sampling interval above 0";
    }
    if (hooks::left_below()) {
        return "memlens hooks from an earlier run are still installed below another "
               "allocator hook; restart the process to trace again";
    }
    reset();
    g_run.opts = options;
    g_run.sampling = options.mode == Mode::Sampling;
    sampling::g_interval = double(options.sample_interval);
    if (g_run.opts.seed == 0) {
        g_run.opts.seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    if (!blocks::init() || !calltree::init(g_run.sampling) || !codes::start()) {
        free_tables();
        return "out of memory";
    }
    g_run.total = g_run.total_nogil = g_run.peak = g_run.window_peak = 0;
    g_run.epoch = 1;
    g_run.allocations = g_run.samples = 0;
    g_run.alloc_bytes = g_run.alloc_bytes_nogil = 0;
    g_run.stack_reads = g_run.frames_read = g_run.exit_watches_dropped = 0;
    g_duration = 0;
    g_peak_rss = 0;
    g_finished = false;  // (a forked child's copy of its parent's, whose run was ending)
    g_frozen = Frozen::kNo;
    ++g_run.generation;
    stacks_stale();
    sampling::g_thread_counter.store(0);  // per-thread seeds are seed + thread order
    sampling::thread_refresh(t_state);    // the starting thread first
    hooks::start_run();
    if (!atfork_registered) {
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
        atfork_registered = true;
    }
    g_watching = stack::start_monitoring();
    g_start_time = std::chrono::steady_clock::now();
    g_run.active.store(true);
    hooks::install();
    g_native_installed = g_run.opts.native && native::install();
    if (!start_timeline(options.timeline_interval_ms)) {
        stop();
        return "out of memory";
    }
    return {};
}

void finish() {
    if (!g_run.active.load() || g_finished) {
        return;
    }
    g_duration = timeline::stop(elapsed);
    g_peak_rss = peak_rss();
    g_finished = true;
}

void freeze() {
    if (!g_run.active.load() || !g_finished || g_frozen != Frozen::kNo) {
        return;
    }
    // No call path is added from now on: the call tree's index goes. GIL events cannot be
    // running (we hold it); those without it that may be reading it are waited for. (The
    // moments' log stays until the snapshot that follows has read it: an event between now
    // and then still logs what its node held before, or that node's history would be lost.)
    calltree::unpublish_index();
    wait_for_nogil_events();
    calltree::free_unpublished();
    g_frozen = Frozen::kFrozen;
}

void stop() {
    if (!g_run.active.load()) {
        return;
    }
    finish();
    g_run.active.store(false);
    wait_for_nogil_events();
    g_finished = false;
    // (A tree given back stays so until reset() frees it, or the next start(): a snapshot
    // meanwhile has no call tree, not one read as zeros.)
    if (g_frozen != Frozen::kTaken) {
        g_frozen = Frozen::kNo;
    }
    if (g_native_installed) {
        native::uninstall();
    }
    hooks::uninstall();
    stack::stop_monitoring();
}

void restart_sampling() {
    if (!g_run.sampling || !g_run.active.load()) {
        return;
    }
    hooks::start_run();
    sampling::thread_seed(t_state, 0);
}

bool disable_address_randomization() {
#ifdef __linux__
    int current = personality(0xffffffff);  // reads it
    if (current == -1 || (current & ADDR_NO_RANDOMIZE)) {
        return false;
    }
    return personality(static_cast<unsigned long>(current) | ADDR_NO_RANDOMIZE) != -1;
#else
    return false;
#endif
}

void name_thread(const char* name) { name_thread(pthread_self(), name); }

void name_thread(pthread_t thread, const char* name) {
#ifdef __linux__
    char kept[16];
    std::snprintf(kept, sizeof kept, "%s", name);
    pthread_setname_np(thread, kept);
#else
    (void)thread;
    (void)name;
#endif
}

PyObject* compile_script(const char* source, PyObject* filename) {
    return compat::compile_script(source, filename);
}

void die_by_signal(int signum) {
    struct sigaction action = {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(signum, &action, nullptr);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signum);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    raise(signum);  // the default action of an ending signal ends every thread
    _exit(128 + signum);  // an ignored or stopping one: end as a shell reports it
}

bool is_active() { return g_run.active.load(); }
bool hooks_installed() { return hooks::installed(); }
bool is_forked_child() { return g_forked_child; }
const char* hook_kind() { return hooks::kind(); }
bool watches_exits() { return g_watching; }
const char* object_reuse() { return hooks::object_reuse(); }
int monitoring_tool() { return g_run.active.load() ? stack::monitoring_tool() : -1; }
int move_monitoring(int tool) {
    if (!g_run.active.load() || stack::monitoring_tool() != tool) {
        return monitoring_tool();
    }
    int now = stack::move_monitoring(tool);
    g_watching = now >= 0;
    return now;
}
void stop_watching() {
    if (g_run.active.load() && stack::monitoring_tool() >= 0) {
        stack::move_monitoring(stack::kNoTool);
        g_watching = false;
    }
}
bool traces_native() { return g_native_installed; }
const char* native_problem() { return native::problem(); }
std::string numpy_attach(void* api_capsule) { return hooks::numpy_attach(api_capsule); }

std::vector<std::string> leftovers() {
    std::vector<std::string> out;
    if (g_run.active.load()) {
        out.emplace_back("the tracer (still tracing)");
        return out;
    }
    if (hooks::installed()) {
        out.emplace_back("allocator hooks (below another tool's hook, as pass-throughs)");
    }
    if (hooks::arena_hook_installed()) {
        out.emplace_back("the pymalloc arena hook (below another tool's hook)");
    }
    if (hooks::numpy_hooked()) {
        out.emplace_back("numpy's memory handler (the program set a handler of its own)");
    }
    if (native::installed()) {
        out.emplace_back("the C allocator interposition");
    }
    if (stack::monitoring()) {
        out.emplace_back("the sys.monitoring tool");
    }
    return out;
}

void snapshot(SnapshotData& out) {
    PauseScope pause;
    out = SnapshotData{};
    uint32_t n = calltree::size();
    if (n == 0) {
        return;
    }
    // A frozen run's next snapshot is its last: it takes the moments' logs, and gives each
    // chunk of the call tree back once copied (calltree::give_back: the tree and its copy are
    // not both held at once, a big tree's peak). A snapshot after it has no call tree.
    const bool last = g_frozen == Frozen::kFrozen;
    const uint32_t copied = g_frozen == Frozen::kTaken ? 0 : n;
    // What CPython's free lists hold is dead: no line keeps it live, now (its blocks stay
    // tracked, and live at the moments before). (Read, and the room made and freed, outside
    // the lock: a free under it would take it again.)
    const std::vector<uintptr_t> listed = copied ? hooks::free_listed_blocks() : std::vector<uintptr_t>{};
    std::vector<hooks::FreeListed> dead;
    dead.reserve(listed.size());
    int64_t dead_bytes = 0;  // (the run's totals, as the lines' figures, leave them out too)
    {
        // GIL events cannot run (we hold the GIL); events without it hold the table lock.
        Guard g(g_table_lock);
        // (Filled as copied, not zeroed first: the copy's pages are touched as the chunks
        // they come from are given back.)
        out.nodes.reserve(copied);
        out.sums.reserve(copied);
        if (g_run.sampling) {
            out.vars.reserve(copied);
        }
        uint64_t epoch = g_run.epoch;
        moments::Snapshot& ms = out.moments;
        hooks::free_listed(listed, dead);
        for (const hooks::FreeListed& d : dead) {
            dead_bytes += d.bytes;
        }
        // (Once the run is finished, its end: the last moment ends there, as the run does.)
        // (A frozen run's next snapshot is its last with moments: it takes their logs.)
        moments::snapshot(ms, copied, calltree::nogil_capacity(),
                          g_run.active.load() && !g_finished ? timeline::elapsed() : g_duration, last, dead.size(),
                          dead_bytes);
        if (last) {
            g_frozen = Frozen::kTaken;
        }
        const moments::KeptMoments kept_of(ms.bounds);
        size_t next_dead = 0;
        for (uint32_t id = 0; id < copied; ++id) {
            const Node& nd = calltree::node(id);
            out.nodes.push_back(SnapshotNode{nd.parent, nd.code, nd.offset});
            Sums& sums = out.sums.emplace_back();
            bool at_peak_now = nd.fig.epoch != epoch;  // unchanged since the latest peak
            const hooks::FreeListed none{id, 0, 0, 0.0};
            const hooks::FreeListed& gone =
                next_dead < dead.size() && dead[next_dead].node == id ? dead[next_dead++] : none;
            sums.alloc_bytes = nd.fig.alloc_bytes;
            sums.alloc_count = nd.fig.alloc_count;
            sums.live_bytes = nd.fig.live_bytes - gone.bytes;
            sums.live_count = nd.fig.live_count - gone.count;
            sums.peak_bytes = at_peak_now ? nd.fig.live_bytes : nd.fig.peak_bytes;
            if (!ms.dropped) {
                moments::pending_less(ms.gil, kept_of, id, nd.moment, nd.fig.live_bytes, gone.bytes, ms.open);
            }
            if (const NogilFigures* nf = calltree::nogil_if_any(id)) {
                const Figures* f = &nf->fig;
                sums.alloc_bytes += f->alloc_bytes;
                sums.alloc_count += f->alloc_count;
                sums.live_bytes += f->live_bytes;
                sums.live_count += f->live_count;
                sums.peak_bytes += f->epoch != epoch ? f->live_bytes : f->peak_bytes;
                if (!ms.dropped) {
                    moments::pending(ms.nogil, kept_of, id, nf->moment, f->live_bytes);
                }
            }
            if (g_run.sampling) {
                const Variances& v = calltree::vars(id);
                out.vars.push_back(SumVars{v.alloc, v.live - gone.var, at_peak_now ? v.live : v.peak});
            }
            if (last && (((id + 1) & (calltree::kChunkSize - 1)) == 0 || id + 1 == copied)) {
                calltree::give_back(id >> calltree::kChunkBits);
            }
        }
        out.peak_traced_bytes = g_run.peak;
        out.current_traced_bytes = std::max<int64_t>(traced_total() - dead_bytes, 0);
        out.allocations = g_run.allocations;
        out.samples = g_run.samples;
        out.stack_reads = g_run.stack_reads;
        out.frames_read = g_run.frames_read;
        out.exit_watches_dropped = g_run.exit_watches_dropped;
    }
    out.lines.load();
    bool running = g_run.active.load() && !g_finished;
    out.duration_s = running ? elapsed() : g_duration;
    out.peak_rss_bytes = running ? peak_rss() : g_peak_rss;
    out.mode = int(g_run.opts.mode);
    out.sample_interval = g_run.opts.sample_interval;
    timeline::points(out.timeline);
    // The point timeline::stop() took at the end (the run's duration is its time), if it took
    // one: a full timeline keeps its last sampled point instead, which is left as it was.
    if (!running && !out.timeline.empty() && out.timeline.back().t == g_duration) {
        int64_t& end = out.timeline.back().traced_bytes;
        end = std::max<int64_t>(end - dead_bytes, 0);
    }
}

void reset() {
    if (g_run.active.load()) {
        return;
    }
    free_tables();
    ++g_run.generation;
    stacks_stale();
}

uint32_t node_count() { return calltree::size(); }

void totals(int64_t* current, int64_t* peak) {
    *current = traced_total();
    *peak = __atomic_load_n(&g_run.peak, __ATOMIC_RELAXED);
}

void window(bool reset, int64_t* current, int64_t* peak, int64_t* allocated) {
    *allocated = __atomic_load_n(&g_run.alloc_bytes, __ATOMIC_RELAXED) +
                 __atomic_load_n(&g_run.alloc_bytes_nogil, __ATOMIC_RELAXED);
    *current = traced_total();
    *peak = __atomic_load_n(&g_run.window_peak, __ATOMIC_RELAXED);
    if (*peak < *current) {
        *peak = *current;
    }
    if (reset) {
        __atomic_store_n(&g_run.window_peak, *current, __ATOMIC_RELAXED);
    }
}

bool thread_paused() { return t_state.paused; }
void set_thread_paused(bool paused) { t_state.paused = paused; }

PauseScope::PauseScope() : previous(t_state.paused) { t_state.paused = true; }
PauseScope::~PauseScope() { t_state.paused = previous; }

}  // namespace memlens
