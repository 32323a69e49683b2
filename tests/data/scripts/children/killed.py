"""A forked child that allocates, waits for two checkpoints of its own, then dies by SIGKILL."""

import os
import signal
import sys
import time

folder = sys.argv[1]
pid = os.fork()
if pid == 0:
    block = bytearray(4 << 20)  # line 11: held when the child is killed
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
    os.kill(os.getpid(), signal.SIGKILL)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
