"""`corruption`: dm-flakey between the filesystem and the device, then a
normal remount and a look at what the filesystem made of it.

One lab boot per iteration: the filesystem is made and mounted on a plain
device-mapper mapping of the device; just before the workload the mapping is
reloaded as dm-flakey (so its clock starts with the workload); modes:
  after      (case "after-10s")    writes pass for `corrupt_after` s (10), then every write is hit
  alternate  (case "1s-on-1s-off") writes pass 1 s, are hit 1 s, and so on
with `corrupt_bio_byte 1 w 0 0` (byte 0 of each written bio becomes 0x00) or,
as the `drop` feature, `drop_writes` (writes are acknowledged and thrown away).
Workloads: one 30 MB file, or 30 files of 1 MB, rewritten with new random
content and `sync`ed round after round (at most one round a second, by default)
until `tail` s after the corruption started (after-10s) or for
`alternate_seconds` (1s-on-1s-off). Then: unmount, remove dm-flakey, mount the
bare device normally, read every file, unmount, run the read-only checker.

Outcomes per case ("<mode> <workload>", plus " drop" for drop_writes), metric
"outcome:<name>", counts:
  per iteration (exactly one): mounts (mounted read-write, checker clean or
  none), read-only (the filesystem turned read-only during the workload, or
  came back read-only), needs-fsck (the checker found damage), unmountable,
  hang (a step did not return: the lab is killed, the console log kept);
  `error` when the iteration could not be set up (never a filesystem's fault).
  per file, over the iterations that mounted: intact, zeroed (a 4 KiB block of
  zeros where data was), truncated (shorter), io-error (reading failed: the
  filesystem noticed), silently-corrupted (other bytes, no error; includes
  stale: an older round's content after its newer write was acknowledged by
  sync), and missing (the name is gone) when it happens.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..lab.boundary import BootResult, Step
from ..results import Measurement
from ..shellwords import DEV
from ..status import FileState, IterationOutcome
from ..variants import FsVariant
from .base import MB, MNT, RUN, Case, CellSpec, Outcome, OutcomeTable, Study, m, step_json
from .failures import (
    CW,
    DM,
    DM_NAME,
    DMSETUP,
    FILE_OUTCOMES,
    SECTORS,
    inspected,
    missing_or_hung,
    on_dm,
    setup_failures,
)
from .params import param

MODES = ("after", "alternate")
FEATURES = {"corrupt": "5 corrupt_bio_byte 1 w 0 0", "drop": "1 drop_writes"}
MOUNT_OUTCOMES = tuple(o for o in IterationOutcome if o.ran)


def _armed_table(boots: list[BootResult]) -> str:
    """The dm-flakey table as the guest's arm step was given it ('' if none ran)."""
    arm = boots[0].step("arm") if boots else None
    cmd = arm.cmd if arm is not None else ""
    return cmd.split('--table "', 1)[1].split('"', 1)[0] if '--table "' in cmd else ""


def mode_label(mode: str, p) -> str:
    if mode == "after":
        return f"after-{float(p.corrupt_after):g}s"
    if mode == "alternate":
        return "1s-on-1s-off"
    raise ValueError(f"unknown corruption mode '{mode}': choose from {', '.join(MODES)}")


def workloads(p) -> dict[str, tuple[int, int]]:
    """name -> (file count, file size)."""
    big, many, size = p.big_mb, p.many_count, p.many_mb
    return {f"one-{big}MB": (1, big * MB), f"many-{size}MB": (many, size * MB)}


def classify_iteration(res: BootResult | None, has_check: bool, clean_codes=(0,)) -> tuple[IterationOutcome, str]:
    """Mount-level outcome of one iteration boot."""
    early = missing_or_hung(res)
    if early is not None:
        return early
    names = {s.name: s for s in res.steps}
    setup = [n for n in names if n.startswith(("dm-create", "mkfs", "mount", "arm"))]
    bad = [n for n in setup if not names[n].status.ok]
    if bad or "work" not in names:
        return IterationOutcome.ERROR, f"setup step '{bad[0] if bad else 'work'}' failed"
    rm = [n for n in names if n.startswith("remount")]
    if not rm or any(not names[n].status.ok for n in rm):
        return IterationOutcome.UNMOUNTABLE, "normal mount failed"
    work = step_json(res, "work") or {}
    insp = step_json(res, "inspect") or {}
    if work.get("ro") or insp.get("ro") or insp.get("probe") == "EROFS":
        return IterationOutcome.READ_ONLY, "the filesystem turned read-only"
    fsck = names.get("fsck")
    if has_check and fsck is not None and fsck.rc not in clean_codes:
        return IterationOutcome.NEEDS_FSCK, f"checker exit {fsck.rc}"
    return IterationOutcome.MOUNTS, ""


def file_outcomes(res: BootResult | None) -> dict[str, int]:
    return inspected(res)


class Corruption(Study):
    name = "corruption"
    title = "Corruption (dm-flakey)"
    description = "dm-flakey corrupts or drops writes; remount and inspect every file"
    order = 120
    primary_metric = "survived"
    good_outcomes = frozenset({FileState.INTACT})
    media = ("block",)
    device_stats = False
    timing_free = True
    continue_after_failure = True
    outcome_tables = (
        OutcomeTable("iterations", "outcome:", MOUNT_OUTCOMES + (IterationOutcome.ERROR,), per_iteration=True),
        OutcomeTable("files, over the iterations that mounted", "outcome:", FILE_OUTCOMES + (FileState.MISSING,)),
    )

    @dataclass(frozen=True)
    class Params:
        iterations: int = param(15, low=1, help="runs per case (the reference study ran 15)")
        modes: tuple[str, ...] = param(MODES, choices=MODES, help="after: corrupt every write after "
                                       "corrupt_after s; alternate: 1 s on, 1 s off")
        features: tuple[str, ...] = param(tuple(FEATURES), choices=tuple(FEATURES),
                                          help="corrupt: byte 0 of each written bio becomes 0; drop: writes vanish")
        corrupt_after: float = param(10, unit="s", low=0)
        tail: float = param(3, unit="s", above=0, help="workload time after the corruption starts (after)")
        alternate_seconds: float = param(5, unit="s", above=0, help="workload time (alternate)")
        round_seconds: float = param(1.0, unit="s", above=0, help="at most one rewrite round per this")
        big_mb: int = param(30, unit="MB", low=1, help="the one big file")
        many_count: int = param(30, low=1, help="the many small files")
        many_mb: int = param(1, unit="MB", low=1, help="each small file")
        mode: str = param("after", choices=MODES, per_case="modes")
        workload: str = param("", per_case="workloads")
        feature: str = param("corrupt", choices=tuple(FEATURES), per_case="features")
        step_timeout: float = param(120.0, unit="s", above=0, help="limit of a mount, unmount or inspection")
        fsck_timeout: float = param(300.0, unit="s", above=0)

    def cases(self, params, device):
        out = []
        for feat in params.features:
            for mode in params.modes:
                for wl in workloads(params):
                    case = f"{mode_label(mode, params)} {wl}" + ("" if feat == "corrupt" else f" {feat}")
                    out.append(Case(case, dataclasses.replace(params, mode=mode, workload=wl, feature=feat)))
        return out

    def min_capacity(self, params):
        count, size = workloads(params)[params.workload]
        return 3 * count * size

    def min_space(self, params):
        count, size = workloads(params)[params.workload]
        return count * size  # the workload's files, before the filesystem's own copies

    def _table(self, spec: CellSpec) -> tuple[str, float]:
        """dm-flakey table and how long the workload runs."""
        p = spec.params
        if p.mode == "after":
            after = float(p.corrupt_after)
            up, down, duration = int(after), 10_000_000, after + float(p.tail)
        elif p.mode == "alternate":
            up, down, duration = 1, 1, float(p.alternate_seconds)
        else:
            raise ValueError(f"unknown corruption mode {p.mode}")
        feat = FEATURES[p.feature]
        return f"0 {SECTORS} flakey {DEV} 0 {up} {down} {feat}", duration

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        v: FsVariant = spec.variant
        p = spec.params
        count, size = workloads(p)[p.workload]
        table, duration = self._table(spec)
        t = float(p.step_timeout)
        check = v.check_cmd()
        out = []
        for i in range(p.iterations):
            seed = spec.seed * 1000 + i
            files = f"--count {count} --size {size} --seed {seed}"
            steps = [
                Step("dm-create", f"{DMSETUP} create {DM_NAME} --table \"0 {SECTORS} linear {DEV} 0\" && "
                                  f"{{ [ -b {DM} ] || dmsetup mknodes; }}", timeout=60),
                *[Step(f"mkfs{j}" if j else "mkfs", c, timeout=600) for j, c in enumerate(on_dm(v.make_cmds()))],
                *[Step(f"mount{j}" if j else "mount", c, timeout=t) for j, c in enumerate(on_dm(v.mount_cmds(MNT)))],
                Step("arm", f"{DMSETUP} reload {DM_NAME} --table \"{table}\" && {DMSETUP} resume {DM_NAME}",
                     timeout=60),
                Step("work", f"{CW} cwork {MNT}/cw {RUN}/cwork.json {files} --duration {duration} "
                             f"--round {float(p.round_seconds)}", timeout=duration + 600, may_fail=True),
                *[Step(f"umount{j}" if j else "umount", c, timeout=t, may_fail=True)
                  for j, c in enumerate(v.umount_cmds(MNT))],
                Step("dm-remove", f"{DMSETUP} remove {DM_NAME}", timeout=60, may_fail=True),
                *[Step(f"remount{j}" if j else "remount", c, timeout=t, may_fail=True)
                  for j, c in enumerate(v.mount_cmds(MNT))],
                Step("inspect", f"mountpoint -q {MNT} && {CW} inspect {MNT}/cw {RUN}/cwork.json {files}",
                     timeout=t + size * count / 1e6, may_fail=True),
                Step("umount2", f"! mountpoint -q {MNT} || {' && '.join(v.umount_cmds(MNT))}", timeout=t,
                     may_fail=True),
            ]
            if check:
                steps.append(Step("fsck", check, timeout=float(p.fsck_timeout), may_fail=True))
            out.append(steps)
        return out

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        case = spec.key.case
        n = spec.params.iterations
        has_check = spec.variant.check_cmd() is not None
        clean = spec.variant.base.check_clean
        mount_counts = {o: 0 for o in MOUNT_OUTCOMES}
        file_counts = {o: 0 for o in FILE_OUTCOMES}
        records = []
        for i in range(n):
            res = boots[i] if i < len(boots) else None
            outcome, why = classify_iteration(res, has_check, clean)
            mount_counts[outcome] = mount_counts.get(outcome, 0) + 1
            files = file_outcomes(res) if outcome.files_read else {}
            for k, c in files.items():
                file_counts[k] = file_counts.get(k, 0) + c
            work = (step_json(res, "work") or {}) if res is not None else {}
            records.append({"i": i, "outcome": outcome, "why": why, "files": files,
                            "rounds": work.get("rounds"), "errors": work.get("errors", [])[:3],
                            **({"console": res.console_log} if outcome is IterationOutcome.HANG and res is not None
                               else {})})
        meas: list[Measurement] = m(case, "iterations", n, "count")
        for name, c in {**mount_counts, **file_counts}.items():
            if c or name in MOUNT_OUTCOMES or name in FILE_OUTCOMES:
                meas += m(case, f"outcome:{name}", c, "count")
        status, error = setup_failures(records, n)
        head_m = ", ".join(f"{c} {k}" for k, c in mount_counts.items() if c)
        head_f = ", ".join(f"{c} {k}" for k, c in file_counts.items() if c)
        return Outcome(meas, f"{n} runs: {head_m}; files: {head_f or 'none read'}",
                       extra={"iterations": records, "table": _armed_table(boots) or self._table(spec)[0]},
                       status=status,
                       error=error)
