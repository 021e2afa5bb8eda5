"""Issue 28, 13: a full disk under --out. A run on a 24 MiB tmpfs that a 40 MiB file fills stops
in one line (exit 2), leaves no temporary file beside its results, and records its cell as an
error, which a resume runs again (it was recorded as a lab crash, exit 0, a .tmp left)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flashbed.store import RunStore

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--study", "bigfile", "--set", "bigfile.size=40M", "--fs", "ext4", "--device", "plain-file@64M", "--no-report"]


def flashbed(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "flashbed.cli", "run", *args], capture_output=True, text=True,
                          env=env, timeout=900)


def test_a_full_disk_stops_the_run_in_one_line_and_leaves_nothing_half_written(kernel, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounts a small tmpfs (root)")
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(small)], check=True)
    try:
        r = flashbed(*ARGS, "--out", str(small / "run"))
        assert r.returncode == 2, r.stderr[-2000:]
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("flashbed: error: the disk holding") and "is full: free some space, then run the " \
            "same command again" in last, last
        assert "Traceback" not in r.stderr
        assert [p for p in small.rglob("*") if ".tmp" in p.name] == []
        (cell,) = list(RunStore(small / "run").results())
        assert cell.status == "error" and not RunStore(small / "run").finished(cell.key)
    finally:
        subprocess.run(["umount", str(small)], check=True)
