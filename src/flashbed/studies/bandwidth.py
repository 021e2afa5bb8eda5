"""`bandwidth`: one fio job at a time over the rw × bs × direct matrix.

The eMMC/SD comparison's job set: rw = randread | randwrite | read | write,
bs = 4 KiB | 4 MiB, direct=1 | buffered, a size spread over nrfiles files,
numjobs=1, ioengine=libaio. Buffered writes end with fsync (end_fsync=1), so
they are measured to the device, not to the page cache. Direct writes do not:
each is the device's when acknowledged, and an fsync at the end would write out
a filesystem's buffered fallback inside the job, hiding it from the device check.
Beside them, what a database feels: 4 KiB writes opened O_SYNC (fio sync=1, a
"sync" case), each acknowledged once durable, so its latency includes the flush.

Each job's statistics phase covers the job alone (the sync after it has its own,
"<case> writeback"), and each job that promises the device has its writes (direct
or synchronous) records that claim (studies/claims.py) for the report's device
check.

A read-only image (squashfs, erofs) runs the buffered read jobs on an image
holding the same files (laid out by fio in the run directory, then built and
written to the device); its write jobs are n/a, and so are direct reads, which
an image filesystem is not read with (squashfs refuses O_DIRECT).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from pathlib import Path

from .. import fio
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
    stats_reset,
    stats_take,
    tree_on_device,
    umount,
)
from .claims import Claim, claims_extra
from .params import param
from .views import Bars, Latency

IMAGE_TREE = "bw-tree"  # a read-only image's files, in the run directory


SYNC = 2  # a job's third mode beside direct (1) and buffered (0): buffered writes opened O_SYNC
MODES = {1: "direct", 0: "buffered", SYNC: "sync"}


def case_name(rw: str, bs: str, direct: int) -> str:
    return f"{rw} {bs} {MODES[direct]}"


def writeback_phase(case: str) -> str:
    """The statistics phase of the sync after a job (the job's own phase covers the job alone)."""
    return f"{case} writeback"


def slug(case: str) -> str:
    return case.replace(" ", "-")


class Bandwidth(Study):
    name = "bandwidth"
    title = "Bandwidth and IOPS (fio, one job at a time)"
    description = "fio MB/s and IOPS, one job at a time"
    order = 10
    primary_metric = "bandwidth"
    figures = (Bars("bandwidth", ("bandwidth",), "Bandwidth"), Bars("iops", ("iops",), "IOPS"), Latency())
    case_order = ("read", "write", "randread", "randwrite")
    tools = ("fio",)
    media = ("block",)
    runs_read_only = True  # its buffered reads

    @dataclass(frozen=True)
    class Params:
        size: int = param(500 * 1000 * 1000, unit="bytes", low=1, help="the files' total size")
        nrfiles: int = param(50, low=1, help="files the size is spread over")
        runtime: int = param(120, unit="s", low=1, help="limit per job")
        rw: tuple[str, ...] = param(("randread", "randwrite", "read", "write"),
                                    choices=("randread", "randwrite", "read", "write", "randrw", "rw"))
        bs: tuple[str, ...] = param(("4k", "4M"), pattern=fio.BLOCK_SIZE, form=fio.BLOCK_SIZE_FORM,
                                     help="block sizes, as fio takes them")
        direct: tuple[int, ...] = param((1, 0), choices=(0, 1), help="1: O_DIRECT, 0: buffered")
        sync_rw: tuple[str, ...] = param(("randwrite",), choices=("randwrite", "write", "none"),
                                         help="write jobs also run at 4 KiB opened O_SYNC (fio sync=1): each "
                                              "write durable when acknowledged; none: no such job")

    def min_capacity(self, params):
        return int(params.size * 1.3)

    def min_space(self, params):
        return int(params.size)  # fio lays out all its files before the first job

    def matrix(self, spec: CellSpec):
        p = spec.params
        jobs = product(p.rw, p.bs, p.direct)
        if spec.variant.read_only:
            return [(rw, bs, d) for rw, bs, d in jobs if rw in ("read", "randread") and not d]
        return list(jobs) + [(rw, "4k", SYNC) for rw in p.sync_rw if rw != "none"]

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        p = spec.params
        common = {"ioengine": "libaio", "directory": MNT, "filename_format": "bw.$filenum",
                  "size": p.size, "nrfiles": p.nrfiles, "numjobs": 1, "runtime": p.runtime,
                  "iodepth": 1,
                  # latency percentiles of the whole request, submission included (see fio._percentiles)
                  "lat_percentiles": 1,
                  # lay files out with real writes: fallocated (unwritten) extents read
                  # back as zeroes without touching the device
                  "fallocate": "none"}
        # a read job's set-up writes its files out in full; a write job's only creates them, which left
        # the laying-out (and its writeback) to the first measured job
        layout = {"layout": {"rw": "read", "bs": "1M", "create_only": 1}}
        lay = Step("layout", "fio --output-format=json --output=layout.json layout.fio", timeout=1800)
        if spec.variant.read_only:
            # the files in the run directory, then an image of them on the device
            fio.job_file(run_dir / "layout.fio", layout, {**common, "directory": IMAGE_TREE})
            steps = [Step("tree", f"mkdir -p {IMAGE_TREE}"), lay, *tree_on_device(spec.variant, IMAGE_TREE),
                     Step("rm-tree", f"rm -rf {IMAGE_TREE}", timeout=600)]
        else:
            fio.job_file(run_dir / "layout.fio", layout, common)
            steps = [*make_and_mount(spec.variant), lay]
        for rw, bs, direct in self.matrix(spec):
            case = case_name(rw, bs, direct)
            opts = {"rw": rw, "bs": bs, "direct": int(direct == 1), "randseed": spec.seed}
            if direct == SYNC:
                opts["sync"] = 1
            elif "write" in rw and not direct:
                opts["end_fsync"] = 1
            fio.job_file(run_dir / f"{slug(case)}.fio", {slug(case): opts}, common)
            after = writeback_phase(case)
            steps += [drop_caches(f"drop-{slug(case)}"), stats_reset(case),
                      Step(case, f"fio --output-format=json --output={slug(case)}.json {slug(case)}.fio",
                           timeout=p.runtime * 4 + 600, may_fail=True),
                      stats_take(case), stats_reset(after),
                      Step(f"sync-{slug(case)}", "sync", timeout=600), stats_take(after)]
        return [steps + umount(spec.variant)]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        res = boots[0]
        out, failed, claims = [], [], []
        for rw, bs, direct in self.matrix(spec):
            case = case_name(rw, bs, direct)
            data = fio.load(run_dir / f"{slug(case)}.json")
            step = res.step(case)
            if not data or not data.get("jobs") or step is None or not step.status.ok:
                failed.append(case)
                continue
            job = data["jobs"][0]
            f = fio.job_figures(job)
            out += m(case, "bandwidth", f["bandwidth"], "MB/s") + m(case, "iops", f["iops"], "IO/s")
            # total latency, submission included
            out += m(case, "lat_p50", f["lat_p50"], "µs") + m(case, "lat_p99", f["lat_p99"], "µs")
            # the interval the figure covers, to set against the device's busy time
            out += m(case, "runtime", f["runtime"], "s")
            if "write" in rw and direct:  # the device must have had these writes when fio was told so
                claims.append(Claim(case=case, direct=direct == 1, synced=int(f["writes"]) if direct == SYNC else 0,
                                    write_bytes=int(f["write_bytes"]), writes=int(f["writes"]),
                                    what=f"fio rw={rw} bs={bs} " + ("direct=1" if direct == 1 else "sync=1")
                                    + " iodepth=1", random_4k=rw == "randwrite" and bs == "4k",
                                    block_bytes=fio.size_bytes(bs), latency_us=fio.write_latency_percentiles(job)))
        err = first_failure(boots, allowed={case_name(*c) for c in self.matrix(spec)})
        def fig(case: str, metric: str) -> float | None:
            return next((x.value for x in out if x.case == case and x.metric == metric), None)
        rw4k, seqw = fig("randwrite 4k direct", "iops"), fig("write 4M direct", "bandwidth")
        # a read-only image's: its buffered reads
        rr4k, seqr = fig("randread 4k buffered", "iops"), fig("read 4M buffered", "bandwidth")
        head = ", ".join(filter(None, [f"seq write {seqw:.1f} MB/s" if seqw is not None else "",
                                       f"4k rand write {rw4k:.0f} IOPS" if rw4k is not None else ""])) or \
            ", ".join(filter(None, [f"seq read {seqr:.1f} MB/s" if seqr is not None else "",
                                    f"4k rand read {rr4k:.0f} IOPS" if rr4k is not None else ""]))
        if failed:
            head += f" ({len(failed)} jobs failed: {', '.join(failed[:3])})"
        return Outcome(out, head or "no job finished", extra={"failed_jobs": failed, **claims_extra(claims)},
                       status=passed(not err and out), error=err or ("; ".join(failed) if failed else ""))
