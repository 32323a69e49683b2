// Every CPython version branch of the tracer lives here and nowhere else.
//
// Reading the interpreter's frame stack and code objects needs internal layouts that change
// between minor versions. Each branch provides:
//   unchecked_tstate()       -> the calling thread's tstate without fatal errors
//   current_frame(tstate)    -> innermost frame of a thread (or nullptr)
//   frame_prev(f)            -> the calling frame
//   frame_code(f)            -> PyCodeObject* or nullptr when the frame runs no code object
//   frame_runs(f, code)      -> whether the frame runs `code` (cheaper than frame_code(f) == code)
//   frame_pos(f)             -> the frame's instruction position as a plain integer, cheap to
//                               compare (changes whenever the frame executes an instruction)
//   frame_offset(f, code)    -> index (code units) of the last instruction executed
//   pos_offset(code, pos)    -> frame_offset() of a position frame_pos() gave for a frame
//                               running `code` (-1: not a position in it; 3.11+)
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
//   block_of(op)             -> the address of the memory block an object lives in: the object
//                               minus what its type puts before it (the GC header; 3.11+ the
//                               managed dict and, 3.12+, weakref pointers)
//   kRefTracer               -> whether the reference tracer exists (3.13+: PyRefTracer_SetTracer
//                               reports every object made, free-listed ones included)
//   RefTracer, RefEvent, kRefCreate, get_ref_tracer, set_ref_tracer -> its API (no-ops before)
//   free_listed_int_size(op) -> the bytes of an int CPython keeps on a free list (3.14+), or 0
//   bytearray_block(op)      -> the block of a bytearray's data (3.15+: a bytes object's)
//   instance_dict(op)        -> an object's own __dict__ if it exists (never made: 3.11+ keeps a
//                               new object's attributes in its own values until a dict is asked
//                               for), or nullptr
//   value_attribute(op, v)   -> the name (borrowed str) of the attribute of `op` whose value `v`
//                               is held in those values (3.11+), or nullptr
//   frame_running(f)         -> a frame object whose frame a thread runs (3.11+: its traverse
//                               skips the frame's locals)
//   frame_locals(f, visit)   -> visit(value, name) for each local variable (and cell) of a frame
//                               object (3.11+: of a running one only)
//   str_ready(s), kRelativeOffset, own_keys(dict) -> see below
//   compile_script(source, filename) -> a script's code, as builtins.compile makes it
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

#include "internal/pycore_gc.h"  // PyGC_Head: the header before every GC object

// Dict keys and object values (the names of attributes held in an object's own values).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#if PY_VERSION_HEX >= 0x030D0000
#include "internal/pycore_dict.h"
#include "internal/pycore_object.h"
#elif PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#include "internal/pycore_dict.h"  // (3.11's pycore_object.h does not compile as C++)
#endif
#pragma GCC diagnostic pop

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
inline bool frame_runs(Frame* f, PyCodeObject* co) { return frame_executable(f) == reinterpret_cast<PyObject*>(co); }
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
inline PyObject* frame_executable(Frame* f) { return reinterpret_cast<PyObject*>(f->f_code); }
inline bool frame_runs(Frame* f, PyCodeObject* co) { return f->f_code == co; }
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
inline PyObject* frame_executable(Frame* f) { return reinterpret_cast<PyObject*>(f->f_code); }
inline bool frame_runs(Frame* f, PyCodeObject* co) { return f->f_code == co; }
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
inline int pos_offset(PyCodeObject* co, uintptr_t pos) {
    const auto first = reinterpret_cast<uintptr_t>(_PyCode_CODE(co));
    if (pos < first || pos >= first + uintptr_t(Py_SIZE(co)) * sizeof(_Py_CODEUNIT)) {
        return -1;
    }
    return static_cast<int>((pos - first) / sizeof(_Py_CODEUNIT));
}
#else
inline int pos_offset(PyCodeObject*, uintptr_t) { return -1; }
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

// What a type puts before its objects in their memory block.
inline size_t preheader(PyTypeObject* tp) {
    size_t gc = PyType_IS_GC(tp) ? sizeof(PyGC_Head) : 0;
#if PY_VERSION_HEX >= 0x030C0000
    return gc + (PyType_HasFeature(tp, Py_TPFLAGS_PREHEADER) ? 2 * sizeof(PyObject*) : 0);
#elif PY_VERSION_HEX >= 0x030B0000
    return gc + (PyType_HasFeature(tp, Py_TPFLAGS_MANAGED_DICT) ? 2 * sizeof(PyObject*) : 0);
#else
    return gc;
#endif
}
inline uintptr_t block_of(PyObject* op) { return reinterpret_cast<uintptr_t>(op) - preheader(Py_TYPE(op)); }

// The memory block holding a bytearray's data, or 0: 3.15+ keeps the data in a bytes object
// of its own (ob_bytes points inside it), older versions in a block of their own.
inline uintptr_t bytearray_block(PyObject* op) {
    auto* ba = reinterpret_cast<PyByteArrayObject*>(op);
#if PY_VERSION_HEX >= 0x030F0000
    return ba->ob_bytes_object ? block_of(ba->ob_bytes_object) : 0;
#else
    return reinterpret_cast<uintptr_t>(ba->ob_bytes);
#endif
}

// The bytes an int took from the allocator if CPython keeps it on a free list, or 0: 3.14+
// keeps freed one-digit ints (the counters and sums of every loop).
inline size_t free_listed_int_size(PyObject* op) {
#if PY_VERSION_HEX >= 0x030E0000
    if (PyUnstable_Long_IsCompact(reinterpret_cast<PyLongObject*>(op))) {
        return size_t(PyLong_Type.tp_basicsize) + size_t(PyLong_Type.tp_itemsize);
    }
#endif
    (void)op;
    return 0;
}

// -- Object values, dicts and frame locals (what holds an object: holders.cpp) -------------

// A dict-keys object's entries of string keys, in insertion order (values of an object's own
// storage are in the same order).
#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000
// 3.12's pycore_dict.h does not compile as C++ (its atomics): the layout of
// struct _dictkeysobject and PyDictUnicodeEntry, as 3.12 defines them.
struct Keys312 {
    Py_ssize_t dk_refcnt;
    uint8_t dk_log2_size;
    uint8_t dk_log2_index_bytes;
    uint8_t dk_kind;
    uint32_t dk_version;
    Py_ssize_t dk_usable;
    Py_ssize_t dk_nentries;
    char dk_indices[8];
};
struct UnicodeEntry312 {
    PyObject* me_key;
    PyObject* me_value;
};
inline PyObject* shared_key(PyHeapTypeObject* ht, Py_ssize_t i) {
    auto* keys = reinterpret_cast<Keys312*>(ht->ht_cached_keys);
    if (!keys || i >= keys->dk_nentries) {
        return nullptr;
    }
    auto* entries = reinterpret_cast<UnicodeEntry312*>(keys->dk_indices + (size_t(1) << keys->dk_log2_index_bytes));
    return entries[i].me_key;
}
#elif PY_VERSION_HEX >= 0x030B0000
inline PyObject* shared_key(PyHeapTypeObject* ht, Py_ssize_t i) {
    PyDictKeysObject* keys = ht->ht_cached_keys;
    if (!keys || i >= keys->dk_nentries) {
        return nullptr;
    }
    return DK_UNICODE_ENTRIES(keys)[i].me_key;
}
#endif

inline PyObject* dict_at_offset(PyObject* op) {
    Py_ssize_t off = Py_TYPE(op)->tp_dictoffset;
    if (off > 0) {
        return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(op) + off);
    }
    if (off < 0) {  // a variable-size object: counted from its end (no dict is made)
        PyObject** p = _PyObject_GetDictPtr(op);
        return p ? *p : nullptr;
    }
    return nullptr;
}

#if PY_VERSION_HEX >= 0x030D0000
inline PyObject* instance_dict(PyObject* op) {
    if (PyType_HasFeature(Py_TYPE(op), Py_TPFLAGS_MANAGED_DICT)) {
        return reinterpret_cast<PyObject*>(_PyObject_ManagedDictPointer(op)->dict);
    }
    return dict_at_offset(op);
}
inline PyObject* value_attribute(PyObject* op, PyObject* v) {
    PyTypeObject* tp = Py_TYPE(op);
    if (!PyType_HasFeature(tp, Py_TPFLAGS_INLINE_VALUES) || !PyType_HasFeature(tp, Py_TPFLAGS_HEAPTYPE)) {
        return nullptr;
    }
    PyDictValues* values = _PyObject_InlineValues(op);
    PyDictKeysObject* keys = reinterpret_cast<PyHeapTypeObject*>(tp)->ht_cached_keys;
    if (!values->valid || !keys) {
        return nullptr;
    }
    for (Py_ssize_t i = 0; i < keys->dk_nentries && i < values->capacity; ++i) {
        if (values->values[i] == v) {
            return DK_UNICODE_ENTRIES(keys)[i].me_key;
        }
    }
    return nullptr;
}
#elif PY_VERSION_HEX >= 0x030C0000
// 3.12: a managed dict slot holds either the dict or the object's values, tagged (the values
// pointer minus one, odd).
inline PyObject* instance_dict(PyObject* op) {
    if (PyType_HasFeature(Py_TYPE(op), Py_TPFLAGS_MANAGED_DICT)) {
        char* raw = reinterpret_cast<char**>(op)[-3];
        return (reinterpret_cast<uintptr_t>(raw) & 1) ? nullptr : reinterpret_cast<PyObject*>(raw);
    }
    return dict_at_offset(op);
}
inline PyObject* value_attribute(PyObject* op, PyObject* v) {
    PyTypeObject* tp = Py_TYPE(op);
    if (!PyType_HasFeature(tp, Py_TPFLAGS_MANAGED_DICT) || !PyType_HasFeature(tp, Py_TPFLAGS_HEAPTYPE)) {
        return nullptr;
    }
    char* raw = reinterpret_cast<char**>(op)[-3];
    if (!(reinterpret_cast<uintptr_t>(raw) & 1)) {
        return nullptr;
    }
    auto** values = reinterpret_cast<PyObject**>(raw + 1);
    auto* ht = reinterpret_cast<PyHeapTypeObject*>(tp);
    for (Py_ssize_t i = 0; PyObject* key = shared_key(ht, i); ++i) {
        if (values[i] == v) {
            return key;
        }
    }
    return nullptr;
}
#elif PY_VERSION_HEX >= 0x030B0000
// 3.11: the managed dict pointer, and before it the object's values.
inline PyObject* instance_dict(PyObject* op) {
    if (PyType_HasFeature(Py_TYPE(op), Py_TPFLAGS_MANAGED_DICT)) {
        return reinterpret_cast<PyObject**>(op)[-3];
    }
    return dict_at_offset(op);
}
inline PyObject* value_attribute(PyObject* op, PyObject* v) {
    PyTypeObject* tp = Py_TYPE(op);
    if (!PyType_HasFeature(tp, Py_TPFLAGS_MANAGED_DICT) || !PyType_HasFeature(tp, Py_TPFLAGS_HEAPTYPE)) {
        return nullptr;
    }
    PyDictValues* values = reinterpret_cast<PyDictValues**>(op)[-4];
    if (!values) {
        return nullptr;
    }
    auto* ht = reinterpret_cast<PyHeapTypeObject*>(tp);
    for (Py_ssize_t i = 0; PyObject* key = shared_key(ht, i); ++i) {
        if (values->values[i] == v) {
            return key;
        }
    }
    return nullptr;
}
#else
inline PyObject* instance_dict(PyObject* op) { return dict_at_offset(op); }
inline PyObject* value_attribute(PyObject*, PyObject*) { return nullptr; }
#endif

// A running frame's locals: (values, count, the name of local i). 3.10: the frame object
// holds them; 3.11+: its interpreter frame (3.14+: as tagged stack references).
// frame_running(f): a frame object whose frame a thread is running (3.11+: its traverse does
// not visit the frame's locals then; they are only read while the frame runs).
#if PY_VERSION_HEX >= 0x030B0000
inline bool frame_running(PyObject* frame) {
    Frame* f = reinterpret_cast<PyFrameObject*>(frame)->f_frame;
    return f && f->owner == FRAME_OWNED_BY_THREAD;
}
template <typename Visit>
inline void frame_locals(PyObject* frame, Visit visit) {
    Frame* f = frame_running(frame) ? reinterpret_cast<PyFrameObject*>(frame)->f_frame : nullptr;
    PyCodeObject* co = f ? frame_code(f) : nullptr;
    if (!co) {
        return;
    }
    for (int i = 0; i < co->co_nlocalsplus; ++i) {
#if PY_VERSION_HEX >= 0x030E0000
        _PyStackRef ref = f->localsplus[i];
        if (PyStackRef_IsNull(ref) || PyStackRef_IsTaggedInt(ref)) {
            continue;
        }
        PyObject* v = PyStackRef_AsPyObjectBorrow(ref);
#else
        PyObject* v = f->localsplus[i];
#endif
        if (v) {
            visit(v, PyTuple_GET_ITEM(co->co_localsplusnames, i));
        }
    }
}
#else
inline bool frame_running(PyObject*) { return false; }  // 3.10: frame objects hold the locals
template <typename Visit>
inline void frame_locals(PyObject* frame, Visit visit) {
    auto* f = reinterpret_cast<PyFrameObject*>(frame);
    PyCodeObject* co = f->f_code;
    Py_ssize_t nlocals = co->co_nlocals, ncells = PyTuple_GET_SIZE(co->co_cellvars);
    Py_ssize_t n = nlocals + ncells + PyTuple_GET_SIZE(co->co_freevars);
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* v = f->f_localsplus[i];
        if (!v) {
            continue;
        }
        PyObject* names = i < nlocals ? co->co_varnames : i < nlocals + ncells ? co->co_cellvars : co->co_freevars;
        Py_ssize_t j = i < nlocals ? i : i < nlocals + ncells ? i - nlocals : i - nlocals - ncells;
        visit(v, PyTuple_GET_ITEM(names, j));
    }
}
#endif

// own_keys(dict): the address of a dict's keys table when it is the dict's own (a combined
// table no other dict shares), else 0 (3.13+; never asked before).
#if PY_VERSION_HEX >= 0x030D0000
inline uintptr_t own_keys(PyObject* dict) {
    auto* mp = reinterpret_cast<PyDictObject*>(dict);
    PyDictKeysObject* keys = mp->ma_keys;
    if (mp->ma_values || !keys || keys->dk_refcnt != 1) {  // (the shared empty table is immortal)
        return 0;
    }
    return reinterpret_cast<uintptr_t>(keys);
}
#else
inline uintptr_t own_keys(PyObject*) { return 0; }
#endif

// str_ready(s): a str whose characters can be read (3.10, 3.11: not an old-style str whose
// canonical form was never made). kRelativeOffset: PyMemberDef's flag for offsets relative
// to the type's own data (3.12+).
#if PY_VERSION_HEX >= 0x030C0000
inline bool str_ready(PyObject*) { return true; }
constexpr int kRelativeOffset = Py_RELATIVE_OFFSET;
#else
inline bool str_ready(PyObject* s) { return PyUnicode_IS_READY(s); }
constexpr int kRelativeOffset = 0;
#endif

#if PY_VERSION_HEX >= 0x030D0000
constexpr bool kRefTracer = true;
using RefEvent = PyRefTracerEvent;
using RefTracer = PyRefTracer;
constexpr RefEvent kRefCreate = PyRefTracer_CREATE;
inline RefTracer get_ref_tracer(void** data) { return PyRefTracer_GetTracer(data); }
inline void set_ref_tracer(RefTracer tracer, void* data) { PyRefTracer_SetTracer(tracer, data); }
#else
constexpr bool kRefTracer = false;
enum RefEvent { kRefCreate = 0 };
using RefTracer = int (*)(PyObject*, RefEvent, void*);
inline RefTracer get_ref_tracer(void** data) {
    *data = nullptr;
    return nullptr;
}
inline void set_ref_tracer(RefTracer, void*) {}
#endif

// pymalloc serves requests of 1 to 512 bytes from pools of one size class each; classes are
// multiples of 16 bytes on 64-bit builds (3.8 to 3.15).
constexpr size_t kPymallocSmall = 512;
constexpr size_t kPymallocAlign = 16;

// compile(source, filename, "exec", dont_inherit=True) for a script's bytes (NUL-free), as the
// builtin calls the compiler: new reference, or nullptr with the error set.
inline PyObject* compile_script(const char* source, PyObject* filename) {
    PyCompilerFlags flags;
    flags.cf_flags = PyCF_SOURCE_IS_UTF8;
    flags.cf_feature_version = PY_MINOR_VERSION;
    return Py_CompileStringObject(source, filename, Py_file_input, &flags, -1);
}

}  // namespace memlens::compat
