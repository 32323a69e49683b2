"""A forked child busy in a long C call (the GIL released, no signal checked) when its parent
ends it by SIGTERM (its default action); it allocated and saw two checkpoints first."""

import hashlib
import os
import signal
import sys
import time

from checkpoints import wait_for_two

r, w = os.pipe()
pid = os.fork()
if pid == 0:
    block = bytearray(3 << 20)  # line 15: held when the signal comes
    wait_for_two(sys.argv[1])
    os.write(w, b"x")
    hashlib.pbkdf2_hmac("sha256", b"key", b"salt", 2**31 - 1)  # many minutes, in C
    os._exit(0)
os.read(r, 1)
time.sleep(0.2)  # the child is in its C call
os.kill(pid, signal.SIGTERM)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
