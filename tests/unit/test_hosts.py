"""Issue 27: the two commands on a stock machine. Setup's refusals (a too-old cargo, no
network), each one line and exit 2 with nothing installed; FUSE that cannot be mounted
(no /dev/fuse, no right to mount), one line before anything runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from flashbed.cli import main
from flashbed.devices import emulator

pytestmark = pytest.mark.long

REPO = Path(__file__).resolve().parents[2]


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


# --- setup ----------------------------------------------------------------------------------

def setup_copy(tmp_path: Path) -> Path:
    """setup.sh and what it reads before installing anything, in a directory of their own."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    (root / "emulator").mkdir()
    shutil.copy(REPO / "scripts" / "setup.sh", root / "scripts" / "setup.sh")
    shutil.copy(REPO / "emulator" / "Cargo.toml", root / "emulator" / "Cargo.toml")
    return root


def fake_tool(bindir: Path, name: str, output: str) -> None:
    bindir.mkdir(exist_ok=True)
    p = bindir / name
    p.write_text(f"#!/bin/sh\necho '{output}'\n")
    p.chmod(0o755)


def rust_version() -> str:
    for line in (REPO / "emulator" / "Cargo.toml").read_text().splitlines():
        if line.startswith("rust-version"):
            return line.split('"')[1]
    raise AssertionError("emulator/Cargo.toml declares no rust-version")


@pytest.mark.skipif(not shutil.which("dpkg-query"), reason="setup is for Debian (dpkg)")
def test_setup_refuses_a_too_old_cargo_in_one_line_before_installing_anything(tmp_path):
    root = setup_copy(tmp_path)
    fake_tool(tmp_path / "bin", "cargo", "cargo 1.63.0")
    fake_tool(tmp_path / "bin", "rustc", "rustc 1.63.0 (4b91a6ea7 2022-08-08)")
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHON": "/usr/bin/python3"}
    r = subprocess.run(["sh", str(root / "scripts" / "setup.sh")], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "Rust 1.63.0" in r.stderr and f"Rust {rust_version()} or newer" in r.stderr
    assert "rustup" in r.stderr, r.stderr
    assert "installing" not in r.stdout and not (root / ".venv").exists()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="an offline network namespace needs root")
def test_setup_without_network_says_so_in_one_line(tmp_path):
    clone = tmp_path / "flashbed"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(clone)], check=True, timeout=120)
    # this tree's setup, its emulator's lock and manifest (the clone has the last commit's)
    for f in ("scripts/setup.sh", "emulator/Cargo.toml", "emulator/Cargo.lock", "pyproject.toml"):
        shutil.copy(REPO / f, clone / f)
    env = {**os.environ, "CARGO_HOME": str(tmp_path / "cargo")}
    r = subprocess.run(["unshare", "--net", "sh", "scripts/setup.sh"], cwd=clone, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "cannot reach the package registry" in r.stderr, r.stderr
    assert "check the network" in r.stderr
