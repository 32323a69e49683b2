"""Sends its own output into files: at the descriptor level (os.dup2) and by replacing
sys.stdout and sys.stderr."""

import os
import sys

print("before", flush=True)
log = open(sys.argv[1], "w")  # noqa: SIM115
os.dup2(log.fileno(), 1)
os.dup2(log.fileno(), 2)
print("into the log", flush=True)
sys.stdout = sys.stderr = open(sys.argv[2], "w")  # noqa: SIM115
print("into the other file")
kept = bytearray(2 * 1024 * 1024)  # line 14
