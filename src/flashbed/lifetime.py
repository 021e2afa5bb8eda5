"""How many years a part lasts under a workload: capacity x rated P/E cycles over the NAND
bytes a day costs (host bytes a day x steady-state write amplification).

Data in, data out: the figures come from a workload cell (its measured host write rate and
write amplification per pass) and the device preset (its rated endurance and where that
rating comes from); `Lifetime.lines()` says every assumption.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DAY = 86400.0
YEAR_DAYS = 365.0
# steady state: the last WINDOW passes' write amplification within TOLERANCE of their mean
WINDOW, TOLERANCE = 3, 0.05


def years(capacity: int, pe_cycles: int, daily_bytes: float, waf: float) -> float:
    """Capacity x P/E cycles = the NAND bytes the part can program; a day programs
    daily_bytes x waf of them."""
    if capacity <= 0 or pe_cycles <= 0:
        raise ValueError("capacity and P/E cycles must be positive")
    if daily_bytes <= 0 or waf <= 0:
        return float("inf")
    return capacity * pe_cycles / (daily_bytes * waf) / YEAR_DAYS


def converged(wafs: list[float], window: int = WINDOW, tolerance: float = TOLERANCE) -> bool:
    """Whether the write amplification of the last `window` passes settled (each within
    `tolerance` of their mean)."""
    last = [w for w in wafs if w > 0][-window:]
    if len(last) < window:
        return False
    mean = sum(last) / len(last)
    return all(abs(w - mean) <= tolerance * mean for w in last)


def daily_from_rate(host_bytes: float, seconds: float) -> float:
    """The workload's measured host write rate, run around the clock."""
    return host_bytes / seconds * DAY if seconds > 0 else 0.0


@dataclass(frozen=True)
class Lifetime:
    capacity: int  # the whole part's, bytes
    pe_cycles: int
    pe_source: str  # where the rating comes from ("class default: ..." when not the part's own datasheet)
    daily_bytes: float
    daily_source: str  # "measured rate ..." or "--daily-writes"
    waf: float
    steady: bool  # the write amplification converged (else: the last pass's, a lower bound of the wear)
    passes: int
    erase_spread: tuple[int, int] | None = None  # min, max erase count at the end

    @property
    def years(self) -> float:
        return years(self.capacity, self.pe_cycles, self.daily_bytes, self.waf)

    def lines(self) -> list[str]:
        gib = 1 << 30
        yrs = self.years
        out = [f"projected lifetime: {yrs:.1f} years" if yrs != float("inf") else "projected lifetime: unbounded "
               "(the workload wrote nothing)",
               f"  = capacity {self.capacity / gib:.1f} GiB x {self.pe_cycles} P/E cycles ({self.pe_source})",
               f"    / ({self.daily_bytes / gib:.2f} GiB a day ({self.daily_source}) x write amplification "
               f"{self.waf:.2f}) / 365",
               "  write amplification: " + (f"steady (the last {WINDOW} of {self.passes} passes within "
                                            f"{TOLERANCE:.0%})" if self.steady else
                                            f"did NOT converge in {self.passes} pass{'es' if self.passes > 1 else ''}: "
                                            "the last pass's figure")]
        if self.erase_spread is not None:
            lo, hi = self.erase_spread
            out.append(f"  erase counts: {lo} to {hi} per block (wear levelling's spread)")
        out.append("  assumes: the part wears out when its average block reaches its rated cycles; the write "
                   "amplification of the emulated capacity holds at the part's; no other writer")
        return out


_ENDURANCE = re.compile(r"^\s*endurance\s*=\s*\d+\s*(?:#\s*(?P<note>.*))?$")


def endurance_source(preset: Path) -> str:
    """Where a preset's P/E rating comes from: the comment of its `endurance` line; a rating
    from a class of parts (not the part's own datasheet), or with no comment, says
    "class default" first."""
    try:
        text = preset.read_text()
    except OSError:
        return "class default (no preset file)"
    for line in text.splitlines():
        mt = _ENDURANCE.match(line)
        if mt:
            note = (mt["note"] or "").strip()
            if not note:
                return "class default (the preset cites no source)"
            return note if not re.search(r"class|typical", note, re.I) else f"class default: {note}"
    return "class default (the preset has no endurance line)"
