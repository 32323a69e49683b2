// Cheap capture of "where" the current thread is: (code object, instruction offset) per frame.
//
// This is the only unit that reads CPython's interpreter frames. It needs CPython's internal
// headers, so every version difference lives in compat.hpp, included only by frames.cpp.
// The functions here never allocate, never create Python objects and never compute line
// numbers: line numbers are resolved once per distinct (code, offset) at snapshot time.
#pragma once

#include <cstdint>

namespace memlens {

struct FrameRec {
    void* code;      // PyCodeObject*, borrowed (the tracer keeps a strong reference once seen)
    int32_t offset;  // instruction offset in code units of the last instruction executed
};

// Fills `out` with the current thread's Python frames, innermost first, skipping frames
// that are not complete yet (being set up) and C-stack shim frames. Returns how many were
// written (at most max_depth). Must be called with the GIL held.
int capture_stack(FrameRec* out, int max_depth);

// True when the calling thread holds the GIL (cheap enough for the RAW domain hooks).
bool thread_holds_gil();

}  // namespace memlens
