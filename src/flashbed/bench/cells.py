"""What the cell benchmarks share: the variants checked up front, one cell timed
in its own lab (wall time, and the CPU time of the lab and its emulator)."""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

from .. import variants
from ..cell import run_cell
from ..devices.presets import Device
from ..lab.kernel import KernelInfo
from ..lab.labs import UmlLab
from ..results import CellResult
from ..studies.base import CellSpec
from ..variants import FsVariant


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def checked_variants(fs: list[str], dev: Device) -> list[FsVariant]:
    """Every name parsed and checked against the device before any lab runs."""
    parsed = [variants.parse(name, dev) for name in fs]
    for v in parsed:
        variants.check_device(v, dev)
    return parsed


def timed_cell(spec: CellSpec, kernel: KernelInfo, prefix: str) -> tuple[CellResult, float, float]:
    """(result, wall seconds, CPU seconds of this process's children)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        cpu0, t0 = children_cpu(), time.monotonic()
        res = run_cell(spec, UmlLab(kernel), Path(tmp) / "logs", Path(tmp) / "scratch")
        return res, time.monotonic() - t0, children_cpu() - cpu0
