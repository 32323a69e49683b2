"""A forked child ended by SIGTERM from its parent (its default action)."""

import os
import signal
import time

r, w = os.pipe()
pid = os.fork()
if pid == 0:
    block = bytearray(3 << 20)  # line 10
    os.write(w, b"x")
    time.sleep(600)  # until SIGTERM
    os._exit(0)
os.read(r, 1)
os.kill(pid, signal.SIGTERM)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
