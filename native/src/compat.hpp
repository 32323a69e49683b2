// Every CPython version branch of the tracer lives here and nowhere else.
//
// Reading the interpreter's frame stack needs the internal frame layout, which changes
// between minor versions. Each branch provides:
//   current_frame(tstate)  -> innermost frame of a thread (or nullptr)
//   frame_prev(f)          -> the calling frame
//   frame_code(f)          -> PyCodeObject* or nullptr when the frame runs no code object
//   frame_offset(f, code)  -> index (code units) of the last instruction executed
//   frame_skip(f)          -> true for frames that are incomplete or C-stack shims
//   unchecked_tstate()     -> the calling thread's tstate without fatal errors
#pragma once

#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#include <Python.h>

#if PY_VERSION_HEX >= 0x030E0000
#error "memlens supports CPython 3.10 to 3.13; its frame reader has not been checked on newer versions"
#endif

#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#else
#include <frameobject.h>
#endif

namespace memlens::compat {

#if PY_VERSION_HEX >= 0x030D0000  // 3.13: tstate->current_frame, f_executable, instr_ptr
using Frame = _PyInterpreterFrame;
inline PyThreadState* unchecked_tstate() { return PyThreadState_GetUnchecked(); }
inline Frame* current_frame(PyThreadState* ts) { return ts->current_frame; }
inline Frame* frame_prev(Frame* f) { return f->previous; }
inline PyCodeObject* frame_code(Frame* f) {
    PyObject* ex = f->f_executable;
    return (ex && PyCode_Check(ex)) ? reinterpret_cast<PyCodeObject*>(ex) : nullptr;
}
inline int frame_offset(Frame* f, PyCodeObject* co) {
    return static_cast<int>(f->instr_ptr - _PyCode_CODE(co));
}
inline bool frame_skip(Frame* f) {
    return f->owner == FRAME_OWNED_BY_CSTACK || _PyFrame_IsIncomplete(f);
}
#elif PY_VERSION_HEX >= 0x030B0000  // 3.11, 3.12: cframe->current_frame, f_code, prev_instr
using Frame = _PyInterpreterFrame;
inline PyThreadState* unchecked_tstate() { return _PyThreadState_UncheckedGet(); }
inline Frame* current_frame(PyThreadState* ts) { return ts->cframe ? ts->cframe->current_frame : nullptr; }
inline Frame* frame_prev(Frame* f) { return f->previous; }
inline PyCodeObject* frame_code(Frame* f) { return f->f_code; }
inline int frame_offset(Frame* f, PyCodeObject* co) {
    return static_cast<int>(f->prev_instr - _PyCode_CODE(co));
}
#if PY_VERSION_HEX >= 0x030C0000  // 3.12 adds shim frames owned by the C stack
inline bool frame_skip(Frame* f) {
    return f->owner == FRAME_OWNED_BY_CSTACK || _PyFrame_IsIncomplete(f);
}
#else
inline bool frame_skip(Frame* f) { return _PyFrame_IsIncomplete(f); }
#endif
#else  // 3.10: PyFrameObject chain, f_lasti in code units
using Frame = PyFrameObject;
inline PyThreadState* unchecked_tstate() { return _PyThreadState_UncheckedGet(); }
inline Frame* current_frame(PyThreadState* ts) { return ts->frame; }
inline Frame* frame_prev(Frame* f) { return f->f_back; }
inline PyCodeObject* frame_code(Frame* f) { return f->f_code; }
inline int frame_offset(Frame* f, PyCodeObject*) { return f->f_lasti < 0 ? 0 : f->f_lasti; }
inline bool frame_skip(Frame*) { return false; }
#endif

}  // namespace memlens::compat
