"""`smallfiles`: copy a tree of many very small files, then copy it over itself.

The USB-stick study's tree: 1019 directories, 4499 small files, made
deterministically in the guest's tmpfs first (not timed), then `cp -a` + sync.
"""

from __future__ import annotations

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
    seconds,
    stats_reset,
    stats_take,
    umount,
)
from .params import param
from .views import Bars


class SmallFiles(Study):
    name = "smallfiles"
    title = "Small files: copy a tree, copy it over itself"
    description = "cp -a of 1019 dirs / 4499 small files + sync, then again over itself"
    order = 40
    primary_metric = "seconds"
    figures = (Bars("bars", ("seconds",), "Small files: copy time"),)
    case_order = ("copy", "copy-over")

    @dataclass(frozen=True)
    class Params:
        dirs: int = param(1019, low=1)
        files: int = param(4499, low=1)
        mean_bytes: int = param(2048, unit="bytes", low=1, help="mean file size")

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        p = spec.params
        return [[
            Step("gen-tree", f"{TOOL} gen-tree /tmp/tree --dirs {p.dirs} --files {p.files} "
                             f"--mean-bytes {p.mean_bytes} --seed {spec.seed}", timeout=600),
            *make_and_mount(spec.variant),
            stats_reset("copy"),
            Step("copy", f"cp -a /tmp/tree {MNT}/tree && sync", timeout=3600),
            stats_take("copy"), stats_reset("copy-over"),
            Step("copy-over", f"cp -a /tmp/tree/. {MNT}/tree/ && sync", timeout=3600),
            stats_take("copy-over"),
            *umount(spec.variant),
        ]]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        out = []
        for case in ("copy", "copy-over"):
            out += m(case, "seconds", seconds(boots[0], case), "s")
        err = first_failure(boots)
        c, o = seconds(boots[0], "copy"), seconds(boots[0], "copy-over")
        return Outcome(out, f"copy {c:.2f}s, copy over {o:.2f}s" if c and o else "incomplete",
                       status=passed(not err), error=err)
