"""One cell's device for its lab boots, one class per kind of device behind one
protocol (capabilities.DeviceSession); `open_session` picks the class from the
device's backend. What a kind can do beyond that, its class declares by the
capability protocols it implements (capabilities.py: PowerSwitch, DeviceStats,
WriteLog, Pacing); make_plan checks them on the class (`session_class`, as its
target gives it).

    emulator   flashbed-emu serves the preset's flash model as a FUSE file (ubd)
    file       a plain sparse file (ubd): a baseline without any flash model
    nandsim    raw NAND inside the lab kernel (nandsim); nothing on the host
    real       a real block device (realdev.py): ubd opens the node itself

A session owns its scratch directory (removed when it ends). A new kind of
device is one class here and one entry in SESSIONS, plus how its presets load
(presets.py: Device.backend).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from .. import cpus
from ..clock import Clock, Pace, emulator_pace
from ..errors import FlashbedError
from ..stopping import stopping
from .capabilities import BlockDevice, DeviceSession, Nandsim
from .presets import Device
from .realdev import claimed

# emulator statistics kept per workload phase, under the names renderers use
STAT_KEYS = ("write_amplification", "host_write_bytes", "host_read_bytes", "nand_program_pages", "nand_read_pages",
             "nand_erases", "busy_seconds", "gc_count", "erase_count_min", "erase_count_max", "erase_count_mean",
             "latency_p50_us", "latency_p99_us",
             # what the report's device check sets against a workload's claims: write requests, flushes,
             # and the writes that continued the previous one (the request pattern)
             "host_writes", "host_flushes", "write_pattern_sequential_write_bytes",
             # virtual time: the device's present (ns), which a phase's duration is measured on
             "device_ns")
WRITE_SIZES = "write_sizes"  # a phase's write requests per size (power-of-two bucket, bytes) -> count


class _Session:
    """What every kind shares: the scratch directory. No capability: a kind adds its own."""

    def __init__(self, device: Device, scratch: Path, seed: int = 1, pace: Pace = Pace.REAL,
                 clock: Clock = Clock.REAL):
        self.device = device
        self.scratch = scratch
        self.seed = seed
        self.pace = Pace(pace)  # in real time: the device's modelled delays waited out, or skipped
        self.clock = Clock(clock)  # virtual: the emulator serves every request in its model's time

    def __enter__(self) -> "_Session":
        _clear_scratch(self.scratch)  # a killed earlier run may have left one behind
        self.scratch.mkdir(parents=True, exist_ok=True)
        try:
            self._open()
        except BaseException:
            _clear_scratch(self.scratch)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._close()
        finally:
            _clear_scratch(self.scratch)

    def _open(self) -> None:
        pass

    def _close(self) -> None:
        pass

    def disks(self) -> tuple[BlockDevice, ...]:
        return ()

    def nandsim(self) -> Nandsim | None:
        return None

    def mem_mb(self) -> int:
        return 768


class _LabKill:
    """A power switch that is the lab's death alone: a device whose volatile state lives in
    the lab (a plain file behind ubd, nandsim's chip) loses it with the lab."""

    def cut_power(self) -> dict[str, Any] | None:
        return None

    def restart_if_cut(self) -> None:
        pass


class _PacedModel:
    """A device whose timing is a model's: a run can skip it (pace none)."""

    pace: Pace
    clock: Clock

    def skips_time(self) -> bool:
        return self.pace is Pace.NONE

    def set_pace(self, pace: Pace) -> None:
        # nandsim takes its delays at each boot (nandsim()): the next boot has the new pace
        self._repace(Pace(pace))

    def _repace(self, pace: Pace) -> bool:
        """Whether the pace changes (one line in virtual time: the cell's whole clock)."""
        if pace is self.pace:
            return False
        if self.clock is Clock.VIRTUAL:
            raise FlashbedError("virtual time is the cell's whole clock: a boot cannot switch to or from it")
        self.pace = pace
        return True


class FileSession(_LabKill, _Session):
    """A sparse file of the device's capacity."""

    def _open(self) -> None:
        with open(self.image, "wb") as f:
            f.truncate(self.device.capacity)

    @property
    def image(self) -> Path:
        return self.scratch / "device.img"

    def disks(self) -> tuple[BlockDevice, ...]:
        return (BlockDevice(self.image),)


class NandsimSession(_LabKill, _PacedModel, _Session):
    """Raw NAND made by the lab kernel's nandsim from the preset's ID bytes."""

    def nandsim(self) -> Nandsim | None:
        # the part's datasheet delays, unless the run skips the device's time
        timing = self.device.nand_timing if self.pace is Pace.REAL else None
        return Nandsim(id_bytes=self.device.nandsim_id_bytes,
                       parts=(self.device.capacity // self.device.erase_block,),
                       extra=timing.nandsim_params() if timing else {})

    def mem_mb(self) -> int:
        # nandsim keeps the chip's written pages in the guest's memory
        return 768 + self.device.capacity // (1 << 20)


class EmulatorSession(_PacedModel, _Session):
    """flashbed-emu: the preset's flash model served as a FUSE file, with statistics and a power switch."""

    def __init__(self, device: Device, scratch: Path, seed: int = 1, pace: Pace = Pace.REAL,
                 clock: Clock = Clock.REAL):
        super().__init__(device, scratch, seed, pace, clock)
        self.emu = None
        self.cut = False
        self._cpu = contextlib.ExitStack()
        self._sock_dir: str | None = None  # a short private directory for the control socket

    def _control_path(self) -> Path:
        """The control socket: in the cell's scratch, unless that path is too long for a Unix
        socket (108 bytes with its NUL; a long case label in a deep run directory), then in a
        private temporary directory removed with the session."""
        path = self.scratch / "control.sock"
        if len(os.fsencode(path)) < 100:
            return path
        if self._sock_dir is None:
            self._sock_dir = tempfile.mkdtemp(prefix="flashbed-emu-")
        return Path(self._sock_dir) / "control.sock"

    def _open(self) -> None:
        # the emulator and every lab of this session share one host CPU
        self._cpu.enter_context(cpus.lease())
        try:
            self._start()
        except BaseException:
            self._cpu.close()
            raise

    def _close(self) -> None:
        try:
            if self.emu is not None:
                self.emu.stop()
        finally:
            self.emu = None
            self._cpu.close()
            if self._sock_dir is not None:
                shutil.rmtree(self._sock_dir, ignore_errors=True)
                self._sock_dir = None

    crash_log: Path | None = None  # a kept write log to serve the states of (LogSession)

    def _start(self) -> None:
        from . import emulator

        spec = emulator.EmulatorSpec(
            preset=self.device.path, state_dir=self.scratch / "state", mount_dir=self.scratch / "mnt",
            control=self._control_path(), capacity=self.device.capacity,
            pace=emulator_pace(self.clock, self.pace), seed=self.seed, sets=self.device.sets,
            crash_log=self.crash_log)
        (self.scratch / "mnt").mkdir(exist_ok=True)
        self.emu = emulator.Emulator(spec)
        self.emu.start()
        self.cut = False

    def disks(self) -> tuple[BlockDevice, ...]:
        # the FUSE server is the only user of its file; ubd's lock is not needed
        return (BlockDevice(Path(self.emu.device_path), shared=True, model_clock=self.clock is Clock.VIRTUAL),)

    def reset_stats(self) -> dict | None:
        self.emu.reset_stats()
        return {}

    def stats(self) -> dict | None:
        return normalize_stats(self.emu.stats())

    def cut_power(self) -> dict[str, Any] | None:
        """The emulator's reply (cut_at_ns, cache_bytes_lost)."""
        reply = self.emu.cut_power()
        self.cut = True
        return reply

    def restart_if_cut(self) -> None:
        if self.cut:
            self._start()

    def set_pace(self, pace: Pace) -> None:
        """The emulator stopped cleanly (its state saved) and started again at `pace`: the
        device as it was, its clock anew (a paced phase after an unpaced one does not wait for
        the unpaced phase's modelled time)."""
        if not self._repace(Pace(pace)):
            return
        if self.emu is not None and not self.cut:
            self.emu.stop()
            self._start()

    def arm_cut(self, seconds: float) -> dict[str, Any]:
        if self.clock is not Clock.VIRTUAL:
            raise FlashbedError("a cut at a guest instant needs virtual time (--clock virtual)")
        return self.emu.cut_at(round(seconds * 1e9))

    def cut_landed(self) -> dict[str, Any] | None:
        return self.emu.cut_state().get("fired")

    def disarm_cut(self) -> None:
        self.emu.cut_disarm()

    def log_start(self, log_dir: Path) -> None:
        self.emu.log_start(log_dir)

    def log_mark(self, label: str) -> int:
        return self.emu.log_mark(label)

    def crash_states(self, *, subsets: int, tears: int, seed: int, marks: bool,
                     images: bool = False) -> dict[str, Any]:
        stop = self.emu.log_stop()
        listing = self.emu.crash_states(subsets=subsets, tears=tears, seed=seed, marks=marks, images=images)
        return {"records": listing.records, "flushes": listing.flushes, "data_bytes": stop.get("data_bytes"),
                "after": listing.after, "marks": len(listing.marks), "flush_pos": list(listing.flush_pos),
                **({"images": listing.images} if images else {}),
                "states": [{**{k: v for k, v in dataclasses.asdict(s).items() if k != "image" or images},
                            "kind": s.kind.value} for s in listing.states]}

    def crash_switch(self, state: str) -> dict[str, Any]:
        return self.emu.crash_switch(state)

    def state_path(self) -> Path:
        return self.emu.state_path


class LogSession(EmulatorSession):
    """The crash states of a cell's kept write log, served by an emulator of its own: another
    lab checks some of the cell's states beside the cell's lab (crashhost/share.py). Its only use is
    crash_switch; the device behind is blank and records nothing."""

    def __init__(self, device: Device, scratch: Path, log: Path, seed: int = 1, pace: Pace = Pace.NONE,
                 clock: Clock = Clock.REAL):
        super().__init__(device, scratch, seed, pace, clock)
        self.crash_log = log


class RealDeviceSession(_Session):
    """A real block device, opened by ubd itself with O_DIRECT (every request reaches the device).

    It has no statistics (the flash emulator's figures are not observable on it) and no
    power switch: a "power cut" is the lab being killed, a kernel crash the device rides
    out (the powercut study refuses real devices; see plan.py)."""

    def __init__(self, device: Device, scratch: Path, seed: int = 1, pace: Pace = Pace.REAL,
                 clock: Clock = Clock.REAL):
        super().__init__(device, scratch, seed, pace, clock)
        self._held = contextlib.ExitStack()

    def _open(self) -> None:
        # one cell at a time on the device; the node must still be the planned device
        self._held.enter_context(claimed(self.device, stopping))

    def _close(self) -> None:
        self._held.close()

    def disks(self) -> tuple[BlockDevice, ...]:
        ident = self.device.info.get("identity", {})
        return (BlockDevice(self.device.path, direct=True, discard=bool(ident.get("write_zeroes_max_bytes"))),)


# Device.backend -> the session class that serves it
SESSIONS: dict[str, type[_Session]] = {"emulator": EmulatorSession, "file": FileSession, "nandsim": NandsimSession,
                                       "real": RealDeviceSession}


def session_class(device: Device) -> type[_Session]:
    """The class that serves `device` in the lab: its capabilities are the plan's to check (a
    board's devices have their own: targets/board.py)."""
    try:
        return SESSIONS[device.backend]
    except KeyError:
        raise FlashbedError(f"device {device.label}: no session for its backend '{device.backend}'") from None


def open_session(device: Device, scratch: Path, seed: int = 1, pace: Pace = Pace.REAL,
                 clock: Clock = Clock.REAL) -> DeviceSession:
    """The device's session in the UML lab (enter it with `with`), in `clock`."""
    return session_class(device)(device, scratch, seed=seed, pace=pace, clock=clock)


def _clear_scratch(scratch: Path) -> None:
    mnt = scratch / "mnt"
    if os.path.ismount(mnt) or _is_dead_mount(mnt):
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
    shutil.rmtree(scratch, ignore_errors=True)


def clear_scratch(root: Path) -> None:
    """Every cell's scratch directory under a run's `root`/scratch, and it (FUSE mounts let go)."""
    if root.is_dir():
        for d in root.iterdir():
            _clear_scratch(d)
    shutil.rmtree(root, ignore_errors=True)


def _is_dead_mount(path: Path) -> bool:
    try:
        path.stat()
        return False
    except OSError as e:
        return e.errno == errno.ENOTCONN  # a FUSE server that died


def normalize_stats(raw: dict) -> dict:
    """The emulator's stats reply, flattened to STAT_KEYS (missing ones absent)."""
    flat: dict[str, Any] = {}

    def walk(prefix: str, d: Any) -> None:
        if isinstance(d, dict):
            for k, v in d.items():
                walk(f"{prefix}{k}_" if prefix or k else k, v)
        elif isinstance(d, (int, float)) and not isinstance(d, bool):
            flat[prefix.rstrip("_")] = d

    walk("", raw)
    out: dict[str, Any] = {k: flat[k] for k in STAT_KEYS if k in flat}
    if not out and raw:
        raise FlashbedError("emulator stats reply has none of the expected fields: " + ", ".join(sorted(flat)[:20]))
    sizes = (raw.get("request_sizes") or {}).get("write")
    if isinstance(sizes, dict) and sizes:
        out[WRITE_SIZES] = {str(k): int(v) for k, v in sizes.items() if isinstance(v, int)}
    return out
