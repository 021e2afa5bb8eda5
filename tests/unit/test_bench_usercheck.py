"""flashbed bench usercheck: the user's check on the host, alone, the sandbox's own cost, and in it."""

import fnmatch
import io
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from flashbed.bench import usercheck
from flashbed.crashhost import sandbox

WHY_NOT = sandbox.available()
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(bool(WHY_NOT), reason=f"no check sandbox here: {WHY_NOT}")
def test_the_bench_prints_the_three_medians_of_a_check_that_passes():
    out = io.StringIO()
    med = usercheck.bench(None, 3, 1, out)
    assert list(med) == ["the check alone (no sandbox)", "the sandbox with `true`", "the check in the sandbox"]
    assert all(m.wall > 0 for m in med.values())
    assert "3 records acknowledged" in out.getvalue() and out.getvalue().count(" ms CPU") == 3


def test_the_default_check_reads_each_acknowledged_record_with_its_own_dd(tmp_path):
    tree, _, acked = usercheck.lay_out(tmp_path, 5)
    assert (tree / "wal.log").stat().st_size == 5 * usercheck.RECORD
    assert acked.read_text() == "records=5\n"
    check = usercheck.default_check()
    assert check.count("dd if=wal.log") == 1 and "while" in check


def _walcheck(tree: Path, acked: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", usercheck.default_check()], cwd=tree, capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "FLASHBED_ACKED": str(acked)}, timeout=60)


def test_the_default_check_is_the_example_itself_and_the_package_ships_it(tmp_path):
    """One text: the bench reads examples/walcheck.sh through the package's data, which a wheel
    takes (pyproject's package-data names it), not a copy kept beside the example."""
    example = ROOT / "examples" / "walcheck.sh"
    assert usercheck.default_check() == example.read_text()
    assert (ROOT / "src" / "flashbed" / "bench" / "walcheck.sh").resolve() == example.resolve()
    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["flashbed"]
    assert any(fnmatch.fnmatch("bench/walcheck.sh", glob) for glob in shipped), shipped
    # it passes on the bench's log and names the first damaged record, as the example says
    tree, _, acked = usercheck.lay_out(tmp_path, 5)
    ok = _walcheck(tree, acked)
    assert ok.returncode == 0 and ok.stdout.strip() == "ok: the 5 acknowledged records are there", ok
    with open(tree / "wal.log", "r+b") as f:
        f.seek(2 * usercheck.RECORD)
        f.write(b"X")
    bad = _walcheck(tree, acked)
    assert bad.returncode == 1 and bad.stdout.strip() == "record 3 of the 5 acknowledged is lost or damaged", bad
