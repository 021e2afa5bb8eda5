"""Requirements before scores: which filesystems a use case may choose at all.

A use case's requirements (weights.toml `requires`, [requirement.NAME]) are checked on
the run's own cells: the `caps` study's probes, the `crashstates` study's classes. A
filesystem that fails one is not eligible (listed with what it lacks, never ranked); a
requirement whose study did not run for it, or whose cell failed or crashed (no evidence
either way: not measured, never missing), leaves the use case not decided, unless the
study cannot run on that device at all (crash states need the emulator's write log).
Durability is the filesystem's promise only: a crash state the device's damage lost
(studies/crashstates.attribute) never rules a filesystem out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase

from ..status import LossCause
from ..studies.base import Reproducer
from . import catalog
from .load import RunData
from .weights import Requirement, UseCase

# manifest device kinds without the emulator's write log (devices/presets.py backends)
NO_WRITE_LOG = ("file", "real", "nandsim", "nand")


class Verdict(StrEnum):
    MET = "met"
    FAILED = "failed"  # not eligible
    UNCHECKED = "unchecked"  # its study did not run (or its cell failed) for this filesystem: the use case waits
    CANNOT = "cannot"  # its study cannot run on this device: said, not held against anyone
    NA = "n/a"  # the study does not apply to the filesystem (a read-only image)


@dataclass
class Check:
    req: Requirement
    verdict: Verdict
    value: float | None = None
    why: str = ""
    reproducer: Reproducer | None = None  # one state that shows the failure, when the study keeps them
    pending: bool = False  # UNCHECKED because states have no verdict (why says how many): not decided


@dataclass
class Eligibility:
    fs: str
    checks: list[Check] = field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.verdict is Verdict.FAILED]

    @property
    def eligible(self) -> bool:
        return not self.failed

    def text(self) -> str:
        """'owners, modes (0 of 1 shown)…; replay: `…`' — what it lacks, with the evidence."""
        parts = []
        for c in self.failed:
            parts.append(c.req.label if not c.why else f"{c.req.label} ({c.why})")
        return "; ".join(parts)


def can_run(run: RunData, device: str, study: str) -> bool:
    s = catalog.study(study)
    if s is not None and s.needs_write_log:
        info = run.device_info(device)
        return info.get("kind") not in NO_WRITE_LOG and str(info.get("ftl", "")).lower() not in ("none", "raw")
    return True


def no_write_log(study: str, device: str) -> str:
    """Why a study that needs the emulator's write log has no figure on a device without one."""
    return f"{study} cannot run on {device} (it needs the flash emulator's write log)"


def check(run: RunData, device: str, fs: str, req: Requirement) -> Check:
    if not can_run(run, device, req.study):
        return Check(req, Verdict.CANNOT, why=no_write_log(req.study, device))
    cases = [k for k in run.cases(device, req.study) if fnmatchcase(k, req.case)]
    vals = [v for k in cases if (st := run.get(device, fs, req.study, k, req.metric)) for v in st.values]
    if vals:
        worst = req.worst(vals)
        if req.holds(worst):
            if (why := _without_verdict(run, device, fs, req, cases)):  # no evidence, no eligibility
                return Check(req, Verdict.UNCHECKED, worst, why, pending=True)
            return Check(req, Verdict.MET, worst)
        return Check(req, Verdict.FAILED, worst, _evidence(run, device, fs, req, worst),
                     _reproducer(run, device, fs, req))
    fails = run.failures_for(device, fs, req.study)
    if fails:  # no evidence either way: not measured, never a capability or a promise missing
        return Check(req, Verdict.UNCHECKED, why=f"its {req.study} cell {fails[0].status}: {fails[0].error}"[:200])
    if run.not_applicable(device, fs, req.study):
        return Check(req, Verdict.NA, why=run.not_applicable(device, fs, req.study))
    return Check(req, Verdict.UNCHECKED, why=f"study {req.study} has no {req.metric} for {fs}")


def _without_verdict(run: RunData, device: str, fs: str, req: Requirement, cases: list[str]) -> str:
    """How many of the crash states a requirement's cells set out to check have no verdict (the
    check hung or disagreed with itself, the lab stopped, the state was not checked), and why;
    "" when every one has one. A state without a verdict is no evidence: the use case waits."""
    n = sum(v for k in cases if (st := run.get(device, fs, req.study, k, "no_verdict")) for v in st.values)
    if not n:
        return ""
    of = sum(v for k in cases if (st := run.get(device, fs, req.study, k, "to_judge")) for v in st.values)
    why: dict[str, int] = {}
    for e in run.extras.get((device, fs, req.study), []):
        for w, k in ((e.get("no_verdict") or {}).get("why") or {}).items():
            why[w] = why.get(w, 0) + k
    reasons = "; ".join(f"{w} ({k:.0f})" for w, k in sorted(why.items(), key=lambda kv: -kv[1])[:3])
    return (f"{n:.0f} of {of:.0f} crash states it set out to check have no verdict"
            + (f" ({reasons})" if reasons else ""))[:400]


def _evidence(run: RunData, device: str, fs: str, req: Requirement, worst: float) -> str:
    if req.study == "caps":
        why = [w for e in run.extras.get((device, fs, req.study), [])
               if (w := (e.get("why") or {}).get(req.metric.removeprefix("cap:")))]
        return why[0] if why else ""
    if req.study not in ("crashstates", "appcheck"):
        return f"{req.metric} = {worst:g}"
    # counts of states: how many of all (every workload and repeat) were in the class
    def total(metric: str) -> float:
        return sum(v for k in run.cases(device, req.study) if fnmatchcase(k, req.case)
                   if (st := run.get(device, fs, req.study, k, metric)) for v in st.values)
    by_device = total("cause:device")
    theirs = f"; {by_device:.0f} more the device's damage lost (not held against it)" if by_device else ""
    if req.study == "appcheck" and req.metric in ("failures", "fs_failures"):
        # your check's own failures (class data-loss) apart from the filesystem's and the stuck ones
        lost, n = total("fs_data_loss" if req.metric == "fs_failures" else "class:data-loss"), total("iterations")
        rest = total(req.metric) - lost
        stuck = "did not recover cleanly or the check did not finish"
        if not lost:
            return f"{rest:.0f} of {n:.0f} crash states {stuck}" + theirs
        return f"your check failed in {lost:.0f} of {n:.0f} crash states" + (f"; {rest:.0f} more {stuck}"
                                                                              if rest else "") + theirs
    what = "acknowledged data lost" if req.metric in ("class:data-loss", "fs_data_loss") else \
        req.metric.split(":", 1)[-1]
    return f"{what} in {total(req.metric):.0f} of {total('iterations'):.0f} crash states" + theirs


def _reproducer(run: RunData, device: str, fs: str, req: Requirement) -> Reproducer | None:
    outcome = req.metric.split(":", 1)[1] if ":" in req.metric else "data-loss" if req.metric == "fs_data_loss" \
        else None
    dev = run.device_of(device)
    mine = [r for r in run.reproducers if r.device == dev and r.fs == fs and r.study == req.study
            and (outcome is None or r.outcome == outcome)
            and (not r.cause or LossCause(r.cause).filesystems)]  # the filesystem's loss, not the device's
    # any failing state will do: one that lost data first (the failure that decides most often), one
    # without flash damage before one the device damaged too (the plainest evidence of the filesystem's)
    return min(mine, key=lambda r: (r.outcome != "data-loss", r.cause == LossCause.BOTH), default=None)


def eligibility(run: RunData, device: str, uc: UseCase, fss: list[str]) -> dict[str, Eligibility]:
    return {fs: Eligibility(fs, [check(run, device, fs, r) for r in uc.requires]) for fs in fss}
