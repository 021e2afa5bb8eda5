"""scripts/fresh-host.sh --user: the name goes into a root shell in the chroot, so only a whole
user name passes, checked before anything else is done."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fresh-host.sh"


@pytest.mark.parametrize("name", ["a;b", "a b", "a$(id)", "a`id`", "Ab", "1a", "-a", "a/b", "a'b", "a" * 33])
def test_a_name_that_is_not_a_user_name_is_refused_in_one_line(name, tmp_path):
    r = subprocess.run(["/bin/sh", str(SCRIPT), "bookworm", "--dir", str(tmp_path / "x"), "--user", name],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("fresh-host: --user '"), r.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("name", ["tester", "_svc", "a-b_1"])
def test_a_user_name_passes_the_name_check(name, tmp_path):
    bin_dir = tmp_path / "bin"  # an `id` that says "not root": the script stops at its next check
    bin_dir.mkdir()
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n")
    (bin_dir / "id").chmod(0o755)
    (bin_dir / "dirname").symlink_to("/usr/bin/dirname")
    r = subprocess.run(["/bin/sh", str(SCRIPT), "bookworm", "--dir", str(tmp_path / "x"), "--user", name],
                       capture_output=True, text=True, timeout=30, env={"PATH": str(bin_dir)})
    assert r.returncode == 2 and "run it as root" in r.stderr and "--user" not in r.stderr, r.stderr
