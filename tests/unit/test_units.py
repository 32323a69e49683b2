"""Sizes as users write them (``--sample``, ``--memlens-min-increase``, ``memlens`` markers)."""

from __future__ import annotations

import pytest

from memlens.errors import MemlensError
from memlens.units import parse_size, sample_option


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
