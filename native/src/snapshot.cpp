#include "snapshot.hpp"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <thread>
#include <utility>

#include "calltree.hpp"
#include "pages.hpp"
#include "tracer.hpp"

namespace memlens {

namespace {

// The rows of two int32 columns being built, by their pair of values, open addressing: a slot
// holds only a row's index, whose key is read back from the columns (4 bytes a slot: a big
// tree's first pass holds one per native node and more). (collapsed parent, site) ->
// collapsed node, and (file, line) -> site.
class PairIndex {
public:
    PairIndex(size_t expected, const std::vector<int32_t>& first, const std::vector<int32_t>& second)
        : first_(first), second_(second) {
        size_t cap = 16;
        while (cap < expected * 2) {
            cap *= 2;
        }
        slots_.assign(cap, kEmpty);
    }
    // The row (a, b), or -1 when there is none yet: then `*slot` is where add() puts it.
    int32_t find(int32_t a, int32_t b, size_t* slot) {
        if ((count_ + 1) * 2 > slots_.size()) {
            grow();
        }
        size_t mask = slots_.size() - 1;
        size_t i = hash(a, b) & mask;
        for (; slots_[i] != kEmpty; i = (i + 1) & mask) {
            int32_t v = slots_[i];
            if (first_[size_t(v)] == a && second_[size_t(v)] == b) {
                return v;
            }
        }
        *slot = i;
        return -1;
    }
    // Records row `v` (already in the columns) at the slot find() gave.
    void add(size_t slot, int32_t v) {
        slots_[slot] = v;
        ++count_;
    }

private:
    static constexpr int32_t kEmpty = -1;
    static size_t hash(int32_t a, int32_t b) { return size_t(mix((uint64_t(uint32_t(a)) << 32) | uint32_t(b))); }
    void grow() {
        std::vector<int32_t> slots(slots_.size() * 2, kEmpty);
        size_t mask = slots.size() - 1;
        for (int32_t v : slots_) {
            if (v != kEmpty) {
                size_t i = hash(first_[size_t(v)], second_[size_t(v)]) & mask;
                while (slots[i] != kEmpty) {
                    i = (i + 1) & mask;
                }
                slots[i] = v;
            }
        }
        slots_.swap(slots);
    }
    const std::vector<int32_t>& first_;
    const std::vector<int32_t>& second_;
    std::vector<int32_t> slots_;
    size_t count_ = 0;
};

// A fixed-size array of fresh zero pages (pages.hpp), for a collapse's big transients: given
// back to the system when freed, by whichever thread, where a heap block of a thread's own
// arena might stay with that arena.
template <typename T>
class PageArray {
public:
    explicit PageArray(size_t n) : n_(n), p_(n ? static_cast<T*>(fresh_pages(n * sizeof(T))) : nullptr) {
        if (n && !p_) {
            throw std::bad_alloc();
        }
    }
    PageArray(const PageArray&) = delete;
    PageArray& operator=(const PageArray&) = delete;
    ~PageArray() { free_pages(p_, n_ * sizeof(T)); }
    T& operator[](size_t i) { return p_[i]; }
    const T& operator[](size_t i) const { return p_[i]; }
    // Back to zeros (the pages given back, fresh ones met when next written).
    void clear() {
        if (p_) {
            madvise(p_, n_ * sizeof(T), MADV_DONTNEED);
        }
    }

private:
    size_t n_;
    T* p_;
};

// For the inclusive figures and the moments: in `up`, each collapsed node's nearest node at or
// above it that is the first of its site (or function) from the root, or -1 (build() fills it
// in its first pass). The next such node above `a`'s.
int32_t first_above(const PageArray<int32_t>& up, const std::vector<int32_t>& parent, int32_t a) {
    const int32_t p = parent[size_t(a)];
    return p >= 0 ? up[size_t(p)] : -1;
}

// Each site's and function's live bytes at each kept moment, in two steps.
//
// moment_changes(): per log (GIL and no-GIL figures, summed), an entry's value holds from the
// first kept moment after its raw moment; a node's entries come in the order of their moments.
// Each entry becomes its node's change since the node's entry before (the first: since 0),
// {collapsed node, kept moment it first applies to, change}; entries that change nothing, or
// apply to no kept moment or collapsed node, go. The changes are then sorted by moment in place
// (a counting sort: at most 257 moments); a node's changes within one moment add up to its
// latest value there, in any order. With `release` this is done in the snapshot's own entries
// (a big tree's log holds millions of them); else in a copy. It reads only the first pass's
// columns, and runs beside the rest of build() (see there).
//
// apply_moments(): the changes, moment by moment: to the changed node's site (self), and once
// to each distinct site and function on its path (inclusive, as the run's own inclusive
// figures count each subtree once per line and function on its path). A path's distinct sites
// are its nodes that are the first of their site from the root: `site_up[i]` is the nearest of
// them at or above node i (found by build()'s first pass), so a change climbs only those, not the
// whole path (a recursion's path repeats few sites: 2^17 call paths on 3.12, ~20 levels each).
struct MomentChanges {
    std::vector<moments::Entry> copies[2];
    std::vector<moments::Entry>* logs[2] = {nullptr, nullptr};
    std::vector<size_t> begins[2];  // per log: where each moment's changes begin
};

void moment_changes(SnapshotData& snap, size_t n, const std::vector<int32_t>& fid_of, bool release,
                    MomentChanges& out) {
    moments::Snapshot& ms = snap.moments;
    const size_t kept = ms.bounds.size();
    out.logs[0] = &ms.gil;
    out.logs[1] = &ms.nogil;
    if (kept == 0) {
        return;
    }
    const moments::KeptMoments kept_moment(ms.bounds);
    PageArray<int64_t> value(n);  // each node's live bytes, as of its entry read last
    for (int l = 0; l < 2; ++l) {
        if (!release) {
            out.copies[l] = *out.logs[l];
            out.logs[l] = &out.copies[l];
        }
        std::vector<moments::Entry>& log = *out.logs[l];
        std::vector<size_t>& begin = out.begins[l];
        begin.assign(kept + 1, 0);
        if (log.empty()) {
            continue;  // (the no-GIL log, in most runs)
        }
        if (l == 1) {
            value.clear();  // (its figures are apart from the GIL log's)
        }
        size_t w = 0;
        for (const moments::Entry& e : log) {
            const size_t k = e.node < n ? kept_moment(e.moment) : kept;
            if (k >= kept) {
                continue;
            }
            const int64_t d = e.live - value[e.node];
            value[e.node] = e.live;
            if (d != 0 && fid_of[e.node] >= 0) {
                log[w++] = moments::Entry{uint32_t(fid_of[e.node]), uint32_t(k), d};
                ++begin[k + 1];
            }
        }
        log.resize(w);
        for (size_t k = 0; k < kept; ++k) {
            begin[k + 1] += begin[k];
        }
        std::vector<size_t> next(begin.begin(), begin.end() - 1);
        for (size_t k = 0; k < kept; ++k) {
            while (next[k] < begin[k + 1]) {
                moments::Entry e = log[next[k]];
                while (e.moment != k) {
                    std::swap(e, log[next[e.moment]++]);
                }
                log[next[k]++] = e;
            }
        }
    }
}

void apply_moments(SnapshotData& snap, MomentChanges& changes, const std::vector<int32_t>& site_of,
                   PageArray<int32_t>& site_up, PageArray<int32_t>& func_up, size_t fns, Built& out,
                   bool release) {
    moments::Snapshot& ms = snap.moments;
    const size_t kept = ms.bounds.size();
    for (const moments::Bound& b : ms.bounds) {
        out.moment_t.push_back(b.t);
        out.moment_traced.push_back(b.traced);
    }
    if (kept == 0) {
        return;
    }
    const size_t m = out.parent.size(), sites = out.site_file.size();
    PageArray<int64_t> node_delta(m);
    PageArray<uint32_t> node_stamp(m);
    std::vector<int64_t> self(sites), incl(sites), fval(fns);
    std::vector<int64_t> shown_self(sites), shown_incl(sites), shown_f(fns);
    std::vector<uint32_t> site_stamp(sites), f_stamp(fns);
    std::vector<int32_t> changed_nodes, changed_sites, changed_fns;
    for (size_t k = 0; k < kept; ++k) {
        const uint32_t stamp = uint32_t(k + 1);
        changed_nodes.clear();
        changed_sites.clear();
        changed_fns.clear();
        for (int l = 0; l < 2; ++l) {
            const std::vector<moments::Entry>& log = *changes.logs[l];
            const std::vector<size_t>& begin = changes.begins[l];
            for (size_t i = begin[k]; i < begin[k + 1]; ++i) {
                const size_t c = log[i].node;
                if (node_stamp[c] != stamp) {
                    node_stamp[c] = stamp;
                    node_delta[c] = 0;
                    changed_nodes.push_back(int32_t(c));
                }
                node_delta[c] += log[i].live;
            }
        }
        for (int32_t c : changed_nodes) {
            const int64_t d = node_delta[size_t(c)];
            if (d == 0) {
                continue;
            }
            self[size_t(site_of[size_t(c)])] += d;
            for (int32_t a = site_up[size_t(c)]; a >= 0; a = first_above(site_up, out.parent, a)) {
                const size_t s = size_t(site_of[size_t(a)]);
                incl[s] += d;
                if (site_stamp[s] != stamp) {
                    site_stamp[s] = stamp;
                    changed_sites.push_back(int32_t(s));
                }
            }
            for (int32_t a = func_up[size_t(c)]; a >= 0; a = first_above(func_up, out.parent, a)) {
                const size_t f = size_t(out.function[size_t(a)]);
                fval[f] += d;
                if (f_stamp[f] != stamp) {
                    f_stamp[f] = stamp;
                    changed_fns.push_back(int32_t(f));
                }
            }
        }
        std::sort(changed_sites.begin(), changed_sites.end());
        for (int32_t s : changed_sites) {
            if (self[size_t(s)] == shown_self[size_t(s)] && incl[size_t(s)] == shown_incl[size_t(s)]) {
                continue;
            }
            shown_self[size_t(s)] = self[size_t(s)];
            shown_incl[size_t(s)] = incl[size_t(s)];
            out.msite_moment.push_back(int32_t(k));
            out.msite_site.push_back(s);
            out.msite_live.push_back(self[size_t(s)]);
            out.msite_incl.push_back(incl[size_t(s)]);
        }
        std::sort(changed_fns.begin(), changed_fns.end());
        for (int32_t f : changed_fns) {
            if (fval[size_t(f)] == shown_f[size_t(f)]) {
                continue;
            }
            shown_f[size_t(f)] = fval[size_t(f)];
            out.mfunc_moment.push_back(int32_t(k));
            out.mfunc_function.push_back(f);
            out.mfunc_live.push_back(fval[size_t(f)]);
        }
    }
    if (release) {  // (read once, as the changes)
        free_now(ms.gil);
        free_now(ms.nogil);
    }
}

// A job run by a thread of its own, beside the caller's work; by the caller, in finish(), when
// no thread could be started. The thread is memlens's: paused from its first instruction (what
// it allocates is not the program's, as for the caller: the checkpoint thread, or the thread
// ending the run), and started with every signal blocked (the program's handlers run in its
// own threads). It is always joined, even when the caller's work throws.
class Beside {
public:
    template <typename F>
    explicit Beside(F job) : job_(std::move(job)) {
        sigset_t all, previous;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &previous);
        try {
            thread_ = std::thread([this] {
                set_thread_paused(true);
                run();
            });
        } catch (...) {
            // (one thread then: finish() runs the job)
        }
        pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    }
    Beside(const Beside&) = delete;
    Beside& operator=(const Beside&) = delete;
    ~Beside() {
        if (thread_.joinable()) {
            thread_.join();
        }
    }
    // Waits for the job (or runs it), and throws what it threw.
    void finish() {
        if (thread_.joinable()) {
            thread_.join();
        } else {
            run();
        }
        if (error_) {
            std::rethrow_exception(error_);
        }
    }

private:
    void run() {
        try {
            job_();
        } catch (...) {
            error_ = std::current_exception();
        }
    }
    std::function<void()> job_;
    std::exception_ptr error_;
    std::thread thread_;
};

}  // namespace

void build(SnapshotData& snap, const std::vector<int32_t>& file_of_code,
           const std::vector<int32_t>& function_of_code, int32_t functions, Built& out, bool release) {
    out = Built{};
    const size_t n = snap.nodes.size();
    std::vector<int32_t> fid_of(n, -1);  // native node -> collapsed node (-1: none)
    std::vector<int32_t> site_of;        // collapsed node -> site
    // (collapsed parent, site) -> collapsed node; (file, line) -> site: needed by the first
    // pass only (freed after it).
    auto node_key = std::make_unique<PairIndex>(n, out.parent, site_of);
    PairIndex site_key(1024, out.site_file, out.site_line);
    // The collapsed columns get at most one row per node: room for them all at once (growing
    // by doubling copied each column about twice over), the slack given back after the pass.
    for (std::vector<int32_t>* v : {&out.parent, &out.file, &out.line, &out.function, &site_of}) {
        v->reserve(n);
    }
    // The site of a place (code, offset), remembered: a big tree has far more nodes than
    // places, and finding a place's line (a search of its code's line table) and then its site
    // was a third of this pass.
    struct Place {
        uint32_t code = UINT32_MAX;
        int32_t offset = 0;
        int32_t site = -1;
    };
    constexpr size_t kPlaces = 4096;
    std::vector<Place> places(kPlaces);
    // For the inclusive figures and the moments (first_above()). A new node is the first of
    // its site unless one of the firsts above its parent has that site: the few distinct sites
    // of its parent's path, not the whole path. (A node without a function is the first of
    // none.)
    PageArray<int32_t> site_up(n), func_up(n);
    // Each collapsed node's first child (its id + 1: 0 none, as fresh pages read) and site.
    struct FirstChild {
        int32_t fid1;
        int32_t site;
    };
    auto first_child = std::make_unique<PageArray<FirstChild>>(n);
    auto up_of = [&](PageArray<int32_t>& up, int32_t fid, int32_t parent, auto same) {
        int32_t a = parent >= 0 ? up[size_t(parent)] : -1;
        const int32_t head = a;
        for (; a >= 0; a = first_above(up, out.parent, a)) {
            if (same(a)) {
                up[size_t(fid)] = head;
                return;
            }
        }
        up[size_t(fid)] = fid;
    };

    for (size_t id = 0; id < n; ++id) {
        const SnapshotNode& nd = snap.nodes[id];
        int32_t inherited = (id > 0 && nd.parent < n) ? fid_of[nd.parent] : -1;
        int32_t file = nd.code < file_of_code.size() ? file_of_code[nd.code] : -1;
        if (file < 0) {
            fid_of[id] = inherited;
        } else {
            size_t slot = 0;
            Place& place = places[mix((uint64_t(nd.code) << 32) | uint32_t(nd.offset)) & (kPlaces - 1)];
            if (place.code != nd.code || place.offset != nd.offset) {
                int32_t line = snap.lines.line(nd.code, nd.offset);
                int32_t found = site_key.find(file, line, &slot);
                if (found < 0) {
                    found = int32_t(out.site_file.size());
                    out.site_file.push_back(file);
                    out.site_line.push_back(line);
                    site_key.add(slot, found);
                }
                place = Place{nd.code, nd.offset, found};
            }
            const int32_t site = place.site;
            const int32_t line = out.site_line[size_t(site)];
            // A collapsed node's first child is kept beside it, not in node_key: most nodes are
            // a first child (a new path's nodes are), found or made with no lookup in the
            // index (whose slots are a cache miss each in a big tree); the index holds the
            // other children (and the roots).
            FirstChild* first = inherited >= 0 ? &(*first_child)[size_t(inherited)] : nullptr;
            int32_t fid = -1;
            const bool indexed = first == nullptr || first->fid1 != 0;  // (else: no child yet)
            if (indexed && first != nullptr && first->site == site) {
                fid = first->fid1 - 1;
            } else if (indexed) {
                fid = node_key->find(inherited, site, &slot);
            }
            if (fid < 0) {
                fid = int32_t(out.parent.size());
                const int32_t fn = function_of_code[nd.code];
                out.parent.push_back(inherited);
                out.file.push_back(file);
                out.line.push_back(line);
                out.function.push_back(fn);
                site_of.push_back(site);
                if (indexed) {
                    node_key->add(slot, fid);
                } else {
                    *first = FirstChild{fid + 1, site};
                }
                up_of(site_up, fid, inherited, [&](int32_t a) { return site_of[size_t(a)] == site; });
                if (fn >= 0 && fn < functions) {
                    up_of(func_up, fid, inherited, [&](int32_t a) { return out.function[size_t(a)] == fn; });
                } else {
                    func_up[size_t(fid)] = inherited >= 0 ? func_up[size_t(inherited)] : -1;
                }
            }
            fid_of[id] = fid;
        }
    }
    node_key.reset();
    first_child.reset();
    for (std::vector<int32_t>* v : {&out.parent, &out.file, &out.line, &out.function, &site_of}) {
        v->shrink_to_fit();
    }
    const size_t m = out.parent.size();
    const size_t sites = out.site_file.size();
    const size_t fns = size_t(functions > 0 ? functions : 0);
    out.site_native.assign(sites, Sums{});
    if (!snap.vars.empty()) {
        out.site_vars.assign(sites, SumVars{});
    }
    out.node_site.assign(n, -1);
    // The collapsed nodes' self figures. With `release`, in the snapshot's own column (a big
    // tree's largest transient was a second one): a node's collapsed node is never after it
    // (fid_of[id] <= id), so its slot has been read by the time it sums a collapsed node.
    std::vector<Sums>& self = release ? snap.sums : out.self;
    if (!release) {
        out.self.assign(m, Sums{});
    }
    for (size_t id = 0; id < n; ++id) {
        const Sums own = snap.sums[id];
        if (release) {
            snap.sums[id] = Sums{};
        }
        const int32_t fid = fid_of[id];
        if (fid >= 0) {
            const size_t site = size_t(site_of[size_t(fid)]);
            out.node_site[id] = int32_t(site);
            self[size_t(fid)].add(own);
            if (snap.nodes[id].code == kNativeCode) {
                out.site_native[site].add(own);
            }
            if (!snap.vars.empty()) {
                out.site_vars[site].add(snap.vars[id]);
            }
        }
    }
    if (release) {
        snap.sums.resize(m);  // (its capacity stays: shrinking would copy it)
        out.self = std::move(snap.sums);
        snap.sums = {};
        snap.released_nodes = n;
        free_now(snap.nodes);
        free_now(snap.vars);
    }
    // The moments' changes need only the first pass's columns, which nothing changes from here
    // on: a second thread makes them while this one sums subtrees (benchmarks/README.md).
    Beside moments([&] {
        MomentChanges changes;
        moment_changes(snap, n, fid_of, release, changes);
        apply_moments(snap, changes, site_of, site_up, func_up, fns, out, release);
    });

    // The sites' self figures; then subtree sums, in place of the self figures (a big tree's
    // second copy of them was its largest transient): a collapsed node's parent always
    // precedes it.
    std::vector<Sums>& sub = out.self;
    out.site_self.assign(sites, Sums{});
    out.site_incl.assign(sites, Sums{});
    out.function_incl.assign(fns, Sums{});
    for (size_t i = 0; i < m; ++i) {
        out.site_self[size_t(site_of[i])].add(sub[i]);
    }
    for (size_t i = m; i-- > 0;) {
        if (out.parent[i] >= 0) {
            sub[size_t(out.parent[i])].add(sub[i]);
        }
    }
    // Inclusive figures count each subtree once per site and per function on its path: at the
    // path's first node of that site or function (site_up/func_up name it: first_above()). In
    // the same pass, in order, each node goes back to its self figures: its subtree less its
    // children's, which come after it (its own slot is still its subtree when it is reached).
    // Passes in node order, where a depth-first walk went from node to scattered node.
    for (size_t i = 0; i < m; ++i) {
        const Sums whole = sub[i];
        if (site_up[i] == int32_t(i)) {
            out.site_incl[size_t(site_of[i])].add(whole);
        }
        const int32_t fn = out.function[i];
        if (fn >= 0 && size_t(fn) < fns && func_up[i] == int32_t(i)) {
            out.function_incl[size_t(fn)].add(whole);
        }
        if (out.parent[i] >= 0) {
            sub[size_t(out.parent[i])].subtract(whole);
        }
    }
    moments.finish();
}

}  // namespace memlens
