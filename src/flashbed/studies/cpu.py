"""`cpu`: CPU time of the workload process and of every kernel thread for a fixed
amount of I/O (a file written with dd and fsync, then read back cold); efficiency is
CPU seconds per second of I/O, as the reference study defines it.

Run times come from the scheduler, /proc/<pid>/schedstat, in ns: the workload's own
(read when it has exited, before it is reaped) and each kernel thread's before and
after (threads started meanwhile count from zero). The lab's sched_clock reads the
host's monotonic clock (lab patch 0004), so they resolve to well under a
microsecond; /proc/<pid>/stat, used before, counted 10 ms ticks, and a filesystem's
threads showed 0.00-0.03 s: noise. Everything dirty is written back before the
command starts, so earlier steps' writeback is not counted. Writeback workers are
one group: a worker serves every device's writeback (the filesystem's and the lab's
hostfs run directory) and is named for the last, so its name cannot split them;
the lab's share is small (its step output). The lab's clock is the host's, so time the host spent elsewhere while a guest task ran
counts as that task's: on a loaded machine the figures grow; compare repeats.
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
    drop_caches,
    first_failure,
    m,
    make_and_mount,
    passed,
    stats_reset,
    stats_take,
    step_json,
    umount,
)
from .params import param
from .views import Bars, TopList

CASES = ("write", "read")


class Cpu(Study):
    name = "cpu"
    title = "CPU efficiency"
    description = "workload + kernel-thread CPU (ns, schedstat) per second of I/O; the busiest kernel threads"
    order = 100
    real_cpu_time = True  # apart from the timed figures: never in virtual time
    primary_metric = "cpu_per_io"
    figures = (Bars("bars", ("cpu_per_io", "workload_cpu", "kthread_cpu"), "CPU efficiency: CPU time per I/O time"),
               TopList("kthreads", "{case}_kthreads", CASES, "Busiest kernel threads by CPU time", "s", top=6,
                       note="kernel workers are named by the workqueue they last ran work for (a worker that served "
                            "several counts under the last; writeback of any device is one group), per-CPU "
                            "threads without their CPU"))
    case_order = CASES

    @dataclass(frozen=True)
    class Params:
        size: int = param(256 << 20, unit="bytes", low=1, help="written, then read back")

    def min_capacity(self, params):
        return int(params.size * 1.25)

    def min_space(self, params):
        return int(params.size)  # the file, whole, on the filesystem

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        mb = spec.params.size >> 20
        return [make_and_mount(spec.variant) + [
            stats_reset("write"),
            Step("write", f"{TOOL} cpu -- dd if=/dev/zero of={MNT}/cpu.dat bs=1M count={mb} conv=fsync status=none",
                 timeout=7200),
            stats_take("write"),
            drop_caches(),
            stats_reset("read"),
            Step("read", f"{TOOL} cpu -- dd if={MNT}/cpu.dat of=/dev/null bs=1M status=none", timeout=7200),
            stats_take("read"),
        ] + umount(spec.variant)]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        out, extra = [], {}
        for case in CASES:
            d = step_json(boots[0], case)
            if not d:
                continue
            # results from before ns accounting have only rusage (user + sys)
            work = d.get("workload_cpu", d["user"] + d["sys"])
            out += m(case, "workload_cpu", work, "s") + m(case, "kthread_cpu", d["kthread_cpu"], "s")
            out += m(case, "cpu_per_io", (work + d["kthread_cpu"]) / d["real"] if d["real"] else None, "s/s")
            out += m(case, "seconds", d["real"], "s")
            extra[f"{case}_kthreads"] = d["kthreads"]
        err = first_failure(boots)
        w = next((x.value for x in out if x.case == "write" and x.metric == "cpu_per_io"), None)
        head = "incomplete"
        if w is not None:
            top = next(iter(extra.get("write_kthreads") or {}), None)
            head = f"write: {w:.3f} CPU s per I/O s" + (
                f"; busiest kernel thread {top} {extra['write_kthreads'][top] * 1e3:.2f} ms" if top else "")
        return Outcome(out, head, extra=extra, status=passed(out and not err), error=err)
