"""`cpu`: CPU time of the workload process and of every kernel thread (from
/proc/[pid]/stat) for a fixed amount of I/O; efficiency is CPU seconds per
second of I/O."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..lab.uml import BootResult, Step
from .base import MNT, TOOL, CellSpec, Outcome, Study, drop_caches, first_failure, m, make_and_mount, passed, \
    stats_reset, stats_take, step_json, umount
from .params import param
from .views import Bars


class Cpu(Study):
    name = "cpu"
    title = "CPU efficiency"
    description = "workload + kernel-thread CPU per second of I/O"
    order = 100
    primary_metric = "cpu_per_io"
    figures = (Bars("bars", ("cpu_per_io", "workload_cpu", "kthread_cpu"), "CPU efficiency: CPU time per I/O time"),)
    case_order = ("write", "read")

    @dataclass(frozen=True)
    class Params:
        size: int = param(256 << 20, unit="bytes", help="written, then read back")

    def min_capacity(self, params):
        return int(params.size * 1.25)

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        mb = spec.params.size >> 20
        return [make_and_mount(spec.variant) + [
            stats_reset("write"),
            Step("write", f"{TOOL} cpu -- dd if=/dev/zero of={MNT}/cpu.dat bs=1M count={mb} conv=fsync status=none",
                 timeout=7200),
            stats_take("write"),
            drop_caches(),
            Step("read", f"{TOOL} cpu -- dd if={MNT}/cpu.dat of=/dev/null bs=1M status=none", timeout=7200),
        ] + umount(spec.variant)]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        out, extra = [], {}
        for case in ("write", "read"):
            d = step_json(boots[0], case)
            if not d:
                continue
            work = d["user"] + d["sys"]
            out += m(case, "workload_cpu", work, "s") + m(case, "kthread_cpu", d["kthread_cpu"], "s")
            out += m(case, "cpu_per_io", (work + d["kthread_cpu"]) / d["real"] if d["real"] else None, "s/s")
            extra[f"{case}_kthreads"] = d["kthreads"]
        err = first_failure(boots)
        w = next((x.value for x in out if x.case == "write" and x.metric == "cpu_per_io"), None)
        return Outcome(out, f"write: {w:.2f} CPU s per I/O s" if w is not None else "incomplete", extra=extra,
                       status=passed(out and not err), error=err)
