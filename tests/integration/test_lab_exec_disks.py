"""Issue 28: `lab exec --disk` in the real lab. A disk image the user did not name with
--destroy-data-on is read behind a copy-on-write overlay (the guest writes, the file stays as
it was); named, the lab writes it; a loop device holding an ext4 is written only when named,
unmounted (writeguard, the checks of `run`)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.spread]

ROOT = Path(__file__).resolve().parents[2]
WRITE = "dd if=/dev/urandom of=/dev/ubda bs=64k count=16 conv=fsync 2>&1 && echo wrote"


def digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def lab_exec(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "flashbed.cli", "lab", "exec", *args], capture_output=True,
                          text=True, env=env, timeout=600)


@pytest.fixture
def image(tmp_path):
    img = tmp_path / "disk.img"
    img.write_bytes(b"\x5a" * (8 << 20))
    return img


def test_a_disk_not_named_is_written_through_an_overlay_only(kernel, image):
    before = digest(image)
    r = lab_exec("--disk", str(image), "--", WRITE, "dd if=/dev/ubda bs=64k count=1 2>/dev/null | od -An -tx1 | "
                 "head -1")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "wrote" in r.stdout and " 5a 5a 5a 5a" not in r.stdout.splitlines()[-1]  # the guest saw its writes
    assert f"--disk {image}: the lab's writes go to an overlay" in r.stderr
    assert digest(image) == before


def test_a_disk_named_by_destroy_data_on_is_written(kernel, image):
    before = digest(image)
    r = lab_exec("--disk", str(image), "--destroy-data-on", str(image), "--", WRITE)
    assert r.returncode == 0 and "wrote" in r.stdout, r.stderr[-2000:]
    assert digest(image) != before


def test_a_loop_device_is_written_only_when_named(kernel, tmp_path):
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup")
    img = tmp_path / "canary.img"
    img.write_bytes(b"\0" * (16 << 20))
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True)
    node = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True,
                          check=True).stdout.strip()
    try:
        before = digest(node)
        r = lab_exec("--disk", node, "--", WRITE)
        assert r.returncode == 2 and f"add --destroy-data-on {node}" in r.stderr
        assert digest(node) == before
        r = lab_exec("--disk", node, "--destroy-data-on", node, "--", WRITE)
        assert r.returncode == 0 and "wrote" in r.stdout, r.stderr[-2000:]
        assert digest(node) != before
    finally:
        subprocess.run(["losetup", "-d", node], check=True)
