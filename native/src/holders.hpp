// What holds the objects of the lines that matter, found once at the end of a run.
//
// A breadth-first walk of the object graph from the program's roots (its modules, the frames
// of its other threads; tier by tier, so that the program's own modules come before the
// libraries'), through each object's own tp_traverse (what gc.get_referents uses),
// plus the memory a container keeps apart from its object (a list's items, a dict's or a set's
// table, a bytearray's or a numpy array's data). Every object (or buffer) reached is looked up
// in the tracer's block tables; when its block is charged to a node the caller asked about, the
// path that reached it is kept, up to `per_target` per target. The walk stops when every
// target has its samples, after `max_visits` objects or `max_seconds` of time, whichever comes
// first. Objects that the roots do not reach (held by C code, or cycles the collector has not
// freed yet) are then looked for from the GC objects the caller passes in `everything`: the
// ones no other of them refers to are roots of their own ("c"), the rest are in cycles.
//
// It changes nothing: the GIL is held throughout and no Python code runs (no finalizer, no
// __eq__, no __repr__); no reference is taken and no Python object is made (names are copied
// as UTF-8 by hand); its own memory comes from libc and is freed before it returns. Each path
// is described at the end, while its objects are still known to be alive.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

namespace memlens::holders {

constexpr uint32_t kNoNode = UINT32_MAX;

struct Root {
    PyObject* object;  // a module, or a frame object of a running thread (borrowed)
    std::string kind;  // "module" or "thread"
    std::string name;  // the module's name, "NAME in FUNCTION" for a thread's frame
    int tier;          // roots are walked tier by tier (the program's own code first)
};

// One step of a path: how the object was reached from the one before (the first step: the
// root), its type, and the call-tree node its block is charged to (kNoNode: none).
//   kinds: module, thread, c, cycle (roots); attribute (a module global, a class or instance
//   attribute, a slot), key (a dict's value; name: the key), dict_key (a dict's key), index (a
//   list's or tuple's item), member (of a set), local (a frame's variable), frame (a calling
//   frame), buffer (a container's own memory: items, table, data), referent (anything else)
struct Hop {
    std::string kind;
    std::string name;
    std::string type;
    uint32_t node;
};

struct Chain {
    int32_t target;
    std::vector<Hop> hops;
};

struct Result {
    std::vector<Chain> chains;
    uint64_t visited = 0;
    bool complete = false;   // every object the roots (and `everything`) reach was visited
    bool timed_out = false;  // stopped by max_seconds
    double seconds = 0;
    uint64_t bytes = 0;  // the most memory the walk's own tables took
};

// `skip`: objects the walk must not enter (memlens's own modules). `node_site[n]`: the site
// (line) of node n (-1: none); `target_of_site[s]`: the target a site's blocks count for (-1:
// none). The walk looks a node's target up when it meets one of its blocks: nothing is made
// per node (a big call tree has a few hundred thousand). `tracked[t]`: how many live blocks
// target t has in the tracer's tables (empty: unknown), so that a target with fewer than
// `per_target` (one big buffer; in sampling mode, the few sampled blocks of a line) is done
// once they are all found (a block met again is kept once, by the first path that met it), and
// the walk stops there instead of going on to its bounds.
// `ndarray`: numpy's array type when numpy is loaded (its data is the array's buffer), else
// nullptr. Requires the GIL; the calling thread should be paused (the walk's memory is not the
// program's).
void find(const std::vector<Root>& roots, const std::vector<PyObject*>& skip, const std::vector<PyObject*>& everything,
          const std::vector<int32_t>& node_site, const std::vector<int32_t>& target_of_site,
          const std::vector<int32_t>& tracked, PyObject* ndarray, uint32_t per_target, uint64_t max_visits,
          double max_seconds, Result& out);

// How many blocks of each of `sites` sites the address table holds (`node_site` as for find):
// in sampling mode, every block tracked (the sampled ones), less those CPython's free lists
// hold (dead: no walk finds them). Requires the GIL.
std::vector<int32_t> table_blocks(const std::vector<int32_t>& node_site, size_t sites);

}  // namespace memlens::holders
