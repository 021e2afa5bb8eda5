"""`flashbed bench clock`: the same fio jobs on one emulated device in real and in
virtual time, side by side, against the device model's own timing (issue 17).

Per job: fio's figure in real time, in virtual time, and as the model timed the
same requests (the emulator's statistics around the job: mean modelled latency
per request, bytes per second of device busy time); the wall-clock seconds the
job took in each mode. Runs interleave the two clocks so drift hits both alike;
medians are printed. With --hog, every host CPU also runs a busy loop meanwhile:
the virtual figures must not move (determinism), the real ones do.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..clock import Clock
from ..devices import presets
from ..devices.rates import RatePlan, random_job
from ..devices.session import open_session
from ..lab.kernel import ensure_kernel
from ..lab.labs import UmlLab
from ..probe.lab import run_fio

MiB = 1 << 20
DEFAULT_PRESET = "emmc-8g@512M"


def jobs(capacity: int, runtime: float, seq_bytes: int = 128 * MiB) -> dict[str, dict]:
    """1 MiB sequential write and read (of `seq_bytes`), 4 KiB QD1 random read and write
    (`runtime` seconds each)."""
    plan = RatePlan(capacity=capacity, erase_unit=4 * MiB, span=capacity, seq_bytes=capacity, runtime=runtime)
    seq = min(capacity, seq_bytes)
    return {"seq-write": {"rw": "write", "bs": "1M", "size": seq},
            "seq-read": {"rw": "read", "bs": "1M", "size": seq},
            "randread": random_job(plan, "randread", "spread"),
            "randwrite": random_job(plan, "randwrite", "spread")}


def figure(job: str, figs: dict[str, float]) -> float:
    """A job's headline figure: MB/s for sequential jobs, IO/s for random ones."""
    return figs["bandwidth"] if job.startswith("seq") else figs["iops"]


@dataclass
class ClockRun:
    clock: Clock
    figures: dict[str, float] = field(default_factory=dict)
    model: dict[str, float] = field(default_factory=dict)
    walls: dict[str, float] = field(default_factory=dict)


def measure(preset: str, clock: Clock, work: Path, runtime: float, seq_bytes: int = 128 * MiB) -> ClockRun:
    """One lab boot running every job on a fresh device in `clock`."""
    dev = presets.load_spec(preset)
    kernel = ensure_kernel(time_travel=clock.time_travel)
    model: dict[str, dict[str, float]] = {}
    walls: dict[str, float] = {}
    js = jobs(dev.capacity, runtime, seq_bytes)
    with open_session(dev, work / "scratch", clock=clock) as session:
        figs = run_fio(session, UmlLab(kernel), work, js, model=model, walls=walls)
    out = ClockRun(clock)
    for name in js:
        out.figures[name] = figure(name, figs[name])
        out.model[name] = figure(name, model[name]) if name in model else float("nan")
        out.walls[name] = walls.get(name, float("nan"))
    return out


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def cpu_hog(n: int):
    """`n` busy loops on the host for the duration (another run loading the CPUs)."""
    procs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.join()


def runnable_others(samples: int = 5, gap: float = 0.02) -> int:
    """Tasks runnable on the host now besides the caller: the kernel's count in /proc/loadavg,
    the median of a few samples (other work already keeping CPUs busy)."""
    counts = []
    for i in range(samples):
        with open("/proc/loadavg") as f:
            counts.append(int(f.read().split()[3].split("/")[0]))
        if i + 1 < samples:
            time.sleep(gap)
    return max(0, int(statistics.median(counts)) - 1)


@contextlib.contextmanager
def every_cpu_busy():
    """Every CPU this process may run on busy for the duration: a busy loop on each one that
    the host's other runnable work leaves free (under the test suite its other workers keep
    most of them busy already, and loops beside them proved nothing more: they only took
    the suite's CPU). Gives the number of loops started."""
    n = max(0, len(os.sched_getaffinity(0)) - runnable_others())
    with cpu_hog(n):
        yield n


def bench(preset: str = DEFAULT_PRESET, runs: int = 3, runtime: float = 5.0, hog: bool = False,
          stream=sys.stdout) -> dict[Clock, list[ClockRun]]:
    done: dict[Clock, list[ClockRun]] = {Clock.REAL: [], Clock.VIRTUAL: []}
    with tempfile.TemporaryDirectory(prefix="flashbed-bench-clock-") as tmp:
        for i in range(runs):
            for clock in done:  # interleaved
                started = time.monotonic()
                with cpu_hog(multiprocessing.cpu_count()) if hog else contextlib.nullcontext():
                    r = measure(preset, clock, Path(tmp) / f"{clock.value}-{i}", runtime)
                done[clock].append(r)
                print(f"run {i + 1}/{runs} {clock.value}: {time.monotonic() - started:.1f}s wall, "
                      + ", ".join(f"{k} {v:.1f}" for k, v in r.figures.items()), file=sys.stderr, flush=True)
    render(preset, done, hog, stream)
    return done


def _med(rs: list[ClockRun], what: str, job: str) -> float:
    return statistics.median(getattr(r, what)[job] for r in rs)


def render(preset: str, done: dict[Clock, list[ClockRun]], hog: bool, stream=sys.stdout) -> None:
    real, virt = done[Clock.REAL], done[Clock.VIRTUAL]
    n = len(real)
    print(f"bench clock: {preset}, medians of {n} runs{' with every host CPU loaded by a busy loop' if hog else ''}",
          file=stream)
    print(f"{'job':10} {'unit':5} {'real':>9} {'virtual':>9} {'model':>9} {'virt/model':>10} "
          f"{'wall real s':>11} {'wall virt s':>11} {'virt spread':>11}", file=stream)
    for job in virt[0].figures:
        unit = "MB/s" if job.startswith("seq") else "IO/s"
        v, m = _med(virt, "figures", job), _med(virt, "model", job)
        vs = [r.figures[job] for r in virt]
        spread = (max(vs) - min(vs)) / statistics.median(vs) if statistics.median(vs) else float("nan")
        print(f"{job:10} {unit:5} {_med(real, 'figures', job):9.1f} {v:9.1f} {m:9.1f} {v / m - 1:+10.2%} "
              f"{_med(real, 'walls', job):11.2f} {_med(virt, 'walls', job):11.2f} {spread:11.4%}", file=stream)
    print("model: the emulator's own timing of the virtual run's requests (mean modelled latency; bytes per "
          "second of device busy time); virt spread: (max - min) / median of the virtual runs", file=stream)
