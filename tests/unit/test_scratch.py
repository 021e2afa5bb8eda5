"""Each flashbed command's temporary files live in one root of its own, removed when it ends; the
roots of flashbed processes that are gone (SIGKILL) are removed by the next one, mounts first."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from flashbed import owner, scratch
from flashbed.cli import main


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_command_s_temporary_files_go_in_its_root_and_leave_with_it(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = {}

    def command(args):
        seen["tempdir"] = tempfile.gettempdir()
        seen["env"] = os.environ["TMPDIR"]
        Path(tempfile.mkdtemp(prefix="flashbed-exec-")).joinpath("f").write_text("x")
        raise KeyboardInterrupt  # however it ends
    monkeypatch.setattr("flashbed.cli._dispatch", command)
    before = os.environ.get("TMPDIR")
    assert main(["devices", "show", "emmc-8g"]) == 130
    root = Path(seen["tempdir"])
    assert root.parent == tmp_path and root.name.startswith(scratch.PREFIX) and seen["env"] == str(root)
    assert not root.exists() and list(tmp_path.iterdir()) == []
    assert os.environ.get("TMPDIR") == before and tempfile.gettempdir() != str(root)


def test_the_next_command_removes_the_roots_of_killed_ones_only(tmp_path):
    dead = tmp_path / "flashbed-tmp-dead"
    (dead / "flashbed-exec-1").mkdir(parents=True)
    (dead / owner.MARK).write_text(f"flashbed {_dead_pid()} 1\n")
    alive = tmp_path / "flashbed-tmp-alive"
    alive.mkdir()
    owner.mark(alive)
    unmarked = tmp_path / "flashbed-tmp-unmarked"
    unmarked.mkdir()
    assert scratch.sweep(tmp_path) == [dead]
    assert not dead.exists() and alive.exists() and unmarked.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs")
def test_a_mount_left_in_a_killed_root_is_unmounted_before_it_is_removed(tmp_path):
    dead = tmp_path / "flashbed-tmp-mounted"
    mnt = dead / "flashbed-exec-1" / "mnt"
    mnt.mkdir(parents=True)
    (dead / owner.MARK).write_text(f"flashbed {_dead_pid()} 1\n")
    if subprocess.run(["mount", "-t", "tmpfs", "none", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (mnt / "file").write_text("x")
        assert scratch.sweep(tmp_path) == [dead]
        assert not dead.exists() and str(mnt) not in Path("/proc/self/mounts").read_text()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_read_only_temporary_directory_runs_the_command_without_a_root(monkeypatch, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(ro))
    monkeypatch.setattr(scratch.tempfile, "mkdtemp", lambda **kw: (_ for _ in ()).throw(OSError(30, "Read-only")))
    with scratch.root() as d:
        assert d is None
