"""One cell's device, whatever serves it: flashbed-emu (FUSE file), a plain
sparse file, or nandsim inside the lab. Owns the scratch state and removes it."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from .. import cpus
from ..errors import FlashbedError
from ..lab.uml import BlockDevice, Nandsim
from .presets import Device

# emulator statistics kept per workload phase, under the names renderers use
STAT_KEYS = ("write_amplification", "host_write_bytes", "host_read_bytes", "nand_program_pages", "nand_read_pages",
             "nand_erases", "busy_seconds", "gc_count", "erase_count_min", "erase_count_max", "erase_count_mean",
             "latency_p50_us", "latency_p99_us")


class DeviceSession:
    def __init__(self, device: Device, scratch: Path, seed: int = 1, pace: str = "real"):
        self.device = device
        self.scratch = scratch
        self.seed = seed
        self.pace = pace
        self.emu = None
        self.cut = False

    def __enter__(self) -> "DeviceSession":
        # the emulator and every lab of this session share one host CPU
        self._cpu = contextlib.ExitStack()
        self._cpu.enter_context(cpus.lease())
        try:
            self._open()
        except BaseException:
            self._cpu.close()
            raise
        return self

    def _open(self) -> None:
        _clear_scratch(self.scratch)  # a killed earlier run may have left one behind
        self.scratch.mkdir(parents=True, exist_ok=True)
        if self.device.kind == "block" and not self.device.emulated:
            with open(self.scratch / "device.img", "wb") as f:
                f.truncate(self.device.capacity)
        elif self.device.emulated:
            self._start_emulator()

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.emu is not None:
                self.emu.stop()
        finally:
            self.emu = None
            _clear_scratch(self.scratch)
            self._cpu.close()

    def _start_emulator(self) -> None:
        from . import emulator

        spec = emulator.EmulatorSpec(
            preset=self.device.path, state_dir=self.scratch / "state", mount_dir=self.scratch / "mnt",
            control=self.scratch / "control.sock", capacity=self.device.capacity, pace=self.pace, seed=self.seed)
        (self.scratch / "mnt").mkdir(exist_ok=True)
        self.emu = emulator.Emulator(spec)
        self.emu.start()
        self.cut = False

    # --- what the lab boot needs --------------------------------------------------------
    def disks(self) -> tuple[BlockDevice, ...]:
        if self.device.kind != "block":
            return ()
        if self.emu is not None:
            # the FUSE server is the only user of its file; ubd's lock is not needed
            return (BlockDevice(Path(self.emu.device_path), shared=True),)
        return (BlockDevice(self.scratch / "device.img"),)

    def nandsim(self) -> Nandsim | None:
        if self.device.kind != "nandsim":
            return None
        # the part's datasheet delays, unless the run skips the device's time
        timing = self.device.nand_timing if self.pace == "real" else None
        return Nandsim(id_bytes=self.device.nandsim_id_bytes,
                       parts=(self.device.capacity // self.device.erase_block,),
                       extra=timing.nandsim_params() if timing else {})

    def mem_mb(self) -> int:
        # nandsim keeps the chip's written pages in the guest's memory
        return 768 if self.device.kind != "nandsim" else 768 + self.device.capacity // (1 << 20)

    # --- host calls from the guest --------------------------------------------------------
    def reset_stats(self) -> dict | None:
        if self.emu is None:
            return None
        self.emu.reset_stats()
        return {}

    def stats(self) -> dict | None:
        if self.emu is None:
            return None
        return normalize_stats(self.emu.stats())

    def cut_power(self) -> dict[str, Any] | None:
        """The emulator's reply (cut_at_ns, cache_bytes_lost), or None without an emulator."""
        if self.emu is not None:
            reply = self.emu.cut_power()
            self.cut = True
            return reply
        # a plain file or nandsim has no power to cut: the lab kill alone is the crash
        return None

    def restart_if_cut(self) -> None:
        if self.cut:
            self._start_emulator()


def _clear_scratch(scratch: Path) -> None:
    mnt = scratch / "mnt"
    if os.path.ismount(mnt) or _is_dead_mount(mnt):
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
    shutil.rmtree(scratch, ignore_errors=True)


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
    out = {k: flat[k] for k in STAT_KEYS if k in flat}
    if not out and raw:
        raise FlashbedError("emulator stats reply has none of the expected fields: " + ", ".join(sorted(flat)[:20]))
    return out
