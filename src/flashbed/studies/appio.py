"""`appio`: iozone-style operations (4 KiB records) on 1 MB and 4 MB files,
without and with fsync; study 4 (ext2 over a wear-levelling layer) compares
them across filesystems and layered variants such as ext2@f2fs."""

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


def label(size: int) -> str:
    return f"{size >> 20}M"


class AppIO(Study):
    name = "appio"
    title = "Application I/O (iozone-style, 4 KiB records)"
    description = "iozone-style write/rewrite/read/reread/random/record-rewrite/f* operations, KB/s"
    order = 50
    primary_metric = "throughput"
    figures = (Bars("bars", ("throughput",), "Application I/O throughput"),)
    case_order = ("write", "rewrite", "read", "reread", "random-read", "random-write", "record-rewrite",
                  "fwrite", "frewrite", "fread", "freread", "1M", "4M")

    @dataclass(frozen=True)
    class Params:
        sizes: tuple[int, ...] = param((1 << 20, 4 << 20), unit="bytes", low=1, help="file sizes")
        record: int = param(4096, unit="bytes", low=1)

    def runs(self, p):
        return [(s, f) for s in p.sizes for f in (False, True)]

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        steps = make_and_mount(spec.variant) + [stats_reset()]
        for size, fsync in self.runs(spec.params):
            steps.append(Step(f"appio-{label(size)}-{'fsync' if fsync else 'nofsync'}",
                              f"{TOOL} appio {MNT}/appio.dat --size {size} --record {spec.params.record}"
                              f"{' --fsync' if fsync else ''} --seed {spec.seed}", timeout=3600))
        return [steps + [stats_take()] + umount(spec.variant)]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        out = []
        for size, fsync in self.runs(spec.params):
            s = boots[0].step(f"appio-{label(size)}-{'fsync' if fsync else 'nofsync'}")
            if s is None or not s.status.ok:
                continue
            for op, v in json.loads(s.stdout.strip().splitlines()[-1])["kBps"].items():
                out += m(f"{op} {label(size)} {'fsync' if fsync else 'nofsync'}", "throughput", v, "KB/s")
        err = first_failure(boots)
        w = next((x.value for x in out if x.case == f"write {label(spec.params.sizes[0])} fsync"), None)
        return Outcome(out, f"write+fsync {w:.0f} KB/s" if w else "incomplete",
                       status=passed(out and not err), error=err)
