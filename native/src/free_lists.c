// The blocks CPython's free lists hold (free_lists.h): read from the interpreter's state, with
// the GIL held. Each version keeps them its own way; their entries are dead objects (and dict
// keys tables), whose first words CPython has overwritten with its links.
#define Py_BUILD_CORE 1
#include <Python.h>

#include "internal/pycore_interp.h"
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>  // (3.10: PyFrameObject's fields)
#endif

#include "free_lists.h"

#define MEMLENS_MAX_ENTRIES 1000000

typedef void (*Visit)(void* arg, uintptr_t block);

// An object of a type with a garbage collector header: its block starts at the header.
static uintptr_t gc_block(const void* op) { return (uintptr_t)op - sizeof(PyGC_Head); }

#if PY_VERSION_HEX < 0x030E0000
// Tuples, before 3.14: a list per length (heads[first..end)), linked through each tuple's
// first item.
static void visit_tuples(PyTupleObject* const* heads, int first, int end, Visit visit, void* arg) {
    for (int i = first; i < end; ++i) {
        PyTupleObject* op = heads[i];
        for (int n = 0; op && n < MEMLENS_MAX_ENTRIES; ++n) {
            visit(arg, gc_block(op));
            op = (PyTupleObject*)op->ob_item[0];
        }
    }
}

// Floats, before 3.14: linked through their type's field.
static void visit_floats(PyFloatObject* f, Visit visit, void* arg) {
    for (int n = 0; f && n < MEMLENS_MAX_ENTRIES; ++n) {
        visit(arg, (uintptr_t)f);
        f = (PyFloatObject*)Py_TYPE(f);
    }
}

// An array of `count` entries (at most `limit`).
static void visit_array(void* const* items, int count, int limit, int gc, Visit visit, void* arg) {
    if (count > limit) {
        count = limit;
    }
    for (int i = 0; i < count; ++i) {
        if (items[i]) {
            visit(arg, gc ? gc_block(items[i]) : (uintptr_t)items[i]);
        }
    }
}
#endif

#if PY_VERSION_HEX >= 0x030E0000
// 3.14+: every list links its entries through their first word. An object's type is intact:
// its block is found from it (a dict keys table is no object: its block is the entry).
static void visit_generic(const struct _Py_freelist* fl, int objects, Visit visit, void* arg) {
    void* p = fl->freelist;
    for (int n = 0; p && n < MEMLENS_MAX_ENTRIES; ++n) {
        uintptr_t block = (uintptr_t)p;
        if (objects) {
            PyTypeObject* tp = Py_TYPE((PyObject*)p);
            if (PyType_IS_GC(tp)) {
                block = gc_block(p);
            }
        }
        visit(arg, block);
        p = *(void**)p;
    }
}
#endif

void memlens_free_listed_blocks(Visit visit, void* arg) {
    PyInterpreterState* interp = PyInterpreterState_Get();
#if PY_VERSION_HEX >= 0x030E0000
#  ifndef Py_GIL_DISABLED
    struct _Py_freelists* fl = &interp->object_state.freelists;
    visit_generic(&fl->floats, 1, visit, arg);
#    if PY_VERSION_HEX >= 0x030F0000
    visit_generic(&fl->complexes, 1, visit, arg);
#    endif
    visit_generic(&fl->ints, 1, visit, arg);
    for (int i = 0; i < PyTuple_MAXSAVESIZE; ++i) {
        visit_generic(&fl->tuples[i], 1, visit, arg);
    }
    visit_generic(&fl->lists, 1, visit, arg);
    visit_generic(&fl->list_iters, 1, visit, arg);
    visit_generic(&fl->tuple_iters, 1, visit, arg);
    visit_generic(&fl->dicts, 1, visit, arg);
    visit_generic(&fl->dictkeys, 0, visit, arg);
    visit_generic(&fl->slices, 1, visit, arg);
    visit_generic(&fl->ranges, 1, visit, arg);
    visit_generic(&fl->range_iters, 1, visit, arg);
    visit_generic(&fl->contexts, 1, visit, arg);
    visit_generic(&fl->async_gens, 1, visit, arg);
    visit_generic(&fl->async_gen_asends, 1, visit, arg);
    visit_generic(&fl->futureiters, 1, visit, arg);
    visit_generic(&fl->pycfunctionobject, 1, visit, arg);
    visit_generic(&fl->pycmethodobject, 1, visit, arg);
    visit_generic(&fl->pymethodobjects, 1, visit, arg);
#  endif
#elif PY_VERSION_HEX >= 0x030D0000
#  if defined(WITH_FREELISTS) && !defined(Py_GIL_DISABLED)
    struct _Py_object_freelists* fl = &interp->object_state.freelists;
    visit_tuples(fl->tuples.items, 0, PyTuple_NFREELISTS, visit, arg);  // (index: the length less one)
    visit_floats(fl->floats.items, visit, arg);
    visit_array((void* const*)fl->lists.items, fl->lists.numfree, PyList_MAXFREELIST, 1, visit, arg);
    visit_array((void* const*)fl->dicts.items, fl->dicts.numfree, PyDict_MAXFREELIST, 1, visit, arg);
    visit_array((void* const*)fl->dictkeys.items, fl->dictkeys.numfree, PyDict_MAXFREELIST, 0, visit, arg);
#  endif
#else
    // 3.10 to 3.12: the interpreter's per-type states.
#  if PyTuple_MAXSAVESIZE > 0
#    if PY_VERSION_HEX >= 0x030B0000
    visit_tuples(interp->tuple.free_list, 0, PyTuple_NFREELISTS, visit, arg);  // (index: the length less one)
#    else
    visit_tuples(interp->tuple.free_list, 1, PyTuple_MAXSAVESIZE, visit, arg);  // (0: the empty tuple, alive)
#    endif
#  endif
#  if PY_VERSION_HEX < 0x030B0000 || PyFloat_MAXFREELIST > 0  // (3.10 always has one)
    visit_floats(interp->float_state.free_list, visit, arg);
#  endif
#  if PyList_MAXFREELIST > 0
    visit_array((void* const*)interp->list.free_list, interp->list.numfree, PyList_MAXFREELIST, 1, visit, arg);
#  endif
#  if PyDict_MAXFREELIST > 0
    visit_array((void* const*)interp->dict_state.free_list, interp->dict_state.numfree, PyDict_MAXFREELIST, 1,
                visit, arg);
    visit_array((void* const*)interp->dict_state.keys_free_list, interp->dict_state.keys_numfree,
                PyDict_MAXFREELIST, 0, visit, arg);
#  endif
#  if PY_VERSION_HEX < 0x030B0000
    // 3.10's frames: linked through f_back.
    PyFrameObject* fr = interp->frame.free_list;
    for (int n = 0; fr && n < MEMLENS_MAX_ENTRIES; ++n) {
        visit(arg, gc_block(fr));
        fr = fr->f_back;
    }
#  endif
#endif
    (void)interp;
    (void)visit;
    (void)arg;
}
