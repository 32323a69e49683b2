"""Replaces itself with a Python program (as launchers and re-executing tools do); with
"fork", a forked child does it too. argv: the program to become, its arguments."""

import os
import sys

setup = bytearray(2 * 1024 * 1024)  # line 7
print("launcher", flush=True)
if sys.argv[1] == "fork":
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, sys.argv[2], "child"])
    _, status = os.waitpid(pid, 0)
    print("child exit", os.waitstatus_to_exitcode(status), flush=True)
    sys.argv[1:3] = sys.argv[2:3]
os.execv(sys.executable, [sys.executable, "-u", "-W", "ignore", *sys.argv[1:]])
