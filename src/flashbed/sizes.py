"""Byte counts in words, one rule everywhere: binary units, and below 1 KiB in bytes ('367 B',
never '0 KiB'); and sizes as the user writes them and reads them back ('512M', '1G': binary units
too, parse_size and format_size)."""

from __future__ import annotations

import re

from .errors import FlashbedError

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size_text(b: float) -> str:
    """'367 B', '4 KiB', '1.5 MiB'."""
    for unit, f in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= f:
            v = b / f
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{b:.0f} B"


def parse_size(text: str) -> int:
    """'512M', '1G', '4096' -> bytes (binary units)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise FlashbedError(f"bad size '{text}': use a number with an optional K/M/G suffix, e.g. 512M")
    return int(m.group(1)) * UNITS[m.group(2).upper()]


def format_size(n: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if n % UNITS[unit] == 0 and n >= UNITS[unit]:
            return f"{n // UNITS[unit]}{unit}"
    return str(n)
