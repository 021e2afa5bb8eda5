"""`bigfile`: write one big file with dd bs=64k then sync; read it back cold.

The USB-stick root filesystem study (4 GB in the paper profile).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..lab.boundary import BootResult, Step
from .base import (
    MNT,
    CellSpec,
    Outcome,
    Study,
    drop_caches,
    first_failure,
    m,
    make_and_mount,
    passed,
    seconds,
    stats_reset,
    stats_take,
    umount,
)
from .params import param
from .views import Bars

BS = 64 * 1024


class BigFile(Study):
    name = "bigfile"
    title = "Big file: dd write + sync, cold read"
    description = "dd bs=64k write + sync, cold read back"
    order = 30
    primary_metric = "seconds"
    figures = (Bars("bars", ("seconds", "bandwidth"), "Big file: time and bandwidth"),)
    case_order = ("write", "read")

    @dataclass(frozen=True)
    class Params:
        size: int = param(4 << 30, unit="bytes", low=1, help="the file (the USB-stick study wrote 4 GB)")

    def min_capacity(self, params):
        return int(params.size * 1.25)

    def min_space(self, params):
        return int(params.size)  # the file, whole, on the filesystem

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        count = spec.params.size // BS
        return [make_and_mount(spec.variant) + [
            stats_reset("write"),
            Step("write", f"dd if=/dev/zero of={MNT}/big bs=64k count={count} status=none && sync", timeout=7200),
            stats_take("write"),
            drop_caches(),
            stats_reset("read"),
            Step("read", f"dd if={MNT}/big of=/dev/null bs=64k status=none", timeout=7200),
            stats_take("read"),
        ] + umount(spec.variant)]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        size = spec.params.size // BS * BS
        out = []
        for case in ("write", "read"):
            s = seconds(boots[0], case)
            out += m(case, "seconds", s, "s") + m(case, "bandwidth", size / 1e6 / s if s else None, "MB/s")
        err = first_failure(boots)
        w, r = seconds(boots[0], "write"), seconds(boots[0], "read")
        head = f"write+sync {w:.2f}s, read {r:.2f}s ({size >> 20} MiB)" if w and r else "incomplete"
        return Outcome(out, head, status=passed(not err), error=err)
