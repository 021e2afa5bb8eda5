"""What a lab sees of a cell's device, and what the device can do beyond that.

A device session (devices/session.py, one class per kind of device; a board's in
lab/board.py) gives the lab its disks (BlockDevice) or raw NAND (Nandsim). What else it
can do is a capability, one small protocol each: PowerSwitch (and TimedCut), DeviceStats,
WriteLog, Pacing. The plan refuses a study whose device lacks one it needs (`session_has`,
asked of the session class), and a cell asks for a capability only where the session has
it. lab/boundary.py hands these on as part of the lab boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..clock import Pace

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

    def state_path(self) -> Path:
        """The served crash state as a read-only file on the host (crashhost/check.py)."""
        ...


@runtime_checkable
class Pacing(Protocol):
    """The device's time is a model's, which a run can skip (--pace none)."""

    def skips_time(self) -> bool:
        """Whether this session skips the device's delays."""
        ...

    def set_pace(self, pace: Pace) -> None:
        """From the next boot on, run the device at `pace`, its state kept (nothing when it runs
        at that pace already)."""
        ...


def session_has(session: Any, capability: type) -> bool:
    """Whether a session (or a session class, as make_plan asks) has a capability."""
    return issubclass(session if isinstance(session, type) else type(session), capability)
