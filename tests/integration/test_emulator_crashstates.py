"""Write log and crash states through the real FUSE file: record writes and
fsyncs from the host, list the crash states, switch the served device
through them and check what each holds; image files and the offline rebuild
give the same bytes; a write-back cache loses unflushed writes; torn upper
pages make flushed data unreadable on a part without paired-page protection."""

from __future__ import annotations

import errno
import os
import struct

import pytest

from flashbed.devices.emulator import CrashKind, Emulator, EmulatorError, rebuild_image

pytestmark = [pytest.mark.emulator, pytest.mark.spread]

MiB = 1 << 20
UNIT = 4096


def block(unit: int, ver: int, size: int = UNIT) -> bytes:
    return (struct.pack("<QQ", unit, ver) * (size // 16 + 1))[:size]


def read_unit(fd: int, unit: int, size: int = UNIT) -> tuple[int, int] | None:
    """(unit, version) a block holds, (unit, 0) for zeroes, None if foreign."""
    b = os.pread(fd, size, unit * size)
    if b == bytes(size):
        return (unit, 0)
    u, v = struct.unpack_from("<QQ", b)
    return (u, v) if b == block(u, v, size) else None


def test_states_served_through_the_device_file(spec_for, tmp_path):
    emu = Emulator(spec_for("ideal", 64 * MiB)).start()
    log = emu.log_start(tmp_path / "log")
    fd = os.open(emu.device_path, os.O_RDWR)
    current: dict[int, int] = {}
    writes: dict[int, list[int]] = {}  # unit -> versions in order
    ver = 0

    def write(unit: int) -> None:
        nonlocal ver
        ver += 1
        os.pwrite(fd, block(unit, ver), unit * UNIT)
        current[unit] = ver
        writes.setdefault(unit, []).append(ver)

    for u in range(16):  # the "mkfs" before the workload
        write(u)
    os.fsync(fd)
    before = dict(current)
    emu.log_mark("workload")
    snapshots = []  # contents at each fsync of the workload
    for k in range(1, 5):
        write(3 * k)
        write(100 + k)
        write(3 * k)  # rewritten before the flush
        os.fsync(fd)
        snapshots.append(dict(current))
    write(7)
    write(200)  # never flushed
    summary = emu.log_stop()
    assert summary["marks"] == [{"pos": summary["marks"][0]["pos"], "label": "workload"}]
    assert (log / "crashlog.events").is_file() and (log / "crashlog.data").is_file()

    listing = emu.crash_states(subsets=6, tears=2)
    flushes = [s for s in listing.states if s.kind is CrashKind.FLUSH]
    assert len(flushes) == 4, "one state per fsync after the mark"
    assert all(s.pos > listing.after for s in listing.states)
    assert {s.kind for s in listing.states} == {CrashKind.FLUSH, CrashKind.CUT, CrashKind.SUBSET}
    flush_at = {s.pos: snap for s, snap in zip(flushes, snapshots)}
    flush_at[listing.after - 1] = before  # the fsync right before the mark
    units = sorted(set(writes) | {0})

    for s in listing.states:
        reply = emu.crash_switch(s.id)
        assert reply["state"] == s.id and reply["switch_ns"] < 50_000_000
        if s.kind is CrashKind.FLUSH:
            for u in units:
                assert read_unit(fd, u) == (u, flush_at[s.pos].get(u, 0)), f"{s.id}: unit {u}"
            continue
        # Between flushes: every unit holds what the last flush left, or a
        # version written after it; never anything else.
        durable = flush_at[s.last_flush]
        newer = 0
        for u in units:
            got = read_unit(fd, u)
            assert got is not None and got[0] == u, f"{s.id}: unit {u} holds foreign data"
            if got[1] != durable.get(u, 0):
                assert got[1] in writes[u] and got[1] > durable.get(u, 0), f"{s.id}: unit {u} version {got[1]}"
                newer += 1
        # ideal commits its mapping only at flushes: the plain cut is the
        # last flush's contents, a subset keeps some of what followed.
        assert newer == 0 if s.kind is CrashKind.CUT else 0 < newer <= s.kept, s

    # Writes while a state is served are gone at the next switch.
    s0 = flushes[0]
    emu.crash_switch(s0.id)
    os.pwrite(fd, b"scratch!" * 512, 0)
    assert os.pread(fd, 8, 0) == b"scratch!"
    emu.crash_switch(flushes[1].id)
    emu.crash_switch(s0.id)
    assert read_unit(fd, 0) == (0, flush_at[s0.pos][0])

    # Image files: online, offline, and the served state agree.
    last_cut = [s for s in listing.states if s.kind is CrashKind.SUBSET][-1]
    emu.crash_switch(last_cut.id)
    served = b"".join(os.pread(fd, MiB, i * MiB) for i in range(64))
    emu.crash_image(last_cut.id, tmp_path / "online.img")
    assert (tmp_path / "online.img").read_bytes() == served

    emu.crash_switch("live")
    for u in units:
        assert read_unit(fd, u) == (u, current[u])
    with pytest.raises(EmulatorError, match="not POS"):
        emu.crash_switch("nonsense")
    os.close(fd)
    emu.stop()
    reply = rebuild_image(log, last_cut.id, tmp_path / "offline.img")
    assert reply["id"] == last_cut.id and reply["damaged_ranges"] == []
    assert (tmp_path / "offline.img").read_bytes() == served


def test_write_back_cache_loses_unflushed_writes_in_some_states(spec_for, tmp_path):
    # emmc-8g: page-mapped FTL, 512 KiB write cache, paired pages protected.
    emu = Emulator(spec_for("emmc-8g", 64 * MiB)).start()
    emu.log_start()
    fd = os.open(emu.device_path, os.O_RDWR)
    os.pwrite(fd, block(0, 1), 0)
    os.fsync(fd)
    emu.log_mark("workload")
    for u in (5, 9, 13):
        os.pwrite(fd, block(u, 2), u * UNIT)
    os.fsync(fd)
    emu.log_stop()
    listing = emu.crash_states(subsets=8)
    cut = next(s for s in listing.states if s.kind is CrashKind.CUT)
    assert cut.volatile == 3
    subsets = [s for s in listing.states if s.kind is CrashKind.SUBSET]
    assert len(subsets) == 6, "every proper subset of three cached writes"
    emu.crash_switch(cut.id)
    assert [read_unit(fd, u) for u in (0, 5, 9, 13)] == [(0, 1), (5, 0), (9, 0), (13, 0)]
    held = []
    for s in subsets:
        emu.crash_switch(s.id)
        assert read_unit(fd, 0) == (0, 1), "flushed data survives every state"
        held.append(tuple(read_unit(fd, u)[1] for u in (5, 9, 13)))
    assert sorted(held) == sorted({(a, b, c) for a in (0, 2) for b in (0, 2) for c in (0, 2)} - {(0, 0, 0), (2, 2, 2)})
    assert all(s.damaged == 0 for s in listing.states)
    os.close(fd)
    emu.stop()


def test_torn_upper_pages_damage_flushed_data_without_protection(spec_for, tmp_path):
    # lexar-c10-16g: hybrid log-block FTL, MLC without paired-page protection;
    # units are 16 KiB pages. Flushed pages in an open AU's log block share
    # wordlines with the upper pages written after the flush.
    page = 16384
    emu = Emulator(spec_for("lexar-c10-16g", 64 * MiB)).start()
    emu.log_start()
    fd = os.open(emu.device_path, os.O_RDWR)
    emu.log_mark("workload")
    for u in range(8):
        os.pwrite(fd, block(u, 1, page), u * page)
    os.fsync(fd)
    for u in range(8, 24):
        os.pwrite(fd, block(u, 1, page), u * page)
    os.fsync(fd)
    emu.log_stop()
    listing = emu.crash_states(subsets=0, tears=50)
    tears = [s for s in listing.states if s.kind is CrashKind.TEAR]
    assert tears and any(s.damaged for s in tears)
    torn = next(s for s in tears if s.damaged)
    reply = emu.crash_switch(torn.id)
    assert reply["damaged"] == torn.damaged
    image = emu.crash_image(torn.id, tmp_path / "torn.img")
    (off, length), *_ = image["damaged_ranges"]
    assert off // page < 8, "the damage hits data the first fsync made durable"
    with pytest.raises(OSError) as e:
        os.pread(fd, length, off)
    assert e.value.errno == errno.EIO
    assert (tmp_path / "torn.img").read_bytes()[off:off + length] == bytes(length)
    os.close(fd)
    emu.stop()


def test_states_differing_in_one_block_the_check_reads_are_never_merged(spec_for, tmp_path):
    """The dedup's soundness on the real file: states whose images differ only in the block a
    check would read keep their own verdicts; states holding the same bytes (the same block
    written again) share one, and only while the verifier's input is the same too."""
    from flashbed.crashhost.plan import VerifierInput, plan_checks
    emu = Emulator(spec_for("ideal", 64 * MiB)).start()
    emu.log_start(tmp_path / "log")
    fd = os.open(emu.device_path, os.O_RDWR)
    for u in range(8):  # the "filesystem" around the record the check reads (unit 5)
        os.pwrite(fd, block(u, 1), u * UNIT)
    os.fsync(fd)
    m0 = emu.log_mark("begin")
    pos = []
    for ver in (2, 3, 2):  # unit 5 only: version 2's bytes, 3's, then 2's again
        os.pwrite(fd, block(5, ver), 5 * UNIT)
        os.fsync(fd)
        pos.append(emu.log_mark(f"ack {ver}"))
    emu.log_stop()
    listing = emu.crash_states(subsets=0, tears=0, images=True)
    flushes = [s for s in listing.states if s.kind is CrashKind.FLUSH]
    assert len(flushes) == 3 and listing.images == 3  # unit 5 holding version 1 (a cut before the first), 2 or 3
    a, b, c = flushes
    assert a.image != b.image, "unit 5 differs: never one image"
    assert a.image == c.image, "the same bytes written again: one image"
    seen = {}
    for s in flushes:
        emu.crash_switch(s.id)
        seen[s.id] = read_unit(fd, 5)
    assert seen[a.id] == seen[c.id] == (5, 2) and seen[b.id] == (5, 3)
    os.close(fd)
    emu.stop()

    states = [{"id": s.id, "kind": s.kind.value, "acked": s.acked, "image": s.image} for s in flushes]
    # the verifier reads the log up to each state: a and c were acknowledged at different
    # points, so even their equal images keep their own verdicts
    records = [{"e": "begin", "m": m0}, *({"e": "ack", "m": p} for p in pos)]
    plan = plan_checks(states, records, VerifierInput.RECORDS)
    assert plan.distinct == 3 and not any("same" in s for s in states)
    # a check that reads nothing of the log (no acknowledgements between them) shares c's with a
    plan = plan_checks(states, [{"e": "begin", "m": m0}], VerifierInput.ACKS)
    assert plan.distinct == 2 and states[2]["same"] == a.id and "same" not in states[1]


def test_a_second_emulator_serves_a_kept_logs_states_as_the_first(spec_for, tmp_path):
    """What a helper lab sees (serve --crash-log): the same bytes in every state as the
    emulator that recorded the log."""
    import dataclasses
    emu = Emulator(spec_for("emmc-8g", 64 * MiB)).start()
    log = emu.log_start(tmp_path / "log")
    fd = os.open(emu.device_path, os.O_RDWR)
    for k in range(12):
        os.pwrite(fd, block(k % 5, k + 1), (k % 5) * UNIT)
        if k % 3 == 2:
            os.fsync(fd)
    emu.log_mark("workload")
    os.pwrite(fd, block(9, 99), 9 * UNIT)
    os.fsync(fd)
    emu.log_stop()
    listing = emu.crash_states(subsets=4, tears=2, after=0)
    first = {}
    for s in listing.states:
        emu.crash_switch(s.id)
        first[s.id] = os.pread(fd, 16 * UNIT, 0)
    os.close(fd)
    spec = spec_for("emmc-8g", 64 * MiB)
    other = Emulator(dataclasses.replace(spec, state_dir=tmp_path / "st2", mount_dir=tmp_path / "mnt2",
                                         control=tmp_path / "c2.sock", crash_log=log)).start()
    fd = os.open(other.device_path, os.O_RDWR)
    for s in listing.states:
        other.crash_switch(s.id)
        assert os.pread(fd, 16 * UNIT, 0) == first[s.id], s.id
    os.close(fd)
    other.stop()
    emu.stop()
    with pytest.raises(EmulatorError, match="the log was not stopped|crashlog.events"):
        Emulator(dataclasses.replace(spec, state_dir=tmp_path / "st3", mount_dir=tmp_path / "mnt3",
                                     control=tmp_path / "c3.sock", crash_log=tmp_path / "nolog")).start()


def test_the_state_file_reads_the_served_state_with_its_writes_and_writes_nothing(spec_for, tmp_path):
    """The host's checker reads the served state through `state` (crashhost/check.py): the same bytes as
    the device file, the state's own writes since the switch included, fresh after each switch
    (the page cache is dropped at open); no write, no flush of the live device, EIO while the live
    device is served."""
    emu = Emulator(spec_for("ideal", 64 * MiB)).start()
    emu.log_start(tmp_path / "log")
    fd = os.open(emu.device_path, os.O_RDWR)
    for u in range(8):
        os.pwrite(fd, block(u, 1), u * UNIT)
    os.fsync(fd)
    emu.log_mark("workload")
    for k in range(1, 4):
        os.pwrite(fd, block(k, k + 1), k * UNIT)
        os.fsync(fd)
    emu.log_stop()
    flushes = [s for s in emu.crash_states(subsets=0, tears=0).states if s.kind is CrashKind.FLUSH]
    assert len(flushes) == 3
    state = emu.state_path
    with open(state, "rb") as f:  # nothing served: the live device is not this file's to read
        with pytest.raises(OSError) as e:
            f.read(UNIT)
        assert e.value.errno == errno.EIO
    for s in flushes:
        emu.crash_switch(s.id)
        os.pwrite(fd, block(7, 99), 7 * UNIT)  # the recovery's own write, in the state's scratch
        served = b"".join(os.pread(fd, MiB, i * MiB) for i in range(64))
        with open(state, "rb") as f:  # a checker's small reads, through the page cache
            got = b"".join(iter(lambda: f.read(UNIT), b""))
        assert got == served, s.id
        g = os.open(state, os.O_RDONLY)
        assert read_unit(g, 7) == (7, 99)
        os.close(g)
    with pytest.raises(OSError) as e:
        g = os.open(state, os.O_RDWR)
        try:
            os.pwrite(g, b"x" * UNIT, 0)
        finally:
            os.fsync(g)  # no flush reaches the device either
            os.close(g)
    assert e.value.errno == errno.EROFS
    emu.crash_switch("live")
    flushed = emu.stats()["host"]["flushes"]
    g = os.open(state, os.O_RDONLY)
    os.fsync(g)
    os.close(g)
    assert emu.stats()["host"]["flushes"] == flushed
    os.close(fd)
    emu.stop()
