// Bindings only: every function here forwards to tracer.hpp and converts plain data.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <string>

#include "tracer.hpp"

namespace nb = nanobind;

namespace {

void start(const std::string& mode, uint64_t sample_interval, uint64_t seed, int max_depth,
           double timeline_interval_ms) {
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
    o.max_depth = max_depth;
    o.timeline_interval_ms = timeline_interval_ms;
    std::string err = memlens::start(o);
    if (!err.empty()) {
        throw std::runtime_error(err);
    }
}

nb::dict snapshot() {
    memlens::SnapshotData data;
    memlens::snapshot(data);
    memlens::PauseScope pause;  // building these objects must not be traced
    nb::list codes;
    for (void* c : data.codes) {
        codes.append(nb::borrow(static_cast<PyObject*>(c)));
    }
    static_assert(sizeof(memlens::NodeOut) == 80, "NodeOut must be packed as '=Iiqqqqqqddd'");
    nb::bytes nodes(reinterpret_cast<const char*>(data.nodes.data()),
                    data.nodes.size() * sizeof(memlens::NodeOut));
    nb::list timeline;
    for (const auto& p : data.timeline) {
        timeline.append(nb::make_tuple(p.t, p.traced_bytes, p.rss_bytes));
    }
    nb::dict d;
    d["codes"] = codes;
    d["nodes"] = nodes;
    d["node_format"] = "=Iiqqqqqqddd";
    d["peak_traced_bytes"] = data.peak_traced_bytes;
    d["current_traced_bytes"] = data.current_traced_bytes;
    d["peak_rss_bytes"] = data.peak_rss_bytes;
    d["samples"] = data.samples;
    d["duration_s"] = data.duration_s;
    d["max_depth"] = data.max_depth;
    d["mode"] = data.mode == 1 ? "sampling" : "exact";
    d["sample_interval"] = data.sample_interval;
    d["timeline"] = timeline;
    return d;
}

}  // namespace

NB_MODULE(_tracer, m) {
    m.doc() = "memlens native tracer: PEP 445 allocator hooks with per-line attribution.";
    m.def("start", &start, nb::arg("mode") = "exact", nb::arg("sample_interval") = 0,
          nb::arg("seed") = 0, nb::arg("max_depth") = 128, nb::arg("timeline_interval_ms") = 10.0,
          "Install the allocator hooks and start recording.");
    m.def("stop", &memlens::stop, "Stop recording and restore the allocators when possible.");
    m.def("snapshot", &snapshot, "Copy of the recorded call tree and totals.");
    m.def("reset", &memlens::reset, "Drop recorded data (not while tracing).");
    m.def("is_active", &memlens::is_active);
    m.def("hooks_installed", &memlens::hooks_installed);
    m.def("is_forked_child", &memlens::is_forked_child);
    m.def("hook_kind", &memlens::hook_kind, "Which hooks the current or last run installed.");
    m.def(
        "totals",
        []() {
            int64_t current = 0, peak = 0;
            memlens::totals(&current, &peak);
            return nb::make_tuple(current, peak);
        },
        "(current, peak) traced bytes, for progress displays.");
    m.def(
        "set_thread_paused",
        [](bool paused) {
            bool previous = memlens::thread_paused();
            memlens::set_thread_paused(paused);
            return previous;
        },
        "Stop (or resume) tracking the calling thread's allocations; returns the old state.");
    m.def(
        "numpy_attach",
        [](nb::handle capsule) {
            std::string err = memlens::numpy_attach(capsule.ptr());
            if (!err.empty()) {
                throw std::runtime_error(err);
            }
        },
        "Trace numpy's array data (numpy's _multiarray_umath._ARRAY_API capsule).");
}
