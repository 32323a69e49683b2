// Bindings only: every function here forwards to tracer.hpp / snapshot.hpp and converts plain
// data into Python objects (typed arrays for per-node columns).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>
#include <string>
#include <vector>

#include "codes.hpp"
#include "holders.hpp"
#include "snapshot.hpp"
#include "stack.hpp"
#include "tracer.hpp"

namespace nb = nanobind;

namespace {

void start(const std::string& mode, uint64_t sample_interval, uint64_t seed, double timeline_interval_ms,
           bool watch_exits, bool native, bool track_reuse) {
    memlens::Options o;
    if (mode == "exact") {
        o.mode = memlens::Mode::Exact;
    } else if (mode == "sampling") {
        o.mode = memlens::Mode::Sampling;
    } else {
        throw nb::value_error("mode must be 'exact' or 'sampling'");
    }
    o.sample_interval = sample_interval;
    o.seed = seed;
    o.timeline_interval_ms = timeline_interval_ms;
    o.watch_exits = watch_exits;
    o.native = native;
    o.track_reuse = track_reuse;
    std::string err = memlens::start(o);
    if (!err.empty()) {
        throw std::runtime_error(err);
    }
}

// array.array(typecode, raw bytes of `v`)
template <typename T>
nb::object typed(const std::vector<T>& v, const char* typecode) {
    static nb::object array = nb::module_::import_("array").attr("array");
    nb::object a = array(typecode);
    // Read through a view of the vector: the array's copy is the only one (a call tree's
    // columns are megabytes each; a bytes object in between doubled them for a while).
    static char none = 0;  // an empty vector's data() may be null, which CPython asserts against
    char* data = v.empty() ? &none : const_cast<char*>(reinterpret_cast<const char*>(v.data()));
    nb::object view = nb::steal(PyMemoryView_FromMemory(data, Py_ssize_t(v.size() * sizeof(T)), PyBUF_READ));
    if (!view.is_valid()) {
        throw nb::python_error();
    }
    a.attr("frombytes")(view);
    return a;
}

// One column of a struct array, as a typed array.
template <typename S, typename T>
nb::object column(const std::vector<S>& rows, T S::*field, const char* typecode) {
    std::vector<T> col(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        col[i] = rows[i].*field;
    }
    return typed(col, typecode);
}

// The figure columns of `sums`: alloc_bytes ... peak_bytes (int64); the variances if any.
void put_sums(nb::dict& d, const std::vector<memlens::Sums>& sums, const std::vector<memlens::SumVars>* vars) {
    using memlens::Sums;
    d["alloc_bytes"] = column(sums, &Sums::alloc_bytes, "q");
    d["alloc_count"] = column(sums, &Sums::alloc_count, "q");
    d["live_bytes"] = column(sums, &Sums::live_bytes, "q");
    d["live_count"] = column(sums, &Sums::live_count, "q");
    d["peak_bytes"] = column(sums, &Sums::peak_bytes, "q");
    if (vars && !vars->empty()) {
        using memlens::SumVars;
        d["alloc_var"] = column(*vars, &SumVars::alloc, "d");
        d["live_var"] = column(*vars, &SumVars::live, "d");
        d["peak_var"] = column(*vars, &SumVars::peak, "d");
    }
}

std::vector<int32_t> int32s(nb::bytes b) {
    std::vector<int32_t> v(b.size() / sizeof(int32_t));
    std::memcpy(v.data(), b.c_str(), v.size() * sizeof(int32_t));
    return v;
}

}  // namespace

NB_MODULE(_tracer, m) {
    m.doc() = "memlens native tracer: PEP 445 allocator hooks with per-line attribution.";

    nb::class_<memlens::SnapshotData>(m, "Snapshot", "A copy of a run's call tree and totals.")
        .def_prop_ro(
            "codes",
            [](const memlens::SnapshotData& s) {
                nb::list out;
                for (uint32_t c = 0; c < s.lines.count(); ++c) {
                    const memlens::codes::Info& i = s.lines.info(c);
                    out.append(nb::make_tuple(nb::str(i.filename.c_str(), i.filename.size()),
                                              nb::str(i.qualname.c_str(), i.qualname.size()), i.first_line,
                                              i.last_line));
                }
                return out;
            },
            "Per code id: (file name, qualified name, first line, last line).")
        .def_prop_ro(
            "info",
            [](const memlens::SnapshotData& s) {
                nb::list timeline;
                for (const auto& p : s.timeline) {
                    timeline.append(nb::make_tuple(p.t, p.traced_bytes, p.rss_bytes));
                }
                nb::dict d;
                d["peak_traced_bytes"] = s.peak_traced_bytes;
                d["current_traced_bytes"] = s.current_traced_bytes;
                d["peak_rss_bytes"] = s.peak_rss_bytes;
                d["allocations"] = s.allocations;
                d["samples"] = s.samples;
                d["stack_reads"] = s.stack_reads;
                d["frames_read"] = s.frames_read;
                d["exit_watches_dropped"] = s.exit_watches_dropped;
                d["duration_s"] = s.duration_s;
                d["mode"] = s.mode == 1 ? "sampling" : "exact";
                d["sample_interval"] = s.sample_interval;
                d["nodes"] = s.nodes.size() + s.released_nodes;
                d["timeline"] = timeline;
                d["peak_t"] = s.moments.peak_t >= 0 ? nb::object(nb::float_(s.moments.peak_t)) : nb::none();
                d["moments_dropped"] = s.moments.dropped;
                d["moment_entries"] = s.moments.gil.size() + s.moments.nogil.size();
                return d;
            },
            "Totals, mode, the timeline, when the peak happened (peak_t, seconds; None before "
            "any allocation), whether the moments were dropped (too many changes) and how many "
            "entries of nodes' values they hold (moment_entries; 0 once built with release).")
        .def(
            "build",
            [](memlens::SnapshotData& s, nb::bytes file_of_code, nb::bytes function_of_code,
               int32_t functions, bool release_nodes) {
                if (s.released_nodes != 0) {
                    throw nb::value_error("this snapshot was built with release=True already");
                }
                std::vector<int32_t> files = int32s(file_of_code), funcs = int32s(function_of_code);
                if (files.size() != s.lines.count() || funcs.size() != s.lines.count()) {
                    throw nb::value_error("one file and one function per code id are needed");
                }
                memlens::Built b;
                {
                    nb::gil_scoped_release release;
                    memlens::build(s, files, funcs, functions, b, release_nodes);
                }
                // Each column freed once converted: a big call tree's peak memory is here.
                nb::dict tree, sites, site_incl, site_native, fns;
                tree["parent"] = typed(b.parent, "i");
                memlens::free_now(b.parent);
                tree["file"] = typed(b.file, "i");
                memlens::free_now(b.file);
                tree["line"] = typed(b.line, "i");
                memlens::free_now(b.line);
                tree["function"] = typed(b.function, "i");
                memlens::free_now(b.function);
                put_sums(tree, b.self, nullptr);
                memlens::free_now(b.self);
                sites["file"] = typed(b.site_file, "i");
                sites["line"] = typed(b.site_line, "i");
                put_sums(sites, b.site_self, &b.site_vars);
                put_sums(site_incl, b.site_incl, nullptr);
                put_sums(site_native, b.site_native, nullptr);
                put_sums(fns, b.function_incl, nullptr);
                nb::dict moments;
                moments["t"] = typed(b.moment_t, "d");
                moments["traced_bytes"] = typed(b.moment_traced, "q");
                moments["site_moment"] = typed(b.msite_moment, "i");
                moments["site"] = typed(b.msite_site, "i");
                moments["site_live"] = typed(b.msite_live, "q");
                moments["site_incl_live"] = typed(b.msite_incl, "q");
                moments["function_moment"] = typed(b.mfunc_moment, "i");
                moments["function"] = typed(b.mfunc_function, "i");
                moments["function_live"] = typed(b.mfunc_live, "q");
                nb::dict out;
                out["node_site"] = typed(b.node_site, "i");
                out["tree"] = tree;
                out["sites"] = sites;
                out["sites_incl"] = site_incl;
                out["sites_native"] = site_native;
                out["functions"] = fns;
                out["moments"] = moments;
                return out;
            },
            nb::arg("file_of_code"), nb::arg("function_of_code"), nb::arg("functions"),
            nb::arg("release") = false,
            "Collapses the tree onto lines: file_of_code and function_of_code are int32 arrays "
            "(one entry per code id; file -1 = transparent). Returns typed columns; `moments`: "
            "per kept moment its time and traced total, and per moment the sites and functions "
            "whose live bytes changed since the moment before, with their new values. `release`: "
            "the snapshot's nodes are freed once summed (it cannot be built again; less peak "
            "memory).");

    m.def(
        "holders",
        [](nb::list roots, nb::list skip, nb::list everything, nb::bytes node_site, nb::bytes target_of_site,
           nb::handle ndarray,
           uint32_t per_target, uint64_t max_visits, double max_seconds, nb::bytes tracked) {
            std::vector<memlens::holders::Root> rs;
            for (nb::handle r : roots) {
                nb::tuple t = nb::borrow<nb::tuple>(r);
                rs.push_back({t[0].ptr(), nb::cast<std::string>(t[1]), nb::cast<std::string>(t[2]), nb::cast<int>(t[3])});
            }
            std::vector<PyObject*> all, skipped;
            all.reserve(everything.size());
            for (nb::handle o : everything) {
                all.push_back(o.ptr());
            }
            for (nb::handle o : skip) {
                skipped.push_back(o.ptr());
            }
            std::vector<int32_t> sites = int32s(node_site), targets = int32s(target_of_site);
            memlens::holders::Result r;
            memlens::holders::find(rs, skipped, all, sites, targets, int32s(tracked),
                                   ndarray.is_none() ? nullptr : ndarray.ptr(), per_target, max_visits, max_seconds, r);
            nb::list chains;
            for (const auto& c : r.chains) {
                nb::list hops;
                for (const auto& h : c.hops) {
                    hops.append(nb::make_tuple(h.kind, h.name, h.type,
                                               h.node == memlens::holders::kNoNode ? -1 : int64_t(h.node)));
                }
                chains.append(nb::make_tuple(c.target, hops));
            }
            nb::dict d;
            d["chains"] = chains;
            d["visited"] = r.visited;
            d["complete"] = r.complete;
            d["timed_out"] = r.timed_out;
            d["seconds"] = r.seconds;
            d["bytes"] = r.bytes;
            return d;
        },
        nb::arg("roots"), nb::arg("skip"), nb::arg("everything"), nb::arg("node_site"), nb::arg("target_of_site"),
        nb::arg("ndarray").none(),
        nb::arg("per_target"), nb::arg("max_visits"), nb::arg("max_seconds"), nb::arg("tracked") = nb::bytes(""),
        "What holds the objects of the target sites (node_site, target_of_site: int32 arrays, -1 "
        "for none): a walk of the object graph from `roots` "
        "((object, kind, name, tier) tuples, by tier), never entering `skip`, then from the objects of "
        "`everything` they do not reach. `tracked`: per target, how many live blocks it has (int32; "
        "a target with fewer than per_target is done once they are found). "
        "Requires the tracer's tables (before reset()); the calling thread should be paused.");
    m.def(
        "table_blocks",
        [](nb::bytes node_site, size_t sites) {
            std::vector<int32_t> counts = memlens::holders::table_blocks(int32s(node_site), sites);
            return nb::bytes(reinterpret_cast<const char*>(counts.data()), counts.size() * sizeof(int32_t));
        },
        nb::arg("node_site"), nb::arg("sites"),
        "How many blocks of each site the address table holds, as an int32 array (node_site as for "
        "holders()): in sampling mode, the sampled blocks still live. Requires the tracer's tables.");
    m.def("start", &start, nb::arg("mode") = "exact", nb::arg("sample_interval") = 0, nb::arg("seed") = 0,
          nb::arg("timeline_interval_ms") = 10.0, nb::arg("watch_exits") = true, nb::arg("native") = true,
          nb::arg("track_reuse") = true,
          "Install the allocator hooks and start recording.");
    m.def("stop", &memlens::stop, "Stop recording and restore the allocators when possible.");
    m.def("finish", &memlens::finish,
          "The program has ended: the run's duration, peak RSS and timeline end now; allocations "
          "are still tracked until stop().");
    m.def("freeze", &memlens::freeze,
          "After finish(), before the run's last snapshot: frees the call tree's index; blocks "
          "are still tracked until stop(), but call paths no thread's cache knows go to the "
          "root. The next snapshot is the last: it frees the moments' log and gives the call "
          "tree's memory back as it copies it (later snapshots have no moments and no call tree).");
    m.def(
        "snapshot",
        []() {
            auto* s = new memlens::SnapshotData();
            memlens::snapshot(*s);
            memlens::PauseScope pause;  // building these objects must not be traced
            return nb::cast(s, nb::rv_policy::take_ownership);
        },
        "Copy of the recorded call tree and totals.");
    m.def("reset", &memlens::reset, "Drop recorded data (not while tracing).");
    m.def("is_active", &memlens::is_active);
    m.def("hooks_installed", &memlens::hooks_installed);
    m.def("leftovers", &memlens::leftovers,
          "What of the tracer is still installed in this process (empty after a clean stop).");
    m.def("is_forked_child", &memlens::is_forked_child);
    m.def("hook_kind", &memlens::hook_kind, "Which hooks the current or last run installed.");
    m.def("object_reuse", &memlens::object_reuse,
          "Whether objects made in reused blocks (free lists) are charged to the line making them: "
          "'tracked' (3.13+), 'lost' (another tool replaced the reference tracer), 'off' (started "
          "without it), 'unavailable' (before 3.13), '' before any run.");
    m.def("watches_exits", &memlens::watches_exits,
          "Whether this run reads only the changed part of stacks (sys.monitoring, 3.12+).");
    m.def("reads_thread_state", &memlens::stack::reads_thread_state,
          "Whether the calling thread's allocations read its current thread state with one load "
          "(3.12+ on x86-64 Linux; otherwise through the interpreter's accessor). False before "
          "this thread's first traced allocation.");
    m.def("monitoring_tool", &memlens::monitoring_tool,
          "The sys.monitoring tool id this run holds (-1: none).");
    m.def("move_monitoring", &memlens::move_monitoring, nb::arg("tool"),
          "Give up our sys.monitoring tool id `tool` for another free one; returns the id held "
          "now (-1: none).");
    m.def(
        "monitoring_call",
        [](nb::handle real, nb::args args) {
            // `real(*args)`, a function of sys.monitoring whose first argument is a tool id: given
            // ours, the tracer first moves to another one (the program gets the id it asks for).
            if (args.size() > 0 && PyLong_Check(args[0].ptr())) {
                long tool = PyLong_AsLong(args[0].ptr());
                if (tool == -1 && PyErr_Occurred()) {
                    PyErr_Clear();
                } else if (tool >= 0 && tool == memlens::monitoring_tool()) {
                    memlens::move_monitoring(int(tool));
                }
            }
            PyObject* result = PyObject_Call(real.ptr(), args.ptr(), nullptr);
            if (!result) {
                throw nb::python_error();
            }
            return nb::steal(result);
        },
        "Call `real` (a function of sys.monitoring) with `args`, first moving the tracer off the "
        "tool id they name if it holds it.");
    m.def(
        "unwatched_call",
        [](nb::handle real, nb::args args, nb::kwargs kwargs) {
            // `real(*args, **kwargs)` after the tracer stopped watching frame exits (a C function,
            // so that no frame of ours comes between the caller and `real`).
            memlens::stop_watching();
            PyObject* result = PyObject_Call(real.ptr(), args.ptr(), kwargs.ptr());
            if (!result) {
                throw nb::python_error();
            }
            return nb::steal(result);
        },
        "Call `real` after the tracer stopped watching frame exits for the rest of the run.");
    m.def("traces_native", &memlens::traces_native,
          "Whether this run traces the C allocator calls of other libraries.");
    m.def(
        "native_problem",
        []() -> nb::object {
            const char* why = memlens::native_problem();
            return why ? nb::object(nb::str(why)) : nb::none();
        },
        "Why the C allocator calls of other libraries are not traced in this process, or None.");
    m.def("node_count", &memlens::node_count,
          "How many call-tree nodes the run has (a checkpoint's cost grows with them).");
    m.def(
        "totals",
        []() {
            int64_t current = 0, peak = 0;
            memlens::totals(&current, &peak);
            return nb::make_tuple(current, peak);
        },
        "(current, peak) traced bytes, for progress displays.");
    m.def(
        "window",
        [](bool reset) {
            int64_t current = 0, peak = 0, allocated = 0;
            memlens::window(reset, &current, &peak, &allocated);
            return nb::make_tuple(current, peak, allocated);
        },
        nb::arg("reset") = false,
        "(current, peak since the last reset, allocated since start) traced bytes; reset=True "
        "starts a new window.");
    m.def(
        "set_thread_paused",
        [](bool paused) {
            bool previous = memlens::thread_paused();
            memlens::set_thread_paused(paused);
            return previous;
        },
        "Stop (or resume) tracking the calling thread's allocations; returns the old state.");
    m.def("name_thread", [](const std::string& name) { memlens::name_thread(name.c_str()); }, nb::arg("name"),
          "Name the calling thread (Linux; 15 bytes kept).");
    m.def("restart_sampling", &memlens::restart_sampling,
          "The program starts now: sampling's countdowns drawn afresh from the seed (GIL held).");
    m.def("disable_address_randomization", &memlens::disable_address_randomization,
          "Address randomisation off for the programs this process executes (Linux); True when "
          "it was on.");
    m.def("die_by_signal", &memlens::die_by_signal, nb::arg("signum"),
          "End the process by this signal's default action (from any thread).");
    m.def(
        "numpy_attach",
        [](nb::handle capsule) {
            std::string err = memlens::numpy_attach(capsule.ptr());
            if (!err.empty()) {
                throw std::runtime_error(err);
            }
        },
        "Trace numpy's array data (numpy's _multiarray_umath._ARRAY_API capsule).");
    m.def(
        "compile_file",
        [](nb::bytes source, nb::handle filename) -> nb::object {
            // compile(source, filename, "exec", dont_inherit=True) for bytes, as CPython's
            // builtin does it, minus its check for an AST argument: that check creates the ast
            // module's hundred-odd classes on first use (10-13 M instructions per run, 3.11 to
            // 3.14), which plain python never does to run a script. None where the builtin's
            // own error is wanted (a NUL byte).
            const char* data = source.c_str();
            if (std::memchr(data, 0, source.size()) != nullptr) {
                return nb::none();
            }
            PyObject* code = memlens::compile_script(data, filename.ptr());
            if (code == nullptr) {
                throw nb::python_error();
            }
            return nb::steal(code);
        },
        nb::arg("source"), nb::arg("filename"),
        "compile(source, filename, 'exec', dont_inherit=True) of a script's bytes, without "
        "builtins.compile's AST set-up; None when the source holds a NUL byte.");
    m.def(
        "_line_of",
        [](nb::handle code, int32_t offset) {
            if (!PyCode_Check(code.ptr())) {
                throw nb::type_error("a code object is needed");
            }
            return memlens::codes::line_of(reinterpret_cast<PyCodeObject*>(code.ptr()), offset);
        },
        "Test hook: the line of an instruction offset (code units), as snapshots resolve it.");
}
