"""A board over SSH, for real, without a board: this machine is the board (a private
sshd on 127.0.0.1 with its own host key and config, tests/sshboard.py), a loop
device its storage, the host kernel's own filesystems the ones under test.

Marked `lab` as well as `board`: integration, kept out of the fast suite."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.sshboard import SshBoard, loop_device, missing, spare_port

pytestmark = [pytest.mark.board, pytest.mark.lab,
              pytest.mark.skipif(bool(missing()), reason=missing() or "ok")]

REPO = Path(__file__).resolve().parents[2]


def flashbed(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    return subprocess.run([sys.executable, "-m", "flashbed.cli", *args], env=env, text=True, capture_output=True,
                          timeout=timeout, cwd=REPO)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    with SshBoard(tmp_path_factory.mktemp("sshd")) as b:
        yield b


def on_board(b: SshBoard, node: str, out: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return flashbed("run", "--target", b.target, "--ssh-config", b.config, "--device", node, "--out", str(out),
                    *args, **kw)


def one_line(r: subprocess.CompletedProcess, words: str) -> None:
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert words in r.stderr, r.stderr


def test_the_studies_run_on_the_board_and_the_report_names_its_kernel_and_device(board, tmp_path):
    with loop_device(tmp_path, 1 << 30) as node:
        r = on_board(board, node, tmp_path / "run", "--destroy-data-on", node, "--fs", "ext4,xfs,btrfs",
                     "--study", "bigfile,smallfiles,mount,mkfs")
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert man["kernel"]["release"] == os.uname().release
    dev = next(iter(man["devices"].values()))
    assert dev["kind"] == "board" and dev["identity"]["node"] == node
    assert dev["identity"]["board"]["uname"].startswith("Linux ")
    cells = [json.loads(p.read_text()) for p in (tmp_path / "run" / "cells").glob("*.json")]
    assert len(cells) == 15 and all(c["status"] == "ok" for c in cells), [c["headline"] for c in cells]
    assert all(c["provenance"]["kernel"] == os.uname().release for c in cells)
    # the power cut of the mount study: the filesystem shut down without its log, then the boot killed
    # (each attempt at a cell has its own directory: logs/<cell>/attempt-N)
    cut = tmp_path / "run" / "logs" / f"{dev['name']}__ext4__mount__fill0__r0" / "attempt-1" / "boot0" / "console.log"
    assert "shut down" in cut.read_text()
    report = (tmp_path / "run" / "report.md").read_text() if (tmp_path / "run" / "report.md").exists() else \
        "\n".join(p.read_text() for p in (tmp_path / "run").rglob("*.md"))
    assert os.uname().release in report


def test_sqlite_on_the_board_counts_what_its_own_device_received(board, tmp_path):
    """The sqlite study reads the block layer's count of the device under test, whatever its node
    (issue 32: it read /sys/block/ubda/stat, a UML name, and recorded nothing on a board)."""
    with loop_device(tmp_path, 256 << 20) as node:
        r = on_board(board, node, tmp_path / "run", "--destroy-data-on", node, "--fs", "ext4", "--study", "sqlite",
                     "--set", "sqlite.transactions=20")
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (cell,) = [json.loads(p.read_text()) for p in (tmp_path / "run" / "cells").glob("*.json")]
    figures = {(m["case"], m["metric"]): m["value"] for m in cell["measurements"]}
    for journal in ("wal", "rollback"):
        # 20 transactions of 10 rows of 100 bytes: the device got at least the rows themselves
        assert figures[(journal, "tps")] > 0 and figures[(journal, "write_amplification")] >= 1, figures


def test_an_unreachable_board_is_one_line_after_a_bounded_wait(tmp_path):
    started = time.monotonic()
    r = flashbed("run", "--target", f"ssh://root@127.0.0.1:{spare_port()}", "--device", "/dev/mmcblk0p3",
                 "--fs", "ext4", "--study", "mkfs", "--out", str(tmp_path / "run"), timeout=120)
    one_line(r, "cannot reach ssh://root@127.0.0.1:")
    assert "Connection refused" in r.stderr and time.monotonic() - started < 60
    assert not (tmp_path / "run").exists()


def test_a_board_without_python_is_one_line(tmp_path):
    # the board's shell finds its tools but no python3
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("sh", "tar", "uname", "mktemp", "rm", "mkdir", "cat"):
        (bare / tool).symlink_to(subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True,
                                                text=True).stdout.strip())
    force = f'ForceCommand env PATH={bare} sh -c "$SSH_ORIGINAL_COMMAND"\n'
    with SshBoard(tmp_path / "sshd", extra=force) as b:
        r = flashbed("run", "--target", b.target, "--ssh-config", b.config, "--device", "/dev/loop0",
                     "--fs", "ext4", "--study", "mkfs", "--out", str(tmp_path / "run"), timeout=120)
    one_line(r, "has no python3")


def test_a_mounted_device_on_the_board_is_refused(board, tmp_path):
    with loop_device(tmp_path, 64 << 20) as node:
        subprocess.run(["mkfs.ext4", "-q", node], check=True)
        (tmp_path / "mnt").mkdir()
        subprocess.run(["mount", node, str(tmp_path / "mnt")], check=True)
        try:
            r = on_board(board, node, tmp_path / "run", "--destroy-data-on", node, "--fs", "ext4", "--study", "mkfs",
                         timeout=120)
        finally:
            subprocess.run(["umount", str(tmp_path / "mnt")], check=True)
    one_line(r, f"{node} is mounted at {tmp_path / 'mnt'}: unmount it first")


def test_a_device_with_data_needs_destroy_data_on(board, tmp_path):
    with loop_device(tmp_path, 64 << 20) as node:
        subprocess.run(["mkfs.ext4", "-q", node], check=True)
        r = on_board(board, node, tmp_path / "run", "--fs", "ext4", "--study", "mkfs", timeout=120)
    one_line(r, f"carries data (ext4), which the run would destroy: if that is what you want, add --destroy-data-on {node}")


def test_a_device_with_data_but_no_signature_needs_destroy_data_on(board, tmp_path):
    with loop_device(tmp_path, 64 << 20) as node:
        with open(node, "r+b") as f:  # a raw backup: no filesystem, no partition table
            f.seek(5 << 20)
            f.write(b"x" * 4096)
        r = on_board(board, node, tmp_path / "run", "--fs", "ext4", "--study", "mkfs", timeout=120)
    one_line(r, f"{node} may carry data (no filesystem or partition-table signature, but non-zero data at offset "
                f"{5 << 20}), which the run would destroy: if that is what you want, add --destroy-data-on {node}")


@pytest.mark.parametrize("study,words", [
    ("powercut", "study powercut cuts the device's power: give the board's power switch with --power-cmd"),
    ("crashstates", "study crashstates needs the flash emulator's write log, which a board's device"),
])
def test_studies_a_board_cannot_run_are_one_line(board, tmp_path, study, words):
    with loop_device(tmp_path, 512 << 20) as node:
        r = on_board(board, node, tmp_path / "run", "--destroy-data-on", node, "--fs", "ext4", "--study", study,
                     timeout=120)
    one_line(r, words)
    assert "--device emmc-8g" not in r.stderr or "without --target" in r.stderr  # never a device --target refuses
    assert not (tmp_path / "run").exists()


def test_destroy_data_on_must_name_the_boards_device(board, tmp_path):
    with loop_device(tmp_path, 64 << 20) as node:
        r = on_board(board, node, tmp_path / "run", "--destroy-data-on", node + "9", "--fs", "ext4", "--study", "mkfs",
                     timeout=120)
    one_line(r, f"--destroy-data-on {node}9 names no device of this run on the board")


def test_powercut_on_the_board_through_its_power_command(tmp_path):
    """--power-cmd: tests/sshpower.py is this "board"'s switch. `off` kills the private sshd, so
    the boot's session drops as a dying board's does (the board side then shuts the
    filesystem down without its log and kills the workload); `on` starts the sshd 3 s later,
    so flashbed's SSH retry has to wait for it. This host keeps its page cache and the loop
    file's: what a real cut loses from caches below the filesystem is not simulated."""
    with SshBoard(tmp_path / "sshd") as b, loop_device(tmp_path, 512 << 20) as node:
        r = flashbed("run", "--target", b.target, "--ssh-config", b.config, "--device", node, "--destroy-data-on",
                     node, "--fs", "ext4", "--study", "powercut", "--iterations", "2", "--set",
                     "powercut.modes=async", "--power-cmd", b.power_cmd(3.0), "--out", str(tmp_path / "run"),
                     timeout=900)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert (b.dir / "power.log").read_text().split() == ["off", "on", "off", "on"]
        sshd_log = (b.dir / "sshd.log").read_text()
    cell = json.loads(next((tmp_path / "run" / "cells").glob("*.json")).read_text())
    assert cell["status"] == "ok", cell["headline"]
    its = cell["extra"]["iterations"]
    assert len(its) == 2, its
    # each cut classified as the lab's are; ext4 replays its journal after a cut of its log flush
    assert all(i["class"] in ("clean", "recovered") for i in its), [(i["class"], i["why"]) for i in its]
    assert all(i.get("acks_after_cut") == 0 and i["acks"] for i in its), its
    logs = tmp_path / "run" / "logs" / next((tmp_path / "run" / "logs").iterdir()).name / "attempt-1"
    assert "power was cut" not in sshd_log
    console = (logs / "boot0" / "console.log").read_text()
    assert "shut down" in console or "agent exit" not in console


def test_probe_on_the_boards_device_writes_a_preset(board, tmp_path):
    """flashbench and fio natively on the board's device; the preset fitted as for a host device."""
    with loop_device(tmp_path, 256 << 20) as node:
        r = flashbed("probe", "--target", board.target, "--ssh-config", board.config, "--device", node,
                     "--destroy-data-on", node, "--runtime", "2", "--max-open", "2", "--out", str(tmp_path / "probe"),
                     "--write-preset", str(tmp_path / "board.toml"), timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    got = json.loads((tmp_path / "probe" / "probe.json").read_text())
    assert got["kernel"] == os.uname().release and got["lab_us"] == {}  # no lab between fio and the device
    assert got["rates"]["seq-write"]["bandwidth"] > 0 and got["raw"]["align"]
    assert "fitted by `flashbed probe`" in (tmp_path / "board.toml").read_text()


@pytest.mark.parametrize("arch", ["", "armv7l"])
def test_probe_copies_flashbench_when_the_board_lacks_it_and_the_architectures_match(tmp_path, arch):
    # the board's shell finds no flashbench (its PATH holds the rest): this machine's is copied over,
    # unless the board says (a `uname` in front of the real one) it is another architecture.
    # The PATH directory is not under /tmp, which each boot on the board replaces with its own
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="flashbed-test-bin-") as bin_dir:
        bare = Path(bin_dir)
        if arch:
            (bare / "uname").write_text(f'#!/bin/sh\n[ "$1" = -m ] && echo {arch} && exit 0\nexec /bin/uname "$@"\n')
            (bare / "uname").chmod(0o755)
        for d in ("/usr/sbin", "/usr/bin", "/sbin", "/bin"):
            for tool in Path(d).iterdir() if Path(d).is_dir() else ():
                if tool.name != "flashbench" and not (bare / tool.name).exists():
                    (bare / tool.name).symlink_to(tool)
        force = f'ForceCommand env PATH={bare} sh -c "$SSH_ORIGINAL_COMMAND"\n'
        r = _probe_with(tmp_path, force)
    if arch:
        one_line(r, f"has no flashbench, and this machine's is for {os.uname().machine}, the board is armv7l: "
                    f"install flashbench on the board")
        return
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    got = json.loads((tmp_path / "probe" / "probe.json").read_text())
    assert "copied to the board" in got["tools"]["flashbench"] and got["raw"]["align"]


def _probe_with(tmp_path: Path, force: str) -> subprocess.CompletedProcess:
    with SshBoard(tmp_path / "sshd", extra=force) as b, loop_device(tmp_path, 128 << 20) as node:
        return flashbed("probe", "--target", b.target, "--ssh-config", b.config, "--device", node, "--destroy-data-on",
                        node, "--runtime", "1", "--max-open", "2", "--out", str(tmp_path / "probe"), timeout=900)


def test_a_board_run_stopped_midway_resumes_without_rerunning_finished_cells(board, tmp_path):
    run = tmp_path / "run"
    args = ["run", "--target", board.target, "--ssh-config", board.config, "--fs", "ext4,xfs",
            "--study", "mkfs,bigfile,smallfiles", "--out", str(run)]
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    with loop_device(tmp_path, 512 << 20) as node:
        args += ["--device", node, "--destroy-data-on", node]
        # as a terminal starts it: SIGINT at its default, even when the suite itself runs in the
        # background (where the shell leaves SIGINT ignored, and Python then keeps it ignored)
        proc = subprocess.Popen([sys.executable, "-m", "flashbed.cli", *args], env=env, cwd=REPO, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 600
        while len(list((run / "cells").glob("*.json")) if (run / "cells").is_dir() else []) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(2)  # Ctrl-C
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 130, out[-1500:] + err[-1500:]
        done = {p.name: p.read_bytes() for p in (run / "cells").glob("*.json")}
        assert 2 <= len(done) < 6
        r = flashbed(*args)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert f"6 cells, {len(done)} already finished, {6 - len(done)} to run" in r.stderr + r.stdout
    cells = {p.name: p.read_bytes() for p in (run / "cells").glob("*.json")}
    assert len(cells) == 6 and all(cells[name] == body for name, body in done.items())  # not run again
    assert all(json.loads(b)["status"] == "ok" for b in cells.values())


@pytest.mark.parametrize("device,fs,words", [
    ("/dev/mtd0", "ext4", "/dev/mtd0: flashbed does not drive a board's raw NAND (UBIFS, JFFS2, YAFFS2 on /dev/mtdN) yet"),
    ("", "ubifs", "ubifs runs on raw NAND, and flashbed does not drive a board's raw NAND (/dev/mtdN) yet"),
])
def test_raw_nand_on_a_board_is_one_line(board, tmp_path, device, fs, words):
    with loop_device(tmp_path, 64 << 20) as node:
        r = on_board(board, device or node, tmp_path / "run", "--fs", fs, "--study", "mount", timeout=120)
    one_line(r, words)
    assert not (tmp_path / "run").exists()


def test_the_board_against_its_twin_in_the_lab(board, tmp_path):
    """The same studies on the board (a loop device) and in the lab (plain-file), then the twin check."""
    studies = ["--fs", "ext4,xfs", "--study", "mkfs,smallfiles"]
    with loop_device(tmp_path, 512 << 20) as node:
        r = on_board(board, node, tmp_path / "board", "--destroy-data-on", node, *studies)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = flashbed("run", "--device", "plain-file@512M", *studies, "--out", str(tmp_path / "twin"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = flashbed("report", str(tmp_path / "board"), str(tmp_path / "twin"), "--out", str(tmp_path / "cmp"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("flashbed twin check: board board (B) against its twin twin (A)")
    s = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    assert s["twin_check"] and s["b"]["kernel"]["release"] == os.uname().release
    rows = [x for x in s["rows"] if x["source"] == "measure"]
    assert {x["study"] for x in rows} == {"mkfs", "smallfiles"} and {x["fs_a"] for x in rows} == {"ext4", "xfs"}
    for x in rows:
        if x["a"] and x["b"] is not None:
            assert x["ratio"] == pytest.approx(x["b"] / x["a"], rel=1e-3)
    assert {g["study"] for g in s["rank_agreement"]} == {"mkfs", "smallfiles"}
    assert all(k["best_a"] in ("ext4", "xfs") and k["best_b"] in ("ext4", "xfs") for k in s["rankings"])
    assert "Rank agreement per study" in (tmp_path / "cmp" / "report.md").read_text()


KILLED_BOARD = """
import sys, time
from flashbed.lab.board import Board
from flashbed.lab.ssh import parse_address
b = Board(parse_address(sys.argv[1], config=sys.argv[2])).open()
print(b.base, b.ssh._dir, flush=True)
time.sleep(600)
"""


def test_a_board_run_killed_with_sigkill_leaves_nothing_the_next_one_does_not_end(board, tmp_path):
    """Issue 42, 13: SIGKILL of a board run left a live ssh ControlMaster, its /tmp/flashbed-ssh-*
    and the board's /var/tmp/flashbed.*: the next board run ends and removes them (this machine is
    the board: its /var/tmp is the board's)."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    p = subprocess.Popen([sys.executable, "-c", KILLED_BOARD, board.target, board.config], env=env,
                         stdout=subprocess.PIPE, text=True)
    base, control = p.stdout.readline().split()
    p.kill()
    p.wait()
    master = subprocess.run(["pgrep", "-f", f"ControlPath={control}/master"], capture_output=True, text=True)
    assert master.stdout.strip(), "the killed run's master connection should outlive it"
    assert Path(base).is_dir() and Path(control).is_dir()
    from flashbed.lab.board import Board
    from flashbed.lab.ssh import parse_address
    b = Board(parse_address(board.target, config=board.config)).open()
    try:
        assert not Path(base).exists() and not Path(control).exists()
        deadline = time.monotonic() + 10
        while subprocess.run(["pgrep", "-f", f"ControlPath={control}/master"], capture_output=True).returncode == 0:
            assert time.monotonic() < deadline, "the killed run's master connection is still up"
            time.sleep(0.2)
    finally:
        b.close()
    assert not Path(b.base or base).exists()
