"""`mixed`: sequential and random readers and writers at once (a loaded system), and
how a filesystem scales with writers and cores.

The mix (one cell): four fio jobs at once, sequential and random, read and write.

The scaling cases (one cell per guest vCPU count, `scale_cpus`): 1, 2, 4 writers
at once (`scale_jobs`), one boot, each writer its own file: 4 KiB random buffered
writes with an fsync every 8 (the small synchronous writes of a loaded embedded
system, where the filesystem's journal or log, its locks and its worker threads
do the work), for `runtime` seconds each. Their aggregate write MB/s against
writers, at 1 and at 2 vCPUs, answers the reference study's question: which
filesystem scales with writers and with cores. A kernel without SMP (6.12) runs
only the 1-vCPU case; the plan says which cells it left out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from .. import fio
from ..errors import FlashbedError
from ..lab.boundary import BootResult, Step
from .base import (
    MNT,
    Case,
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
    umount,
)
from .params import param
from .views import Bars, CaseLabel, Scaling

JOBS = {
    "seqread": {"rw": "read", "bs": "4M"},
    "seqwrite": {"rw": "write", "bs": "4M", "end_fsync": 1},
    "randread": {"rw": "randread", "bs": "4k"},
    "randwrite": {"rw": "randwrite", "bs": "4k", "end_fsync": 1},
}
MIX_CASES = (*JOBS, "total")
# a scaling case's cell ("scale-2vcpu") and its figures' cases ("scale-2vcpu 4 writers")
SCALE_CELL = "scale-{}vcpu"
SCALE = CaseLabel("scale-{cpus:int}vcpu {jobs:int} writers")


class Mixed(Study):
    name = "mixed"
    title = "Mixed load (several fio jobs at once)"
    description = "four fio jobs at once; and 1, 2, 4 writers at once on 1 and 2 vCPUs (scaling)"
    order = 20
    primary_metric = "bandwidth"
    figures = (Bars("bars", ("bandwidth", "iops"), "Mixed load: bandwidth and IOPS per job", cases=MIX_CASES),
               Scaling(SCALE, x="jobs", lines="cpus", metric="bandwidth",
                       title="Scaling: aggregate write rate of several writers at once",
                       xlabel="writers at once", x_words="{} writers", line_words="{} vCPU",
                       nouns=("writers", "vCPUs")))
    case_order = ("seqread", "seqwrite", "randread", "randwrite", "total")
    tools = ("fio",)
    media = ("block",)

    @dataclass(frozen=True)
    class Params:
        size: int = param(500 * 1000 * 1000, unit="bytes", low=1, help="all jobs' files together")
        nrfiles: int = param(50, low=1, help="files, shared out among the jobs")
        runtime: int = param(120, unit="s", low=1,
                             help="limit per job; each writer count of a scaling case runs this long")
        direct: int = param(1, choices=(0, 1), help="1: O_DIRECT, 0: buffered")
        scale_jobs: tuple[int, ...] = param((1, 2, 4), low=1, help="writers at once in a scaling case, in turn")
        scale_cpus: tuple[int, ...] = param((1, 2), low=0, help="guest vCPUs of the scaling cases, one cell each "
                                                         "(0: no scaling case)")
        scale_bs: str = param("4k", pattern=fio.BLOCK_SIZE, form=fio.BLOCK_SIZE_FORM,
                              help="a writer's block size (scaling cases)")
        scale_fsync: int = param(8, low=0, help="a writer fsyncs after this many writes (0: only at its end)")
        cpus: int = param(0, low=0, per_case="scale_cpus")  # a scaling case's vCPUs; 0: the mix

    def cases(self, params, device):
        if min(params.scale_jobs) < 1 or min(params.scale_cpus) < 0:
            raise FlashbedError("mixed.scale_jobs takes writer counts of 1 or more, mixed.scale_cpus vCPU counts "
                                "(0: no scaling case), e.g. --set mixed.scale_jobs=1,2,4 --set mixed.scale_cpus=1,2")
        return [Case("", params)] + [Case(SCALE_CELL.format(n), replace(params, cpus=n))
                                     for n in dict.fromkeys(params.scale_cpus) if n > 0]

    def vcpus(self, params):
        return params.cpus or None

    def min_capacity(self, params):
        return int(params.size * 1.3)

    def min_space(self, params):
        return int(params.size)  # the jobs' files, all at once

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        if spec.params.cpus:
            return [self._scaling(spec, run_dir)]
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

    def _scaling(self, spec: CellSpec, run_dir: Path) -> list[Step]:
        """Each writer count in turn, on the same laid-out files (writer i writes file i)."""
        p = spec.params
        # every writer's file the same size: together the study's size at the most writers
        common = {"directory": MNT, "filename_format": "scale.$jobnum", "size": p.size // max(p.scale_jobs),
                  "nrfiles": 1, "fallocate": "none", "randseed": spec.seed}
        fio.job_file(run_dir / "scale-layout.fio",
                     {"layout": {"rw": "read", "bs": "1M", "create_only": 1, "numjobs": max(p.scale_jobs)}}, common)
        steps = make_and_mount(spec.variant) + [
            Step("layout", "fio --output-format=json --output=scale-layout.json scale-layout.fio", timeout=1800)]
        for n in p.scale_jobs:
            case = SCALE.format(cpus=p.cpus, jobs=n)
            writer = {"ioengine": "psync", "rw": "randwrite", "bs": p.scale_bs, "direct": 0, "end_fsync": 1,
                      "time_based": 1, "runtime": p.runtime, "numjobs": n, "group_reporting": 1}
            if p.scale_fsync:
                writer["fsync"] = p.scale_fsync
            fio.job_file(run_dir / f"scale-{n}.fio", {"scale": writer}, common)
            steps += [drop_caches(f"drop-{n}"), stats_reset(case),
                      Step(case, f"fio --output-format=json --output=scale-{n}.json scale-{n}.fio",
                           timeout=p.runtime * 4 + 600),
                      Step(f"sync-{n}", "sync", timeout=600), stats_take(case)]
        return steps + umount(spec.variant)

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        if spec.params.cpus:
            return self._parse_scaling(spec, boots, run_dir)
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

    def _parse_scaling(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        p = spec.params
        out, rates = [], []
        for n in p.scale_jobs:
            case = SCALE.format(cpus=p.cpus, jobs=n)
            data = fio.load(run_dir / f"scale-{n}.json")
            if not data or not data.get("jobs"):
                rates.append("—")
                continue
            f = fio.job_figures(data["jobs"][0])  # group_reporting: the writers together
            out += m(case, "bandwidth", f["bandwidth"], "MB/s") + m(case, "iops", f["iops"], "IO/s")
            out += m(case, "lat_p50", f["lat_p50"], "µs") + m(case, "lat_p99", f["lat_p99"], "µs")
            out += m(case, "runtime", f["runtime"], "s")
            rates.append(f"{f['bandwidth']:.2f}")
        err = first_failure(boots)
        head = (f"{p.cpus} vCPU, {'/'.join(map(str, p.scale_jobs))} writers: {'/'.join(rates)} MB/s" if out
                else "no result")
        return Outcome(out, head, status=passed(out and not err), error=err)
