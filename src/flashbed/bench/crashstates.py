"""Crash-state checking throughput: states per hour per core, and where the time goes.

  flashbed bench crashstates [--device emmc-8g@128M] [--fs ext4,f2fs] [--workload powercut]
                             [--ops 60] [--pace none] [--clock virtual] [--seed 1] [--no-dedup]
  flashbed bench crashstates --workload examples/sqlite-logger.sh --check examples/sqlite-check.sh

Each filesystem runs one cell (one lab kernel and its emulator on one leased CPU, so one
core; no helper labs), in virtual time as runs check crash states (--clock real: the
real-time kernel): the workload once with the write log on, then its crash states checked in
the same boot, each distinct state once (as runs do; --no-dedup checks every state), the
fsck of each run by the host on the served state (crashhost/check.py; as runs do). Prints, per
filesystem, the states found, distinct and checked; states per hour of the check loop,
distinct (the lab's checks) and total (every state's verdict, shared ones included; on the
host's wall clock, from the lab's first state to its last), and of the whole cell (boot,
mkfs and workload included), per CPU-hour of this process's children (lab, emulator and the
host's fsck: the lab waits for the host's answer on its own CPU, so this is the fairer "per
core"); and with --clock real the median wall-clock time per checked state of each part (in
virtual time the guest's clock is the device model's, which a served state does not move: no
split is printed):
switch (the host call that rebuilds and serves the state), drop (the block device's
buffers), mount (with the journal's or log's recovery), verify (the check: the built-in
verifier or yours; yours runs once per distinct recovered tree, share_trees, and the count
of its runs is printed), umount, fsck (the host call).

With a user workload (a script, as `flashbed run --workload` takes it) the cells are the
appcheck study's: once with your check (--check FILE) and once with a trivial check (exit 0:
the floor the recovery alone sets), so the check's own cost shows.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import profiles, userwork
from ..clock import Clock, Pace
from ..devices import presets
from ..errors import FlashbedError
from ..lab.kernel import ensure_kernel
from ..results import CellKey
from ..studies import STUDIES, edge
from ..studies.base import CellSpec
from ..studies.crashstates import PARTS
from .cells import checked_variants, timed_cell

BUILT_IN = ("powercut", "sequences")
TRIVIAL = "#!/bin/sh\n# the floor: a check that reads nothing\nexit 0\n"


@dataclass(frozen=True)
class Case:
    """One row: a study's cell with its parameters, named for the table."""

    label: str
    study: str
    case: str
    params: dict


def cases(workload: str, check: str | None, ops: int, dedup: bool, tmp: Path) -> list[Case]:
    """The built-in workload's case, or a user workload's: with the check given and a trivial one."""
    if workload in BUILT_IN:
        if check:
            raise FlashbedError(f"--check goes with a user workload (--workload FILE), not the built-in {workload}")
        p = {**profiles.overrides("quick", "crashstates"), "ops": ops, "workload": workload, "dedup": dedup}
        return [Case(workload, "crashstates", workload, p)]
    userwork.load(workload, "--workload", fio_allowed=False)  # one clear line before any lab runs
    trivial = tmp / "trivial-check.sh"
    trivial.write_text(TRIVIAL)
    trivial.chmod(0o755)
    checks = ([check] if check else []) + [str(trivial)]
    out = []
    for c in checks:
        userwork.load(c, "--check", fio_allowed=False)
        # the same parameters `flashbed run --workload W --check C` gives the appcheck study
        p = {**edge.overrides({"--workload": workload, "--check": c})["appcheck"], "dedup": dedup}
        label = "check: trivial (exit 0)" if c == str(trivial) else f"check: {Path(c).name}"
        out.append(Case(label, "appcheck", "user", p))
    return out


def bench(device: str, fs: list[str], workload: str, ops: int, pace: str, seed: int, out=sys.stdout,
          check: str | None = None, dedup: bool = True, clock: Clock = Clock.REAL) -> list[dict]:
    dev = presets.load_spec(device)
    if not dev.emulated:
        raise FlashbedError(f"{dev.label} is not an emulated device: crash states need the emulator's write log")
    parsed = checked_variants(fs, dev)
    with tempfile.TemporaryDirectory(prefix="flashbed-bench-cs-check-") as tmp:
        rows_of = cases(workload, check, ops, dedup, Path(tmp))  # the files checked before any lab runs
        kernel = ensure_kernel(time_travel=clock.time_travel)
        what = (f"{workload} workload" + (f", {ops} operations" if workload == "powercut" else "")
                if workload in BUILT_IN else f"workload {Path(workload).name}")
        print(f"crash states on {dev.label} ({what}, pace {pace}, clock {clock}, "
              f"{'each distinct state once' if dedup else 'every state'}, one lab per cell)", file=out, flush=True)
        rows = []
        for c in rows_of:
            study = STUDIES[c.study]
            params = study.params(**c.params)
            if len(rows_of) > 1:
                print(f" {c.label}", file=out, flush=True)
            for name, v in zip(fs, parsed, strict=True):
                spec = CellSpec(key=CellKey(dev.label, v.spec, c.study, c.case), device=dev, variant=v,
                                params=params, seed=seed, pace=Pace(pace), clock=clock)
                res, wall, cpu = timed_cell(spec, kernel, "flashbed-bench-cs-")
                rows.append(row(name, c, res, wall, cpu))
                print_row(rows[-1], out, clock)
    return rows


def row(name: str, c: Case, res, wall: float, cpu: float) -> dict:
    k = c.case
    n = res.value(k, "checked") or res.value(k, "iterations")
    if res.status.retryable or not n:
        raise FlashbedError(f"{name} ({c.label}): {res.error or res.headline}")
    total = res.value(k, "iterations")
    split = {p: res.value(k, f"{p}_ms") or 0.0 for p in PARTS}
    return {"fs": name, "case": c.label, "states": int(res.value(k, "states")), "distinct": int(
                res.value(k, "distinct") or total), "checked": int(n), "verdicts": int(total),
            "per_hour": res.value(k, "states_per_hour"),
            "per_hour_total": res.value(k, "verdicts_per_hour") or res.value(k, "states_per_hour"),
            "per_hour_cell": 3600 * n / wall, "per_cpu_hour": 3600 * n / cpu if cpu else None,
            "wall": wall, "failures": res.value(k, "failures"), "split_ms": split,
            "check_runs": res.value(k, "check_runs")}


def print_row(r: dict, out, clock: Clock = Clock.REAL) -> None:
    print(f"  {r['fs']:10} {r['states']:5d} states, {r['distinct']} distinct, {r['checked']} checked: "
          f"{r['per_hour']:7.0f} states/hour/core distinct, {r['per_hour_total']:7.0f} total; "
          f"{r['per_hour_cell']:7.0f} distinct for the whole cell ({r['wall']:.1f} s), "
          f"{r['per_cpu_hour'] or 0:7.0f} per CPU-hour; failures {int(r['failures'] or 0)}"
          + (f"; the check ran {int(r['check_runs'])} times (once per recovered tree)"
             if r.get("check_runs") is not None else ""), file=out)
    split = r["split_ms"]
    if clock is Clock.VIRTUAL:
        # the guest's clock is the device model's, and a served state's requests cost it nothing:
        # a split of zeros would say nothing about where the host's time goes
        print("             the split per state: --clock real (in virtual time the guest's clock is the "
              "device model's, which a served state does not move)", file=out, flush=True)
        return
    print("             median per checked state (wall clock): " + ", ".join(f"{p} {split[p]:.1f} ms" for p in PARTS)
          + f" (sum {sum(split.values()):.1f} ms)", file=out, flush=True)
