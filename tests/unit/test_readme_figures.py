"""The README's measured figures are written by scripts/readme_figures.py from its run (issue 40):
its rewriting of the marked block and its reading of the suites' closing lines."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "readme_figures.py"
spec = importlib.util.spec_from_file_location("readme_figures", SCRIPT)
rf = sys.modules["readme_figures"] = importlib.util.module_from_spec(spec)  # its dataclass looks itself up
spec.loader.exec_module(rf)


def _fig(what, seconds, counts=""):
    return rf.Figure(what, seconds, counts, 2, "2026-12-04", "abc1234")


def test_the_measured_line_is_replaced_and_every_other_line_kept():
    readme = rf.README.read_text()
    assert rf.BEGIN in readme and rf.END in readme  # the block the script writes is there
    text = f"intro\n{rf.BEGIN}\n- `make demo`: 1 min 0 s (old)\n- `make test`: 20 min 0 s (old)\n{rf.END}\ntail\n"
    out = rf.rewrite(text, [_fig("test", 661.4, "1 345 passed (Python)")])
    assert out == (f"intro\n{rf.BEGIN}\n- `make demo`: 1 min 0 s (old)\n- `make test`: 11 min 1 s, 1 345 passed "
                   f"(Python) (2 CPUs, 2026-12-04, commit abc1234)\n{rf.END}\ntail\n")
    assert rf.rewrite(out, []) == out


def test_a_readme_without_its_markers_is_one_line_and_nothing_is_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(rf, "README", tmp_path / "README.md")
    rf.README.write_text("no markers\n")
    monkeypatch.setattr(rf, "measure", lambda what: pytest.fail("measured without a place to write it"))
    assert rf.main(["test"]) == 2
    assert rf.README.read_text() == "no markers\n"
    assert rf.main(["nonsense"]) == 2


def test_the_counts_come_from_the_suites_own_closing_lines():
    out = ("test result: ok. 90 passed; 0 failed; 0 ignored\n"
           "test result: ok. 28 passed; 0 failed; 0 ignored\n"
           "1343 passed, 2 skipped in 640.21s (0:10:40)\n")
    assert rf.counts(out) == "1 343 passed, 2 skipped (Python); 118 passed (Rust)"
    assert rf.counts("nothing ran\n") == ""
