"""Every status and outcome class flashbed knows, typed, in one place.

A status derives from another through one function here (as kunit's
TestStatus/KunitStatus): a step's status makes the agent's, the agent's and the
lab process's fate make a boot's, a study's reading and its boots make a cell's.
They are StrEnums: stored results keep their plain strings, and a stored string
compares equal to its member.

The statuses the guest produces itself live in the guest protocol module (the
guest cannot import flashbed) and are re-exported here: import every status from
this module on the host.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Protocol

from .lab.guest.protocol import AgentStatus, FileState, FsckResult, Phase, StepStatus, Verdict

__all__ = ["AfterFault", "AgentStatus", "BadBlocksFlag", "BootStatus", "CellStatus", "FileState", "FsckResult",
           "IterationOutcome", "Measured", "MountState", "Phase", "PowerCutClass", "StepStatus", "Verdict"]


class BootStatus(StrEnum):
    """How one lab boot ended, as the host saw it."""

    DONE = "done"
    STEP_FAILED = "step-failed"
    HANG = "hang"  # the lab did not finish in time and was killed
    CRASH = "crash"  # the lab kernel exited before the agent finished
    AGENT_ERROR = "agent-error"
    KILLED = "killed"  # killed on request (a power cut)

    @property
    def ok(self) -> bool:
        return self is BootStatus.DONE

    @property
    def as_planned(self) -> bool:
        """Ended the way its steps meant: done, or killed by a planned power cut."""
        return self in (BootStatus.DONE, BootStatus.KILLED)

    @property
    def is_hang(self) -> bool:
        return self is BootStatus.HANG

    @classmethod
    def derive(cls, agent: str, *, timed_out: bool, killed: bool) -> "BootStatus":
        """The boot's status from the agent's last word and the lab process's fate."""
        if killed:
            return cls.KILLED
        a = AgentStatus(agent) if agent in AgentStatus._value2member_map_ else None
        if timed_out:
            # an agent still at work (or silent) when time ran out: a guest step never returned
            return cls.HANG if a in (None, AgentStatus.RUNNING, AgentStatus.HANG) else cls(a.value)
        if a in (None, AgentStatus.RUNNING):
            return cls.CRASH
        return cls(a.value)


class _Boot(Protocol):
    status: BootStatus
    error: str


class CellStatus(StrEnum):
    """A cell's result."""

    OK = "ok"
    FAILED = "failed"  # the study's reading: a step that had to succeed did not
    HANG = "hang"
    CRASH = "crash"
    ERROR = "error"  # flashbed or the lab infrastructure failed, not the filesystem

    @property
    def ok(self) -> bool:
        return self is CellStatus.OK

    @property
    def retryable(self) -> bool:
        """Run again on resume: an infrastructure error is not a result of the cell."""
        return self is CellStatus.ERROR

    @property
    def is_result(self) -> bool:
        """Says something about the filesystem (the report scores it)."""
        return not self.retryable

    @classmethod
    def derive(cls, reading: "CellStatus", boots: Iterable[_Boot]) -> "tuple[CellStatus, str]":
        """The cell's status from the study's reading and the boots it judges by
        (a hung or crashed boot overrides the reading), with the boot's error."""
        boots = list(boots)
        for status in (BootStatus.HANG, BootStatus.CRASH):
            b = next((b for b in boots if b.status is status), None)
            if b is not None:
                return cls(status.value), b.error
        return reading, ""


class PowerCutClass(StrEnum):
    """One power-cut iteration (checked in this order; see studies/powercut.py)."""

    CLEAN = "clean"
    RECOVERED = "recovered"
    FSCK_FIXED = "fsck-fixed"
    DATA_LOSS = "data-loss"
    GARBAGE = "garbage"
    UNMOUNTABLE = "unmountable"
    READ_ONLY = "read-only"
    HANG = "hang"
    FSCK_FAILED = "fsck-failed"
    CRASH = "crash"
    ERROR = "error"

    @property
    def always_shown(self) -> bool:
        """Counted in every result (zero or not), so tables line up; the rest when they occur."""
        return self not in (PowerCutClass.FSCK_FAILED, PowerCutClass.CRASH, PowerCutClass.ERROR)

    @property
    def good(self) -> bool:
        """Survived: data intact without help."""
        return self in (PowerCutClass.CLEAN, PowerCutClass.RECOVERED)

    @property
    def keeps_console(self) -> bool:
        """The kernel's console tells this story (a hang, a crash)."""
        return self in (PowerCutClass.HANG, PowerCutClass.CRASH)

    @property
    def ran(self) -> bool:
        """The iteration ran as planned (error: flashbed could not set it up)."""
        return self is not PowerCutClass.ERROR


class LossCause(StrEnum):
    """Whose loss a failed crash state is (studies/crashstates.attribute), from the write log and
    the state's undamaged twin (the same cut without its flash damage)."""

    FILESYSTEM = "filesystem"  # no flash damage in the state: the filesystem lost what the device kept
    DEVICE = "device"  # the cut damaged durable data (torn program, paired pages) and the twin survived
    BOTH = "both"  # damaged, and its undamaged twin failed too: the filesystem would have lost it anyway
    UNKNOWN = "unknown"  # damaged, and its twin could not be checked (the lab stopped on the state)

    @property
    def filesystems(self) -> bool:
        """The filesystem broke a promise here (what rules it out): alone, or beside the device."""
        return self in (LossCause.FILESYSTEM, LossCause.BOTH)


class MountState(StrEnum):
    """The first mount after a power cut."""

    OK = "ok"
    RECOVERY = "recovery"  # the kernel replayed a journal or log
    WARNING = "warning"  # mounted, but said the filesystem was dirty
    READ_ONLY = "read-only"
    FAILED = "failed"
    HANG = "hang"


class IterationOutcome(StrEnum):
    """One corruption or bad-block iteration, at mount level."""

    MOUNTS = "mounts"
    READ_ONLY = "read-only"
    NEEDS_FSCK = "needs-fsck"
    UNMOUNTABLE = "unmountable"
    HANG = "hang"
    ERROR = "error"  # the iteration could not be set up (never the filesystem's fault)

    @property
    def files_read(self) -> bool:
        """The files were read back (the filesystem mounted)."""
        return self in (IterationOutcome.MOUNTS, IterationOutcome.READ_ONLY, IterationOutcome.NEEDS_FSCK)

    @property
    def ran(self) -> bool:
        return self is not IterationOutcome.ERROR


class BadBlocksFlag(StrEnum):
    """Counted per bad-block iteration besides its outcome."""

    NOTICED = "noticed"  # the filesystem (or UBI) logged the fault
    NEEDS_FSCK = "needs-fsck"  # the checker found damage after the faults were gone


class AfterFault(StrEnum):
    """A file read again once the bad blocks are gone."""

    INTACT = "after:intact"
    DAMAGED = "after:damaged"

    @classmethod
    def of(cls, state: str) -> "AfterFault":
        return cls.INTACT if state == FileState.INTACT else cls.DAMAGED


class Measured(StrEnum):
    """A recommendation criterion's value for one filesystem."""

    OK = "ok"
    FAILED = "failed"  # its cells failed: scores 0
    MISSING = "missing"  # not measured: not scored
    NOT_OBSERVABLE = "not-observable"  # an emulator statistic of a real device: not scored for anyone
    NA = "n/a"  # does not apply to the filesystem (a write figure of a read-only one)


class DeviceVerdict(StrEnum):
    """A timed figure whose workload promised the device had its writes (direct, synchronous),
    set against what the device received in the same statistics phase (report/devcheck.py)."""

    SERVED = "served"  # the device received the writes and the flushes during the job
    # served, at a rate above the part's random write rate: the device saw the writes in its
    # request pattern (sequential, after copy-on-write or a log), which the report shows beside it
    SERVED_ABOVE_RATE = "served-above-random-rate"
    CACHED = "cached"  # acknowledged before the device received it: scores nobody
    UNCHECKED = "unchecked"  # no statistics phase of its own (a real device, a plain file)

    @property
    def served(self) -> bool:
        return self in (DeviceVerdict.SERVED, DeviceVerdict.SERVED_ABOVE_RATE)
