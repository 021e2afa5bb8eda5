"""Issue 27: a short study as an unprivileged user.

The suite runs as root; this test runs `flashbed run --study mkfs --fs ext4 --device
emmc-8g@64M` as uid 65534 (nobody) with a home of its own: the kernel cache is that
user's XDG cache (seeded with this machine's time-travel kernel, so nothing is built),
the run directory is under the working directory, the emulator's FUSE file is mounted
through fusermount3. It needs an interpreter that user can run: the project environment
of a checkout anyone can read (as in scripts/fresh-host.sh's roots); under root's home
(pyenv) it is skipped. Where the host's /dev/fuse is root's only, the run is refused in
one line instead, and the test holds it to that.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.emulator]

REPO = Path(__file__).resolve().parents[2]
UID = GID = 65534
COMMAND = ["run", "--study", "mkfs", "--fs", "ext4", "--device", "emmc-8g@64M"]


def as_user(home: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
           "PYTHONPATH": str(REPO / "src"), "LANG": "C.UTF-8"}
    return subprocess.run(["setpriv", f"--reuid={UID}", f"--regid={GID}", "--clear-groups", "--inh-caps=-all",
                           *args], cwd=home, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def home():
    if os.geteuid() != 0:
        pytest.skip("the suite runs as an ordinary user already")
    if not shutil.which("setpriv"):
        pytest.skip("no setpriv (util-linux)")
    d = Path(tempfile.mkdtemp(prefix="flashbed-user-", dir="/tmp"))  # a directory the user can reach
    os.chown(d, UID, GID)
    probe = as_user(d, sys.executable, "-c", "import flashbed, matplotlib", timeout=60)
    if probe.returncode != 0:
        shutil.rmtree(d)
        pytest.skip(f"{sys.executable} with flashbed is not usable by uid {UID} (a project environment under "
                    f"root's home): {probe.stderr.strip().splitlines()[-1:]}")
    yield d
    subprocess.run(["umount", "-R", "-l", str(d)], capture_output=True)  # nothing should be mounted; if it is, off
    shutil.rmtree(d, ignore_errors=True)


def seed_cache(home: Path, kernel) -> None:
    """The user's kernel cache holds this machine's time-travel kernel (a copy, owned by the user)."""
    entry = home / ".cache" / "flashbed" / "kernel" / kernel.key
    entry.mkdir(parents=True)
    src = Path(kernel.path).parent
    for name in ("linux", "config", "info.json"):
        shutil.copy2(src / name, entry / name)
    for p in [home / ".cache", *(home / ".cache").rglob("*")]:
        os.chown(p, UID, GID)


def test_a_study_runs_as_an_unprivileged_user_in_its_own_directories(tt_kernel, home):
    seed_cache(home, tt_kernel)
    before = {p for p in Path("/tmp").iterdir()}
    r = as_user(home, sys.executable, "-m", "flashbed.cli", *COMMAND, timeout=900)
    fuse = Path("/dev/fuse")
    if fuse.stat().st_mode & 0o006 != 0o006:
        # this host's /dev/fuse is root's only: one line, exit 2, nothing written
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "mode 0666" in r.stderr, r.stderr
        assert not (home / "runs").exists()
        return
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    (run,) = (home / "runs").iterdir()
    cells = [json.loads(p.read_text()) for p in (run / "cells").glob("*.json")]
    assert [c["status"] for c in cells] == ["ok"] and (run / "report.html").is_file()
    # the run, its FUSE mount point and the kernel are the user's, under its own directories
    assert run.stat().st_uid == UID and all(p.stat().st_uid == UID for p in run.rglob("*") if not p.is_symlink())
    assert not any(os.path.ismount(p) for p in run.rglob("*") if p.is_dir())
    assert (home / ".cache" / "flashbed" / "kernel" / tt_kernel.key / "linux").is_file()
    # and nothing of the user's anywhere else in /tmp
    assert [p for p in set(Path("/tmp").iterdir()) - before if p.stat().st_uid == UID] == []


def test_a_real_device_an_ordinary_user_cannot_open_is_one_line(home, tmp_path):
    if not shutil.which("losetup"):
        pytest.skip("no losetup")
    img = tmp_path / "card.img"
    img.write_bytes(b"\0" * (64 << 20))
    node = subprocess.run(["losetup", "--find", "--show", str(img)], capture_output=True, text=True)
    if node.returncode != 0:
        pytest.skip(f"no loop device: {node.stderr.strip()}")
    dev = node.stdout.strip()
    try:
        r = as_user(home, sys.executable, "-m", "flashbed.cli", "run", "--study", "mkfs", "--fs", "ext4",
                    "--device", dev, "--destroy-data-on", dev, timeout=120)
    finally:
        subprocess.run(["losetup", "-d", dev], check=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "cannot read and write it" in r.stderr and "run flashbed as root" in r.stderr
    assert not (home / "runs").exists()
