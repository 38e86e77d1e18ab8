"""Parsing sizes (``64MB``) and durations (``15m``) as the CLI contract spells them."""

from __future__ import annotations

import re
from datetime import timedelta

from lake_core.errors import UsageError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?B?|[KMGT]iB)?\s*$", re.IGNORECASE)
_POW = {
    "": 0,
    "B": 0,
    "K": 1,
    "KB": 1,
    "KIB": 1,
    "M": 2,
    "MB": 2,
    "MIB": 2,
    "G": 3,
    "GB": 3,
    "GIB": 3,
    "T": 4,
    "TB": 4,
    "TIB": 4,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$", re.IGNORECASE)
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
#: Bounds that keep arithmetic on sizes and durations exact and in range (a timedelta cannot
#: exceed 999,999,999 days; ``now - grace`` must stay after year 1).
MAX_SIZE = 1024**5  # 1 PiB
MAX_DURATION = timedelta(days=100 * 366)  # about 100 years


def parse_size(text: str) -> int:
    """``16KB``, ``64MB``, ``1GB`` (powers of 1024) or a byte count → bytes."""
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"invalid size {text!r}: use e.g. 16KB, 64MB, 1GB or a byte count")
    n = float(m.group(1)) * 1024 ** _POW[(m.group(2) or "").upper()]
    if n < 1:
        raise UsageError(f"invalid size {text!r}: must be at least 1 byte")
    if n > MAX_SIZE:
        raise UsageError(f"invalid size {text!r}: must be at most {format_size(MAX_SIZE)}")
    return int(n)


def parse_duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``2h``, ``7d`` → timedelta; a bare ``0`` is zero."""
    if text.strip() == "0":
        return timedelta(0)
    m = _DURATION.match(text)
    if not m:
        raise UsageError(f"invalid duration {text!r}: use e.g. 0, 90s, 15m, 2h, 7d")
    seconds = float(m.group(1)) * _SECONDS[m.group(2).lower()]
    if seconds > MAX_DURATION.total_seconds():
        raise UsageError(f"invalid duration {text!r}: must be at most {MAX_DURATION.days}d")
    return timedelta(seconds=seconds)


def parse_fraction(text: str) -> float:
    """A sample fraction: ``0.01``, ``1e-3`` or a percentage ``1%`` → a float in (0, 1]."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UsageError(f"invalid fraction {text!r}: use e.g. 0.01 or 1%") from None
    if not 0 < value <= 1:  # NaN fails this too
        raise UsageError(f"invalid fraction {text!r}: must be above 0 and at most 1 (100%)")
    return value


def counted(n: int, noun: str) -> str:
    """``1 row``, ``8,255 rows``: a count and its noun, plural unless one."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def format_size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n}B"


def human_size(n: int) -> str:
    """Bytes as people read them: ``512 B``, ``1.5 KiB``, ``48.3 MiB`` (powers of 1024)."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} PiB"
