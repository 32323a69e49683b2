#include "moments.hpp"

#include <algorithm>
#include <cstdlib>

namespace memlens::moments {
namespace {

// The kept boundaries and the peak's time: written by the timeline thread, read by snapshots.
SpinLock g_bounds_lock;
Bound g_bounds[kMaxKept];
size_t g_kept = 0;
uint64_t g_last_epoch = 1;  // the epoch the timeline thread saw last
double g_peak_t = -1;
bool g_overflowed = false;  // written under the log's own serialisation, read at snapshot

void free_log(Log& log) {
    for (uint32_t i = 0; i < log.count; ++i) {
        std::free(log.chunks[i]);
        log.chunks[i] = nullptr;
    }
    log.count = 0;
    log.cur = log.end = nullptr;
}

// Keeps, per node, one entry per group of raw moments between kept boundaries (the latest):
// the others can never be a kept moment's value. And none that changes nothing: an entry
// whose value is that of the node's entry kept before it (or 0, before any: nodes start with
// nothing), as when a call's frame or temporaries came and went within one moment (most of a
// big tree's entries on 3.10). A node's entries are in the log in the order of their moments,
// so one pass with the position of each node's last kept entry does it.
void compact(Log& log, const KeptMoments& kept_of, uint32_t nodes) {
    size_t n = log.size();
    if (n == 0) {
        return;
    }
    // 1 + position of each node's last kept entry. From libc directly, as everything a
    // snapshot frees under g_table_lock: a free through another library (libstdc++'s
    // operator delete) would reach our hooks, which take that lock.
    auto* last = static_cast<uint32_t*>(std::calloc(nodes, sizeof(uint32_t)));
    if (last == nullptr) {
        return;  // no compaction this time
    }
    size_t w = 0;
    for (size_t i = 0; i < n; ++i) {
        Entry e = log.at(i);
        if (e.node >= nodes) {
            continue;  // cannot happen: entries name existing nodes
        }
        uint32_t& l = last[e.node];
        if (l != 0 && kept_of(log.at(l - 1).moment) == kept_of(e.moment)) {
            log.at(l - 1) = e;
            continue;
        }
        if (e.live == (l != 0 ? log.at(l - 1).live : 0)) {
            continue;
        }
        log.at(w) = e;
        l = uint32_t(++w);
    }
    std::free(last);
    uint32_t keep = uint32_t((w + kChunkEntries - 1) / kChunkEntries);
    for (uint32_t i = keep; i < log.count; ++i) {
        std::free(log.chunks[i]);
        log.chunks[i] = nullptr;
    }
    log.count = keep;
    if (keep == 0) {
        log.cur = log.end = nullptr;
        return;
    }
    Chunk* tail = log.chunks[keep - 1];
    log.cur = tail->e + (w - size_t(keep - 1) * kChunkEntries);
    log.end = tail->e + kChunkEntries;
}

// With `take`, each of the log's chunks is freed once copied (the log is then empty): the
// entries are not held twice at once.
void copy(Log& log, const KeptMoments& kept_of, std::vector<Entry>& out, bool take) {
    size_t n = log.size();
    for (size_t i = 0; i < n; ++i) {
        const Entry& e = log.at(i);
        if (kept_of(e.moment) < kept_of.size()) {
            out.push_back(e);
        }
        if (take && (i + 1 == n || (i + 1) % kChunkEntries == 0)) {
            std::free(log.chunks[i / kChunkEntries]);
            log.chunks[i / kChunkEntries] = nullptr;
        }
    }
    if (take) {
        log.count = 0;
        log.cur = log.end = nullptr;
    }
}

}  // namespace

void append_slow(Log& log, const Entry& e) {
    Chunk* c = log.count < kMaxChunks ? static_cast<Chunk*>(std::malloc(sizeof(Chunk))) : nullptr;
    if (c == nullptr) {
        __atomic_store_n(&g_recording, false, __ATOMIC_RELAXED);
        g_overflowed = true;
        return;
    }
    log.chunks[log.count++] = c;
    log.cur = c->e;
    log.end = c->e + kChunkEntries;
    *log.cur++ = e;
}

bool bump(double t) {
    Guard g(g_bounds_lock);
    uint32_t raw = __atomic_load_n(&g_moment, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&g_moment, raw, __ATOMIC_RELAXED);
    g_bounds[g_kept++] = Bound{raw, t, traced_total()};
    if (g_kept < kMaxKept) {
        return false;
    }
    // Every other boundary goes, the latest stays: evenly spaced still, and the next one
    // comes twice as far from it.
    for (size_t i = 0; i < kMaxKept / 2; ++i) {
        g_bounds[i] = g_bounds[2 * i + 1];
    }
    g_kept = kMaxKept / 2;
    return true;
}

void note_peak(double t) {
    uint64_t epoch = __atomic_load_n(&g_run.epoch, __ATOMIC_RELAXED);
    Guard g(g_bounds_lock);
    if (epoch != g_last_epoch) {
        g_last_epoch = epoch;
        g_peak_t = t;
    }
}

KeptMoments::KeptMoments(const std::vector<Bound>& bounds)
    : bounds_(bounds), last_(bounds.empty() ? 0 : bounds.back().raw), table_(nullptr) {
    static_assert(kMaxKept + 1 <= UINT16_MAX, "kept moments fit the table");
    if (last_ == 0 || last_ > (uint32_t{1} << 22)) {
        return;  // (no table for a pathological run: searched)
    }
    table_ = static_cast<uint16_t*>(std::malloc(size_t(last_) * sizeof(uint16_t)));
    if (table_ == nullptr) {
        return;
    }
    size_t k = 0;  // the first boundary after raw
    for (uint32_t raw = 0; raw < last_; ++raw) {
        while (k < bounds.size() && bounds[k].raw <= raw) {
            ++k;
        }
        table_[raw] = uint16_t(k);
    }
}

KeptMoments::~KeptMoments() { std::free(table_); }

size_t moment_of(const std::vector<Bound>& bounds, uint32_t raw) {
    auto it = std::upper_bound(bounds.begin(), bounds.end(), raw,
                               [](uint32_t r, const Bound& b) { return r < b.raw; });
    return size_t(it - bounds.begin());
}

void snapshot(Snapshot& out, uint32_t nodes, uint32_t nogil_nodes, double now, bool last, size_t extra,
              int64_t dead_bytes) {
    // `out` is empty, and its vectors only grow within the capacity reserved here: nothing is
    // freed while g_table_lock is held (see compact).
    {
        Guard g(g_bounds_lock);
        uint64_t epoch = __atomic_load_n(&g_run.epoch, __ATOMIC_RELAXED);
        if (epoch != 1) {
            out.peak_t = epoch != g_last_epoch ? now : g_peak_t;
        }
        // The moment open now ends at the snapshot: the last moment is the run as it stands
        // (or as it ended), whatever changed after the latest boundary.
        out.bounds.reserve(g_kept + 1);
        out.bounds.assign(g_bounds, g_bounds + g_kept);
        out.open = __atomic_load_n(&g_moment, __ATOMIC_RELAXED);
        if (g_kept > 0 && now > g_bounds[g_kept - 1].t) {
            out.bounds.push_back(Bound{out.open + 1, now, traced_total()});
        }
        // The last moment's total, as its lines' figures (pending_less), is without what the
        // free lists hold: that moment is the one pushed above, or a boundary that came after
        // `now` was read (the timeline thread between the caller's clock and this lock).
        if (g_kept > 0) {
            out.bounds.back().traced = std::max<int64_t>(out.bounds.back().traced - dead_bytes, 0);
        }
    }
    if (last) {
        // (No writer runs now, and none appends after: see snapshot() in the header.)
        __atomic_store_n(&g_recording, false, __ATOMIC_SEQ_CST);
    }
    if (g_overflowed) {
        out.dropped = true;
        out.bounds.clear();
        if (last) {  // (nothing more to read in them: they go now, as they would once read)
            free_log(g_log);
            free_log(g_log_nogil);
        }
        return;
    }
    const KeptMoments kept_of(out.bounds);
    compact(g_log, kept_of, nodes);
    compact(g_log_nogil, kept_of, nodes);
    out.gil.reserve(g_log.size() + nodes + extra);  // the log, and the pending entries
    out.nogil.reserve(g_log_nogil.size() + nogil_nodes);
    copy(g_log, kept_of, out.gil, last);
    copy(g_log_nogil, kept_of, out.nogil, last);
    if (last) {
        g_overflowed = true;  // a later snapshot has no log to read: its moments say dropped
    }
}

void pending(std::vector<Entry>& out, const KeptMoments& kept_of, uint32_t id, uint32_t seen, int64_t live) {
    // A node that holds nothing now and logged nothing but 0 held nothing since (most nodes
    // of a big tree: frames that only call, or came and went within a moment).
    if ((live != 0 || (seen & kHeld)) && kept_of(raw_of(seen)) < kept_of.size()) {
        out.push_back(Entry{id, raw_of(seen), live});
    }
}

void pending_less(std::vector<Entry>& out, const KeptMoments& kept_of, uint32_t id, uint32_t seen, int64_t live,
                  int64_t dead, uint32_t open) {
    // (Where no kept moment follows the open one, as when a boundary came after the snapshot's
    // time was read, the entry at `seen` stands for the last moment: it has the rest.)
    if (dead != 0 && raw_of(seen) != open && kept_of(open) < kept_of.size()) {
        pending(out, kept_of, id, seen, live);  // until the moment open now
        seen = open | (live != 0 ? kHeld : 0);
    }
    pending(out, kept_of, id, seen, live - dead);
}

void reset() {
    free_log(g_log);
    free_log(g_log_nogil);
    __atomic_store_n(&g_moment, 0u, __ATOMIC_RELAXED);
    g_recording = true;
    g_overflowed = false;
    Guard g(g_bounds_lock);
    g_kept = 0;
    g_last_epoch = 1;
    g_peak_t = -1;
}

void after_fork_in_child() { g_bounds_lock.unlock(); }

}  // namespace memlens::moments
