"""A forked child still running when the program ends; it says when it has allocated."""

import os
import sys
import time

r, w = os.pipe()
pid = os.fork()
if pid == 0:
    block = bytearray(2 << 20)  # line 10
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the program's output ends with the program
    os.dup2(devnull, 2)
    os.write(w, b"x")
    time.sleep(float(sys.argv[1]))
    os._exit(0)
os.read(r, 1)
print("child", pid, flush=True)
