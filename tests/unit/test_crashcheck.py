"""The crash-state loop's fsck run by the host on the served state (crashhost.check.run_checker),
here on image files with the real checkers: the same exit status as through `sh -c` in the
lab, nothing written, a limit kept."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from flashbed.crashhost.check import run_checker
from flashbed.lab.guest.protocol import StepStatus

MiB = 1 << 20


def image(tmp_path: Path, fs: str) -> Path:
    p = tmp_path / f"{fs}.img"
    with open(p, "wb") as f:
        f.truncate(64 * MiB)
    mkfs = {"ext4": ["mkfs.ext4", "-q", "-F"], "f2fs": ["mkfs.f2fs", "-f", "-q"]}[fs]
    subprocess.run([*mkfs, str(p)], check=True, stdout=subprocess.DEVNULL)
    return p


CHECK = {"ext4": "e2fsck -f -n ${FLASHBED_DEV}", "f2fs": "fsck.f2fs -f --dry-run ${FLASHBED_DEV}"}


@pytest.mark.parametrize("fs", ["ext4", "f2fs"])
def test_the_host_runs_the_checker_on_the_state_as_the_shell_would(fs, tmp_path):
    if not shutil.which(CHECK[fs].split()[0]):
        pytest.skip(f"{fs}'s checker is not installed")
    img = image(tmp_path, fs)
    r = run_checker(CHECK[fs], img, 60)
    assert r["status"] == StepStatus.OK.value and r["rc"] == 0 and r["on_host"]
    # a superblock overwritten: the checker fails, as it does in the lab (no repair here: nothing written)
    with open(img, "r+b") as f:
        f.seek(1024 if fs == "ext4" else 0)
        f.write(os.urandom(8192))
    before = img.read_bytes()
    bad = run_checker(CHECK[fs], img, 60)
    sh = subprocess.run(["/bin/sh", "-c", CHECK[fs]], env=dict(os.environ, FLASHBED_DEV=str(img)),
                        capture_output=True)
    assert bad["status"] == StepStatus.FAILED.value and bad["rc"] == sh.returncode != 0
    assert img.read_bytes() == before


def test_a_checker_over_its_limit_is_killed_and_said(tmp_path):
    r = run_checker("sleep 30", tmp_path / "none.img", 0.5)
    assert r["status"] == StepStatus.TIMEOUT.value and r["seconds"] < 10


def test_the_guest_asks_the_host_and_keeps_its_own_clock_for_the_step(monkeypatch, tmp_path):
    from flashbed.lab.guest import crashstates as guest
    from flashbed.lab.guest.protocol import Call, HostAnswer
    asked = []

    def call_host(run_dir, name, call, timeout, keep=True):
        asked.append((name, call.call, call.args))
        return HostAnswer(ok=True, data={"cmd": call.args["cmd"], "status": "failed", "rc": 4, "seconds": 7.5,
                                         "out": "errors", "on_host": True})
    monkeypatch.setattr(guest, "call_host", call_host)
    r = guest.host_check("fsck.f2fs -f --dry-run ${FLASHBED_DEV}", 300.0)
    r2 = guest.host_check("fsck.f2fs -f --dry-run ${FLASHBED_DEV}", 300.0)
    assert r["status"] is StepStatus.FAILED and r["rc"] == 4 and r["host_seconds"] == 7.5 and r["seconds"] < 7.5
    assert [a[1] for a in asked] == [Call.CRASH_CHECK] * 2 and asked[0][0] != asked[1][0], "each call's name once"
    assert r2["out"] == "errors"
    assert abs(asked[0][2]["now"] - time.time()) < 60, "the lab's present goes with the call"
    monkeypatch.setattr(guest, "call_host", lambda *a, **k: None)
    assert guest.host_check("x", 1.0)["status"] is StepStatus.HANG  # no answer: as a checker that never returned


def test_the_checker_sees_the_lab_s_present_not_the_host_s(tmp_path):
    """A superblock mount time the lab's clock (virtual time: ahead of the host's) set in the host's
    future: e2fsck on the host, given the lab's now, reads it as the lab's e2fsck would."""
    if not shutil.which("debugfs") or not shutil.which("e2fsck"):
        pytest.skip("e2fsprogs is not installed")
    img = image(tmp_path, "ext4")
    subprocess.run(["debugfs", "-w", "-R", "ssv mtime 20300101", str(img)], check=True, capture_output=True)
    lab_now = 1893542400  # 2030-01-02, the day after
    assert "in the future" in run_checker(CHECK["ext4"], img, 60)["out"]
    r = run_checker(CHECK["ext4"], img, 60, now=lab_now)
    assert "in the future" not in r["out"] and r["rc"] == 0
