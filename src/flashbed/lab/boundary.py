"""The lab boundary: what every layer above a lab shares with it.

A Lab boots a BootSpec (steps, disks, raw NAND) and returns a BootResult; a
LabFactory gives each cell its lab. The types here are the only ones studies,
cells and device sessions need from lab/; the implementations (uml.py, the
replay in replay.py) import them from here.

Where things are on the machine that runs the steps is the lab's business (its
GuestLayout): steps name the device under test and the guest programs by the
variables DEV and TOOLS (shellwords.py), which the agent sets from the lab's layout.

A device session (opened by the lab) may have capabilities, each a small
protocol: PowerSwitch, DeviceStats, WriteLog, Pacing (devices/capabilities.py,
handed on here). make_plan refuses a study whose device lacks one it needs
(`session_has`), and the cell asks for a capability only where the session has it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from ..clock import Clock, Pace
from ..devices.capabilities import (
    BlockDevice,
    DeviceSession,
    DeviceStats,
    Nandsim,
    Pacing,
    PowerSwitch,
    TimedCut,
    WriteLog,
    session_has,
)
from ..status import BootStatus, StepStatus
from .guest.protocol import Step

__all__ = [
    "AGENT", "GUEST_DIR", "INIT", "BlockDevice", "BootResult", "BootSpec",
    "DeviceSession", "DeviceStats", "GuestLayout", "HostHandler", "Lab", "LabFactory", "Nandsim", "Pacing",
    "PowerSwitch", "Step", "StepResult", "TimedCut", "WriteLog", "session_has",
]

GUEST_DIR = Path(__file__).resolve().parent / "guest"  # the guest programs, on this machine
INIT = GUEST_DIR / "init.sh"
AGENT = GUEST_DIR / "agent.py"

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


HostHandler = Callable[[str, dict], Any]


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

    def open_session(self, device: Any, scratch: Path, seed: int = 1, pace: Pace = Pace.REAL,
                     clock: Clock = Clock.REAL) -> DeviceSession:
        """The session of `device` (a presets.Device) for this lab's boots, in `clock`; in real
        time an emulated device at `pace`."""
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
