"""The big call tree at 2^15 call paths (see _calls.py): the size the sampling-mode
instruction target is set on."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _calls import main

main(15)
