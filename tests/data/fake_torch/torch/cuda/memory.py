"""The caching allocator's history, as ``torch.cuda.memory`` gives it (one device)."""

import sys
import time

_recording = False
_context = None
_max_entries = sys.maxsize
_skip = ()
_events = []
_live = {}  # address -> (size, frames)
_next_address = 1 << 40
_current = 0
_peak = 0


def _frames():
    """The Python frames of the caller of torch's API, innermost first (as PyTorch's)."""
    out = []
    frame = sys._getframe(3)
    while frame is not None:
        code = frame.f_code
        out.append({"filename": code.co_filename, "line": frame.f_lineno, "name": code.co_name})
        frame = frame.f_back
    return out


def _record(action, addr, size, frames):
    if not _recording or action in _skip:
        return
    if action.startswith("free") and _context != "all":
        frames = []
    _events.append(
        {
            "action": action,
            "addr": addr,
            "size": size,
            "stream": 0,
            "time_us": time.time_ns() // 1000,
            "frames": frames,
        }
    )
    del _events[:-_max_entries]


def _alloc(nbytes, with_frames=True):
    global _next_address, _current, _peak
    addr = _next_address
    _next_address += max(512, -(-nbytes // 512) * 512)
    frames = _frames() if with_frames and _recording else []
    _live[addr] = (nbytes, frames)
    _current += nbytes
    _peak = max(_peak, _current)
    _record("alloc", addr, nbytes, frames)
    return addr


def _free(addr):
    global _current
    size, _frames_ = _live.pop(addr)
    _current -= size
    frames = _frames() if _recording else []
    _record("free_requested", addr, size, frames)
    _record("free_completed", addr, size, frames)


def _record_memory_history(
    enabled="all", context="all", stacks="all", max_entries=sys.maxsize, skip_actions=None
):
    global _recording, _context, _max_entries, _skip
    _recording = enabled is not None
    _context = context
    _max_entries = max_entries
    _skip = tuple(skip_actions or ())


def _snapshot():
    blocks = [
        {
            "address": addr,
            "size": max(512, -(-size // 512) * 512),
            "requested_size": size,
            "state": "active_allocated",
            "frames": frames,
        }
        for addr, (size, frames) in sorted(_live.items())
    ]
    return {
        "segments": [
            {
                "device": 0,
                "address": 1 << 40,
                "total_size": _next_address - (1 << 40),
                "stream": 0,
                "blocks": blocks,
            }
        ],
        "device_traces": [[dict(e) for e in _events]],
    }
