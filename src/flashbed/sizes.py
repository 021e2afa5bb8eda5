"""Byte counts in words, one rule everywhere: binary units, and below 1 KiB in bytes ('367 B',
never '0 KiB')."""

from __future__ import annotations


def size_text(b: float) -> str:
    """'367 B', '4 KiB', '1.5 MiB'."""
    for unit, f in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= f:
            v = b / f
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{b:.0f} B"
