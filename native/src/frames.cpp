#include "frames.hpp"

#include "compat.hpp"

namespace memlens {

int capture_stack(FrameRec* out, int max_depth) {
    PyThreadState* ts = compat::unchecked_tstate();
    if (ts == nullptr) {
        return 0;
    }
    int n = 0;
    for (compat::Frame* f = compat::current_frame(ts); f != nullptr && n < max_depth;
         f = compat::frame_prev(f)) {
        if (compat::frame_skip(f)) {
            continue;
        }
        PyCodeObject* co = compat::frame_code(f);
        if (co == nullptr) {
            continue;
        }
        int off = compat::frame_offset(f, co);
        out[n].code = co;
        out[n].offset = off < 0 ? 0 : off;
        ++n;
    }
    return n;
}

bool thread_holds_gil() { return PyGILState_Check() != 0; }

}  // namespace memlens
