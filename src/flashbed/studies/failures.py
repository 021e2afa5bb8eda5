"""What the failure studies share, so that none of them imports another (appcheck, crashstates over
the user's workload, is a CrashStates and imports it by design).

After a power cut (powercut, crashstates and appcheck; `flashbed crashstate replay`): the
recovery's spec and its limit, a mount mode's variant, the workload's seed, and how a
recovery's facts are classified (PowerCutClass, MountState, FsckResult).

Under device-mapper faults (corruption, badblocks): the guest side that writes and inspects
the files, the dm commands, the per-file outcomes and how an iteration's set-up is judged.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from typing import Any

from .. import filesystems as fscat
from ..lab.boundary import BootResult
from ..lab.guest.protocol import RecoverFacts, RecoverSpec
from ..shellwords import DEV, TOOLS
from ..status import (
    BootStatus,
    CellStatus,
    FileState,
    FsckResult,
    IterationOutcome,
    MountState,
    PowerCutClass,
    StepStatus,
)
from ..variants import FsVariant
from .base import MNT, PY, step_json

# --- after a power cut ---------------------------------------------------------------------

CLASSES = tuple(c for c in PowerCutClass if c.always_shown)
EXTRA_CLASSES = tuple(c for c in PowerCutClass if not c.always_shown)
MOUNT_STATES = tuple(MountState)
FSCK_RESULTS = tuple(FsckResult)
# kernel messages that say a mount found the filesystem dirty (those that say it replayed
# a journal or log are each filesystem's own: its catalogue recovery_log)
DIRTY = r"not properly unmounted|mounting unchecked|dirty"
ANY_RECOVERY = r"[Rr]ecover|replay"


def work_seed(seed: int, k: int) -> int:
    return seed * 100_003 + k


def case_variant(v: FsVariant, mode: str) -> FsVariant:
    if mode == "sync" and "sync" not in v.mount_extra:
        return dataclasses.replace(v, mount_extra=(*v.mount_extra, "sync"))
    return v


def shell_arg(msg: Any) -> str:
    """A guest message as one shell-quoted argument."""
    return shlex.quote(msg.arg())


def recover_spec(v: FsVariant, workdir: str, log: str, out: str, timeout: float, fsck_timeout: float,
                 sabotage: bool = False) -> RecoverSpec:
    """The recovery after a cut of variant v: mount, verify the workload in `workdir`
    against `log`, unmount, check and repair with the filesystem's own tools."""
    base = v.base
    return RecoverSpec(mnt=MNT, dir=workdir, log=log, out=out, timeout=timeout, fsck_timeout=fsck_timeout,
                       mount=v.mount_cmds(MNT), umount=v.umount_cmds(MNT), check=v.check_cmd(), repair=v.repair_cmd(),
                       clean=list(base.check_clean), fixed=list(base.repair_fixed), sabotage=sabotage)


def recover_timeout(rs: RecoverSpec) -> float:
    """The longest a recovery may take: every mount, unmount and check at its limit."""
    return 6 * rs.timeout + 2 * rs.fsck_timeout + 120


def mount_state(facts: RecoverFacts | dict, fstype: str) -> MountState:
    facts = RecoverFacts.from_json(facts)
    m1 = facts.run("mount1")
    if not m1:
        return MountState.HANG if facts.hang else MountState.FAILED
    status = StepStatus.coerce(m1.get("status"))
    if status is not None and status.is_hang:
        return MountState.HANG
    if status is not StepStatus.OK:
        return MountState.FAILED
    if m1.get("ro"):
        return MountState.READ_ONLY
    msgs = "\n".join(m1.get("kmsg", []) + facts.run("mount1-attach").get("kmsg", []))
    fs = fscat.by_fstype(fstype)
    if "log_replay" in m1:  # read from the filesystem before the mount (powercut.log_replay_due): decides
        if m1["log_replay"]:
            return MountState.RECOVERY
    elif re.search(fs.recovery_log if fs is not None and fs.recovery_log else ANY_RECOVERY, msgs, re.MULTILINE):
        return MountState.RECOVERY
    if re.search(DIRTY, msgs):
        return MountState.WARNING
    return MountState.OK


def classify(facts: RecoverFacts | dict | None, *, cut: bool, recover_status: str | None = StepStatus.OK,
             boot_status: str | None = BootStatus.DONE, fstype: str = "") -> tuple[PowerCutClass, str]:
    """(class, reason) of one iteration from the recovery's facts; a status None
    (or "missing") means the recovery step or boot never happened."""
    facts = RecoverFacts.from_json(facts)
    rstatus = StepStatus.coerce(recover_status)
    if not cut:
        return PowerCutClass.ERROR, "no power cut happened (the workload failed or ended before it)"
    if (rstatus is not None and rstatus.is_hang) or (facts and facts.hang):
        return PowerCutClass.HANG, (facts and facts.hang) or f"recovery step {recover_status}"
    if boot_status == BootStatus.CRASH:
        return PowerCutClass.CRASH, "the lab kernel died during the recovery"
    if not facts or not facts.done:
        return (PowerCutClass.ERROR, "the recovery left no facts" if not facts
                else f"recovery stopped at {facts.phase}")
    fsck = facts.fsck_result
    if not facts.mounted:
        return PowerCutClass.UNMOUNTABLE, "mount failed" + (" after the repair" if fsck not in (None, FsckResult.NA)
                                                            else "")
    v = facts.verify or {}
    if v.get("n_loss"):
        return PowerCutClass.DATA_LOSS, "; ".join(v.get("loss", [])[:3])
    if v.get("n_garbage"):
        return PowerCutClass.GARBAGE, "; ".join(v.get("garbage", [])[:3])
    m_used = facts.run(facts.verified_by or "mount1")
    if m_used.get("ro") or v.get("ro_after") or v.get("probe") == "EROFS":
        return PowerCutClass.READ_ONLY, "mounted or turned read-only"
    if fsck is FsckResult.FAILED:
        return PowerCutClass.FSCK_FAILED, "checker found damage its repair did not fix"
    if fsck is FsckResult.FIXED or facts.verified_by == "mount2":
        return PowerCutClass.FSCK_FIXED, "checker found and fixed damage"
    if mount_state(facts, fstype) is MountState.RECOVERY:
        return PowerCutClass.RECOVERED, "journal/log replayed at mount"
    return PowerCutClass.CLEAN, ""


# --- under device-mapper faults -----------------------------------------------------------

# the corruption study's guest side (badblocks writes and inspects its files with it too), its dm target
CW = f"{PY} {TOOLS}/corruption.py"
DM_NAME = "fbflakey"
DM = f"/dev/mapper/{DM_NAME}"
DMSETUP = "dmsetup --noudevsync"
SECTORS = f"$(blockdev --getsz {DEV})"
# per file, as counted (stale data counts as silently corrupted; missing only when it happens)
FILE_OUTCOMES = (FileState.INTACT, FileState.ZEROED, FileState.TRUNCATED, FileState.IO_ERROR,
                 FileState.SILENTLY_CORRUPTED)


def on_dm(cmds: list[str], dm: str = DM) -> list[str]:
    """The variant's commands on a device-mapper target stacked on the device."""
    return [c.replace(DEV, dm) for c in cmds]


def missing_or_hung(res: BootResult | None) -> tuple[IterationOutcome, str] | None:
    """An iteration boot that never happened (error) or hung; None otherwise."""
    if res is None:
        return IterationOutcome.ERROR, "the boot did not happen"
    for s in res.steps:
        if s.status.is_hang:
            return IterationOutcome.HANG, f"step '{s.name}' did not return"
    if res.status.is_hang:
        return IterationOutcome.HANG, res.error
    return None


def setup_failures(records: list[dict], n: int) -> tuple[CellStatus, str]:
    """(cell status, error) from per-iteration records: the cell failed only when
    no iteration could be set up; otherwise the set-up errors are counted, with the first."""
    errors = [r for r in records if not IterationOutcome(r["outcome"]).ran]
    status = CellStatus.FAILED if errors and len(errors) == n else CellStatus.OK
    return status, (f"{len(errors)} of {n} iterations could not be set up: {errors[0]['why']}" if errors else "")


def inspected(res: BootResult | None, step: str = "inspect") -> dict[FileState, int]:
    """Files per reported state, from a guest inspect step (stale counts as silently corrupted)."""
    insp = step_json(res, step) if res is not None else None
    counts: dict[FileState, int] = {}
    for name, n in (insp or {}).get("counts", {}).items():
        key = FileState(name).reported
        counts[key] = counts.get(key, 0) + n
    return counts
