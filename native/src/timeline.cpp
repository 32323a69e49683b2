#include "timeline.hpp"

#include <Python.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "moments.hpp"
#include "state.hpp"
#include "tracer.hpp"

namespace memlens::timeline {
namespace {

constexpr size_t kCap = 4096;

// Written by the sampler thread only, read after it stopped.
TimelinePoint* g_points = nullptr;
size_t g_len = 0;
std::thread* g_thread = nullptr;
std::chrono::steady_clock::time_point g_start;
// Heap objects that are never destroyed: a child forked while the sampler thread waits would
// otherwise hang at exit destroying a condition variable that has a (now absent) waiter. The
// child gets fresh ones (forget_thread).
std::mutex* g_mutex = new std::mutex;
std::condition_variable* g_cv = new std::condition_variable;
bool g_stop = false;

// Moments begin this often at first (seconds); the spacing doubles each time the kept
// boundaries are thinned (moments.hpp), so a run of T seconds has moments T/256 to T/128 apart.
constexpr double kFirstMomentS = 0.001;

void sampler_main(double interval_ms) {
    name_thread("memlens-timeline");
    using Clock = std::chrono::steady_clock;
    std::unique_lock<std::mutex> lk(*g_mutex);
    const double interval = interval_ms / 1000.0;
    double point_every = interval;  // doubles as the points are thinned
    double moment_every = kFirstMomentS;
    double next_point = 0, next_moment = kFirstMomentS;
    for (;;) {
        if (g_stop) {
            break;
        }
        double t = std::chrono::duration<double>(Clock::now() - g_start).count();
        moments::note_peak(t);
        if (t >= next_moment) {
            if (moments::bump(t)) {
                moment_every *= 2;
            }
            next_moment = std::max(next_moment + moment_every, t + moment_every / 2);
        }
        if (t >= next_point) {
            if (g_len == kCap) {
                // Bounded however long the run: keep every other point, halve the rate.
                for (size_t i = 0; i < kCap / 2; ++i) {
                    g_points[i] = g_points[2 * i];
                }
                g_len = kCap / 2;
                point_every *= 2;
            }
            g_points[g_len++] = TimelinePoint{t, traced_total(), read_rss()};
            next_point = std::max(next_point + point_every, t + point_every / 2);
        }
        double wake = std::min(next_point, next_moment);
        g_cv->wait_until(lk, g_start + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(wake)));
    }
}

}  // namespace

int64_t read_rss() {
    static long page = sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    char buf[128];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = 0;
    char* p = buf;
    while (*p && *p != ' ') {
        ++p;
    }
    return int64_t(std::strtoll(p, nullptr, 10)) * page;
}

bool start(double interval_ms) {
    reset();
    g_points = static_cast<TimelinePoint*>(std::calloc(kCap, sizeof(TimelinePoint)));
    if (!g_points) {
        return false;
    }
    g_start = std::chrono::steady_clock::now();
    if (interval_ms > 0) {
        g_stop = false;
        g_thread = new std::thread(sampler_main, interval_ms);
        // Named now, not only by itself: Python 3.12+ warns at a fork while the process has
        // threads other than memlens's, which it tells by their names.
        name_thread(g_thread->native_handle(), "memlens-timeline");
    }
    return true;
}

double stop(double (*end_time)()) {
    if (!g_thread) {
        return end_time();
    }
    double t;
    {
        // The end's time is read holding the sampler's lock, which it holds while it samples:
        // every moment and point it took came before it (read before, a moment could come a
        // fraction of a millisecond after the run's end).
        std::lock_guard<std::mutex> lk(*g_mutex);
        g_stop = true;
        t = end_time();
    }
    g_cv->notify_all();
    Py_BEGIN_ALLOW_THREADS
    g_thread->join();
    Py_END_ALLOW_THREADS
    delete g_thread;
    g_thread = nullptr;
    moments::note_peak(t);
    if (g_points && g_len < kCap) {  // the state at stop, always
        g_points[g_len++] = TimelinePoint{t, traced_total(), read_rss()};
    }
    return t;
}

double elapsed() { return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count(); }

void points(std::vector<TimelinePoint>& out) {
    out.clear();
    if (!g_thread && g_points) {  // the sampler thread has stopped: the buffer is stable
        out.assign(g_points, g_points + g_len);
    }
}

void reset() {
    std::free(g_points);
    g_points = nullptr;
    g_len = 0;
}

void forget_thread() {
    g_thread = nullptr;  // it does not exist in the child (leaked on purpose)
    g_mutex = new std::mutex;  // the parent's may be held or waited on
    g_cv = new std::condition_variable;
}

}  // namespace memlens::timeline
