"""`workload`: the user's own workload (`--workload FILE`), a fio job file or an executable
script, on the filesystem under test, with the device's counters for its phase.

One cell, one lab boot: mkfs, mount, the workload in MNT/wl (fio with `directory=` set
there; a script with $FLASHBED_MNT there as its working directory, within `timeout`),
sync, unmount. The file reaches the guest through the cell's run directory (staged and
checked against its content hash: userwork.stage).

Steady state and lifetime: with `fill` (--age FILL) the filesystem is first filled to
FILL % with a file population and churned (lab/guest/age.py), with the device unpaced
(nothing times it): at --pace real that is a boot of its own, the emulator restarted
unpaced on the same device for it and paced again for the workload's boot, which mounts the
aged filesystem (the run's pace holds for every figure); with `passes` > 1 the
workload runs that many times (each pass in a fresh directory, the last one's removed),
each pass a phase of the device's counters; the last pass is the phase "workload". The
write amplification has converged when the last passes agree (lifetime.converged), and the
projected lifetime (lifetime.py) uses the last pass's figures: its host write rate around
the clock, or `daily_writes` (--daily-writes), and the preset's rated P/E cycles.

Figures: per fio job fio's own (MB/s, IOPS, latency percentiles, runtime); for a script
its wall time and every `key=value` line it prints with a numeric value. For both, the
block layer's view of the phase (/sys/class/block/*/stat: write requests, their mean
size, flushes) beside the emulator's counters (the cell's device_stats: host and NAND
bytes, write amplification, erases, busy time).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

from .. import fio as fiojson
from .. import lifetime as life
from ..clock import Clock, Pace
from ..errors import FlashbedError
from ..lab.boundary import BootResult, Step
from ..results import printable
from ..shellwords import TOOLS
from ..sizes import size_text
from ..userwork import Kind, UserFile, stage
from . import inputs
from .base import (
    MNT,
    PY,
    RUN,
    Case,
    CellSpec,
    Outcome,
    Study,
    block_stat,
    boot_dir,
    first_failure,
    m,
    make_and_mount,
    mount,
    passed,
    seconds,
    stats_reset,
    stats_take,
    step_json,
    umount,
)
from .params import param, user_file

AGE = f"{TOOLS}/age.py"
# devices whose delays are a model's, which a boot can skip (their sessions' Pacing capability)
MODELLED = ("emulator", "nandsim")

WL_DIR = f"{MNT}/wl"
FIO_OUT, SCRIPT_OUT = "workload.json", "workload.out"
STAGED = {Kind.FIO: "workload.fio", Kind.SCRIPT: "workload.sh"}
BETTER = re.compile(r"^\s*better:([A-Za-z_][\w.:/-]{0,63})\s*=\s*(higher|lower)\s*$", re.I)
TIME_UNITS = frozenset({"ns", "us", "µs", "ms", "s", "sec", "min", "h"})
SMALL_REQUEST = 64 << 10  # bytes: a fio job of smaller requests is ranked on its IOPS, else its MB/s
METRIC = re.compile(r"^\s*([A-Za-z_][\w.:/-]{0,63})\s*=\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S{0,12})\s*$")
# figures kept of one workload run: its first key=value metrics, or fio jobs (a script printing
# thousands of key=value lines kept `run` in the report for minutes and took gigabytes)
MAX_FIGURES = 32
# /sys/block/<dev>/stat fields, from 0 (Documentation/block/stat.rst): write requests, sectors
# written, discard requests, flush requests
W_IOS, W_SECTORS, D_IOS, F_IOS = 4, 6, 11, 15


def metrics(text: str) -> dict[str, tuple[float, str]]:
    """`key=value[unit]` lines of a script's output (the last value of a key wins)."""
    out: dict[str, tuple[float, str]] = {}
    for line in text.splitlines():
        mt = METRIC.match(line)
        if mt:
            out[mt[1]] = (float(mt[2]), mt[3])
    return out


def declared_better(text: str) -> dict[str, str]:
    """`better:KEY=higher|lower` lines of a script's output: the direction of a metric whose
    unit does not say it (a size, a count)."""
    return {mt[1]: mt[2].lower() for line in text.splitlines() if (mt := BETTER.match(line))}


def unit_better(unit: str) -> str:
    """A metric's direction from its unit: a time is better lower, a rate higher; '' (no
    direction: not ranked unless the script declares one) for anything else."""
    u = unit.strip().lower()
    if u in TIME_UNITS:
        return "lower"
    if u.endswith("/s") or u in ("iops", "hz", "tps"):
        return "higher"
    return ""


# fio options that pace a job: the device then idles by the job's design, not the lab's slowness
PACING = ("rate", "rate_iops", "rate_min", "rate_iops_min", "thinktime")


def rate_limited(out: dict) -> bool:
    """Whether any job of fio's JSON output is paced by its own options."""
    opts = [out.get("global options") or {}] + [j.get("job options") or {} for j in out.get("jobs", [])]
    return any(str(o.get(k, "0")).strip() not in ("", "0") for o in opts for k in PACING)


def io_seconds(job: dict) -> float:
    """The time a fio job had a request outstanding: each direction's and its syncs' mean latency
    times their count (the basis of a rate-limited job's device utilisation: report/load.py)."""
    total = 0.0
    for d in ("read", "write", "sync"):
        part = job.get(d) or {}
        lat = (part.get("lat_ns") or {}).get("mean") or 0
        total += lat / 1e9 * (part.get("total_ios") or 0)
    return total


@dataclass(frozen=True)
class Figure:
    """One figure the recommendation ranks this workload on (report/workcase.py makes the
    workload's use case from them): which measurement, which way is better, which weight of
    weights.toml [workload] it takes, and whether the lab's speed can set it (timed: checked
    for being lab-bound as every timed figure is)."""

    case: str
    metric: str
    better: str  # "higher" | "lower"
    kind: str  # a [workload] weight: wall_time, metric, job_rate, job_latency, lifetime
    label: str
    timed: bool

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def script_figures(case: str, found: dict[str, tuple[float, str]], declared: dict[str, str]) -> list[Figure]:
    """A script's ranked figures: its wall time, then each metric with a direction (declared,
    or from its unit); a metric without one is shown, not ranked."""
    out = [Figure(case, "seconds", "lower", "wall_time", "wall time", True)]
    for key, (_v, unit) in sorted(found.items()):
        better = declared.get(key) or unit_better(unit)
        if better:
            out.append(Figure(case, key, better, "metric", key.replace("_", " "), bool(unit_better(unit))))
    return out


def job_figures(jc: str, job: str, figs: dict[str, float]) -> list[Figure]:
    """A fio job's ranked figures: its rate (IOPS for requests under 64 KiB, else MB/s) and
    its p99 latency."""
    small = figs.get("iops") and figs["bandwidth"] * 1e6 / figs["iops"] < SMALL_REQUEST
    rate = Figure(jc, "iops", "higher", "job_rate", f"{job} IOPS", True) if small else \
        Figure(jc, "bandwidth", "higher", "job_rate", f"{job} bandwidth", True)
    return [rate, Figure(jc, "lat_p99", "lower", "job_latency", f"{job} p99 latency", True)]


def blk_delta(before: str, after: str) -> dict[str, float]:
    """The phase's write requests, their mean size, flushes and discards (block layer)."""
    try:
        a, b = [int(x) for x in before.split()], [int(x) for x in after.split()]
    except ValueError:
        return {}
    if len(a) < 11 or len(b) != len(a):
        return {}
    d = [y - x for x, y in zip(a, b)]
    out = {"write_requests": float(d[W_IOS]),
           "write_request_kib": d[W_SECTORS] * 512 / 1024 / d[W_IOS] if d[W_IOS] else 0.0,
           "discards": float(d[D_IOS]) if len(d) > D_IOS else 0.0}
    if len(d) >= F_IOS + 1:
        out["flushes"] = float(d[F_IOS])
    return out


def stat_cmd(device: str) -> str:
    # raw NAND (/dev/mtdN) has no block-layer counters: nothing printed, none reported
    return f"cat {block_stat(device)} 2>/dev/null || true"


class Workload(Study):
    name = "workload"
    title = "Your workload"
    description = "your own fio job file or script (--workload FILE) on each filesystem, with the device's counters"
    order = 5
    primary_metric = "seconds"
    tools = ("fio",)

    inputs = (inputs.WORKLOAD, inputs.AGE, inputs.DAILY)

    @dataclass(frozen=True)
    class Params:
        file: UserFile | None = user_file("--workload FILE", help="your workload")
        timeout: float = param(1800.0, unit="s", above=0, help="limit of the workload (each pass)")
        fill: int = param(0, low=0, high=95, help="precondition: fill the filesystem to this % with a file population and "
                                  "churn it first (--age FILL; 0: a blank device)")
        churn: int = param(2, low=0, help="precondition: rounds of deleting a quarter of the files and refilling")
        passes: int = param(1, low=1, help="run the workload this many times (the lifetime phase: until the write "
                                    "amplification converges)")
        daily_writes: int = param(0, unit="bytes", low=0, help="host writes a day for the lifetime (--daily-writes; "
                                                       "0: the workload's measured rate, around the clock)")

    def cases(self, params, device):
        if params.file is None:
            raise FlashbedError("study workload runs your own workload: give it with --workload FILE")
        return [Case(params.file.stem, params)]

    def unpaced_age(self, spec: CellSpec) -> bool:
        """Preconditioning in a boot of its own with the device unpaced (nothing times it), the
        workload's boot at the cell's pace: at --pace real (virtual time costs no waiting)."""
        return bool(spec.params.fill) and spec.pace is Pace.REAL and spec.clock is not Clock.VIRTUAL and \
            spec.device.backend in MODELLED

    def boot_pace(self, spec: CellSpec, index: int) -> Pace | None:
        return Pace.NONE if index == 0 and self.unpaced_age(spec) else None

    def work_dir(self, spec: CellSpec, run_dir: Path) -> Path:
        """Where the workload's boot writes its files: the cell's directory, or its last boot's."""
        return boot_dir(run_dir, 1) if self.unpaced_age(spec) else run_dir

    def before_boot(self, spec: CellSpec, index: int, run_dir: Path) -> None:
        p = spec.params
        if self.unpaced_age(spec) and index == 0:
            return  # the preconditioning boot does not run the workload
        dest = self.work_dir(spec, run_dir)
        dest.mkdir(parents=True, exist_ok=True)
        staged = stage(p.file.path, p.file.digest, dest / STAGED[p.file.kind])
        if p.file.kind is Kind.FIO:
            # directory= first, in a [global] of its own: fio merges every [global] section
            staged.write_text(f"[global]\ndirectory={WL_DIR}\n\n" + staged.read_text())

    def workload_cmd(self, p, out: str) -> str:
        if p.file.kind is Kind.FIO:
            return f"fio --output-format=json --output={RUN}/{out} {RUN}/{STAGED[Kind.FIO]}"
        # $FLASHBED_ACK marks acknowledgements only in a crash-state cell (appcheck): a no-op here
        return (f"cd {WL_DIR} && FLASHBED_MNT={WL_DIR} FLASHBED_ACK=true {RUN}/{STAGED[Kind.SCRIPT]} "
                f"> {RUN}/{out} 2>&1")

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        p, v = spec.params, spec.variant
        steps = [*make_and_mount(v)]
        if p.fill:
            steps.append(Step("age", f"{PY} {AGE} {MNT}/age {p.fill} {spec.seed} {p.churn}", timeout=4 * 3600))
        first: list[list[Step]] = []
        if self.unpaced_age(spec):
            first = [[*steps, *umount(v, "umount-age")]]
            steps = [*mount(v)]
        for i in range(1, p.passes + 1):
            last = i == p.passes
            phase, sfx = ("workload", "") if last else (f"pass{i}", f"-{i}")
            out = (FIO_OUT if p.file.kind is Kind.FIO else SCRIPT_OUT) if last else f"pass{i}.out"
            steps += [
                Step(f"mkdir{sfx}", f"rm -rf {WL_DIR} && mkdir -p {WL_DIR} && sync", timeout=600),
                Step(f"blk-before{sfx}", stat_cmd(v.device_path())),
                stats_reset(phase),
                Step(f"workload{sfx}", self.workload_cmd(p, out), timeout=p.timeout),
                Step(f"sync{sfx}", "sync", timeout=600),
                stats_take(phase),
                Step(f"blk-after{sfx}", stat_cmd(v.device_path())),
            ]
        return [*first, [*steps, *umount(v)]]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        p = spec.params
        case = p.file.stem
        res = boots[-1] if boots else None  # the workload's boot (after the preconditioning's own)
        aged = next((b for b in boots if b.step("age") is not None), None)
        run_dir = self.work_dir(spec, run_dir)
        why = first_failure(boots)
        if res is None or why:
            tail = _tail(run_dir / SCRIPT_OUT) if p.file.kind is Kind.SCRIPT else ""
            err = why + (f"; it printed: {tail}" if tail else "") if why else "the lab did not boot"
            return Outcome([], f"error: {err}"[:200], status=passed(False), error=err[:400])
        meas = m(case, "seconds", seconds(res, "workload"), "s")
        extra: dict = {"file": p.file.name, "digest": p.file.digest, "kind": str(p.file.kind)}
        ranked: list[Figure] = []
        if p.file.kind is Kind.FIO:
            out = fiojson.load(run_dir / FIO_OUT)
            if not out:
                return Outcome(meas, "error: fio left no JSON output", status=passed(False),
                               error="fio left no JSON output")
            jobs = {}
            paced = rate_limited(out)
            every = out.get("jobs", [])
            if len(every) > MAX_FIGURES:
                extra["dropped"] = f"{len(every) - MAX_FIGURES} more fio jobs not kept (figures of the first " \
                                   f"{MAX_FIGURES}; group_reporting gives one for all)"
            for job in every[:MAX_FIGURES]:
                figs = fiojson.job_figures(job)
                jobs[job["jobname"]] = figs
                jc = f"{case}:{job['jobname']}"
                meas += m(jc, "bandwidth", figs["bandwidth"], "MB/s") + m(jc, "iops", figs["iops"], "IOPS")
                meas += m(jc, "lat_p50", figs["lat_p50"], "us") + m(jc, "lat_p99", figs["lat_p99"], "us")
                meas += m(jc, "runtime", figs["runtime"], "s")
                ranked += job_figures(jc, job["jobname"], figs)
                if paced:  # the device idles by the job's design: the time it waited for requests instead
                    meas += m(jc, "io_seconds", io_seconds(job), "s")
            extra["jobs"] = jobs
        else:
            text = _read(run_dir / SCRIPT_OUT)
            found, declared = metrics(text), declared_better(text)
            if len(found) > MAX_FIGURES:
                extra["dropped"] = f"{len(found) - MAX_FIGURES} more key=value metrics not kept (the first " \
                                   f"{MAX_FIGURES} are)"
                found = dict(list(found.items())[:MAX_FIGURES])
            for k, (val, unit) in found.items():
                meas += m(case, k, val, unit)
            extra["metrics"] = {k: v for k, (v, _) in found.items()}
            ranked += script_figures(case, found, declared)
        blk = blk_delta(_stdout(res, "blk-before"), _stdout(res, "blk-after"))
        for k, val in blk.items():
            meas += m(case, k, val, "KiB" if k.endswith("_kib") else "count")
        extra["block"] = blk
        if aged is not None:
            extra["age"] = step_json(aged, "age")
            extra["age_pace"] = str(Pace.NONE if self.unpaced_age(spec) else spec.pace)
        phases = host_stats(run_dir)
        lt = self.lifetime(spec, phases)
        if lt is not None:
            meas += m(case, "lifetime_years", lt.years if lt.years != float("inf") else None, "years")
            meas += m(case, "steady_waf", lt.waf, "x")
            extra["lifetime"] = {"years": lt.years, "waf": lt.waf, "steady": lt.steady, "passes": lt.passes,
                                 "waf_per_pass": [round(phases[k].get("write_amplification") or 0, 4)
                                                  for k in _pass_order(phases)],
                                 "daily_bytes": lt.daily_bytes, "daily_source": lt.daily_source,
                                 "pe_cycles": lt.pe_cycles, "pe_source": lt.pe_source,
                                 "capacity": lt.capacity, "erase_spread": lt.erase_spread,
                                 "lines": lt.lines()}
            # at the measured rate the years follow the wall clock: as timed as the wall time
            ranked.append(Figure(case, "lifetime_years", "higher", "lifetime", "projected lifetime",
                                 not p.daily_writes))
        extra["ranked"] = [f.to_json() for f in ranked]
        head = f"{case}: {seconds(res, 'workload') or 0:.1f} s"
        if blk.get("write_requests"):
            head += f", {blk['write_requests']:.0f} writes of {size_text(blk['write_request_kib'] * 1024)}"
        if "flushes" in blk:
            head += f", {blk['flushes']:.0f} flushes"
        if lt is not None and lt.years != float("inf"):
            head += f"; {lt.years:.1f} years at WAF {lt.waf:.2f}" + ("" if lt.steady else " (not converged)")
        if extra.get("dropped"):
            head += f"; {extra['dropped']}"
        return Outcome(meas, head, extra=extra)

    def lifetime(self, spec: CellSpec, phases: dict[str, dict]) -> "life.Lifetime | None":
        """The projected lifetime from the passes' counters (None: the device has none)."""
        order = _pass_order(phases)
        if not order or spec.device.info.get("endurance") is None:
            return None
        last = phases[order[-1]]
        wafs = [float(phases[k].get("write_amplification") or 0) for k in order]
        p = spec.params
        if p.daily_writes:
            daily, source = float(p.daily_writes), "--daily-writes"
        else:
            secs = float(last.get("wall_seconds") or 0)
            daily = life.daily_from_rate(float(last.get("host_write_bytes") or 0), secs)
            source = f"the last pass's rate, {(last.get('host_write_bytes') or 0) / 1e6:.1f} MB in {secs:.1f} s, " \
                     "around the clock"
        steady = life.converged(wafs)
        waf = sum(wafs[-life.WINDOW:]) / len(wafs[-life.WINDOW:]) if steady else wafs[-1]
        spread = (int(last["erase_count_min"]), int(last["erase_count_max"])) \
            if last.get("erase_count_max") is not None else None
        return life.Lifetime(capacity=spec.device.preset_capacity, pe_cycles=int(spec.device.info["endurance"]),
                             pe_source=life.endurance_source(spec.device.path), daily_bytes=daily,
                             daily_source=source, waf=waf or 1.0, steady=steady, passes=len(order),
                             erase_spread=spread)


def host_stats(run_dir: Path) -> dict[str, dict]:
    """The device's counters per phase, as the host answered the guest's stats calls (kept
    in the run directory's host-calls/)."""
    out: dict[str, dict] = {}
    calls = run_dir / "host-calls"
    for req in sorted(calls.glob("*.req")) if calls.is_dir() else []:
        try:
            q = json.loads(req.read_text())
            a = json.loads(req.with_suffix(".resp").read_text())
        except (OSError, ValueError):
            continue
        if q.get("call") == "stats" and a.get("ok") and isinstance(a.get("data"), dict):
            out[(q.get("args") or {}).get("phase", "workload")] = a["data"]
    return out


def _pass_order(phases: dict[str, dict]) -> list[str]:
    passes = sorted((k for k in phases if re.fullmatch(r"pass\d+", k)), key=lambda k: int(k[4:]))
    return passes + (["workload"] if "workload" in phases else [])


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _tail(path: Path) -> str:
    lines = _read(path).strip().splitlines()
    return printable(lines[-1])[:200] if lines else ""


def _stdout(res: BootResult, name: str) -> str:
    s = res.step(name)
    return s.stdout.strip() if s is not None and s.status.ok else ""
