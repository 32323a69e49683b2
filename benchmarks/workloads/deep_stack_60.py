"""Small-object churn 60 frames deep (see _deep.py)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _deep import main

main(60)
