"""The tracer's Python side: the façade over the native tracer (:mod:`memlens.tracing.tracer`),
running a program as Python would (:mod:`memlens.tracing.runner`) and following the processes
it starts (:mod:`memlens.tracing.follow`, the root's half; :mod:`memlens.tracing.child`, what
each followed process does). Imports nothing itself: a followed child loads only
what it uses."""
