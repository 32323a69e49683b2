"""A forked child that allocates, waits for two checkpoints of its own, then dies by SIGKILL."""

import os
import signal
import sys

from checkpoints import wait_for_two

pid = os.fork()
if pid == 0:
    block = bytearray(4 << 20)  # line 11: held when the child is killed
    wait_for_two(sys.argv[1])
    os.kill(os.getpid(), signal.SIGKILL)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
