"""`flashbed bench crashstates` with your workload: its cases are the appcheck study's, as `run` makes them."""

from pathlib import Path

from flashbed.bench.crashstates import cases
from flashbed.studies import STUDIES

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_a_user_workload_gives_your_check_and_the_trivial_floor(tmp_path):
    rows = cases(str(EXAMPLES / "sqlite-logger.sh"), str(EXAMPLES / "sqlite-check.sh"), 60, True, tmp_path)
    assert [r.label for r in rows] == ["check: sqlite-check.sh", "check: trivial (exit 0)"]
    for r in rows:
        p = STUDIES["appcheck"].params(**r.params)  # parameters the study accepts
        assert r.study == "appcheck" and p.file.path.endswith("sqlite-logger.sh") and p.dedup
    assert rows[0].params["check"].endswith("sqlite-check.sh")
    assert rows[1].params["check"] == str((tmp_path / "trivial-check.sh").resolve())
