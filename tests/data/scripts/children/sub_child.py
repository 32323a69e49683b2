import os
import sys

block = bytearray(4 << 20)  # line 4: 4 MiB in the subprocess
import sitecustomize

print("user sitecustomize:", getattr(sitecustomize, "MARK", None))
print("memlens on sys.path:", any("_startup" in p for p in sys.path))
print("allocated", len(block))
