// Moments: each node's live bytes at moments of the run, O(1) per event.
//
// The timeline thread (timeline.cpp) bumps a raw moment counter at moment boundaries, and
// records each boundary (raw number, time, traced total). Every node remembers the raw moment
// its live bytes last changed in; the first event at a node in a later moment appends
// (node, that moment, live bytes before this event) to a log: what the node held from the end
// of that moment on, until this event. So the log holds, per moment, the live bytes of each
// node that changed in it, and nothing for the nodes that did not: memory in proportion to
// changes, no lock on GIL events (the log has the same writers as the figures it follows: see
// state.hpp).
//
// Bounded: at most kMaxKept boundaries are kept; when full, every other one is dropped (merged
// into its neighbour) and the thread bumps half as often, so moments stay evenly spaced over
// the run, however long. Log entries that a dropped boundary makes redundant (two entries of a
// node with no kept boundary between them) are removed when the log is compacted, at snapshot
// time (the GIL and g_table_lock held: no writer runs). Appending never calls a hooked
// allocator: a full chunk is followed by one from libc directly (our own module's calls are
// never rerouted, native.cpp). Should the log reach
// kMaxChunks (64M entries), or libc have no memory, the run's moments are dropped (the
// snapshot says so): a moment is only worth showing when exact.
//
// The peak needs no moment of its own here: per-node live bytes at the peak are exact already
// (calltree.hpp); the timeline thread only notes when the peak happened (within one wake-up).
#pragma once

#include <cstdint>
#include <vector>

#include "state.hpp"

namespace memlens::moments {

// One log entry: `node` held `live` bytes from the end of raw moment `moment` on.
struct Entry {
    uint32_t node;
    uint32_t moment;
    int64_t live;
};
static_assert(sizeof(Entry) == 16, "log entries are 16 bytes");

// A kept moment boundary: raw moment `raw` began at `t` seconds, with `traced` bytes traced.
struct Bound {
    uint32_t raw;
    double t;
    int64_t traced;
};

constexpr uint32_t kChunkEntries = uint32_t{1} << 16;  // 1 MiB per chunk
constexpr uint32_t kMaxChunks = 1024;                   // at most 64M entries (1 GiB)
constexpr size_t kMaxKept = 256;                        // boundaries kept (thinned to half)

struct Chunk {
    Entry e[kChunkEntries];
};

// An append-only log in chunks that never move. Appends are serialised by the caller.
struct Log {
    Chunk* chunks[kMaxChunks];
    uint32_t count;  // chunks in use
    Entry* cur;      // the next free entry of the last chunk (nullptr before the first)
    Entry* end;      // the end of the last chunk
    size_t size() const {
        return count == 0 ? 0 : size_t(count - 1) * kChunkEntries + size_t(cur - chunks[count - 1]->e);
    }
    Entry& at(size_t i) { return chunks[i / kChunkEntries]->e[i % kChunkEntries]; }
};

// The raw moment events fall in now. Written by the timeline thread; read by every hook.
alignas(64) inline uint32_t g_moment = 0;
// False once moments are dropped (the log is full).
inline bool g_recording = true;
// The log of the GIL figures (all events in sampling mode), and of the no-GIL figures.
inline Log g_log{};
inline Log g_log_nogil{};

// A new chunk (libc), or moments dropped.
void append_slow(Log& log, const Entry& e);
inline void append(Log& log, const Entry& e) {
    if (__builtin_expect(log.cur < log.end, 1)) {
        *log.cur++ = e;
        return;
    }
    append_slow(log, e);
}

// A node's `seen` (below) is the raw moment its live bytes last changed in, and this bit: the
// value it last logged (or would have) was not 0. Raw moments stay far below it (boundaries
// are thinned, and moments then bumped half as often).
constexpr uint32_t kHeld = uint32_t{1} << 31;
inline uint32_t raw_of(uint32_t seen) { return seen & ~kHeld; }

// Whether touch() of a node that saw raw moment `seen` has nothing to do.
inline bool current(uint32_t seen) { return raw_of(seen) == __atomic_load_n(&g_moment, __ATOMIC_RELAXED); }

// Called before the live bytes of node `id` change: `seen` is kept by the caller beside the
// figures, `live` their value now. An entry that would change nothing (0 after 0, or after
// nothing: nodes start with nothing) is not logged: a call's frame or temporaries that came
// and went within one moment, most of a big call tree's entries on 3.10.
inline void touch(uint32_t& seen, uint32_t id, int64_t live, Log& log) {
    uint32_t now = __atomic_load_n(&g_moment, __ATOMIC_RELAXED);
    if (__builtin_expect(raw_of(seen) != now, 0)) {
        // (seq_cst, as no-GIL events order their loads after their count of themselves; a
        // plain load on x86-64, and only when the moment moved. The run's last snapshot turns
        // logging off while no writer runs: see snapshot() below.)
        if ((live != 0 || (seen & kHeld)) && __atomic_load_n(&g_recording, __ATOMIC_SEQ_CST)) {
            append(log, Entry{id, raw_of(seen), live});
        }
        seen = now | (live != 0 ? kHeld : 0);
    }
}

// The timeline thread: a new moment begins at `t` (seconds since start). True when the kept
// boundaries were thinned (the thread then bumps half as often).
bool bump(double t);
// The timeline thread, at each wake-up: the peak moved since the last call if the epoch did.
void note_peak(double t);

// The first kept boundary after raw moment `raw` (bounds.size() when none): the kept moment
// an entry first applies to.
size_t moment_of(const std::vector<Bound>& bounds, uint32_t raw);

// moment_of() for many raw moments: read from a table (moment_of() is a binary search, and a
// big tree's log has millions of entries). Raw moments from the last boundary's on apply to
// no kept moment; the others are few, even in a long run (the boundaries are thinned, and
// moments then bumped half as often). The table is libc's (malloc/free, never rerouted to
// our hooks): usable while g_table_lock is held.
class KeptMoments {
public:
    explicit KeptMoments(const std::vector<Bound>& bounds);
    KeptMoments(const KeptMoments&) = delete;
    KeptMoments& operator=(const KeptMoments&) = delete;
    ~KeptMoments();
    size_t operator()(uint32_t raw) const {
        if (raw >= last_) {
            return bounds_.size();
        }
        return table_ ? size_t(table_[raw]) : moment_of(bounds_, raw);
    }
    size_t size() const { return bounds_.size(); }  // (the kept moments)

private:
    const std::vector<Bound>& bounds_;
    uint32_t last_;     // the last boundary's raw moment (0: none)
    uint16_t* table_;   // raw moment -> kept moment, below last_ (nullptr: searched)
};

// What a snapshot takes: the kept boundaries, the log entries that matter to them (the logs
// are compacted in place first), and when the peak happened. The caller then adds, per node,
// the entry its current figures stand for (`pending`: within the capacity reserved, so that
// nothing is freed while the lock is held). GIL and g_table_lock held; `out` empty.
struct Snapshot {
    std::vector<Bound> bounds;
    std::vector<Entry> gil, nogil;
    double peak_t = -1;    // when the latest peak happened (-1: no peak yet)
    bool dropped = false;  // the log overflowed: no moments
    uint32_t open = 0;     // the raw moment open at the snapshot (its last kept moment's)
};
// `nogil_nodes`: how many nodes may have no-GIL figures (pending entries of that log).
// `last`: the run's last snapshot with moments (tracer.cpp, freeze): nothing is logged from
// now on, and the logs are freed as they are read (they are not held twice at once). The
// writers of both logs are kept out meanwhile (the GIL and g_table_lock held), and see that
// nothing is logged before they next append.
// `extra`: room for that many more pending entries of the GIL log (pending_less).
void snapshot(Snapshot& out, uint32_t nodes, uint32_t nogil_nodes, double now, bool last, size_t extra = 0,
              int64_t dead_bytes = 0);
// Adds the entry of a node's current figures (`seen`: as touch() keeps it) when it matters to
// a kept moment and changes something.
void pending(std::vector<Entry>& out, const KeptMoments& kept_of, uint32_t id, uint32_t seen, int64_t live);
// pending() for a node `dead` bytes of whose `live` bytes are known dead now (CPython's free
// lists hold them): they count until the moment open now (`open`: Snapshot::open), which ends
// with the rest. (When they died is not known; the moments before keep what they held.)
void pending_less(std::vector<Entry>& out, const KeptMoments& kept_of, uint32_t id, uint32_t seen, int64_t live,
                  int64_t dead, uint32_t open);

// Drops everything (start, reset); not while tracing.
void reset();
// In a forked child: the timeline thread may have held the boundaries' lock.
void after_fork_in_child();

}  // namespace memlens::moments
