"""`overwrite`: create an n MB file, then overwrite n MB of it in 1 KiB units
at a fixed place, without and with fsync after each unit (MB/s)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..lab.boundary import BootResult, Step
from .base import (
    MNT,
    TOOL,
    CellSpec,
    Outcome,
    Study,
    first_failure,
    m,
    make_and_mount,
    passed,
    stats_reset,
    stats_take,
    umount,
)
from .params import param
from .views import Bars


class Overwrite(Study):
    name = "overwrite"
    title = "Overwrite in place (1 KiB units)"
    description = "n MB overwritten in 1 KiB units at one place, with/without fsync"
    order = 60
    primary_metric = "bandwidth"
    figures = (Bars("bars", ("bandwidth",), "Overwrite in place: bandwidth"),)

    @dataclass(frozen=True)
    class Params:
        mb: tuple[int, ...] = param((1, 5), unit="MB", low=1, help="file sizes n")
        unit: int = param(1024, unit="bytes", low=1, help="overwrite unit")

    def runs(self, p):
        return [(n, f) for n in p.mb for f in (False, True)]

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        steps = make_and_mount(spec.variant)
        for n, fsync in self.runs(spec.params):
            case = f"{n}MB {'fsync' if fsync else 'nofsync'}"
            steps += [stats_reset(case),
                      Step(case, f"{TOOL} overwrite {MNT}/ow.dat --mb {n} --unit {spec.params.unit}"
                                 f"{' --fsync' if fsync else ''}", timeout=7200),
                      stats_take(case)]
        return [steps + umount(spec.variant)]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        out = []
        for n, fsync in self.runs(spec.params):
            case = f"{n}MB {'fsync' if fsync else 'nofsync'}"
            s = boots[0].step(case)
            if s is not None and s.status.ok:
                res = json.loads(s.stdout.strip().splitlines()[-1])
                out += m(case, "bandwidth", res["MBps"], "MB/s") + m(case, "seconds", res["seconds"], "s")
        err = first_failure(boots)
        f = next((x.value for x in out if x.case.endswith(" fsync")), None)
        return Outcome(out, f"1 KiB overwrite+fsync {f:.3f} MB/s" if f else "incomplete",
                       status=passed(out and not err), error=err)
