"""`lab exec` exits as a `set -e` script of its steps would, and never attaches one image twice."""

from __future__ import annotations

import pytest

from flashbed.errors import FlashbedError
from flashbed.lab import labexec
from flashbed.lab.boundary import StepResult


def st(i, status="ok", rc=0):
    return StepResult(name=f"s{i}", cmd="x", status=status, rc=rc, seconds=0.1, stdout="", stderr="")


def test_the_first_step_that_failed_gives_its_exit_code():
    assert labexec.exit_code(["true", "true"], [st(0), st(1)]) == (0, "")
    assert labexec.exit_code(["exit 3", "true"], [st(0, "failed", 3), st(1)]) == (3, "step 1 ('exit 3') exited 3")
    assert labexec.exit_code(["true", "exit 3"], [st(0), st(1, "failed", 3)])[0] == 3


def test_a_timed_out_step_exits_124_and_a_step_that_never_ran_1():
    rc, why = labexec.exit_code(["sleep 9"], [st(0, "timeout", None)])
    assert rc == 124 and "ran past its limit of --timeout" in why
    assert labexec.exit_code(["true", "true"], [st(0)]) == (1, "step 2 ('true') did not run")
    assert labexec.exit_code(["kill -9 $$"], [st(0, "failed", -9)])[0] == 1  # no exit code of its own: 1


def test_one_file_given_twice_as_disks_is_refused(tmp_path):
    img = tmp_path / "F"
    img.write_bytes(b"\0" * 4096)
    (tmp_path / "link").symlink_to(img)
    with pytest.raises(FlashbedError, match=r"--disk .* and --disk .* are the same file: give it once"):
        labexec.check_disks([img, img], ())
    with pytest.raises(FlashbedError, match="the same file"):
        labexec.check_disks([img, tmp_path / "link"], ())
    other = tmp_path / "G"
    other.write_bytes(b"\0" * 4096)
    assert len(labexec.check_disks([img, other], ())) == 2
