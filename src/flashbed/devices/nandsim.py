"""Raw NAND timing for the kernel's nandsim: a preset's datasheet figures as
nandsim's delay parameters.

nandsim (drivers/mtd/nand/raw/nandsim.c) busy-waits, when `do_delays` is set,
for `access_delay` µs plus `input_cycle` ns per byte of the page on every page
read, `programm_delay` µs plus `output_cycle` ns per byte on every page
program, and `erase_delay` *milliseconds* (whole ones) on every block erase.
(The source charges the read with `input_cycle` and the program with
`output_cycle`, the reverse of their descriptions; one bus cycle figure is
given to both, so that does not matter.) Its waits are udelay()/mdelay(): in
UML a calibrated busy loop on the host CPU, i.e. real time the guest's
CLOCK_MONOTONIC sees, stretched (never shortened) if the host preempts the lab.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import FlashbedError

FIELDS = ("read_us", "program_us", "erase_us", "cycle_ns")


@dataclass(frozen=True)
class NandTiming:
    """Datasheet timings of a raw NAND part (see the preset's [timing] table)."""

    read_us: float  # tR: cell array to page register
    program_us: float  # tPROG (typical)
    erase_us: float  # tBERS (typical)
    cycle_ns: float  # tRC / tWC: one byte over the 8-bit bus

    def nandsim_params(self) -> dict[str, str]:
        # erase_delay is whole milliseconds: round up so an erase is never free
        return {"do_delays": "1", "access_delay": str(round(self.read_us)),
                "programm_delay": str(round(self.program_us)),
                "erase_delay": str(max(1, math.ceil(self.erase_us / 1000))),
                "input_cycle": str(round(self.cycle_ns)), "output_cycle": str(round(self.cycle_ns))}

    def page_read_us(self, page_size: int) -> float:
        """What nandsim waits for one page read (its integer arithmetic)."""
        return round(self.read_us) + round(self.cycle_ns) * page_size // 1000


def parse_timing(path: Path, table: Any) -> NandTiming | None:
    """The preset's [timing] table, checked; None when the preset has none."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise FlashbedError(f"{path}: [timing] must be a table")
    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise FlashbedError(f"{path}: field [timing].{unknown[0]}: unknown field (known: {', '.join(FIELDS)})")
    values = {}
    for key in FIELDS:
        v = table.get(key)
        if v is None:
            raise FlashbedError(f"{path}: missing field [timing].{key}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 <= v <= 1e7):
            raise FlashbedError(f"{path}: field [timing].{key}: must be a number from 0 to 10000000")
        values[key] = float(v)
    return NandTiming(**values)
