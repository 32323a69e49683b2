// See holders.hpp. The walk keeps, per object reached, the object, the entry it was reached
// from and its root (16 bytes), and which objects it has seen (a bitmap over the address
// space: about 1/128 of the memory walked); all freed when it returns.
#include "compat.hpp"  // first: Py_BUILD_CORE before Python.h (3.12 internal headers)
#include "holders.hpp"

#include <structmember.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "blocks.hpp"
#include "compat.hpp"
#include "hooks.hpp"
#include "pages.hpp"
#include "state.hpp"

namespace memlens::holders {
namespace {

constexpr uint32_t kNone = UINT32_MAX;
// Paths longer than this keep their first kHead and last kTail hops, with one "elided" hop
// (saying how many were left out) between them.
constexpr size_t kHead = 24;
constexpr size_t kTail = 15;
// Longest text kept of a name (a key's repr, a type name), in code points.
constexpr size_t kMaxText = 60;

struct Entry {
    PyObject* obj;
    uint32_t parent;  // the entry it was reached from (kNone: a root)
    uint32_t root;    // its root (an index into Walk::roots)
};

// The objects seen: one bit per 16 bytes of address space (objects are 16-byte aligned), in
// 1 GiB leaves of 8 MiB mapped without reserve (only the pages written cost memory: about
// 1/128 of the memory the walk goes through). Objects next to each other in memory have
// their bits next to each other, so the walk stays in cache where a hash table would miss
// on every object.
class Seen {
public:
    static constexpr int kLeafBits = 30;
    static constexpr size_t kLeafWords = (size_t(1) << (kLeafBits - 4)) / 64;
    static constexpr size_t kTop = size_t(1) << (48 - kLeafBits);

    ~Seen() {
        for (Leaf* leaf : leaves_) {
            free_pages(leaf->words, kLeafWords * sizeof(uint64_t));
            std::free(leaf);
        }
        std::free(top_);
    }
    bool init() {
        top_ = static_cast<Leaf**>(std::calloc(kTop, sizeof(Leaf*)));
        return top_ != nullptr;
    }
    // Adds `p`; false when it was there already (or memory ran out: then nothing is added).
    bool insert(uintptr_t p) {
        Leaf* leaf = leaf_of(p, true);
        if (!leaf) {
            return false;
        }
        size_t bit = (p >> 4) & ((size_t(1) << (kLeafBits - 4)) - 1);
        uint64_t& word = leaf->words[bit >> 6];
        uint64_t mask = uint64_t(1) << (bit & 63);
        if (word & mask) {
            return false;
        }
        if (!word) {
            size_t page = (bit >> 6) >> 9;  // 512 words per 4 KiB page
            if (!(leaf->pages[page >> 6] & (uint64_t(1) << (page & 63)))) {
                leaf->pages[page >> 6] |= uint64_t(1) << (page & 63);
                ++pages_;
            }
        }
        word |= mask;
        return true;
    }
    bool contains(uintptr_t p) const {
        Leaf* leaf = leaf_of(p, false);
        size_t bit = (p >> 4) & ((size_t(1) << (kLeafBits - 4)) - 1);
        return leaf && (leaf->words[bit >> 6] & (uint64_t(1) << (bit & 63)));
    }
    // Memory written (the top table is mapped lazily too: its few pages in use are left out).
    size_t bytes() const { return pages_ * 4096 + leaves_.size() * sizeof(Leaf); }
    bool failed() const { return failed_; }

private:
    struct Leaf {
        uint64_t* words;
        uint64_t pages[kLeafWords / 512 / 64];
    };
    Leaf* leaf_of(uintptr_t p, bool create) const {
        if (p >= (uintptr_t(1) << 48) || !top_) {
            return nullptr;
        }
        Leaf*& leaf = top_[p >> kLeafBits];
        if (!leaf && create) {
            auto* fresh = static_cast<Leaf*>(std::calloc(1, sizeof(Leaf)));
            void* m = fresh ? fresh_pages(kLeafWords * sizeof(uint64_t)) : nullptr;
            if (!m) {
                std::free(fresh);
                failed_ = true;
                return nullptr;
            }
            fresh->words = static_cast<uint64_t*>(m);
            leaf = fresh;
            leaves_.push_back(fresh);
        }
        return leaf;
    }
    Leaf** top_ = nullptr;
    mutable std::vector<Leaf*> leaves_;
    mutable size_t pages_ = 0;
    mutable bool failed_ = false;
};

// What a found block is of the object its path ends at: the object's own block, or memory it
// keeps apart.
enum class Via : uint8_t { Object, Items, Table, Data };

struct Found {
    int32_t target;
    uint32_t entry;
    Via via;
};

struct RootInfo {
    std::string kind;
    std::string name;
};

struct Walk {
    const std::vector<int32_t>* node_site;
    const std::vector<int32_t>* target_of_site;
    PyObject* ndarray;
    uint32_t per_target;
    uint64_t max_visits;
    std::vector<Entry> entries;
    std::vector<RootInfo> roots;
    Seen seen;
    std::vector<uint32_t> samples;  // per target: paths kept (at most per_target)
    // Per target: the blocks it has in the tracer's tables, when fewer than per_target (else
    // UINT32_MAX), and the distinct ones of them met so far: a block met twice (a keys table
    // that instances share, an array's data met through its views) is kept once.
    std::vector<uint32_t> tracked;
    std::vector<std::vector<uintptr_t>> met;
    std::vector<bool> done;   // per target: its samples, or all its blocks, found
    size_t short_targets = 0;  // targets not done
    std::vector<Found> found;
    uint32_t current = kNone;  // the entry being expanded
    size_t unchecked = 0;      // entries from here on are not checked yet
    bool full = false;         // max_visits reached
};

// The call-tree node a block is charged to, or kNone.
uint32_t node_of(uintptr_t p) {
    uint32_t node = 0;
    if (blocks::page_get(p, &node)) {
        return node;
    }
    if (!blocks::filter_hit(p)) {
        return kNone;
    }
    Guard g(g_table_lock);
    blocks::Entry e{};
    return blocks::table_get(p, &e) ? e.node : kNone;
}

void check(Walk& w, uintptr_t block, uint32_t entry, Via via) {
    uint32_t node = node_of(block);
    if (node >= w.node_site->size()) {
        return;
    }
    int32_t site = (*w.node_site)[node];
    if (site < 0 || size_t(site) >= w.target_of_site->size()) {
        return;
    }
    int32_t t = (*w.target_of_site)[size_t(site)];
    if (t < 0 || w.done[size_t(t)]) {
        return;
    }
    bool all_met = false;
    if (uint32_t tracked = w.tracked[size_t(t)]; tracked != UINT32_MAX) {
        // A line with few blocks: each is kept once, by the first path that meets it (more
        // paths to the same block would use up the samples before the other blocks).
        std::vector<uintptr_t>& met = w.met[size_t(t)];
        if (std::find(met.begin(), met.end(), block) != met.end()) {
            return;
        }
        met.push_back(block);
        all_met = met.size() >= tracked;
    }
    w.found.push_back(Found{t, entry, via});
    if (++w.samples[size_t(t)] == w.per_target || all_met) {
        w.done[size_t(t)] = true;
        --w.short_targets;
    }
}

// Adds an object reached from the entry being expanded (or a root) unless seen already
// (`root`: a root, whose address was put in the seen set before the walk began).
void reach(Walk& w, PyObject* child, uint32_t root, bool is_root = false) {
    if (w.entries.size() >= w.max_visits) {
        w.full = true;
        return;
    }
    if (!w.seen.insert(reinterpret_cast<uintptr_t>(child)) && !is_root) {
        return;
    }
    w.entries.push_back(Entry{child, w.current, root});
    __builtin_prefetch(child);  // checked after its siblings are in (see expand)
}

// Checks the objects reached since the last check (their headers were prefetched meanwhile).
void check_new(Walk& w) {
    for (size_t i = w.unchecked; i < w.entries.size(); ++i) {
        check(w, compat::block_of(w.entries[i].obj), uint32_t(i), Via::Object);
    }
    w.unchecked = w.entries.size();
}

// Checks go by batches of this many objects: enough for their prefetches to overlap, few
// enough that a container of a million items stops soon after every line has its samples.
constexpr size_t kBatch = 64;

int visit(PyObject* child, void* arg) {
    auto& w = *static_cast<Walk*>(arg);
    reach(w, child, w.entries[w.current].root);
    if (w.entries.size() - w.unchecked >= kBatch) {
        check_new(w);
    }
    return w.full || w.short_targets == 0;  // nonzero: the traverse stops
}

bool is_ndarray(const Walk& w, PyObject* op) {
    return w.ndarray && PyType_Check(w.ndarray) && PyObject_TypeCheck(op, reinterpret_cast<PyTypeObject*>(w.ndarray));
}

// Visits what an object refers to, and checks the memory it keeps apart.
void expand(Walk& w, uint32_t i) {
    w.current = i;
    PyObject* op = w.entries[i].obj;
    PyTypeObject* tp = Py_TYPE(op);
    if (PyObject_IS_GC(op) && tp->tp_traverse) {
        tp->tp_traverse(op, visit, &w);
    }
    if (PyFrame_Check(op) && compat::frame_running(op)) {
        compat::frame_locals(op, [&](PyObject* v, PyObject*) { reach(w, v, w.entries[i].root); });
    }
    check_new(w);
    if (PyList_Check(op)) {
        if (PyObject** items = reinterpret_cast<PyListObject*>(op)->ob_item) {
            check(w, reinterpret_cast<uintptr_t>(items), i, Via::Items);
        }
    } else if (PyDict_Check(op)) {
        check(w, reinterpret_cast<uintptr_t>(reinterpret_cast<PyDictObject*>(op)->ma_keys), i, Via::Table);
    } else if (PyAnySet_Check(op)) {
        auto* so = reinterpret_cast<PySetObject*>(op);
        if (so->table != so->smalltable) {
            check(w, reinterpret_cast<uintptr_t>(so->table), i, Via::Table);
        }
    } else if (PyByteArray_Check(op)) {
        if (uintptr_t data = compat::bytearray_block(op)) {
            check(w, data, i, Via::Data);
        }
    } else if (is_ndarray(w, op)) {
        // numpy's PyArrayObject starts with its data pointer, after the object header.
        char* data = *reinterpret_cast<char**>(reinterpret_cast<char*>(op) + sizeof(PyObject));
        if (data) {
            check(w, reinterpret_cast<uintptr_t>(data), i, Via::Data);
        }
    }
}

// Expands entries from `from` on. True when there is nothing left to expand, or nothing left
// to look for; false when stopped by max_visits, max_seconds or memory.
bool run(Walk& w, size_t from, std::chrono::steady_clock::time_point deadline, bool* timed_out) {
    for (size_t i = from; i < w.entries.size(); ++i) {
        if (w.short_targets == 0) {
            return true;
        }
        if (w.full || w.seen.failed()) {
            return false;
        }
        if ((i & 1023) == 0 && std::chrono::steady_clock::now() > deadline) {
            *timed_out = true;
            return false;
        }
        expand(w, uint32_t(i));
    }
    return !w.full && !w.seen.failed();
}

// -- describing a path -----------------------------------------------------------------------

void put_utf8(std::string& out, uint32_t c) {
    if (c < 0x80) {
        out += char(c);
    } else if (c < 0x800) {
        out += char(0xC0 | (c >> 6));
        out += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += char(0xE0 | (c >> 12));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    } else {
        out += char(0xF0 | (c >> 18));
        out += char(0x80 | ((c >> 12) & 0x3F));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    }
}

// A str's text, at most kMaxText code points ("…" after), read from its storage (no UTF-8
// cache is made in it); quoted as Python writes a str literal when `quote`.
std::string str_text(PyObject* s, bool quote) {
    std::string out;
    if (!compat::str_ready(s)) {
        return "<str>";
    }
    int kind = PyUnicode_KIND(s);
    const void* data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (quote) {
        out += '\'';
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        if (size_t(i) >= kMaxText) {
            out += "\xE2\x80\xA6";  // …
            break;
        }
        uint32_t c = PyUnicode_READ(kind, data, i);
        if (quote && (c == '\'' || c == '\\')) {
            out += '\\';
            out += char(c);
        } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0)) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\x%02x", c);
            out += esc;
        } else if (c >= 0xD800 && c < 0xE000) {  // a lone surrogate: no UTF-8 for it
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\u%04x", c);
            out += esc;
        } else {
            put_utf8(out, c);
        }
    }
    if (quote) {
        out += '\'';
    }
    return out;
}

std::string type_name(PyObject* op) {
    const char* name = Py_TYPE(op)->tp_name;
    size_t n = name ? strnlen(name, kMaxText) : 0;
    return n ? std::string(name, n) : "?";
}

// A dict key as the program would write it: a literal for str, int, float, bytes, bool, None
// and tuples of them; <type> for anything else (no __repr__ of the program's runs).
std::string key_text(PyObject* k, int depth = 0) {
    char buf[64];
    if (PyUnicode_CheckExact(k)) {
        return str_text(k, true);
    }
    if (k == Py_None) {
        return "None";
    }
    if (PyBool_Check(k)) {
        return k == Py_True ? "True" : "False";
    }
    if (PyLong_CheckExact(k)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(k, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return "<int>";
        }
        std::snprintf(buf, sizeof buf, "%lld", v);
        return buf;
    }
    if (PyFloat_CheckExact(k)) {
        std::snprintf(buf, sizeof buf, "%.17g", PyFloat_AS_DOUBLE(k));
        return buf;
    }
    if (PyBytes_CheckExact(k)) {
        std::string out = "b'";
        Py_ssize_t n = PyBytes_GET_SIZE(k);
        const char* b = PyBytes_AS_STRING(k);
        for (Py_ssize_t i = 0; i < n && size_t(i) < kMaxText; ++i) {
            auto c = static_cast<unsigned char>(b[i]);
            if (c < 0x20 || c >= 0x7F || c == '\'' || c == '\\') {
                std::snprintf(buf, sizeof buf, "\\x%02x", c);
                out += buf;
            } else {
                out += char(c);
            }
        }
        return out + (size_t(n) > kMaxText ? "\xE2\x80\xA6'" : "'");
    }
    if (PyTuple_CheckExact(k) && depth == 0) {
        std::string out = "(";
        Py_ssize_t n = PyTuple_GET_SIZE(k);
        for (Py_ssize_t i = 0; i < n && i < 4; ++i) {
            out += (i ? ", " : "") + key_text(PyTuple_GET_ITEM(k, i), 1);
        }
        return out + (n > 4 ? ", \xE2\x80\xA6)" : n == 1 ? ",)" : ")");
    }
    return "<" + type_name(k) + ">";
}

struct Edge {
    const char* kind;
    std::string name;
    PyObject* key = nullptr;  // a dict's key (kind "key")
};

// How `child` is held by `parent` (both alive: the GIL was held since they were reached).
Edge describe(PyObject* parent, PyObject* child) {
    if (PyModule_Check(parent)) {
        return PyModule_GetDict(parent) == child ? Edge{"dict_of", {}} : Edge{"referent", {}};
    }
    if (PyType_Check(parent) && reinterpret_cast<PyTypeObject*>(parent)->tp_dict == child) {
        return Edge{"dict_of", {}};
    }
    if (PyDict_Check(parent)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(parent, &pos, &k, &v)) {
            if (v == child) {
                return Edge{"key", key_text(k), k};
            }
            if (k == child) {
                return Edge{"dict_key", key_text(k)};
            }
        }
        return Edge{"referent", {}};
    }
    if (PyList_Check(parent) || PyTuple_Check(parent)) {
        PyObject** items = PyList_Check(parent) ? reinterpret_cast<PyListObject*>(parent)->ob_item
                                                : reinterpret_cast<PyTupleObject*>(parent)->ob_item;
        for (Py_ssize_t i = 0; items && i < Py_SIZE(parent); ++i) {
            if (items[i] == child) {
                return Edge{"index", std::to_string(i)};
            }
        }
        return Edge{"referent", {}};
    }
    if (PyAnySet_Check(parent)) {
        return Edge{"member", {}};
    }
    if (PyFrame_Check(parent)) {
        Edge e{"referent", {}};
        if (PyFrame_Check(child)) {
            PyCodeObject* co = PyFrame_GetCode(reinterpret_cast<PyFrameObject*>(child));
            e = Edge{"frame", str_text(compat::code_qualname(co), false)};
            Py_DECREF(co);
            return e;
        }
        compat::frame_locals(parent, [&](PyObject* v, PyObject* name) {
            if (v == child && e.kind[0] == 'r') {
                e = Edge{"local", str_text(name, false)};
            }
        });
        return e;
    }
    if (PyCell_Check(parent)) {
        return Edge{"referent", "cell_contents"};
    }
    if (compat::instance_dict(parent) == child) {
        return Edge{"dict_of", {}};
    }
    if (PyObject* name = compat::value_attribute(parent, child)) {
        return Edge{"attribute", str_text(name, false)};
    }
    // Slots and members of C types (a function's __globals__, a bound method's __self__).
    PyObject* mro = Py_TYPE(parent)->tp_mro;
    Py_ssize_t n = mro && PyTuple_Check(mro) ? PyTuple_GET_SIZE(mro) : 0;
    for (Py_ssize_t j = 0; j < n; ++j) {
        auto* tp = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, j));
        for (PyMemberDef* m = tp->tp_members; m && m->name; ++m) {
            if ((m->type == T_OBJECT || m->type == T_OBJECT_EX) && !(m->flags & compat::kRelativeOffset) &&
                m->offset > 0 && *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(parent) + m->offset) == child) {
                return Edge{"attribute", std::string(m->name, strnlen(m->name, kMaxText))};
            }
        }
    }
    return Edge{"referent", {}};
}

Hop hop_of(PyObject* op, const char* kind, std::string name) {
    return Hop{kind, std::move(name), type_name(op), node_of(compat::block_of(op))};
}

Chain describe_path(const Walk& w, const Found& f) {
    std::vector<uint32_t> path;
    for (uint32_t e = f.entry; e != kNone; e = w.entries[e].parent) {
        path.push_back(e);
    }
    Chain c{f.target, {}};
    const Entry& root = w.entries[path.back()];
    const RootInfo& info = w.roots[root.root];
    c.hops.push_back(hop_of(root.obj, info.kind.c_str(), info.name));
    bool through_dict = false;  // the hop before reached an object's (module's, class's) __dict__
    for (size_t j = path.size() - 1; j-- > 0;) {
        PyObject* parent = w.entries[path[j + 1]].obj;
        PyObject* child = w.entries[path[j]].obj;
        Edge e = describe(parent, child);
        if (std::strcmp(e.kind, "dict_of") == 0) {
            through_dict = true;  // shown as the attribute the next hop names
            continue;
        }
        if (through_dict && std::strcmp(e.kind, "key") == 0 && e.key && PyUnicode_CheckExact(e.key)) {
            e = Edge{"attribute", str_text(e.key, false)};
        }
        through_dict = false;
        c.hops.push_back(hop_of(child, e.kind, std::move(e.name)));
    }
    if (f.via != Via::Object) {
        static const char* const what[] = {"", "items", "table", "data"};
        PyObject* last = w.entries[f.entry].obj;
        uintptr_t block = f.via == Via::Items   ? reinterpret_cast<uintptr_t>(reinterpret_cast<PyListObject*>(last)->ob_item)
                          : f.via == Via::Data && PyByteArray_Check(last)
                              ? compat::bytearray_block(last)
                          : f.via == Via::Data ? reinterpret_cast<uintptr_t>(
                                                     *reinterpret_cast<char**>(reinterpret_cast<char*>(last) + sizeof(PyObject)))
                          : PyDict_Check(last) ? reinterpret_cast<uintptr_t>(reinterpret_cast<PyDictObject*>(last)->ma_keys)
                                               : reinterpret_cast<uintptr_t>(reinterpret_cast<PySetObject*>(last)->table);
        c.hops.push_back(Hop{"buffer", what[int(f.via)], "", node_of(block)});
    }
    if (c.hops.size() > kHead + kTail + 1) {
        size_t cut = c.hops.size() - kHead - kTail;
        std::vector<Hop> kept(c.hops.begin(), c.hops.begin() + kHead);
        kept.push_back(Hop{"elided", std::to_string(cut), "", kNone});
        kept.insert(kept.end(), c.hops.end() - kTail, c.hops.end());
        c.hops.swap(kept);
    }
    return c;
}

}  // namespace

std::vector<int32_t> table_blocks(const std::vector<int32_t>& node_site, size_t sites) {
    struct Count {
        const std::vector<int32_t>* node_site;
        std::vector<int32_t> per_site;
        int32_t site_of(uint32_t node) const {
            int32_t site = node < node_site->size() ? (*node_site)[node] : -1;
            return site >= 0 && size_t(site) < per_site.size() ? site : -1;
        }
    } c{&node_site, std::vector<int32_t>(sites, 0)};
    // (Read before the lock is taken, as a snapshot does: see there.)
    const std::vector<uintptr_t> listed = hooks::free_listed_blocks();
    Guard g(g_table_lock);
    // What the free lists hold is tracked but dead: no walk finds it, so it is not counted
    // (a line whose blocks are mostly there, e.g. tuples dropped by the thousand, wanted
    // objects it could never find, and the walk went to its bounds).
    for (uintptr_t block : listed) {
        blocks::Entry e{};
        int32_t site = blocks::filter_hit(block) && blocks::table_get(block, &e) ? c.site_of(e.node) : -1;
        if (site >= 0) {
            --c.per_site[size_t(site)];
        }
    }
    blocks::table_nodes(
        [](uint32_t node, void* arg) {
            auto& c = *static_cast<Count*>(arg);
            int32_t site = c.site_of(node);
            if (site >= 0 && c.per_site[size_t(site)] < INT32_MAX) {
                ++c.per_site[size_t(site)];
            }
        },
        &c);
    return std::move(c.per_site);
}

void find(const std::vector<Root>& roots, const std::vector<PyObject*>& skip, const std::vector<PyObject*>& everything,
          const std::vector<int32_t>& node_site, const std::vector<int32_t>& target_of_site,
          const std::vector<int32_t>& tracked, PyObject* ndarray, uint32_t per_target, uint64_t max_visits,
          double max_seconds, Result& out) {
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now();
    auto deadline = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(max_seconds));
    out = Result{};
    Walk w;
    w.node_site = &node_site;
    w.target_of_site = &target_of_site;
    w.ndarray = ndarray;
    w.per_target = per_target ? per_target : 1;
    w.max_visits = max_visits < UINT32_MAX - 1 ? max_visits : UINT32_MAX - 1;
    int32_t targets = 0;
    for (int32_t t : target_of_site) {
        targets = t + 1 > targets ? t + 1 : targets;
    }
    w.samples.assign(size_t(targets), 0);
    w.tracked.assign(size_t(targets), UINT32_MAX);
    w.met.resize(size_t(targets));
    w.done.assign(size_t(targets), false);
    w.short_targets = size_t(targets);
    for (size_t t = 0; t < tracked.size() && t < w.tracked.size(); ++t) {
        if (tracked[t] >= 0 && uint32_t(tracked[t]) < w.per_target) {
            w.tracked[t] = uint32_t(tracked[t]);
            if (tracked[t] == 0) {
                w.done[t] = true;  // (nothing of it to find)
                --w.short_targets;
            }
        }
    }
    if (!w.seen.init()) {
        return;
    }
    // Roots are entered only as roots, in their tier: an object a module holds is named from
    // that module, not from another module that imported it.
    for (PyObject* op : skip) {
        w.seen.insert(reinterpret_cast<uintptr_t>(op));
    }
    for (const Root& r : roots) {
        w.seen.insert(reinterpret_cast<uintptr_t>(r.object));
    }
    bool timed_out = false;
    bool complete = true;
    for (size_t r = 0; r < roots.size() && complete && w.short_targets > 0;) {
        size_t from = w.entries.size();
        int tier = roots[r].tier;
        for (; r < roots.size() && roots[r].tier == tier; ++r) {
            w.roots.push_back(RootInfo{roots[r].kind, roots[r].name});
            w.current = kNone;
            reach(w, roots[r].object, uint32_t(w.roots.size() - 1), true);
        }
        check_new(w);
        complete = run(w, from, deadline, &timed_out);
    }
    if (complete && w.short_targets > 0 && !everything.empty()) {
        // What the roots do not reach: held by C code (an object no other unreached one refers
        // to), or in a reference cycle the collector has not freed yet.
        Seen unreached, referenced;
        if (unreached.init() && referenced.init()) {
            std::vector<PyObject*> left;
            for (PyObject* op : everything) {
                if (!w.seen.contains(reinterpret_cast<uintptr_t>(op)) && unreached.insert(reinterpret_cast<uintptr_t>(op))) {
                    left.push_back(op);
                }
            }
            struct Mark {
                Seen* unreached;
                Seen* referenced;
            } mark{&unreached, &referenced};
            for (PyObject* op : left) {
                if (PyObject_IS_GC(op) && Py_TYPE(op)->tp_traverse) {
                    Py_TYPE(op)->tp_traverse(
                        op,
                        [](PyObject* child, void* arg) {
                            auto* m = static_cast<Mark*>(arg);
                            if (child != nullptr && m->unreached->contains(reinterpret_cast<uintptr_t>(child))) {
                                m->referenced->insert(reinterpret_cast<uintptr_t>(child));
                            }
                            return 0;
                        },
                        &mark);
                }
            }
            // Roots of their own first ("c"), then what is left, in cycles: the program's own
            // objects (instances of classes it made) before builtin containers, so that a path
            // reads from the object that owns the others.
            for (int pass = 0; pass < 3 && complete && w.short_targets > 0; ++pass) {
                size_t from = w.entries.size();
                for (PyObject* op : left) {
                    bool is_root = !referenced.contains(reinterpret_cast<uintptr_t>(op));
                    bool own = PyType_HasFeature(Py_TYPE(op), Py_TPFLAGS_HEAPTYPE);
                    bool now = pass == 0 ? is_root : !is_root && (pass == 1) == own;
                    if (now && !w.seen.contains(reinterpret_cast<uintptr_t>(op))) {
                        w.roots.push_back(RootInfo{pass == 0 ? "c" : "cycle", type_name(op)});
                        w.current = kNone;
                        reach(w, op, uint32_t(w.roots.size() - 1));
                    }
                }
                check_new(w);
                complete = run(w, from, deadline, &timed_out);
            }
            out.bytes += unreached.bytes() + referenced.bytes() + left.capacity() * sizeof(PyObject*);
        }
    }
    for (const Found& f : w.found) {
        out.chains.push_back(describe_path(w, f));
    }
    out.visited = w.entries.size();
    out.complete = complete || w.short_targets == 0;
    out.timed_out = timed_out;
    out.bytes += w.entries.capacity() * sizeof(Entry) + w.seen.bytes();
    out.seconds = std::chrono::duration<double>(clock::now() - t0).count();
}

}  // namespace memlens::holders
