"""Small-object churn 100 frames deep (see _deep.py)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _deep import main

main(100)
