"""Human-readable sizes, counts and changes; the one place labels are formatted."""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def fmt_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``; integers below 1 KiB stay exact (``'512 B'``)."""
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    if value < 1024:
        return f"{sign}{round(value)} B"
    unit = 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{sign}{value:.1f} {_UNITS[unit]}"


def fmt_count(n: float) -> str:
    """``1234`` -> ``'1.2k'``, ``2_500_000`` -> ``'2.5M'``."""
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    for threshold, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= threshold:
            return f"{sign}{value / threshold:.1f}{suffix}"
    return f"{sign}{round(value)}"


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


def parse_size(text: str) -> int:
    """``'64k'``, ``'512KiB'``, ``'1M'``, ``'4096'`` -> bytes. Raises ValueError."""
    s = text.strip().lower().replace(" ", "")
    if s.endswith("ib"):
        s = s[:-2]
    elif s.endswith("b"):
        s = s[:-1]
    mult = 1
    if s and s[-1] in "kmgt":
        mult = 1024 ** ("kmgt".index(s[-1]) + 1)
        s = s[:-1]
    try:
        value = float(s)
    except ValueError:
        raise ValueError(f"not a size: {text!r}") from None
    if value <= 0:
        raise ValueError(f"size must be positive: {text!r}")
    return int(value * mult)
