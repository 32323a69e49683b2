"""A Python program started with subprocess, with the same interpreter, prints what it sees."""

import subprocess
import sys
from pathlib import Path

child = Path(__file__).with_name("sub_child.py")
out = subprocess.run([sys.executable, str(child)], capture_output=True, text=True, check=True)
print(out.stdout, end="")
