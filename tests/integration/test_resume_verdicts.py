"""Issue 28: resumes that cannot lie. A crash-state cell (crashstates, and appcheck with the
SQLite logger and its check) is stopped during its workload and during its check, by SIGINT,
SIGTERM and SIGKILL in turn, and the same command run again each time; the attempt that
finishes must give the verdicts of an uninterrupted twin (a killed attempt's checked.jsonl and
workload log once mixed into the next attempt's: data loss that never happened, or "-48 of 273
states were not checked").

The moment is read from the attempt's own directory: during the workload its log
(cslog.jsonl) is there and the state listing (states.json) not yet; during the check at least
one state is in checked.jsonl. Each stop's row (attempt, signal, moment, exit code, the line
flashbed printed) is printed: run with -s to see the table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flashbed.store import RunStore
from flashbed.studies.crashstates import CHECKED_FILE, LOG_FILE, STATES_FILE

# spread: the two cells (each a twin and eight attempts, 35-50 s of a quiet make test) share no fixture
# but the kernel, so under xdist they may run on two workers
pytestmark = [pytest.mark.lab, pytest.mark.spread]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DEVICE = "emmc-8g@64M"
RUNS = {
    "crashstates": ["--study", "crashstates", "--fs", "ext3", "--set", "crashstates.ops=30",
                    "--set", "crashstates.workloads=powercut"],
    "appcheck": ["--workload", str(EXAMPLES / "sqlite-logger.sh"), "--check", str(EXAMPLES / "sqlite-check.sh"),
                 "--fs", "ext4"],
}
STOPS = [(signal.SIGINT, "workload"), (signal.SIGTERM, "check"), (signal.SIGKILL, "workload"),
         (signal.SIGINT, "check"), (signal.SIGTERM, "workload"), (signal.SIGKILL, "check")]
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -signal.SIGKILL}
VERDICTS = ("states", "iterations", "failures")  # with every class:, kind:, mount: and fsck: count


def flashbed(out: Path, args: list[str]) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.Popen([sys.executable, "-m", "flashbed.cli", "run", *args, "--device", DEVICE, "--out",
                             str(out), "--jobs", "1", "--no-report"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            # as a terminal starts it: SIGINT at its default even when the suite runs in
                            # the background (the shell leaves SIGINT ignored there, and Python keeps it so)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def verdicts(out: Path, study: str) -> dict[str, float]:
    (r,) = [r for r in RunStore(out).results() if r.key.study == study]
    assert r.ok, r.headline
    return {m.metric: m.value for m in r.measurements
            if m.metric in VERDICTS or m.metric.split(":")[0] in ("class", "kind", "mount", "fsck")}


def cell_logs(out: Path, study: str) -> Path | None:
    logs = out / "logs"
    found = [d for d in logs.iterdir() if f"__{study}__" in d.name] if logs.is_dir() else []
    return found[0] if found else None


def moment(attempt: Path) -> str:
    checked = attempt / CHECKED_FILE
    if checked.is_file() and checked.read_text().count("\n") >= 1:
        return "check"
    if (attempt / LOG_FILE).is_file() and not (attempt / STATES_FILE).exists():
        return "workload"
    return ""


def stop_at(out: Path, study: str, args: list[str], sig: signal.Signals, want: str, before: int) -> tuple:
    """Start the run, stop it with `sig` once the new attempt is at `want`: (attempt, moment, rc, last line)."""
    proc = flashbed(out, args)
    deadline = time.monotonic() + 600
    seen = ""
    while time.monotonic() < deadline and proc.poll() is None:
        cell = cell_logs(out, study)
        attempts = sorted(cell.glob("attempt-*"), key=lambda p: int(p.name.split("-")[1])) if cell else []
        if len(attempts) > before:
            seen = moment(attempts[-1])
            if seen == want:
                break
            if want == "workload" and seen == "check":
                break  # too late for this moment: the assertion below says so
        time.sleep(0.01)
    assert proc.poll() is None, f"the run ended before its {want}: {proc.communicate()[1][-2000:]}"
    assert seen == want, f"missed the {want}: the attempt was at its {seen or 'start'}"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    time.sleep(0.5)  # the labs die with flashbed (SIGKILL: through their parent-death signal)
    left = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True).stdout.split()
    assert not left, f"processes of the stopped run are left: {left}"
    lines = [ln for ln in err.splitlines() if ln.startswith("flashbed:")]
    return len(attempts), seen, proc.returncode, lines[-1] if lines else ""


@pytest.mark.parametrize("study", list(RUNS))
def test_a_cell_stopped_during_its_workload_or_check_resumes_to_the_twins_verdicts(kernel, tmp_path, study):
    twin = tmp_path / "twin"
    p = flashbed(twin, RUNS[study])
    _, err = p.communicate(timeout=900)
    assert p.returncode == 0, err[-3000:]
    want = verdicts(twin, study)
    assert want["failures"] == 0 and want["iterations"] == want["states"] > 0

    out = tmp_path / "run"
    rows = []
    for i, (sig, at) in enumerate(STOPS):
        attempt, seen, rc, line = stop_at(out, study, RUNS[study], sig, at, before=i)
        rows.append((attempt, sig.name, seen, rc, line))
        assert rc == EXIT[sig], line
        assert not (out / "cells").is_dir() or not [r for r in RunStore(out).results() if r.key.study == study]
    p = flashbed(out, RUNS[study])
    _, err = p.communicate(timeout=900)
    assert p.returncode == 0, err[-3000:]
    got = verdicts(out, study)
    (r,) = [r for r in RunStore(out).results() if r.key.study == study]
    rows.append((len(STOPS) + 1, "-", "to the end", 0, r.headline))
    print(f"\n{study}: twin {json.dumps(want)}")
    print(f"{'attempt':>7}  {'signal':7}  {'moment':10}  {'exit':>4}  line")
    for row in rows:
        print(f"{row[0]:>7}  {row[1]:7}  {row[2]:10}  {row[3]:>4}  {row[4]}")
    print(f"resumed: {json.dumps(got)}; the same as the twin: {got == want}")
    assert got == want
    assert r.attempt_dir.endswith(f"attempt-{len(STOPS) + 1}")
    assert [d.name for d in RunStore(out).logs_dir(r.key).iterdir()] == [f"attempt-{len(STOPS) + 1}"]
