"""numpy array data (which bypasses PEP 445) and the library-transparency default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memlens

np = pytest.importorskip("numpy")
HERE = str(Path(__file__).resolve())
MB80 = 80_000_000


def test_numpy_array_data_is_charged_to_the_calling_line() -> None:
    with memlens.profile() as p:
        a = np.ones(10_000_000)  # 80 MB, inside numpy's Python code (np.ones)
        b = a * 2  # 80 MB from a C ufunc, freed below
        del b
    assert p.run is not None
    lines = p.run.files[HERE].lines
    first = min(ln for ln, s in lines.items() if s.live_bytes >= MB80)
    s_ones = lines[first]
    assert MB80 <= s_ones.live_bytes < MB80 + 4096
    s_mul = lines[first + 1]
    assert MB80 <= s_mul.alloc_bytes < MB80 + 4096
    assert s_mul.live_bytes < 4096
    assert MB80 <= s_mul.peak_bytes < MB80 + 4096  # both arrays were live at the peak
    assert p.run.info.peak_traced_bytes >= 2 * MB80
    assert a.sum() == 10_000_000


def test_library_frames_are_transparent_by_default() -> None:
    with memlens.profile() as p:
        text = json.dumps(list(range(100_000)))
    assert p.run is not None
    assert not [f for f in p.run.files if f.endswith("json/encoder.py")]
    assert max(s.alloc_bytes for s in p.run.files[HERE].lines.values()) >= len(text)


def test_libraries_option_shows_library_lines() -> None:
    with memlens.profile(libraries=True) as p:
        _ = json.dumps(list(range(100_000)))
    assert p.run is not None
    assert [f for f in p.run.files if f.endswith("json/encoder.py")]
