"""Human-readable sizes, counts and changes; the one place labels are formatted."""

from __future__ import annotations

from memlens.errors import MemlensError

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def fmt_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``; integers below 1 KiB stay exact (``'512 B'``)."""
    if n < 0:
        return "-" + fmt_bytes(-n)
    if n < 1024:
        return f"{round(n)} B"
    unit = (int(n).bit_length() - 1) // 10  # 1024 ** unit <= n
    if unit >= len(_UNITS):
        unit = len(_UNITS) - 1
    return f"{n / _SCALES[unit]:.1f}{_SUFFIXES[unit]}"


#: Each unit's size, and its label after a figure (formatting is asked per line of a file).
_SCALES = tuple(1024.0**i for i in range(len(_UNITS)))
_SUFFIXES = tuple(f" {unit}" for unit in _UNITS)


def fmt_count(n: float) -> str:
    """``1234`` -> ``'1.2k'``, ``2_500_000`` -> ``'2.5M'``."""
    if n < 0:
        return "-" + fmt_count(-n)
    if n < 1e3:
        return f"{round(n)}"
    if n < 1e6:
        return f"{n / 1e3:.1f}k"
    if n < 1e9:
        return f"{n / 1e6:.1f}M"
    return f"{n / 1e9:.1f}G"


def fmt_delta_bytes(delta: float) -> str:
    """Signed size change: ``'+1.0 MiB'``, ``'−12.0 MiB'`` (U+2212 minus), ``'±0 B'``."""
    if delta == 0:
        return "±0 B"
    text = fmt_bytes(abs(delta))
    return ("+" if delta > 0 else "\u2212") + text


def fmt_percent(ratio: float | None) -> str:
    """Signed relative change, ``0.2`` -> ``'+20%'``; None (no old value) -> ``'new'``."""
    if ratio is None:
        return "new"
    pct = ratio * 100
    if abs(pct) < 0.5:
        return "±0%"
    text = f"{abs(pct):.0f}%"
    return ("+" if pct > 0 else "\u2212") + text


#: Size suffixes (case does not matter): IEC binary units and their one-letter short forms
#: are powers of 1024, SI units (KB, MB, GB, TB) powers of 1000.
_SIZE_SUFFIXES = {
    "": 1,
    "b": 1,
    **{p: 1024 ** (i + 1) for i, p in enumerate("kmgt")},
    **{f"{p}ib": 1024 ** (i + 1) for i, p in enumerate("kmgt")},
    **{f"{p}b": 1000 ** (i + 1) for i, p in enumerate("kmgt")},
}


def sample_option(text: str | None, flag: str = "--sample") -> int | None:
    """The mean sampling interval (bytes) that option ``flag`` gives as ``text``: None when the
    option is not given; a one-line :class:`MemlensError` naming ``flag`` for a
    size :func:`parse_size` refuses."""
    if text is None:
        return None
    try:
        return parse_size(text)
    except ValueError as exc:
        raise MemlensError(f"{flag}: {exc}") from None


def parse_size(text: str, *, zero: bool = False) -> int:
    """``'64k'``, ``'512KiB'``, ``'1 MiB'``, ``'4096'`` -> bytes; ``'5 MB'`` -> 5,000,000.

    ``B``, ``KiB``, ``MiB``, ``GiB``, ``TiB`` (and ``K``, ``M``, ``G``, ``T``) are powers of
    1024, ``KB``, ``MB``, ``GB``, ``TB`` powers of 1000. Raises ValueError for anything else,
    for sizes that are not positive (0 is allowed with ``zero``) and from 2**63 bytes on.
    """
    s = text.strip().lower().replace(" ", "")
    number = s.rstrip("kmgtib")
    mult = _SIZE_SUFFIXES.get(s[len(number) :])
    try:
        value = float(number)
    except ValueError:
        mult = None
    if mult is None or value - value != 0:  # NaN and infinities (no math import at start-up)
        raise ValueError(f"not a size: {text!r}")
    if value < 0 or (value == 0 and not zero):
        raise ValueError(f"size must be positive: {text!r}")
    if value * mult >= 2**63:
        raise ValueError(f"size too large: {text!r}")
    return int(value * mult)
