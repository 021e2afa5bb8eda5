"""Issue 27: the two commands on a stock machine. FUSE that cannot be mounted (no
/dev/fuse, no right to mount), one line before anything runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from flashbed.cli import main
from flashbed.devices import emulator

def status_file(tmp_path: Path, eff: int, bnd: int) -> Path:
    p = tmp_path / "status"
    p.write_text(f"Name:\tpython3\nCapInh:\t0000000000000000\nCapPrm:\t{eff:016x}\nCapEff:\t{eff:016x}\n"
                 f"CapBnd:\t{bnd:016x}\n")
    return p


ALL = (1 << 41) - 1
NO_ADMIN = ALL & ~(1 << emulator.CAP_SYS_ADMIN)


def test_no_dev_fuse_names_the_device_flag_and_the_module(tmp_path):
    line = emulator.fuse_problem(tmp_path / "fuse")
    assert line.startswith(f"no {tmp_path / 'fuse'}: ") and "--device /dev/fuse" in line and "modprobe fuse" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root opens any device node")
def test_a_dev_fuse_users_cannot_open_names_its_mode(tmp_path):
    dev = tmp_path / "fuse"
    dev.touch(mode=0o600)
    dev.chmod(0o000)
    assert "mode 0666" in emulator.fuse_problem(dev)


def test_root_without_sys_admin_names_the_capability(tmp_path):
    dev = tmp_path / "fuse"
    dev.touch()
    line = emulator.fuse_problem(dev, euid=0, status=status_file(tmp_path, NO_ADMIN, ALL))
    assert "root without CAP_SYS_ADMIN" in line and "--cap-add SYS_ADMIN" in line
    assert emulator.fuse_problem(dev, euid=0, status=status_file(tmp_path, ALL, ALL)) == ""


def test_an_ordinary_user_needs_fusermount3_and_sys_admin_in_the_bounding_set(tmp_path, monkeypatch):
    dev = tmp_path / "fuse"
    dev.touch()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "sudo apt-get install fuse3" in emulator.fuse_problem(dev, euid=1000, status=status_file(tmp_path, 0, ALL))
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/fusermount3")
    assert emulator.fuse_problem(dev, euid=1000, status=status_file(tmp_path, 0, ALL)) == ""
    line = emulator.fuse_problem(dev, euid=1000, status=status_file(tmp_path, 0, NO_ADMIN))
    assert "bounding set" in line and "--cap-add SYS_ADMIN" in line


@pytest.mark.parametrize("argv", [
    ["run", "--fs", "ext4", "--study", "mkfs", "--device", "emmc-8g@64M"],
    ["probe", "emmc-8g@64M"],
    ["lab", "exec", "--device", "emmc-8g@64M", "--", "true"],
])
def test_a_command_on_an_emulated_device_without_fuse_is_one_line_and_writes_nothing(tmp_path, monkeypatch,
                                                                                     capsys, argv):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(emulator, "fuse_problem", lambda: "no /dev/fuse: in a container, run it with --device /dev/fuse")
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err and "--device /dev/fuse" in err, err
    assert list(tmp_path.iterdir()) == []  # no run or probe directory


def test_a_plain_file_device_needs_no_fuse(tmp_path, monkeypatch):
    from flashbed.plan import PlanRequest, make_plan
    plan = make_plan(PlanRequest(fs=("ext4",), devices=("plain-file@512M",), studies=("mkfs",)))
    assert {d.backend for d in plan.devices.values()} == {"file"}
