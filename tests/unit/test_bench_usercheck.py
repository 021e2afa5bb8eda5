"""flashbed bench usercheck: the user's check on the host, alone, the sandbox's own cost, and in it."""

import io

import pytest

from flashbed.bench import usercheck
from flashbed.crashhost import sandbox

WHY_NOT = sandbox.available()


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
    assert usercheck.WALCHECK.count("dd if=wal.log") == 1 and "while" in usercheck.WALCHECK
