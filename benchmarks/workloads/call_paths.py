"""A big call tree: 2^17 distinct call paths, each ending in a small allocation that is kept
(a recursive descent: parsers, tree walkers, serializers; see _calls.py)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _calls import main

main(17)
