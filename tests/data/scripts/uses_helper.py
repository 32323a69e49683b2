import sys

from helper import make

data = make(4 * 1024 * 1024)  # line 5: calls into helper.py
sys.exit(256 + 9)
