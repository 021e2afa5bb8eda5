"""The lab boundary: what every layer above a lab shares with it.

A Lab boots a BootSpec (steps, disks, raw NAND) and returns a BootResult; a
LabFactory gives each cell its lab. The types here are the only ones studies,
cells and device sessions need from lab/; the implementations (uml.py, the
replay in replay.py) import them from here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from ..errors import FlashbedError
from ..status import BootStatus, StepStatus
from .guest.protocol import Step

__all__ = [
    "AGENT", "GUEST_DIR", "INIT", "BlockDevice", "BootResult", "BootSpec", "HostHandler", "Lab",
    "LabFactory", "Nandsim", "Step", "StepResult", "Stopping", "kill_all", "on_stop", "stopping",
]

GUEST_DIR = Path(__file__).resolve().parent / "guest"
INIT = GUEST_DIR / "init.sh"
AGENT = GUEST_DIR / "agent.py"

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
class BootSpec:
    run_dir: Path
    steps: tuple[Step, ...]
    disks: tuple[BlockDevice, ...] = ()
    nandsim: Nandsim | None = None
    mem_mb: int = 768
    timeout: float = 600.0
    cpus: int = 1  # guest vCPUs; the lab leases as many host CPUs


@dataclass
class StepResult:
    name: str
    cmd: str
    status: StepStatus
    rc: int | None
    seconds: float
    stdout: str
    stderr: str

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


class Lab(Protocol):
    """Boots the lab once with a spec's steps; never raises for what happens in the guest."""

    @property
    def release(self) -> str:
        """The lab kernel's release (a result's provenance)."""
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
