"""`mkfs`: what an empty filesystem costs: space used, mkfs time, kernel
threads created by mounting it, and a clean fsck's real and CPU time."""

from __future__ import annotations

import shlex
from pathlib import Path

from ..lab.boundary import BootResult, Step
from .base import MNT, TOOL, CellSpec, Outcome, Study, first_failure, m, mount, passed, step_json, umount

KTHREADS = "ps -e -o ppid=,pid= | awk '$1 == 2 || $2 == 2' | wc -l"


class Mkfs(Study):
    name = "mkfs"
    title = "mkfs: space used, kernel threads, fsck time"
    description = "empty-filesystem footprint, mkfs time, mount threads, clean fsck time"
    order = 90
    primary_metric = "used"
    device_stats = False
    runs_read_only = True  # a read-only image of an empty tree

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        v = spec.variant
        steps = [Step("kthreads-before", KTHREADS)]
        steps += [Step(f"mkfs{i}", c, timeout=600) for i, c in enumerate(v.make_cmds())]
        steps += mount(v) + [
            Step("kthreads-after", KTHREADS),
            Step("used", v.used_cmd(MNT)),
            *umount(v),
        ]
        check = v.check_cmd()
        if check:
            steps.append(Step("fsck", f"{TOOL} timed -- {' '.join(shlex.split(check))}", timeout=1800))
        return [steps]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        b = boots[0]

        def num(name):
            s = b.step(name)
            try:
                return int(s.stdout.strip()) if s and s.status.ok else None
            except ValueError:
                return None

        mkfs_s = sum(s.seconds for s in b.steps if s.name.startswith("mkfs") and s.status.ok) or None
        used, kb, ka = num("used"), num("kthreads-before"), num("kthreads-after")
        fsck = step_json(b, "fsck")
        out = m("empty", "used", used, "bytes") + m("empty", "mkfs", mkfs_s, "s")
        out += m("empty", "kthreads", ka - kb if ka is not None and kb is not None else None, "count")
        if fsck:
            out += m("empty", "fsck_real", fsck["real"], "s") + m("empty", "fsck_cpu", fsck["user"] + fsck["sys"], "s")
        err = first_failure(boots)
        head = f"used {used / 1048576:.1f} MiB, mkfs {mkfs_s:.2f}s" if used is not None and mkfs_s else "incomplete"
        if fsck:
            head += f", fsck {fsck['real']:.2f}s"
        return Outcome(out, head, status=passed(used is not None and not err), error=err)
