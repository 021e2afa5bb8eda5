"""`mixed`: sequential and random readers and writers at once (a loaded system)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..lab.uml import BootResult, Step
from . import fio
from .base import MNT, CellSpec, Outcome, Study, drop_caches, first_failure, m, make_and_mount, passed, stats_reset, \
    stats_take, umount
from .params import param
from .views import Bars

JOBS = {
    "seqread": {"rw": "read", "bs": "4M"},
    "seqwrite": {"rw": "write", "bs": "4M", "end_fsync": 1},
    "randread": {"rw": "randread", "bs": "4k"},
    "randwrite": {"rw": "randwrite", "bs": "4k", "end_fsync": 1},
}


class Mixed(Study):
    name = "mixed"
    title = "Mixed load (several fio jobs at once)"
    description = "four fio jobs at once: sequential and random, read and write"
    order = 20
    primary_metric = "bandwidth"
    figures = (Bars("bars", ("bandwidth", "iops"), "Mixed load: bandwidth and IOPS per job"),)
    case_order = ("seqread", "seqwrite", "randread", "randwrite", "total")
    tools = ("fio",)
    media = ("block",)

    @dataclass(frozen=True)
    class Params:
        size: int = param(500 * 1000 * 1000, unit="bytes", help="all jobs' files together")
        nrfiles: int = param(50, help="files, shared out among the jobs")
        runtime: int = param(120, unit="s")
        direct: int = param(1, choices=(0, 1), help="1: O_DIRECT, 0: buffered")

    def min_capacity(self, params):
        return int(params.size * 1.3)

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        p = spec.params
        per_job = p.size // len(JOBS)
        common = {"ioengine": "libaio", "directory": MNT, "filename_format": "mixed.$jobname.$filenum",
                  "size": per_job, "nrfiles": max(1, p.nrfiles // len(JOBS)), "runtime": p.runtime,
                  "direct": p.direct, "iodepth": 1,
                  # lay files out with real writes: fallocated (unwritten) extents read
                  # back as zeroes without touching the device
                  "fallocate": "none", "randseed": spec.seed}
        # read set-up writes the files out in full (write set-up only creates them; see bandwidth)
        fio.job_file(run_dir / "mixed-layout.fio",
                     {n: {"rw": "read", "bs": "1M", "create_only": 1} for n in JOBS}, common)
        fio.job_file(run_dir / "mixed.fio", JOBS, common)
        steps = make_and_mount(spec.variant) + [
            Step("layout", "fio --output-format=json --output=mixed-layout.json mixed-layout.fio", timeout=1800),
            drop_caches(), stats_reset(),
            Step("mixed", "fio --output-format=json --output=mixed.json mixed.fio", timeout=p.runtime * 4 + 600),
            Step("sync", "sync", timeout=600), stats_take(),
        ]
        return [steps + umount(spec.variant)]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        data = fio.load(run_dir / "mixed.json")
        out = []
        total_bw = total_iops = 0.0
        for job in (data or {}).get("jobs", []):
            f = fio.job_figures(job)
            out += m(job["jobname"], "bandwidth", f["bandwidth"], "MB/s") + m(job["jobname"], "iops", f["iops"], "IO/s")
            out += m(job["jobname"], "runtime", f["runtime"], "s")
            total_bw += f["bandwidth"]
            total_iops += f["iops"]
        if out:
            out += m("total", "bandwidth", total_bw, "MB/s") + m("total", "iops", total_iops, "IO/s")
        err = first_failure(boots)
        return Outcome(out, f"total {total_bw:.1f} MB/s, {total_iops:.0f} IOPS" if out else "no result",
                       status=passed(out and not err), error=err)
