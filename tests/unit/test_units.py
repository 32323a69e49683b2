"""Sizes as users write them (``--sample``, ``--memlens-min-increase``, ``memlens`` markers),
and as labels show them."""

from __future__ import annotations

import random

import pytest

from memlens.errors import MemlensError
from memlens.units import fmt_bytes, fmt_count, parse_size, sample_option


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4096", 4096),
        ("512 B", 512),
        ("64k", 64 * 1024),
        ("128KiB", 128 * 1024),
        ("1 MiB", 1024**2),
        ("1M", 1024**2),
        ("1.5 GiB", 3 * 1024**3 // 2),
        ("2T", 2 * 1024**4),
        ("5 KB", 5_000),
        ("5 MB", 5_000_000),
        ("10MB", 10_000_000),
        ("2 GB", 2_000_000_000),
        ("1 TB", 10**12),
        (" 5 mib ", 5 * 1024**2),
        ("1e3", 1000),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lots", "not a size: 'lots'"),
        ("", "not a size: ''"),
        ("MiB", "not a size: 'MiB'"),
        ("5 XB", "not a size: '5 XB'"),
        ("5 ib", "not a size: '5 ib'"),
        ("5 bb", "not a size: '5 bb'"),
        ("nan", "not a size: 'nan'"),
        ("inf MiB", "not a size: 'inf MiB'"),
        ("-1", "size must be positive: '-1'"),
        ("0", "size must be positive: '0'"),
        ("8 EiB", "not a size: '8 EiB'"),
        ("9000000 TiB", "size too large: '9000000 TiB'"),
    ],
)
def test_not_sizes(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_size(text)


def test_zero_where_allowed() -> None:
    assert parse_size("0 B", zero=True) == 0
    with pytest.raises(ValueError, match="size must be positive"):
        parse_size("-1 KiB", zero=True)


def test_sample_option_names_its_flag_in_one_line() -> None:
    assert sample_option(None) is None
    assert sample_option("64k") == 64 * 1024
    with pytest.raises(MemlensError, match=r"^--sample: not a size: 'lots'$"):
        sample_option("lots")
    with pytest.raises(MemlensError, match=r"^--memlens-sample: size must be positive: '0'$"):
        sample_option("0", "--memlens-sample")


def _bytes_as_written(n: float) -> str:
    """What ``fmt_bytes`` gives, as its docstring states it: the largest power of 1024 not over
    the size, to one decimal (float formatting's rounding); exact bytes below 1 KiB."""
    sign, value = ("-" if n < 0 else ""), abs(n)
    if value < 1024:
        return f"{sign}{round(value)} B"
    unit = 0
    while unit < 5 and 1024 ** (unit + 1) <= value:
        unit += 1
    return f"{sign}{value / 1024**unit:.1f} {('B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB')[unit]}"


def _count_as_written(n: float) -> str:
    sign, value = ("-" if n < 0 else ""), abs(n)
    for threshold, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= threshold:
            return f"{sign}{value / threshold:.1f}{suffix}"
    return f"{sign}{round(value)}"


def test_sizes_and_counts_are_formatted_as_documented() -> None:
    """The label formatters (asked per line of a whole file, so written for speed) give the
    documented text at every unit boundary, on rounding ties, for floats and negatives."""
    rnd = random.Random(3)
    edges = [0, 1, 512, 999, 1000, 1023, 1024, 1536, 10**6, 10**9, 2**50, 2**60, 2**70]
    values: list[float] = [*edges, *(e - 1 for e in edges), *(e + 1 for e in edges)]
    values += [1023.6, 999.5, 999.4, 0.4, 1024.0, 1e300, 1050, 1250, 1050 * 1024]
    values += [rnd.randint(0, 2**62) for _ in range(3000)]
    values += [rnd.random() * 10 ** rnd.randint(0, 15) for _ in range(3000)]
    values += [-v for v in values]
    for v in values:
        assert fmt_bytes(v) == _bytes_as_written(v), v
        assert fmt_count(v) == _count_as_written(v), v
    assert (fmt_bytes(1536), fmt_bytes(512), fmt_count(1234), fmt_count(2_500_000)) == (
        "1.5 KiB",
        "512 B",
        "1.2k",
        "2.5M",
    )
