"""The board path against an emulated board (flashbed.boards.qemu): a board with its own kernel,
architecture and SD card. Skipped, with the reason, where QEMU or the board's image cannot be had.

The busybox board (no python3, no fio, busybox's tools) must be refused in one line naming what
to install, before anything is written on it: its card stays all zeros, its /var/tmp empty.

The Debian board (arm64, Debian's kernel, an SD card behind SDHCI) runs studies on its own kernel,
card and tools (sqlite3 for sqlite); its power cut (slow: a reboot under TCG) is a real restart, counted from QEMU's side.
One board at a time: each fixture's board is switched off when its tests end."""

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from flashbed.boards import qemu
from flashbed.errors import FlashbedError

REPO = Path(__file__).resolve().parents[2]

# lab too: it boots a kernel (the board's), so the fast selection (not lab) leaves it out
pytestmark = [pytest.mark.qemu_board, pytest.mark.lab]


@contextmanager
def _board(tmp_path_factory, recipe: str, card_bytes: int):
    """A board of `recipe` with a card of `card_bytes`, switched on, reached by SSH, and switched
    off on leaving; the test is skipped, with the reason, where QEMU or a tool the build needs is
    missing. A build that fails is the recipe's failure, and the test's: a skip hid one (the
    Debian board's stage 2 could not mount its root on bookworm's 6.1.0-50 kernel)."""
    missing = qemu.missing_tools()  # QEMU among them
    if missing:
        pytest.skip(f"the {recipe} board needs {', '.join(missing)}: apt-get install them")
    try:  # an image is built once into the cache (tens of minutes under TCG for Debian's), then reused
        b = qemu.create(tmp_path_factory.mktemp(recipe) / "board", qemu.RECIPES[recipe], card_bytes=card_bytes,
                        say=lambda *_: None)
    except FlashbedError as e:
        pytest.fail(f"the {recipe} board was not built: {e}")
    qemu.power_on(b)
    try:
        qemu.wait_ssh(b)
        yield b
    finally:
        qemu.power_off(b)


@pytest.fixture
def busybox_board(tmp_path_factory):
    with _board(tmp_path_factory, "busybox", 64 << 20) as b:
        yield b


def _ssh(b: qemu.BoardDir, cmd: str) -> str:
    return subprocess.run(["ssh", "-F", str(b.ssh_config), "-o", "BatchMode=yes", "-p", str(b.load()["port"]),
                           "127.0.0.1", cmd], capture_output=True, text=True, timeout=300).stdout


def test_a_board_without_python3_is_refused_in_one_line_before_anything_is_written(busybox_board):
    b = busybox_board
    assert "aarch64" in _ssh(b, "uname -m")
    r = subprocess.run([str(Path(sys.executable).parent / "flashbed"), "run", "--target", qemu.url(b),
                        "--ssh-config", str(b.ssh_config), "--device", "/dev/mmcblk0",
                        "--destroy-data-on", "/dev/mmcblk0", "--study", "bigfile", "--fs", "ext4", "--no-report"],
                       capture_output=True, text=True, timeout=900)
    err = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2, r.stderr
    assert len(err) == 1 and "python3" in err[0] and "install" in err[0], err
    assert "Traceback" not in r.stderr
    assert _ssh(b, "ls -A /var/tmp").strip() == ""
    with open(b.card, "rb") as f:
        assert f.read(1 << 20).count(0) == 1 << 20  # the card: never written


@pytest.fixture(scope="module")
def debian_board(tmp_path_factory):
    with _board(tmp_path_factory, "debian", 128 << 20) as b:
        yield b


def _on_board(b: qemu.BoardDir, out: Path, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "flashbed"), "run", "--target", qemu.url(b),
                           "--ssh-config", str(b.ssh_config), "--device", "/dev/mmcblk0", "--destroy-data-on",
                           "/dev/mmcblk0", "--out", str(out), "--no-report", *args], capture_output=True, text=True,
                          timeout=timeout)


def _cells(run: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((run / "cells").glob("*.json"))]


def test_the_studies_run_on_the_emulated_boards_own_kernel_and_sd_card(debian_board, tmp_path):
    b = debian_board
    # sqlite with the board's own sqlite3 (its image has it), a few transactions: the suite's time.
    # f2fs: a module of Debian's kernel that the board loads at the cell's first mount (ext4's is
    # loaded already, for the board's root); ext4 runs on the board in the power cut below. Both
    # filesystems here cost the suite a second pair of cells under TCG
    r = _on_board(b, tmp_path / "run", "--study", "mkfs,sqlite", "--fs", "f2fs", "--set", "sqlite.transactions=20",
                  "--set", "sqlite.journals=wal")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    dev = next(iter(man["devices"].values()))
    ident = dev["identity"]
    # the board's kernel, not this machine's or the lab's; its card an SD card with its CID
    assert ident["board"]["uname"].startswith("Linux ") and " aarch64" in ident["board"]["uname"]
    assert ident["board"]["release"] != os.uname().release and man["kernel"]["release"] == ident["board"]["release"]
    assert ident["transport"] == "mmc" and ident["mmc_type"] == "SD" and len(ident["mmc_cid"]) == 32
    cells = _cells(tmp_path / "run")
    assert len(cells) == 2 and all(c["status"] == "ok" for c in cells), [c["headline"] for c in cells]
    assert all(c["provenance"]["kernel"] == ident["board"]["release"] for c in cells)
    sqlite = [c for c in cells if c["key"]["study"] == "sqlite"]
    assert len(sqlite) == 1 and all(any(x["metric"] == "tps" and x["value"] > 0 for x in c["measurements"])
                                    for c in sqlite), [c["headline"] for c in sqlite]


@pytest.mark.slow
def test_a_power_cut_on_the_emulated_board_is_a_real_restart(debian_board, tmp_path):
    """--power-cmd is the board's own switch: off kills QEMU (SIGKILL), on starts a new QEMU, and
    flashbed waits for the board's SSH. The restart is counted from QEMU's side (power.log: a new
    process), the recovery classified as the lab's are."""
    b = debian_board
    before = b.power_log.read_text().splitlines()
    first = b.pid()
    r = _on_board(b, tmp_path / "run", "--study", "powercut", "--fs", "ext4", "--iterations", "1", "--set",
                  "powercut.modes=async", "--power-cmd", f"{REPO / 'scripts' / 'qemu-board.sh'} --dir {b.dir} "
                  "{action}", "--boot-wait", "900")  # TCG under load took up to 233 s of the default 300
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    lines = b.power_log.read_text().splitlines()[len(before):]
    assert [" ".join(x.split()[1:3]) for x in lines] == ["off (SIGKILL)", "on qemu"], lines
    assert lines[0].split()[-1] == str(first) and b.pid() not in (None, first)  # another QEMU process
    (cell,) = _cells(tmp_path / "run")
    assert cell["status"] == "ok", cell["headline"]
    (it,) = cell["extra"]["iterations"]
    assert it["class"] in ("clean", "recovered"), (it["class"], it["why"])
    assert it["acks"] and it.get("acks_after_cut") == 0, it
