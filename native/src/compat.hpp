// Every CPython version branch of the tracer lives here and nowhere else.
//
// Reading the interpreter's frame stack and code objects needs internal layouts that change
// between minor versions. Each branch provides:
//   unchecked_tstate()       -> the calling thread's tstate without fatal errors
//   current_frame(tstate)    -> innermost frame of a thread (or nullptr)
//   frame_prev(f)            -> the calling frame
//   frame_code(f)            -> PyCodeObject* or nullptr when the frame runs no code object
//   frame_pos(f)             -> the frame's instruction position as a plain integer, cheap to
//                               compare (changes whenever the frame executes an instruction)
//   frame_offset(f, code)    -> index (code units) of the last instruction executed
//   frame_shim(f)            -> true for frames owned by the C stack (3.12+ entry shims) or,
//                               3.14+, by the interpreter itself
//   frame_incomplete(f)      -> true for a frame still being set up (only the innermost can be)
//   frame_at_resume(f)       -> true while a frame executes RESUME (3.12+: where the interpreter
//                               instruments a code object for sys.monitoring)
//   code_qualname(code)      -> the qualified name (3.10 has only co_name)
//   kLineTable               -> the format of co_linetable: 310 (PEP 626 pairs) or 311
//                               (the location table of 3.11+)
//   kMonitoring              -> whether sys.monitoring exists (3.12+)
//   kFreeThreaded            -> a free-threaded (no-GIL) build, which the tracer refuses
//   allocator_name()         -> the MEM/OBJ allocator's name ("pymalloc", "malloc", ...)
//   request_code_extra_index, code_get_extra, code_set_extra -> co_extra slots
#pragma once

#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#include <Python.h>

// (CMakeLists.txt refuses newer versions with a message saying what to do; this is the backstop.)
#if PY_VERSION_HEX >= 0x03100000
#error "memlens supports CPython 3.10 to 3.15; its frame reader has not been checked on newer versions"
#endif

// CPython's internal headers are not written for -Wextra (3.14's have unused parameters, for
// one): their warnings are theirs, not ours, and must not fail a -Werror build (CI's).
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#if PY_VERSION_HEX >= 0x030E0000
#include "internal/pycore_interpframe.h"
#include "internal/pycore_stackref.h"
#endif
#if PY_VERSION_HEX >= 0x030D0000
#include "opcode_ids.h"
#elif PY_VERSION_HEX >= 0x030C0000
#include "opcode.h"
#endif
#else
#include <frameobject.h>
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include <cstdint>

#if PY_VERSION_HEX >= 0x030D0000
// Still exported by 3.13, but Python.h no longer declares it.
extern "C" const char* _PyMem_GetCurrentAllocatorName(void);
#endif

namespace memlens::compat {

#if PY_VERSION_HEX >= 0x030D0000  // 3.13+: tstate->current_frame, f_executable, instr_ptr
using Frame = _PyInterpreterFrame;
inline PyThreadState* unchecked_tstate() { return PyThreadState_GetUnchecked(); }
inline Frame* current_frame(PyThreadState* ts) { return ts->current_frame; }
inline Frame* frame_prev(Frame* f) { return f->previous; }
#if PY_VERSION_HEX >= 0x030E0000  // 3.14+: f_executable is a tagged stack reference
inline PyObject* frame_executable(Frame* f) {
    return PyStackRef_IsNull(f->f_executable) ? nullptr : PyStackRef_AsPyObjectBorrow(f->f_executable);
}
#else
inline PyObject* frame_executable(Frame* f) { return f->f_executable; }
#endif
inline PyCodeObject* frame_code(Frame* f) {
    PyObject* ex = frame_executable(f);
    return (ex && PyCode_Check(ex)) ? reinterpret_cast<PyCodeObject*>(ex) : nullptr;
}
inline uintptr_t frame_pos(Frame* f) { return reinterpret_cast<uintptr_t>(f->instr_ptr); }
inline int frame_offset(Frame* f, PyCodeObject* co) {
    return static_cast<int>(f->instr_ptr - _PyCode_CODE(co));
}
// Entry shims, and the interpreter's own static code (e.g. the frame that checks what an
// __init__ returned), flagged as never monitored.
inline bool frame_shim(Frame* f) {
#if PY_VERSION_HEX >= 0x030F0000  // 3.15: the interpreter owns its entry frames (no C-stack owner)
    if (f->owner == FRAME_OWNED_BY_INTERPRETER) {
        return true;
    }
#elif PY_VERSION_HEX >= 0x030E0000  // 3.14 adds frames owned by the interpreter
    if (f->owner == FRAME_OWNED_BY_CSTACK || f->owner == FRAME_OWNED_BY_INTERPRETER) {
        return true;
    }
#else
    if (f->owner == FRAME_OWNED_BY_CSTACK) {
        return true;
    }
#endif
    PyCodeObject* co = frame_code(f);
    return co && (co->co_flags & CO_NO_MONITORING_EVENTS);
}
inline bool frame_incomplete(Frame* f) { return _PyFrame_IsIncomplete(f); }
inline bool frame_at_resume(Frame* f) {
    int op = f->instr_ptr->op.code;
#ifdef RESUME_CHECK_JIT  // 3.15
    if (op == RESUME_CHECK_JIT) {
        return true;
    }
#endif
    return op == RESUME || op == RESUME_CHECK || op == INSTRUMENTED_RESUME;
}
#elif PY_VERSION_HEX >= 0x030B0000  // 3.11, 3.12: cframe->current_frame, f_code, prev_instr
using Frame = _PyInterpreterFrame;
inline PyThreadState* unchecked_tstate() { return _PyThreadState_UncheckedGet(); }
inline Frame* current_frame(PyThreadState* ts) { return ts->cframe ? ts->cframe->current_frame : nullptr; }
inline Frame* frame_prev(Frame* f) { return f->previous; }
inline PyCodeObject* frame_code(Frame* f) { return f->f_code; }
inline uintptr_t frame_pos(Frame* f) { return reinterpret_cast<uintptr_t>(f->prev_instr); }
inline int frame_offset(Frame* f, PyCodeObject* co) {
    return static_cast<int>(f->prev_instr - _PyCode_CODE(co));
}
#if PY_VERSION_HEX >= 0x030C0000  // 3.12 adds shim frames owned by the C stack
inline bool frame_shim(Frame* f) { return f->owner == FRAME_OWNED_BY_CSTACK; }
inline bool frame_at_resume(Frame* f) {
    int op = f->prev_instr->op.code;
    return op == RESUME || op == INSTRUMENTED_RESUME;
}
#else
inline bool frame_shim(Frame*) { return false; }
inline bool frame_at_resume(Frame*) { return false; }
#endif
inline bool frame_incomplete(Frame* f) { return _PyFrame_IsIncomplete(f); }
#else  // 3.10: PyFrameObject chain, f_lasti in code units
using Frame = PyFrameObject;
inline PyThreadState* unchecked_tstate() { return _PyThreadState_UncheckedGet(); }
inline Frame* current_frame(PyThreadState* ts) { return ts->frame; }
inline Frame* frame_prev(Frame* f) { return f->f_back; }
inline PyCodeObject* frame_code(Frame* f) { return f->f_code; }
inline uintptr_t frame_pos(Frame* f) { return static_cast<uintptr_t>(static_cast<intptr_t>(f->f_lasti)); }
inline int frame_offset(Frame* f, PyCodeObject*) { return f->f_lasti < 0 ? 0 : f->f_lasti; }
inline bool frame_shim(Frame*) { return false; }
inline bool frame_incomplete(Frame*) { return false; }
inline bool frame_at_resume(Frame*) { return false; }
#endif

// The globals a frame runs with (borrowed; every supported version keeps them in the frame).
inline PyObject* frame_globals(Frame* f) { return f->f_globals; }

#if PY_VERSION_HEX >= 0x030B0000
inline PyObject* code_qualname(PyCodeObject* co) { return co->co_qualname; }
constexpr int kLineTable = 311;
#else
inline PyObject* code_qualname(PyCodeObject* co) { return co->co_name; }
constexpr int kLineTable = 310;
#endif

// co_extra slots (the unstable C API names them PyUnstable_* from 3.12 on). Static code
// objects (immortal from 3.12 on: deep-frozen modules, interpreter shims) may live in read-only
// memory: they get no co_extra slot (and, never dying, need none).
#if PY_VERSION_HEX >= 0x030C0000
inline bool code_is_static(PyCodeObject* co) { return _Py_IsImmortal(reinterpret_cast<PyObject*>(co)); }
#else
inline bool code_is_static(PyCodeObject*) { return false; }
#endif
#if PY_VERSION_HEX >= 0x030C0000
inline Py_ssize_t request_code_extra_index(freefunc f) { return PyUnstable_Eval_RequestCodeExtraIndex(f); }
inline int code_get_extra(PyObject* code, Py_ssize_t i, void** extra) { return PyUnstable_Code_GetExtra(code, i, extra); }
inline int code_set_extra(PyObject* code, Py_ssize_t i, void* extra) { return PyUnstable_Code_SetExtra(code, i, extra); }
#else
inline Py_ssize_t request_code_extra_index(freefunc f) { return _PyEval_RequestCodeExtraIndex(f); }
inline int code_get_extra(PyObject* code, Py_ssize_t i, void** extra) { return _PyCode_GetExtra(code, i, extra); }
inline int code_set_extra(PyObject* code, Py_ssize_t i, void* extra) { return _PyCode_SetExtra(code, i, extra); }
#endif

#if PY_VERSION_HEX >= 0x030C0000
constexpr bool kMonitoring = true;
#else
constexpr bool kMonitoring = false;
#endif

#ifdef Py_GIL_DISABLED
constexpr bool kFreeThreaded = true;
#else
constexpr bool kFreeThreaded = false;
#endif

inline const char* allocator_name() { return _PyMem_GetCurrentAllocatorName(); }

// pymalloc serves requests of 1 to 512 bytes from pools of one size class each; classes are
// multiples of 16 bytes on 64-bit builds (3.8 to 3.15).
constexpr size_t kPymallocSmall = 512;
constexpr size_t kPymallocAlign = 16;

}  // namespace memlens::compat
