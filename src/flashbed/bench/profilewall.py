"""`flashbed bench clock --profile quick`: a whole profile's wall-clock time in real
and in virtual time on one device, side by side (issue 17: in virtual time a slow
part's device time costs no wall-clock time, only the lab's and the emulator's CPU).

Each run is a separate `flashbed run` process in a fresh directory, timed whole
(setup, every cell, the report); the clocks alternate so drift and other load on a
shared host hit both alike. The host's load average is printed beside each run,
since a virtual run's wall time is all CPU and moves with the load where a real
run's paced part does not.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..clock import Clock
from ..errors import FlashbedError
from ..store import RunStore


@dataclass(frozen=True)
class ProfileRun:
    clock: Clock
    seconds: float
    cells: int
    ok: int
    load: float  # the host's 1-minute load average at the end


def _count(run_dir: Path) -> tuple[int, int]:
    """(cells, of which ok) from a run directory's cell results."""
    results = list(RunStore(run_dir).results())
    return len(results), sum(1 for r in results if r.ok)


def command(profile: str, device: str, clock: Clock, out: Path) -> list[str]:
    return [sys.executable, "-m", "flashbed.cli", "run", "--profile", profile, "--device", device,
            "--clock", clock.value, "--out", str(out)]


def run_once(profile: str, device: str, clock: Clock, out: Path, log: Path) -> ProfileRun:
    started = time.monotonic()
    with log.open("w") as f:
        rc = subprocess.run(command(profile, device, clock, out), stdout=f, stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - started
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise FlashbedError(f"bench clock: the {clock.value}-time run of profile {profile} on {device} failed "
                            f"(exit {rc}): {tail[0]}")
    cells, ok = _count(out)
    return ProfileRun(clock, seconds, cells, ok, os.getloadavg()[0])


def bench(profile: str, device: str, runs: int = 1, keep: Path | None = None,
          stream=sys.stdout) -> dict[Clock, list[ProfileRun]]:
    done: dict[Clock, list[ProfileRun]] = {Clock.VIRTUAL: [], Clock.REAL: []}
    with tempfile.TemporaryDirectory(prefix="flashbed-bench-profile-") as tmp:
        base = keep or Path(tmp)
        for i in range(runs):
            for clock in done:  # interleaved
                out = base / f"{clock.value}-{i}"
                print(f"run {i + 1}/{runs} {clock.value}: flashbed run --profile {profile} --device {device} "
                      f"--clock {clock.value} ...", file=sys.stderr, flush=True)
                r = run_once(profile, device, clock, out, base / f"{clock.value}-{i}.log")
                done[clock].append(r)
                print(f"run {i + 1}/{runs} {clock.value}: {r.seconds:.0f} s wall, {r.ok}/{r.cells} cells ok, "
                      f"load {r.load:.1f}", file=sys.stderr, flush=True)
    render(profile, device, done, stream)
    return done


def render(profile: str, device: str, done: dict[Clock, list[ProfileRun]], stream=sys.stdout) -> None:
    real = statistics.median(r.seconds for r in done[Clock.REAL])
    virt = statistics.median(r.seconds for r in done[Clock.VIRTUAL])
    n = len(done[Clock.REAL])
    print(f"bench clock: profile {profile} on {device}, whole `flashbed run` process, "
          f"{'median of ' + str(n) + ' runs' if n > 1 else 'one run'} per clock, interleaved", file=stream)
    print(f"{'clock':8} {'wall s':>8} {'cells ok':>9} {'load':>5}", file=stream)
    for clock in (Clock.REAL, Clock.VIRTUAL):
        rs = done[clock]
        print(f"{clock.value:8} {statistics.median(r.seconds for r in rs):8.0f} "
              f"{min(r.ok for r in rs):4}/{max(r.cells for r in rs):<4} "
              f"{statistics.median(r.load for r in rs):5.1f}", file=stream)
    print(f"real / virtual: {real / virt:.2f}x  (load: the host's 1-minute load average at the end of a run; a "
          f"virtual run's wall time is the lab's and the emulator's CPU, so load lengthens it more)", file=stream)
