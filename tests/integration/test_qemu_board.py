"""The board path against an emulated board (flashbed.boards.qemu): a board with its own kernel,
architecture and SD card. Skipped, with the reason, where QEMU or the board's image cannot be had.

The busybox board (no python3, no fio, busybox's tools) must be refused in one line naming what
to install, before anything is written on it: its card stays all zeros, its /var/tmp empty."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flashbed.boards import qemu
from flashbed.errors import FlashbedError

# lab too: it boots a kernel (the board's), so the fast selection (not lab) leaves it out
pytestmark = [pytest.mark.qemu_board, pytest.mark.lab]


@pytest.fixture(scope="module")
def busybox_board(tmp_path_factory):
    if shutil.which(qemu.QEMU) is None:
        pytest.skip(f"no {qemu.QEMU} on this machine (apt-get install qemu-system-arm)")
    try:
        b = qemu.create(tmp_path_factory.mktemp("bb") / "board", qemu.RECIPES["busybox"], card_bytes=64 << 20,
                        say=lambda *_: None)
    except FlashbedError as e:
        pytest.skip(f"the busybox board cannot be built here: {e}")
    qemu.power_on(b)
    try:
        qemu.wait_ssh(b)
        yield b
    finally:
        qemu.power_off(b)


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
