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


# make test's output as CI saves it (`/usr/bin/time -v .ci/run > LOG 2>&1`), cut to its closing lines
PASSED_LOG = """\
cargo test --release --locked --manifest-path emulator/Cargo.toml
test result: ok. 26 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s
test result: ok. 17 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 24.78s
.venv/bin/python -m pytest -q -n auto --dist loadgroup --no-loadscope-reorder
........................................................................ [ 97%]
============================= slowest 25 durations =============================
141.56s call     tests/integration/test_userwork_lab.py::test_a_check_over_its_limit_is_recorded
1625 passed, 3 skipped in 834.97s (0:13:54)
\tCommand being timed: "./.ci/run"
\tUser time (seconds): 700.92
\tElapsed (wall clock) time (h:mm:ss or m:ss): 15:38.59
\tExit status: 0
"""
FAILED_LOG = """\
test result: ok. 26 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s
FAILED tests/integration/test_qemu_board.py::test_a_power_cut_on_the_emulated_board_is_a_real_restart
1 failed, 1623 passed, 3 skipped in 860.34s (0:14:20)
make: *** [Makefile:26: test] Error 1
\tElapsed (wall clock) time (h:mm:ss or m:ss): 16:03.79
\tExit status: 2
"""


def _readme(tmp_path, monkeypatch):
    monkeypatch.setattr(rf, "README", tmp_path / "README.md")
    rf.README.write_text(f"intro\n{rf.BEGIN}\n- `make test`: 20 min 0 s (old)\n{rf.END}\n")
    monkeypatch.setattr(rf, "measure", lambda what: pytest.fail("ran a measurement for a log"))
    return rf.README


def test_a_saved_log_gives_the_line_its_counts_and_its_own_whole_process_time(tmp_path, monkeypatch):
    readme = _readme(tmp_path, monkeypatch)
    (tmp_path / "ci.log").write_text(PASSED_LOG)
    assert rf.main(["test", "--from-log", str(tmp_path / "ci.log"), "--commit", "c90f7f8"]) == 0
    (line,) = [x for x in readme.read_text().splitlines() if x.startswith("- `make test`")]
    assert line.startswith("- `make test`: 15 min 39 s, 1 625 passed, 3 skipped (Python); 43 passed (Rust) (")
    assert line.endswith(", commit c90f7f8)")
    # --seconds is the run's time when given (the log's pytest 'in 834.97s' is only its Python part)
    assert rf.main(["--from-log", str(tmp_path / "ci.log"), "--seconds", "11:02", "--commit", "c90f7f8"]) == 0
    assert "- `make test`: 11 min 2 s, 1 625 passed" in readme.read_text()


def test_times_as_timers_print_them():
    assert rf.clock_seconds("835") == 835 and rf.clock_seconds("13:55") == 835
    assert rf.clock_seconds("1:02:03") == 3723 and rf.clock_seconds("15m38.590s") == pytest.approx(938.59)
    assert rf.logged_seconds("x\nreal\t9m41.250s\nuser\t1m0.000s\n") == pytest.approx(581.25)
    assert rf.logged_seconds("1625 passed in 834.97s (0:13:54)\n") is None  # pytest's part is not the whole
    with pytest.raises(ValueError, match="not a time"):
        rf.clock_seconds("ten minutes")


@pytest.mark.parametrize("log", [
    FAILED_LOG,
    PASSED_LOG.replace("1625 passed, 3 skipped", "1624 passed, 3 skipped, 1 error"),
    PASSED_LOG.replace("test result: ok. 17 passed; 0 failed", "test result: FAILED. 16 passed; 1 failed"),
    PASSED_LOG.replace("Exit status: 0", "Exit status: 2"),
    PASSED_LOG.replace("1625 passed, 3 skipped in 834.97s (0:13:54)\n", ""),  # pytest never ended
    PASSED_LOG.replace("\tElapsed (wall clock) time (h:mm:ss or m:ss): 15:38.59\n", ""),  # no time, none given
], ids=["failed", "error", "rust", "exit", "no-pytest", "no-time"])
def test_a_log_of_a_failed_or_unfinished_run_writes_nothing(tmp_path, monkeypatch, capsys, log):
    readme = _readme(tmp_path, monkeypatch)
    before = readme.read_text()
    (tmp_path / "ci.log").write_text(log)
    assert rf.main(["--from-log", str(tmp_path / "ci.log")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("readme_figures: ") and "Traceback" not in err[0], err
    assert readme.read_text() == before


@pytest.mark.parametrize("argv", [["--from-log"], ["--seconds", "10"], ["test", "demo", "--from-log", "x.log"],
                                  ["--from-log", "x.log", "--seconds", "soon"], ["--from-log", "missing.log"],
                                  ["--quick"]])
def test_bad_arguments_are_one_line_and_nothing_is_read_or_run(tmp_path, monkeypatch, capsys, argv):
    readme = _readme(tmp_path, monkeypatch)
    before = readme.read_text()
    monkeypatch.chdir(tmp_path)
    assert rf.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("readme_figures: "), err
    assert readme.read_text() == before
