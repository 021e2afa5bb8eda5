"""flashbed-emu end to end on the host: the served file behaves as a block
device would under ubd (pread/pwrite, fsync, punch hole, zero range, fcntl
locks), power cuts keep flushed data, restarts continue, mkfs/fsck work,
statistics add up, pacing follows the model."""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

from flashbed.devices.emulator import Emulator, EmulatorError, EmulatorSpec, describe

pytestmark = [pytest.mark.emulator, pytest.mark.spread]

REPO = Path(__file__).resolve().parents[2]
PRESETS = REPO / "presets"
MiB = 1 << 20

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def fallocate(fd: int, mode: int, off: int, length: int) -> None:
    if _libc.fallocate(fd, mode, off, length) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def pattern(tag: int, n: int) -> bytes:
    return (struct.pack("<Q", tag) * (n // 8 + 1))[:n]


def test_io_flush_discard_lock_cut_restart(spec_for):
    spec = spec_for()
    emu = Emulator(spec).start()
    fd = os.open(emu.device_path, os.O_RDWR)
    try:
        # Durable data: written then flushed.
        durable = {off: pattern(off, 64 * 1024) for off in range(0, 8 * MiB, MiB)}
        for off, data in durable.items():
            assert os.pwrite(fd, data, off) == len(data)
        os.fsync(fd)
        for off, data in durable.items():
            assert os.pread(fd, len(data), off) == data
        # Unaligned I/O is read-modify-written.
        os.pwrite(fd, b"xyz" * 1000, 9 * MiB + 123)
        assert os.pread(fd, 3000, 9 * MiB + 123) == b"xyz" * 1000
        # Punch hole (discard) and zero range (write zeroes) read back as zeroes.
        os.pwrite(fd, b"\xaa" * (256 * 1024), 10 * MiB)
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10 * MiB + 1000, 100 * 1024)
        got = os.pread(fd, 256 * 1024, 10 * MiB)
        assert got[:1000] == b"\xaa" * 1000
        assert got[1000:1000 + 100 * 1024] == bytes(100 * 1024)
        assert got[1000 + 100 * 1024:] == b"\xaa" * (256 * 1024 - 1000 - 100 * 1024)
        fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 10 * MiB, 4096)
        assert os.pread(fd, 4096, 10 * MiB) == bytes(4096)
        # ubd takes an fcntl lock on its backing file.
        lock = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        fcntl.fcntl(fd, fcntl.F_SETLK, lock)
        # Beyond the end: short read, failing write.
        assert os.pread(fd, 4096, spec.capacity) == b""
        with pytest.raises(OSError):
            os.pwrite(fd, b"x" * 4096, spec.capacity)

        s = emu.stats()
        assert s["host"]["writes"] == len(durable) + 2
        assert s["host"]["write_bytes"] == 8 * 64 * 1024 + 3000 + 256 * 1024  # discards are counted apart
        assert s["host"]["discards"] == 2
        assert s["host"]["flushes"] >= 1
        n = s["nand"]
        assert n["page_programs"] == n["host_page_programs"] + n["gc_page_programs"] + n["fold_page_programs"]
        assert sum(s["erase_counts"]) == n["erases"]
        assert s["write_amplification"] > 0
        assert s["latency_us"]["all"]["count"] == s["host"]["reads"] + s["host"]["writes"] + s["host"]["flushes"] + s["host"]["discards"]

        # Written after the last flush: may or may not survive the cut.
        os.pwrite(fd, pattern(999, 4096), 20 * MiB)
        reply = emu.cut_power()
        assert reply["ok"] is True
        assert not emu.running and not os.path.ismount(spec.mount_dir)
        with pytest.raises(OSError):
            os.pread(fd, 4096, 0)
    finally:
        try:
            os.close(fd)
        except OSError:
            pass  # the device's process is gone: ENOTCONN

    with Emulator(spec) as emu2:
        with open(emu2.device_path, "rb") as f:
            for off, data in durable.items():
                f.seek(off)
                assert f.read(len(data)) == data, f"flushed data at {off} lost"
            f.seek(20 * MiB)
            assert f.read(4096) in (pattern(999, 4096), bytes(4096))
        assert emu2.stats()["host"]["writes"] == 0, "statistics restart with the process"


def test_clean_stop_and_restart_keep_everything_and_refuse_mismatch(spec_for, tmp_path):
    spec = spec_for(preset="emmc-8g", capacity=128 * MiB)
    with Emulator(spec) as emu:
        fd = os.open(emu.device_path, os.O_RDWR)
        os.pwrite(fd, pattern(5, MiB), 3 * MiB)  # no fsync: a clean stop persists it anyway
        os.close(fd)
        before = emu.stats()["erase_counts"]
    with Emulator(spec) as emu:
        fd = os.open(emu.device_path, os.O_RDONLY)
        assert os.pread(fd, MiB, 3 * MiB) == pattern(5, MiB)
        os.close(fd)
        assert emu.stats()["erase_counts"] == before, "wear persists across restarts"
    other = EmulatorSpec(**{**spec.__dict__, "capacity": 256 * MiB})
    with pytest.raises(EmulatorError, match="does not match"):
        Emulator(other).start()
    other = EmulatorSpec(**{**spec.__dict__, "preset": PRESETS / "lexar-c10-16g.toml"})
    with pytest.raises(EmulatorError, match="differs"):
        Emulator(other).start()


def test_mkfs_ext4_and_fsck_survive_a_cut(spec_for):
    mkfs, fsck = shutil.which("mkfs.ext4"), shutil.which("e2fsck")
    if not mkfs or not fsck:
        pytest.skip("e2fsprogs not installed")
    spec = spec_for(capacity=64 * MiB)
    emu = Emulator(spec).start()
    dev = str(emu.device_path)
    r = subprocess.run([mkfs, "-F", "-q", "-E", "discard", dev], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([fsck, "-fn", dev], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    s = emu.stats()
    assert s["host"]["discards"] >= 1 and s["host"]["flushes"] >= 1
    emu.cut_power()
    with Emulator(spec) as emu2:
        r = subprocess.run([fsck, "-fn", str(emu2.device_path)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr


def test_injected_faults_reach_the_host(spec_for):
    spec = spec_for(capacity=64 * MiB)
    with Emulator(spec) as emu:
        fd = os.open(emu.device_path, os.O_RDWR)
        try:
            os.pwrite(fd, pattern(1, 4096), 0)
            os.fsync(fd)
            blocks = len(emu.stats()["erase_counts"])
            with pytest.raises(EmulatorError, match="out of range"):
                emu.inject("bad-block", block=blocks)
            # The ideal preset has one plane and 4 KiB pages: unit 0 is the
            # first page of the first block written.
            emu.inject("bit-errors", block=0, page=0, bits=1000)
            with pytest.raises(OSError):
                os.pread(fd, 4096, 0)
            emu.inject("bad-block", block=0)
            assert 0 in emu.stats()["bad_blocks"]["grown"]
        finally:
            os.close(fd)


def test_real_pacing_follows_the_model(spec_for):
    """With --pace real a request returns no earlier than the modelled device
    would finish it: a synchronous write of a whole erase unit on the SD card
    model takes at least its modelled program time."""
    spec = spec_for(preset="lexar-c10-16g", capacity=64 * MiB, pace="real")
    with Emulator(spec) as emu:
        au = emu.info["erase_block_bytes"]
        fd = os.open(emu.device_path, os.O_RDWR)
        t0 = time.monotonic()
        os.pwrite(fd, bytes(au), 0)
        os.fsync(fd)
        wall = time.monotonic() - t0
        os.close(fd)
        s = emu.stats()
    # Lower bound from the preset: pages per plane x fastest program time.
    pages = au // emu.info["page_size"]
    min_model = pages / describe(spec.preset)["planes"] * 600e-6
    assert wall >= min_model * 0.9, f"{wall:.3f} s < modelled {min_model:.3f} s"
    assert s["busy_ns"] / 1e9 >= min_model * 0.9


def test_virtual_pace_serves_a_clock_file_that_answers_each_submit(spec_for):
    """--pace virtual: `clock` beside the device takes the guest's submit time (8 bytes
    LE at offset 0) and answers the guest time its requests complete at; no sleeps."""
    emu = Emulator(spec_for("emmc-8g", 64 * MiB, pace="virtual")).start()
    clock_path = Path(emu.device_path).parent / "clock"
    dev = os.open(emu.device_path, os.O_RDWR)
    clk = os.open(clock_path, os.O_RDWR)
    try:
        def request(guest_ns: int, io) -> int:
            os.pwrite(clk, struct.pack("<Q", guest_ns), 0)
            io()
            return struct.unpack("<Q", os.pread(clk, 8, 0))[0]

        started = time.monotonic()
        done = request(1_000_000, lambda: os.pwrite(dev, pattern(1, 4 * MiB), 0))
        wall = time.monotonic() - started
        # 4 MiB over the preset's 25 MB/s host bus: at least 160 ms of device time
        assert done - 1_000_000 >= 160_000_000, done
        assert wall < (done - 1_000_000) / 1e9, f"{wall:.3f}s of wall time: it slept"
        # submitted after the device went idle: an isolated 4 KiB read's latency
        later = done + 50_000_000
        read_done = request(later, lambda: os.pread(dev, 4096, 8 * MiB))
        assert 0 < read_done - later < 5_000_000, read_done - later
        with pytest.raises(OSError):
            os.pwrite(clk, b"1234", 0)  # a submit time is 8 bytes, whole
        assert emu.stats()["pace"] == "virtual" and emu.stats()["device_ns"] > 0
    finally:
        os.close(clk)
        os.close(dev)
        emu.stop()
    emu2 = Emulator(spec_for("emmc-8g", 64 * MiB, pace="real")).start()
    try:
        assert not (Path(emu2.device_path).parent / "clock").exists(), "a real-time emulator serves no clock"
    finally:
        emu2.stop()


def test_the_device_check_s_counters_writes_flushes_sizes_and_sequential_bytes(spec_for):
    """What the report's device check reads of a phase: write requests, flushes, sizes, and the writes
    that continued the previous one (through the session's normalisation, as a cell records them)."""
    from flashbed.devices.session import normalize_stats
    emu = Emulator(spec_for()).start()
    fd = os.open(emu.device_path, os.O_RDWR)
    try:
        emu.reset_stats()
        for i in range(8):  # one stream of 8 x 4 KiB
            os.pwrite(fd, pattern(i, 4096), MiB + i * 4096)
        for off in (5 * MiB, 3 * MiB, 7 * MiB):  # three jumps
            os.pwrite(fd, pattern(off, 4096), off)
        os.fsync(fd)
        s = normalize_stats(emu.stats())
        assert s["host_writes"] == 11 and s["host_write_bytes"] == 11 * 4096 and s["host_flushes"] == 1
        assert s["write_sizes"] == {"4096": 11}
        assert s["write_pattern_sequential_write_bytes"] == 7 * 4096  # the stream's first write follows nothing
    finally:
        os.close(fd)
        emu.stop()
    info = describe(PRESETS / "emmc-8g.toml", 512 * MiB)
    assert info["host_bytes_per_s"] == 25_000_000  # the preset's 25 MB/s host interface
