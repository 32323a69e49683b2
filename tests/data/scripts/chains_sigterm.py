"""Chains to the SIGTERM handler it found (as shutdown hooks of libraries do), and calls print
through __builtins__, which is a module in __main__ under python."""

import os
import signal
import sys

__builtins__.print("builtins:", type(__builtins__).__name__)
previous = signal.getsignal(signal.SIGTERM)
print("previous:", previous is signal.SIG_DFL, callable(previous))


def shutdown(signum, frame):
    print("shutting down", flush=True)
    if callable(previous):
        previous(signum, frame)
    sys.exit(3)


replaced = signal.signal(signal.SIGTERM, shutdown)
print("replaced:", replaced is signal.SIG_DFL, callable(replaced))
kept = bytearray(3 * 1024 * 1024)  # line 22
os.kill(os.getpid(), signal.SIGTERM)
print("not reached")
