"""flashbed-yaffs2 without a kernel: YAFFS2 on a file NAND (the free-OOB sizes of
nandsim's ECC layouts), mounted through FUSE on the host. The MTD backend is the
same driver hooks over ioctls; the lab's smoke test runs it on nandsim."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from flashbed.yaffs2 import build

pytestmark = pytest.mark.long

# a deadline on the wall clock, not a count of polls: under make test beside lab boots a poll
# of 10 ms takes far longer, and 1 000 of them ended a daemon's wait before it had exited
PATIENCE_S = 60.0
# 4 KiB pages, 64 per block: nandsim's free OOB with Hamming on a 128-byte OOB (78),
# BCH-4 and BCH-8 on 224 bytes (166, 118), and a 16-byte one (bare tags, no tag ECC)
LAYOUTS = (78, 166, 118, 16)
BLOCKS = 96


@pytest.fixture(scope="module")
def daemon() -> Path:
    return build.ensure_daemon()


@pytest.fixture(autouse=True)
def _no_mount_left(tmp_path):
    yield
    # a failed test must not leave a FUSE mount behind
    mnt = tmp_path / "mnt"
    if os.path.ismount(mnt):
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], timeout=30)


class Mounted:
    def __init__(self, daemon: Path, nand: Path, mnt: Path, oob: int, extra: tuple[str, ...] = ()):
        self.stats = nand.with_suffix(".stats")
        self.pidfile = nand.with_suffix(".pid")
        self.log = nand.with_suffix(".log")
        self.mnt = mnt
        mnt.mkdir(exist_ok=True)
        r = subprocess.run([str(daemon), "--file", str(nand), "--geometry", f"4096:{oob}:64:{BLOCKS}",
                            "--stats", str(self.stats), "--log", str(self.log), "--pidfile", str(self.pidfile),
                            *extra, str(mnt)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        # with --log, stdout carries the mount's JSON line alone (the trace lines go to the log)
        assert [json.loads(l)["event"] for l in r.stdout.splitlines()] == ["mount"]
        self.pid = self._wait_pid()

    def log_lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def _wait_pid(self) -> int:
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            if self.pidfile.exists() and self.pidfile.read_text().strip():
                return int(self.pidfile.read_text())
            time.sleep(0.01)
        raise AssertionError("the daemon wrote no pidfile")

    def events(self) -> list[dict]:
        return [json.loads(l) for l in self.stats.read_text().splitlines()]

    def _gone(self) -> None:
        # the daemon is its session's leader, reaped by whoever adopts it, maybe late:
        # a zombie has exited
        stat = Path(f"/proc/{self.pid}/stat")
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            try:
                if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    raise FileNotFoundError
            except FileNotFoundError:
                self.pidfile.unlink()
                return
            time.sleep(0.01)
        raise AssertionError("the daemon did not exit")

    def unmount(self) -> None:
        subprocess.run(["fusermount3", "-u", str(self.mnt)], check=True, timeout=30)
        self._gone()

    def cut(self) -> None:
        """A power cut: the daemon dies between two NAND operations, nothing written after."""
        os.kill(self.pid, signal.SIGKILL)
        self._gone()
        subprocess.run(["fusermount3", "-u", "-z", str(self.mnt)], timeout=30)


def _payload(n: int, seed: int) -> bytes:
    """Byte i is (i * 131 + seed) mod 256: one period of 256 bytes repeated (made byte by byte,
    the tests' hundreds of MiB of churn took seconds of the suite's CPU)."""
    period = bytes((i * 131 + seed) & 0xFF for i in range(256))
    return (period * (n // 256 + 1))[:n]


@pytest.mark.parametrize("oob", LAYOUTS)
def test_written_data_reads_back_after_a_clean_remount_from_the_checkpoint(daemon, tmp_path, oob):
    nand = tmp_path / "nand.img"
    m = Mounted(daemon, nand, tmp_path / "mnt", oob)
    assert m.events()[0]["checkpoint_restored"] is False  # blank flash: nothing to restore
    (m.mnt / "dir").mkdir()
    big = _payload(1024 * 1024 + 123, 7)
    (m.mnt / "dir" / "big").write_bytes(big)
    (m.mnt / "small").write_text("hello yaffs2\n")
    os.rename(m.mnt / "small", m.mnt / "renamed")
    assert (m.mnt / "dir" / "big").read_bytes() == big
    m.unmount()
    unmount = m.events()[-1]
    assert unmount["event"] == "unmount" and unmount["page_writes"] >= len(big) // 4096

    m = Mounted(daemon, nand, tmp_path / "mnt", oob)
    mount = m.events()[-1]
    assert mount["checkpoint_restored"] is True  # the clean unmount wrote one
    assert mount["oob_avail"] == oob and mount["page_size"] == 4096
    assert (m.mnt / "dir" / "big").read_bytes() == big
    assert (m.mnt / "renamed").read_text() == "hello yaffs2\n"
    assert not (m.mnt / "small").exists()
    m.unmount()


def test_after_a_cut_the_mount_scans_and_finds_what_was_fsynced(daemon, tmp_path):
    nand = tmp_path / "nand.img"
    m = Mounted(daemon, nand, tmp_path / "mnt", 78)
    m.unmount()  # a checkpoint on flash, then writes make it stale
    m = Mounted(daemon, nand, tmp_path / "mnt", 78)
    data = _payload(600 * 1024, 3)
    with open(m.mnt / "kept", "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    m.cut()
    m = Mounted(daemon, nand, tmp_path / "mnt", 78)
    assert m.events()[-1]["checkpoint_restored"] is False  # no checkpoint after a cut: a scan
    assert (m.mnt / "kept").read_bytes() == data
    m.unmount()


def _copy_of_the_mounts() -> subprocess.Popen:
    """A process in a mount namespace of its own, made now: it holds a copy of every mount there is
    (as a check sandbox's long-lived namespace does, or a container's) until it is killed."""
    try:
        p = subprocess.Popen(["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private",
                              "sh", "-c", "echo made; exec sleep 600"], stdout=subprocess.PIPE, text=True)
    except FileNotFoundError:
        pytest.skip("no unshare here")
    if p.stdout.readline().strip() != "made":
        p.wait()
        pytest.skip("no mount namespace can be made here (user namespaces off)")
    return p


def test_the_daemon_ends_at_its_unmount_while_another_namespace_holds_a_copy(daemon, tmp_path):
    """The kernel ends a FUSE connection only with the last copy of its mount, and a mount namespace
    made while the mount was there keeps one: under make test another worker's check sandbox (it lives
    as long as its worker) held a daemon's mount, which outlived its unmount and failed the test
    ('the daemon did not exit'). The daemon ends at the unmount in its own namespace, checkpoint
    written."""
    nand = tmp_path / "nand.img"
    m = Mounted(daemon, nand, tmp_path / "mnt", 78)
    (m.mnt / "f").write_bytes(b"kept\n")
    holder = _copy_of_the_mounts()
    try:
        m.unmount()  # waits for the daemon's exit
        assert m.events()[-1]["event"] == "unmount"
    finally:
        holder.kill()
        holder.wait()
    m = Mounted(daemon, nand, tmp_path / "mnt", 78)
    assert m.events()[-1]["checkpoint_restored"] is True
    assert (m.mnt / "f").read_bytes() == b"kept\n"
    m.unmount()


def test_without_the_checkpoint_a_clean_mount_scans(daemon, tmp_path):
    nand = tmp_path / "nand.img"
    m = Mounted(daemon, nand, tmp_path / "mnt", 78)
    (m.mnt / "f").write_bytes(b"x" * 10000)
    m.unmount()
    m = Mounted(daemon, nand, tmp_path / "mnt", 78, ("--no-checkpoint",))
    assert m.events()[-1]["checkpoint_restored"] is False
    assert (m.mnt / "f").read_bytes() == b"x" * 10000
    m.unmount()


def test_a_block_marked_bad_is_never_written(daemon, tmp_path):
    nand = tmp_path / "nand.img"
    stride = 4096 + 78
    bad = 5
    # blank flash in the file NAND's layout: pages (data and free OOB), then its
    # bad-block table, one byte per block
    table = bytearray(b"\xff" * BLOCKS)
    table[bad] = 0
    nand.write_bytes(b"\xff" * (BLOCKS * 64 * stride) + bytes(table))
    m = Mounted(daemon, nand, tmp_path / "mnt", 78)
    assert m.events()[0]["bad_blocks"] == 1  # the mount's scan found the mark
    data = _payload(BLOCKS * 64 * 4096 // 2, 11)  # half the flash: passes every block
    (m.mnt / "half").write_bytes(data)
    m.unmount()
    with open(nand, "rb") as f:
        f.seek(bad * 64 * stride)
        assert set(f.read(64 * stride)) == {0xFF}
    m = Mounted(daemon, nand, tmp_path / "mnt", 78)
    assert (m.mnt / "half").read_bytes() == data
    m.unmount()


# --- the NAND's faults (--faults, as nandsim's in the lab) -----------------------------

def _bad_table(nand: Path, oob: int = 78) -> bytes:
    return nand.read_bytes()[BLOCKS * 64 * (4096 + oob):]


def test_a_failed_erase_retires_the_block_and_marks_it_bad(daemon, tmp_path):
    nand = tmp_path / "nand.img"
    weak = range(2, BLOCKS, 8)
    faults = ("--faults", ",".join(f"erase:{b}" for b in weak))
    m = Mounted(daemon, nand, tmp_path / "mnt", 78, faults)
    # two thirds of the flash written and deleted, then as much again: YAFFS2 must erase
    # the blocks the first file emptied (the weak ones among them) to take the second
    (m.mnt / "gone").write_bytes(_payload(BLOCKS * 64 * 4096 * 2 // 3, 1))
    os.unlink(m.mnt / "gone")
    kept = _payload(BLOCKS * 64 * 4096 * 2 // 3, 2)
    (m.mnt / "kept").write_bytes(kept)
    m.unmount()
    unmount = m.events()[-1]
    marked = [b for b, mark in enumerate(_bad_table(nand)) if mark != 0xFF]  # MEMSETBADBLOCK's mark
    assert marked and set(marked) <= set(weak)  # only weak blocks, those YAFFS2 tried to erase
    assert unmount["retired_blocks"] == len(marked) and unmount["bad_blocks"] == len(marked)
    log = m.log_lines()
    for b in marked:
        assert f"yaffs: erase of block {b} failed: Input/output error" in log
        assert f"yaffs: block {b} marked bad" in log
    m = Mounted(daemon, nand, tmp_path / "mnt", 78, faults)
    assert m.events()[-1]["bad_blocks"] == len(marked)
    assert (m.mnt / "kept").read_bytes() == kept
    m.unmount()


def test_a_failed_program_is_written_again_elsewhere_and_its_block_retired_after_strikes(daemon, tmp_path):
    nand = tmp_path / "nand.img"
    page = 2 * 64 + 10  # inside the file's first blocks
    faults = ("--faults", f"program:{page}")
    m = Mounted(daemon, nand, tmp_path / "mnt", 78, faults)
    data = _payload(6 * 64 * 4096, 3)
    (m.mnt / "f").write_bytes(data)
    # this YAFFS2 retires a block for a failed program at once only when it had just checked
    # the page erased; else the failure is a strike, and the fourth retires the block: the
    # flash filled again and again around the file until the block is used four times
    failures = lambda: m.log_lines().count(f"yaffs: program of page {page} failed: Input/output error")
    for i in range(12):
        if failures() >= 4:
            break
        (m.mnt / "churn").write_bytes(_payload(BLOCKS * 64 * 4096 * 2 // 3, 4 + i))
        os.unlink(m.mnt / "churn")
    assert "yaffs: **>> yaffs write required 2 attempts" in m.log_lines()  # written again elsewhere
    m.unmount()
    assert failures() >= 4 and "yaffs: yaffs: Block struck out" in m.log_lines()
    assert f"yaffs: block {page // 64} marked bad" in m.log_lines()
    assert _bad_table(nand)[page // 64] == 0 and m.events()[-1]["retired_blocks"] == 1
    m = Mounted(daemon, nand, tmp_path / "mnt", 78, faults)
    assert (m.mnt / "f").read_bytes() == data  # the failed page's chunk was written again elsewhere
    m.unmount()


def test_a_torn_program_loses_nothing_acknowledged(daemon, tmp_path):
    """The power goes while a page is programmed (half of it programmed, data and tags,
    then the daemon killed): the next mount scans, and every fsync'ed record is there,
    with nothing wrong after them."""
    nand = tmp_path / "nand.img"
    m = Mounted(daemon, nand, tmp_path / "mnt", 78)
    kept = _payload(1024 * 1024, 6)
    (m.mnt / "kept").write_bytes(kept)
    m.unmount()
    # every program past the first blocks tears: the first one the writer reaches is the cut
    m = Mounted(daemon, nand, tmp_path / "mnt", 78, ("--faults", f"tear:{6 * 64}-{BLOCKS * 64 - 1}"))
    record = _payload(4096, 9)
    acked = 0
    with pytest.raises(OSError):  # the daemon is gone: the FUSE connection aborts
        fd = os.open(m.mnt / "log", os.O_WRONLY | os.O_CREAT)
        for _ in range(BLOCKS * 64):
            os.write(fd, record)
            os.fsync(fd)
            acked += 1
    m._gone()
    subprocess.run(["fusermount3", "-u", "-z", str(m.mnt)], timeout=30)
    assert acked >= 1
    m = Mounted(daemon, nand, tmp_path / "mnt", 78)
    assert m.events()[-1]["checkpoint_restored"] is False  # a scan, over the torn page
    assert (m.mnt / "kept").read_bytes() == kept
    got = (m.mnt / "log").read_bytes()
    assert got[:acked * 4096] == record * acked  # nothing acknowledged lost
    assert len(got) % 4096 == 0 and got == record * (len(got) // 4096)  # and no torn bytes after it
    m.unmount()


def _mount_and_read(daemon: Path, tmp_path: Path, faults: str, size: int) -> tuple[Mounted, bytes, bytes]:
    nand = tmp_path / "nand.img"
    m = Mounted(daemon, nand, tmp_path / "mnt", 78)
    data = _payload(size, 5)
    (m.mnt / "f").write_bytes(data)
    m.unmount()
    m = Mounted(daemon, nand, tmp_path / "mnt", 78, ("--faults", faults))  # the faults from here on
    got = (m.mnt / "f").read_bytes()
    m.unmount()
    return m, data, got


def test_bit_flips_the_ecc_corrected_are_counted_and_the_data_is_right(daemon, tmp_path):
    pages = range(64, 128)  # the second block: under the file's data
    m, data, got = _mount_and_read(daemon, tmp_path, ",".join(f"flip:{p}" for p in pages), 2 * 64 * 4096)
    assert got == data
    assert m.events()[-1]["ecc_fixed"] >= 1 and m.events()[-1]["ecc_unfixed"] == 0
    assert any(l.startswith("yaffs: page ") and l.endswith("bit flips corrected by ECC") for l in m.log_lines())


def test_an_uncorrectable_read_is_counted_and_logged_and_yaffs2_hands_on_what_it_read(daemon, tmp_path):
    # YAFFS2's file read does not fail on a failed chunk read (yaffs_file_rd ignores it): the
    # reader gets the wrong bytes, as the in-kernel YAFFS2 gives them; the daemon's log and
    # counters are where it shows
    m, data, got = _mount_and_read(daemon, tmp_path, ",".join(f"ecc:{p}" for p in range(64, 128)),
                                   2 * 64 * 4096)
    assert len(got) == len(data) and got != data
    assert m.events()[-1]["ecc_unfixed"] >= 1
    assert any(l.endswith("uncorrectable ECC error") for l in m.log_lines())


@pytest.mark.parametrize("args, message", [
    (("--mtd", "/dev/mtd9", "--faults", "ecc:1"), "--faults is for a file NAND"),
    (("--file", "NAND", "--geometry", f"4096:78:64:{BLOCKS}", "--faults", "ecc:99999"),
     "--faults ecc:99999: give erase:BLOCK"),
    (("--file", "NAND", "--geometry", f"4096:78:64:{BLOCKS}", "--faults", "melt:3"),
     "--faults melt:3: give erase:BLOCK"),
    (("--file", "NAND", "--geometry", f"4096:78:64:{BLOCKS}", "--faults", "tear:9-3"),
     "--faults tear:9-3: give erase:BLOCK"),
])
def test_bad_faults_are_one_clear_line_and_exit_2(daemon, tmp_path, args, message):
    args = tuple(str(tmp_path / "n") if a == "NAND" else a for a in args)
    r = subprocess.run([str(daemon), *args, str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr


def test_too_few_free_oob_bytes_is_one_clear_line(daemon, tmp_path):
    r = subprocess.run([str(daemon), "--file", str(tmp_path / "n"), "--geometry", f"4096:8:64:{BLOCKS}",
                        str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == ["flashbed-yaffs2: 8 free OOB bytes cannot hold YAFFS2's 16-byte tags"]


def test_a_bad_geometry_is_one_clear_line_and_exit_2(daemon, tmp_path):
    r = subprocess.run([str(daemon), "--file", str(tmp_path / "n"), "--geometry", "4096x78", str(tmp_path)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "PAGE:OOB:PAGES:BLOCKS" in r.stderr


def test_the_build_key_follows_flashbeds_own_c_sources(tmp_path, monkeypatch):
    key = build.cache_key()
    csrc = tmp_path / "csrc"
    (csrc / "shim").mkdir(parents=True)
    for p in build.own_sources():
        dest = csrc / p.relative_to(build.CSRC)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(p.read_bytes())
    monkeypatch.setattr(build, "CSRC", csrc)
    assert build.cache_key() == key
    (csrc / "yfb_fuse.c").write_text((csrc / "yfb_fuse.c").read_text() + "\n/* changed */\n")
    assert build.cache_key() != key
