// Bindings only: every function here forwards to tracer.hpp.
#include <nanobind/nanobind.h>

namespace nb = nanobind;

NB_MODULE(_tracer, m) {
    m.doc() = "memlens native tracer (placeholder during bootstrap)";
    m.def("hooks_installed", []() { return false; });
}
