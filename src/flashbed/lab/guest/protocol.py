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

import dataclasses
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# bumped when a message changes shape; the agent refuses a steps.json of another version
# (2: crash states: the write-log calls, CrashWorkSpec, CrashCheckSpec, RecoverSpec.direct)
PROTOCOL_VERSION = 2


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


class Call(StrEnum):
    """Host calls: what a guest step (or a guest program) asks the host to do."""

    RESET_STATS = "reset-stats"  # start a workload phase's device statistics
    STATS = "stats"  # the phase's statistics (args: phase)
    CUT_POWER = "cut-power"  # now: the lab is killed
    CUT_POWER_IN = "cut-power-in"  # after args.seconds, timed from the request (a workload asks for its own cut)
    # the device's write log and its crash states (an emulated device)
    LOG_START = "log-start"  # start recording (a blank device: before mkfs)
    LOG_MARK = "log-mark"  # a labelled record (args: label); answers its position {"pos": N}
    CRASH_STATES = "crash-states"  # stop recording; list the states (args: subsets, tears, seed, marks) into args.out
    CRASH_SWITCH = "crash-switch"  # serve a state (args: state, an id or "live"; watchdog: s until the lab is
    # killed unless it asks for another state: a kernel stuck on this one)
    # take the next of the cell's states no lab has taken and serve it (args: watchdog); answers
    # {"state": its listing entry, "switch_ns"} or {"state", "error"}, or {"done": true}: several
    # labs share a cell's states this way (crashshare.py)
    CRASH_NEXT = "crash-next"
    # run the filesystem's checker (args: cmd, its device ${FLASHBED_DEV}; timeout) on the host, on
    # the crash state now served (its writes since the switch included): the same program the lab
    # would start (the lab's root is the host's), without the lab kernel's cost of starting it and
    # of each of its system calls; answers {"status", "rc", "seconds", "out"} as a guest command's
    CRASH_CHECK = "crash-check"
    # run the user's check on the host, in a sandbox (crashhost/sandbox.py), on a copy of the recovered
    # workload directory the guest packed into the run directory (args: cmd, timeout, dir, pack, acked,
    # ro, env): without the lab kernel's cost of every program it starts; answers {"status", "rc",
    # "seconds", "out", "pids"} as a guest command's, or {"refused": why} (the lab then runs it)
    USER_CHECK = "user-check"
    # in virtual time a program that only computes stops the guest's clock, so no guest-side limit
    # fires: the lab bounds it in wall-clock time instead (args: key, what, seconds; 0 lifts the
    # key's limit). Answered by the lab itself (uml.py), whatever the cell's host handler
    WALL_LIMIT = "wall-limit"


# --- messages ---------------------------------------------------------------------------

class Message:
    """A dataclass that travels as JSON: `to_json()` and `from_json()` (unknown keys
    ignored, missing ones at their defaults, so either side may be a version ahead
    in what it adds)."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]):
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def arg(self) -> str:
        """As one command-line argument (compact JSON; the caller shell-quotes it)."""
        return json.dumps(self.to_json(), separators=(",", ":"))


@dataclass(frozen=True)
class Step(Message):
    """One shell command the agent runs in the guest, or (with `host`) a call
    the guest makes to the host, answered by the handler given to the lab."""

    name: str
    cmd: str = ""
    timeout: float = 60.0
    may_fail: bool = False
    env: dict[str, str] = field(default_factory=dict)
    host: str = ""  # a Call
    args: dict[str, Any] = field(default_factory=dict)


def steps_file(steps: "list[Step] | tuple[Step, ...]", env: "dict[str, str] | None" = None) -> dict[str, Any]:
    """steps.json: what the host asks of one boot; `env`, the lab's layout for every step."""
    return {"protocol": PROTOCOL_VERSION, "steps": [s.to_json() for s in steps], "env": dict(env or {})}


def read_env(data: dict[str, Any]) -> "dict[str, str]":
    """The variables every step of a steps.json gets (the lab's layout)."""
    return {str(k): str(v) for k, v in (data.get("env") or {}).items()}


def read_steps(data: dict[str, Any]) -> "list[Step]":
    """The steps of a steps.json, or ValueError naming the version it was written for."""
    if data.get("protocol") != PROTOCOL_VERSION:
        raise ValueError(f"steps.json is for protocol {data.get('protocol')}, this agent speaks {PROTOCOL_VERSION}")
    return [Step.from_json(s) for s in data["steps"]]


@dataclass(frozen=True)
class HostCall(Message):
    call: str  # a Call
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HostAnswer(Message):
    ok: bool
    data: Any = None
    error: str = ""


@dataclass(frozen=True)
class PrepareSpec(Message):
    """Before a power-cut workload: mount the filesystem the previous recovery left,
    or make a new one (when it left it unusable, or too full)."""

    mkfs: list[str]
    mount: list[str]
    timeout: float
    previous: str | None = None  # the previous recovery's facts file (None: first iteration)
    mnt: str = "/mnt"
    umount: list[str] = field(default_factory=list)
    min_free: int = 0  # bytes; less free space than this: make it afresh


@dataclass(frozen=True)
class RecoverSpec(Message):
    """After a power cut: mount (timed), verify against the workload's log, unmount,
    check (and repair), and mount and verify again when the first mount failed."""

    mnt: str
    dir: str  # the workload's directory
    log: str  # its log of intents and acknowledgements
    out: str  # where the facts go (written after every stage)
    timeout: float
    fsck_timeout: float
    mount: list[str]
    umount: list[str]
    check: str | None = None
    repair: str | None = None
    clean: list[int] = field(default_factory=lambda: [0])  # checker exit codes: clean
    fixed: list[int] = field(default_factory=list)  # repair exit codes: errors fixed
    sabotage: bool = False  # corrupt an acknowledged file first (tests the verifier)
    teardown: list[str] = field(default_factory=list)  # raw NAND: what is left of the cut-off stack
    attach: list[str] = field(default_factory=list)  # raw NAND: UBI attach, timed apart
    # mount(2)/umount(2) in the checker's own process instead of `mount`/`umount`
    # (DirectMount as JSON): no program started, which in the lab costs more than the
    # mount itself; the crash-state loop mounts thousands of times
    direct: dict[str, Any] | None = None


@dataclass(frozen=True)
class SnapcutSpec(Message):
    """Raw NAND without a cut switch (JFFS2): run the workload, stop every writer at
    the cut, dump the flash, unmount, erase and write the dump back."""

    work: str  # the workload's shell command
    work_log: str
    cut: float  # seconds into the workload
    mtd: str
    snapshot: str
    umount: list[str]
    timeout: float
    gc_prefix: str = "jffs2_gcd_mtd"
    # a filesystem in user space (YAFFS2's daemon, its pid in this file): the cut is the
    # daemon's SIGKILL once the writers are stopped, between two NAND operations, and the
    # flash stays as it is (no dump: YAFFS2 keeps its tags in the OOB)
    kill_pidfile: str = ""


@dataclass(frozen=True)
class DirectMount(Message):
    """A block filesystem mounted by the mount(2) system call: `options` as `mount -o`
    takes them (the generic ones become flags, the rest the filesystem's data)."""

    device: str
    fstype: str
    options: list[str] = field(default_factory=list)


class Workload(StrEnum):
    """What a crash-state cell runs once with the write log on."""

    POWERCUT = "powercut"  # the powercut study's workload (files created, appended, replaced, deleted)
    SEQUENCES = "sequences"  # short B3-style operation sequences, each followed by its persistence point
    USER = "user"  # the user's own workload (a script or fio job), judged by the user's own check


@dataclass(frozen=True)
class CrashWorkSpec(Message):
    """The workload of a crash-state cell, run once with the device's write log on:
    mount, lay out, mark the start, run (each intent and acknowledgement marked
    in the write log and logged in `log`), unmount."""

    workload: str  # a Workload
    mnt: str
    dir: str  # the workload's directory under mnt
    log: str  # its log of intents and acknowledgements, each with the write log's mark ("m")
    seed: int
    mount: list[str]
    umount: list[str]
    timeout: float
    # powercut: operations, sizes; the op whose fsync is skipped but logged as made (0: none)
    ops: int = 0
    max_bytes: int = 0
    max_files: int = 0
    max_file: int = 0
    skip_fsync: int = 0
    # sequences: all of length <= exhaustive, then `sequences` in all (seeded), up to max_len operations
    sequences: int = 0
    exhaustive: int = 0
    max_len: int = 0
    skip: list[str] = field(default_factory=list)  # operations the filesystem has not (link on FAT)
    # user: the workload's shell command (run in `dir`, $FLASHBED_MNT = dir, $FLASHBED_ACK marks an
    # acknowledgement), and the check run at every crash state ($FLASHBED_ACKED: the acknowledged labels)
    command: str = ""
    check: str = ""
    check_timeout: float = 0.0
    # the check run once per recovered tree and acknowledged labels, its verdict shared (trees.py)
    share_trees: bool = False
    # why the check runs in the lab ('' : on the host, on a copy of each recovered directory the tree
    # key covers, where the copy can be made: Call.USER_CHECK)
    check_in_lab: str = "the host does not run it"


@dataclass(frozen=True)
class CrashCheckSpec(Message):
    """Check every listed crash state in this boot: switch the device to it (a host
    call), drop the block device's buffers, recover (mount, verify against the
    workload's log as acknowledged at that state, unmount, check, repair) as a
    power-cut recovery does, and write one StateFacts line per state to `out`."""

    work: dict[str, Any]  # the CrashWorkSpec that ran: which workload, its log, its seed and bounds
    states: str  # the listing the host wrote (CRASH_STATES)
    device: str  # the block device whose buffers are dropped
    recover: dict[str, Any]  # a RecoverSpec (its dir and log: the workload's)
    out: str
    kmsg_pattern: str = ""  # kernel lines kept in the facts (the filesystem's own); others dropped
    limit: int = 0  # check only the first this many (0: all)
    watchdog: float = 0.0  # s a state may take before the host kills the lab (0: never)
    # the states to check come from the host one at a time (Call.CRASH_NEXT: the cell's states
    # shared with other labs), not from the listing in order
    claim: bool = False
    # a replay: the device already holds the (one) state, nobody serves it; its units a
    # torn program damaged ([offset, length] in bytes) are mapped bad with dm-dust
    # under `device` first (they read as EIO, as when the emulator served them)
    serve: bool = True
    dust: list[list[int]] = field(default_factory=list)
    dust_under: str = ""  # the disk dm-dust goes on
    # the recovery's check (fsck, not its repair) runs on the host on the served state
    # (Call.CRASH_CHECK): a plain block filesystem on the device itself, served by the emulator
    check_on_host: bool = False


@dataclass
class StateFacts(Message):
    """One crash state checked: the state as listed (id, kind, acked records, units
    damaged), the recovery's facts (RecoverFacts, trimmed) and the time split (s)."""

    id: str
    kind: str
    acked: int
    damaged: int = 0
    facts: dict[str, Any] | None = None
    switch: dict[str, Any] | None = None  # the host's answer (or its error)
    seconds: dict[str, float] = field(default_factory=dict)
    # what the cut damaged, as the host served it: byte ranges of every damaged unit ("ranges")
    # and of those whose lost version had been flushed ("flushed")
    damage: dict[str, Any] | None = None
    # a damaged state that did not survive: its undamaged twin (ID+u) checked the same way (a
    # StateFacts of its own), and while it was mounted which files held the flushed damaged bytes
    # (TwinPlace as JSON): whose loss it was, the device's or the filesystem's
    twin: dict[str, Any] | None = None
    error: str | None = None  # the state's check could not run (never the filesystem's verdict)


# a crash state's undamaged twin is its id with this suffix (the emulator's crashlog/cut.rs)
UNDAMAGED = "+u"


@dataclass
class TwinPlace(Message):
    """Where the flushed bytes a state's damage hit live in its undamaged twin's filesystem:
    per path (relative to the mount) the damaged bytes of its extents (FIEMAP), and the bytes in no
    file's or directory's extent (the filesystem's metadata, or free space). `why`: not mapped (the
    filesystem reports no extents, or not in device offsets)."""

    files: dict[str, int] = field(default_factory=dict)
    outside: int = 0
    why: str = ""


@dataclass
class RecoverFacts(Message):
    """What a recovery found (pc-recover.json, and the recover step's stdout).

    `runs` holds the timed commands by tag: mount1 (and mount1-attach on raw
    NAND), umount1, and after a repair mount2, umount2; each a record with
    status, rc, seconds, out, kmsg (the kernel's lines meanwhile) and, for a
    mount, ro. In JSON the tags are top-level keys, as the host has always read them.
    """

    phase: str = Phase.START
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    teardown: list[dict[str, Any]] | None = None
    verify: dict[str, Any] | None = None  # the verifier's verdict on the files
    verified_by: str | None = None  # the mount tag the verdict was taken under
    fsck: dict[str, Any] | None = None  # result (FsckResult), seconds, check, repair
    mounted: bool | None = None
    hang: str | None = None  # what did not return
    sabotaged: str | None = None
    reusable: bool | None = None  # the next iteration may mount it again

    TAGS = ("mount1-attach", "mount1", "umount1", "mount2-attach", "mount2", "umount2")

    def to_json(self) -> dict[str, Any]:
        d = {k: v for k, v in dataclasses.asdict(self).items() if k != "runs" and v is not None}
        return {**d, **self.runs}

    @classmethod
    def from_json(cls, data: "dict[str, Any] | RecoverFacts | None") -> "RecoverFacts | None":
        if data is None or isinstance(data, RecoverFacts):
            return data
        names = {f.name for f in dataclasses.fields(cls)} - {"runs"}
        return cls(runs={k: v for k, v in data.items() if k in cls.TAGS},
                   **{k: v for k, v in data.items() if k in names})

    def run(self, tag: str) -> dict[str, Any]:
        return self.runs.get(tag) or {}

    @property
    def done(self) -> bool:
        return self.phase == Phase.DONE

    @property
    def fsck_result(self) -> "FsckResult | None":
        r = (self.fsck or {}).get("result")
        return FsckResult(r) if r else None
