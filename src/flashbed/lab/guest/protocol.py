"""The host <-> guest protocol: what the host asks the guest to do and what the
guest reports back, as typed values both sides import.

The guest programs (agent.py, the failure studies' guest modules) run on the
host's Debian python3 as `python3 -S -I` inside the lab and cannot import the
flashbed package: they import this file as the top-level module `protocol`
(their own directory is on their sys.path). The host imports the same file as
`flashbed.lab.guest.protocol`. So: standard library only, no relative imports.

Statuses are StrEnums: on disk (steps.json, result.json, the facts files, the
cell results) they are the same plain strings as ever.
"""

from __future__ import annotations

from enum import StrEnum

# bumped when a message changes shape; the agent refuses a steps.json of another version
PROTOCOL_VERSION = 1


class StepStatus(StrEnum):
    """How one guest command ended (the agent's steps, the guest modules' commands)."""

    OK = "ok"
    FAILED = "failed"  # ran to the end with a non-zero exit code
    TIMEOUT = "timeout"  # over its limit; killed with its process group
    HANG = "hang"  # not even SIGKILL ended it: a task stuck in the kernel

    @property
    def ok(self) -> bool:
        return self is StepStatus.OK

    @property
    def is_hang(self) -> bool:
        """Did not return in time (killed or unkillable): the filesystem hung."""
        return self in (StepStatus.TIMEOUT, StepStatus.HANG)

    @property
    def returned(self) -> bool:
        """Ran to the end (whatever its exit code)."""
        return self in (StepStatus.OK, StepStatus.FAILED)

    @classmethod
    def coerce(cls, value: object) -> "StepStatus | None":
        """The status of a stored or given value; None for anything else (e.g. "missing")."""
        try:
            return cls(value)
        except ValueError:
            return None


class AgentStatus(StrEnum):
    """The guest agent's account of a boot (result.json "status")."""

    RUNNING = "running"  # written before the first step: a lab killed now leaves this
    DONE = "done"
    STEP_FAILED = "step-failed"
    HANG = "hang"
    AGENT_ERROR = "agent-error"

    @classmethod
    def after(cls, step: StepStatus, may_fail: bool) -> "AgentStatus | None":
        """What one step's status makes of the boot: None to go on with the next step."""
        if step is StepStatus.HANG:
            return cls.HANG
        if not step.ok and not may_fail:
            return cls.STEP_FAILED
        return None


class FsckResult(StrEnum):
    """A checker run after a cut (check, then repair when the check was not clean)."""

    CLEAN = "clean"
    FIXED = "fixed"
    FAILED = "failed"
    NA = "n/a"  # the filesystem has no checker


class Phase(StrEnum):
    """How far a recovery after a cut got (its facts' "phase"; while verifying it
    is "verify (<mount tag>)")."""

    START = "start"
    FSCK = "fsck"
    DONE = "done"
    HANG = "hang"

    @staticmethod
    def verifying(tag: str) -> str:
        return f"verify ({tag})"


class Verdict(StrEnum):
    """The power-cut verifier's judgement of one file against the log."""

    OK = "ok"
    LOSS = "loss"  # acknowledged data lost
    GARBAGE = "garbage"  # bytes never written there


class FileState(StrEnum):
    """One file read back after corruption or bad blocks (guest inspect)."""

    INTACT = "intact"
    ZEROED = "zeroed"
    TRUNCATED = "truncated"
    IO_ERROR = "io-error"
    STALE = "stale"  # an older round's content after a newer one was synced
    SILENTLY_CORRUPTED = "silently-corrupted"
    MISSING = "missing"

    @property
    def reported(self) -> "FileState":
        """The outcome a study counts it as: stale data is silent corruption."""
        return FileState.SILENTLY_CORRUPTED if self is FileState.STALE else self
