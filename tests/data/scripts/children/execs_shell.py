"""Replaces itself with another program (a shell), found on PATH."""

import os

setup = bytearray(2 * 1024 * 1024)  # line 5
print("launcher", flush=True)
os.execvp("sh", ["sh", "-c", "echo from sh"])
