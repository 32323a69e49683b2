"""Forks from __main__, with a thread of its own or not (Python 3.12+ warns when it has one)."""

import os
import sys
import threading
import time

if sys.argv[1] == "thread":
    threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
print("forked")
