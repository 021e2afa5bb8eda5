"""The lab boundary: what every layer above a lab shares with it.

A Lab boots a BootSpec (steps, disks, raw NAND) and returns a BootResult; a
LabFactory gives each cell its lab. The types here are the only ones studies,
cells and device sessions need from lab/; the implementations (uml.py, the
replay in replay.py) import them from here.

Where things are on the machine that runs the steps is the lab's business (its
GuestLayout): steps name the device under test and the guest programs by the
variables DEV and TOOLS, which the agent sets from the lab's layout.

A device session (opened by the lab) may have capabilities, each a small
protocol: PowerSwitch, DeviceStats, WriteLog, Clock. make_plan refuses a study
whose device lacks one it needs (`session_has`), and the cell asks for a
capability only where the session has it.
"""

from __future__ import annotations

import shlex
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from ..errors import FlashbedError
from ..status import BootStatus, StepStatus
from .guest.protocol import Step

__all__ = [
    "AGENT", "DEV", "GUEST_DIR", "INIT", "TOOLS", "BlockDevice", "BootResult", "BootSpec", "Clock",
    "DeviceSession", "DeviceStats", "GuestLayout", "HostHandler", "Lab", "LabFactory", "Nandsim",
    "PowerSwitch", "Step", "StepResult", "Stopping", "WriteLog", "kill_all", "on_stop", "session_has",
    "shell_join", "stopping",
]

GUEST_DIR = Path(__file__).resolve().parent / "guest"  # the guest programs, on this machine
INIT = GUEST_DIR / "init.sh"
AGENT = GUEST_DIR / "agent.py"

# what steps call the device under test and the guest programs' directory; the
# agent sets them from the lab's GuestLayout (steps.json "env"). Braced: the
# shell, fio job files and os.path.expandvars all expand this form
DEV = "${FLASHBED_DEV}"
TOOLS = "${FLASHBED_TOOLS}"


@dataclass(frozen=True)
class GuestLayout:
    """Where a lab's guest finds things: the block device under test and the guest programs
    (agent.py, fbtool.py, the failure studies' guest sides). The run directory is the agent's
    argument, $FLASHBED_RUN to the steps."""

    device: str
    tools: str
    # logs a power cut must not lose (the powercut study's) are fsync'ed, not only written
    # back: on a board whose power is cut they live on its own storage, not on a host file
    fsync_logs: bool = False

    def env(self) -> dict[str, str]:
        """The variables the agent sets for every step."""
        return {"FLASHBED_DEV": self.device, "FLASHBED_TOOLS": self.tools} | \
            ({"FLASHBED_FSYNC_LOGS": "1"} if self.fsync_logs else {})


def shell_join(args: list[str] | tuple[str, ...]) -> str:
    """shlex.join, leaving DEV and TOOLS-relative words for the guest's shell to expand."""
    return " ".join(a if a == DEV or a.startswith(TOOLS + "/") and "'" not in a and " " not in a
                    else shlex.quote(a) for a in args)

HostHandler = Callable[[str, dict], Any]


# set by kill_all(): no new lab starts in this process (a cell of many boots
# would otherwise boot its next lab right after its current one was killed)
_STOPPING = threading.Event()
# what each lab implementation stops on kill_all() (UML: its live kernels)
_STOPPERS: list[Callable[[], None]] = []


class Stopping(FlashbedError):
    """flashbed is stopping (Ctrl-C): no more labs."""


def stopping() -> bool:
    """Whether kill_all() was called: no new lab will start."""
    return _STOPPING.is_set()


def on_stop(stopper: Callable[[], None]) -> None:
    """Have kill_all() call `stopper` (a lab implementation's way to stop its running labs)."""
    _STOPPERS.append(stopper)


def kill_all() -> None:
    _STOPPING.set()
    for stop in list(_STOPPERS):
        stop()


@dataclass(frozen=True)
class BlockDevice:
    """A host file the guest sees as /dev/ubd<letter>."""

    path: Path
    # ubd takes an F_SETLK lock on its file unless shared; a FUSE-served device
    # whose server does not need the lock can use it
    shared: bool = False
    discard: bool = True
    # a host block device measured itself: opened O_DIRECT (lab patch 0005), never
    # probed for a COW header
    direct: bool = False
    # served by the emulator in virtual time: requests complete when its model says,
    # told through the `clock` file beside it (ubd 'v', lab patch 0006)
    model_clock: bool = False
    # a copy-on-write file that takes the guest's writes: `path` is then only read (ubd's COW,
    # the overlay made on first use), so a disk the user did not let flashbed write stays as it was
    overlay: Path | None = None


@dataclass(frozen=True)
class Nandsim:
    """Raw NAND in the guest through the kernel's nandsim (/dev/mtd0).

    id_bytes select the geometry (the chip's READ ID answer); the remaining
    fields are nandsim module parameters.
    """

    id_bytes: tuple[int, ...]
    # store pages in a file in the guest instead of RAM (large chips)
    cache_file: str | None = None
    parts: tuple[int, ...] = ()  # partition sizes in erase blocks
    extra: dict[str, str] = field(default_factory=dict)

    def cmdline(self) -> list[str]:
        args = ["nandsim.id_bytes=" + ",".join(f"0x{b:02x}" for b in self.id_bytes)]
        if self.cache_file:
            args.append(f"nandsim.cache_file={self.cache_file}")
        if self.parts:
            args.append("nandsim.parts=" + ",".join(str(p) for p in self.parts))
        args += [f"nandsim.{k}={v}" for k, v in self.extra.items()]
        return args


@dataclass(frozen=True)
class CpuCosts:
    """A guest CPU's cost per event in virtual time, in guest ns (lab patch 0008)."""

    syscall_ns: int
    fault_ns: int
    switch_ns: int

    def cmdline(self) -> str:
        return f"flashbed_cpu={self.syscall_ns},{self.fault_ns},{self.switch_ns}"


@dataclass(frozen=True)
class BootSpec:
    run_dir: Path
    steps: tuple[Step, ...]
    disks: tuple[BlockDevice, ...] = ()
    nandsim: Nandsim | None = None
    mem_mb: int = 768
    timeout: float = 600.0
    cpus: int = 1  # guest vCPUs; the lab leases as many host CPUs
    # in virtual time: the guest time each CPU event costs (lab/cpuprofile.py); None: nothing
    cpu: CpuCosts | None = None


@dataclass
class StepResult:
    name: str
    cmd: str
    status: StepStatus
    rc: int | None
    seconds: float
    stdout: str
    stderr: str
    # in virtual time with a CPU profile: the guest time of `seconds` charged to the CPU
    cpu_seconds: float | None = None

    def __post_init__(self) -> None:
        self.status = StepStatus(self.status)


@dataclass
class BootResult:
    """What one boot of the lab produced."""

    status: BootStatus
    steps: list[StepResult]
    boot_seconds: float | None  # spawn to agent ready (host clock)
    total_seconds: float
    console_log: str
    exit_code: int | None
    kernel_release: str
    error: str = ""

    def __post_init__(self) -> None:
        self.status = BootStatus(self.status)

    def step(self, name: str) -> StepResult | None:
        return next((s for s in self.steps if s.name == name), None)

    @property
    def ok(self) -> bool:
        return self.status.ok


class DeviceSession(Protocol):
    """A cell's device for its boots (enter it with `with`): what the lab boots with. What
    else it can do, it declares by the capability protocols below."""

    def __enter__(self) -> "DeviceSession": ...

    def __exit__(self, *exc: Any) -> None: ...

    def disks(self) -> tuple[BlockDevice, ...]:
        """Host files (or devices) the lab sees as its block devices."""
        ...

    def nandsim(self) -> Nandsim | None:
        """Raw NAND the lab kernel makes itself."""
        ...

    def mem_mb(self) -> int: ...


@runtime_checkable
class PowerSwitch(Protocol):
    """The device's power can be cut in the middle of a boot (the powercut study)."""

    def cut_power(self) -> dict[str, Any] | None:
        """Drop what the device had not made durable (its reply); None when the lab's
        death alone is the crash (a plain file: the lab's volatile state dies with it)."""
        ...

    def restart_if_cut(self) -> None:
        """Before the next boot: bring the device back after a power cut."""
        ...


@runtime_checkable
class TimedCut(Protocol):
    """In virtual time the device cuts its own power at a chosen instant of the guest's
    time and holds the lab there (the emulator's cut-at): a cut that replays exactly."""

    def arm_cut(self, seconds: float) -> dict[str, Any]:
        """A cut `seconds` of guest time from the device's present (its reply: the instant)."""
        ...

    def cut_landed(self) -> dict[str, Any] | None:
        """What the armed cut did once the guest reached it (None: not yet)."""
        ...

    def disarm_cut(self) -> None:
        """Take back a cut that has not landed (the boot ended first)."""
        ...


@runtime_checkable
class DeviceStats(Protocol):
    """The device counts what it did (the emulator's flash statistics)."""

    def reset_stats(self) -> dict | None:
        """Start a workload phase's statistics."""
        ...

    def stats(self) -> dict | None:
        """The phase's statistics (devices.session.STAT_KEYS)."""
        ...


@runtime_checkable
class WriteLog(Protocol):
    """The device logs every write and serves the states a power cut could leave (crashstates)."""

    def log_start(self, log_dir: Path) -> None:
        """Record every host request from now on into `log_dir` (a blank device: before mkfs)."""
        ...

    def log_mark(self, label: str) -> int:
        """A labelled record in the log; its position."""
        ...

    def crash_states(self, *, subsets: int, tears: int, seed: int, marks: bool,
                     images: bool = False) -> dict[str, Any]:
        """Stop the log; the states a power cut could leave (emulator.CrashListing as JSON; with
        `images`, each state's device image class)."""
        ...

    def crash_switch(self, state: str) -> dict[str, Any]:
        """Serve crash state `state` (or "live") through the device file."""
        ...


@runtime_checkable
class Clock(Protocol):
    """The device's time is a model's, which a run can skip (--pace none)."""

    def skips_time(self) -> bool:
        """Whether this session skips the device's delays."""
        ...

    def set_pace(self, pace: str) -> None:
        """From the next boot on, run the device at `pace` ("real" or "none"), its state kept
        (nothing when it runs at that pace already)."""
        ...


def session_has(session: Any, capability: type) -> bool:
    """Whether a session (or a session class, as make_plan asks) has a capability."""
    return issubclass(session if isinstance(session, type) else type(session), capability)


@runtime_checkable
class VCpus(Protocol):
    """A lab whose guest can have several vCPUs (UML in seccomp mode)."""

    @property
    def max_cpus(self) -> int: ...


class Lab(Protocol):
    """Boots the lab once with a spec's steps; never raises for what happens in the guest.
    It opens the cell's device session (what its boots see of the device) and writes its
    GuestLayout into each boot's steps.json."""

    @property
    def release(self) -> str:
        """The lab kernel's release (a result's provenance)."""
        ...

    def open_session(self, device: Any, scratch: Path, seed: int = 1, pace: str = "real") -> DeviceSession:
        """The session of `device` (a presets.Device) for this lab's boots."""
        ...

    def boot(self, spec: BootSpec, host: HostHandler | None = None,
             kill: threading.Event | None = None) -> BootResult:
        ...


class LabFactory(Protocol):
    def __call__(self, cell: Any) -> Lab:
        """The lab cell `cell` (a CellSpec) runs in."""
        ...

    def describe(self) -> dict[str, Any]:
        """The kernels as a run's manifest records them: {"kernel": ..., "kernels": {label: ...}}
        (manifest_kernels)."""
        ...
