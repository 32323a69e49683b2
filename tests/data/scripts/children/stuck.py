"""A forked child busy in a long C call (the GIL released, no signal checked) when its parent
ends it by SIGTERM (its default action); it allocated and saw two checkpoints first."""

import hashlib
import os
import signal
import sys
import time

folder = sys.argv[1]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    block = bytearray(3 << 20)  # line 14: held when the signal comes
    mine = os.path.join(folder, f"{os.getpid()}.mlrun")
    seen = set()
    deadline = time.monotonic() + (120 if "MEMLENS_FOLLOW" in os.environ else 0)  # plain: none
    while len(seen) < 2 and time.monotonic() < deadline:  # two checkpoints after the allocation
        try:
            st = os.stat(mine)
            seen.add((st.st_ino, st.st_mtime_ns))
        except OSError:
            pass
        time.sleep(0.01)
    os.write(w, b"x")
    hashlib.pbkdf2_hmac("sha256", b"key", b"salt", 2**31 - 1)  # many minutes, in C
    os._exit(0)
os.read(r, 1)
time.sleep(0.2)  # the child is in its C call
os.kill(pid, signal.SIGTERM)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
