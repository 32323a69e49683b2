"""A forked child writes its run as it leaves; the program then damages that run."""

import os
import sys

keep = bytearray(1 << 20)  # line 6: the program's own
pid = os.fork()
if pid == 0:
    block = bytearray(2 << 20)
    os._exit(0)
os.waitpid(pid, 0)
run = os.path.join(sys.argv[1], f"{pid}.mlrun")
if os.path.exists(run):  # under memlens
    with open(run, "r+b") as fh:
        fh.seek(200)
        fh.write(b"\xff" * 4096)
print("child done")
