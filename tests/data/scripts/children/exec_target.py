"""What execs_python.py becomes."""

import sys

work = bytearray(3 * 1024 * 1024)  # line 5
print("became", sys.argv[1:], __name__, flush=True)
