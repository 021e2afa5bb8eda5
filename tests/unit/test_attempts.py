"""Each attempt at a cell in a directory of its own: a crash-state cell whose first attempt
was interrupted mid-check (its guest had appended states to checked.jsonl and the workload's
log) gives, resumed, the verdicts of an uninterrupted run, and `crashstate replay` reads the
files of the attempt that made the result. A fake lab writes what the guest would; no kernel."""

from __future__ import annotations

import json

import pytest

from flashbed.crashreplay import find
from flashbed.execute import execute
from flashbed.executors import LocalExecutor
from flashbed.lab.boundary import BootResult
from flashbed.plan import PlanRequest, make_plan
from flashbed.store import RunStore
from flashbed.studies.base import CRASHLOG
from flashbed.studies.crashstates import CHECKED_FILE, LOG_FILE, STATES_FILE
from tests.unit.test_crashstates import boot as crash_boot
from tests.unit.test_crashstates import state
from tests.unit.test_powercut_classify import facts

LOSS = facts(verify={"n_loss": 1, "loss": ["f00003: acked file missing"]})
STATES = ["100", "101", "102"]


class Session:
    def __init__(self, *a, **kw):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def disks(self):
        return ()

    def nandsim(self):
        return None

    def mem_mb(self):
        return 256


class Lab:
    """The guest of one attempt: it appends (as crashstates.py does) to the workload's log and
    to checked.jsonl; `interrupt` stops it after the first state, as a Ctrl-C would."""

    release = "test"

    def __init__(self, verdict: dict, interrupt: bool):
        self.verdict, self.interrupt = verdict, interrupt

    def open_session(self, device, scratch, seed=1, pace="real", clock="real"):
        return Session()

    def boot(self, spec, host=None, kill=None):
        run = spec.run_dir
        with open(run / LOG_FILE, "a") as f:
            f.write(json.dumps({"e": "intent", "seq": 1, "k": "creat", "n": 0, "m": 5}) + "\n")
        (run / STATES_FILE).write_text(json.dumps({"records": 2, "flushes": 1, "log_bytes": 10, "states": [
            {"id": s, "kind": "flush", "acked": 10} for s in STATES]}))
        (run / CRASHLOG).mkdir(exist_ok=True)
        (run / CRASHLOG / "events").write_bytes(b"x" * 10)
        for s in STATES:
            with open(run / CHECKED_FILE, "a") as f:
                f.write(json.dumps(state(s, "flush", self.verdict)) + "\n")
            if self.interrupt:
                raise KeyboardInterrupt
        (run / "console.log").write_text("")
        b = crash_boot()
        return BootResult(b.status, b.steps, 1.0, 2.0, str(run / "console.log"), 0, "test")


class Labs:
    def __init__(self, lab: Lab):
        self.lab = lab

    def __call__(self, cell):
        return self.lab

    def describe(self):
        return {"kernel": {"name": "test"}, "kernels": {}}


@pytest.fixture(autouse=True)
def _own_stop_flag(monkeypatch):
    """The interrupted attempt's Ctrl-C stops this test's labs only (kill_all sets a process-wide flag)."""
    import threading

    from flashbed import stopping
    monkeypatch.setattr(stopping, "_STOPPING", threading.Event())


@pytest.fixture
def plan():
    return make_plan(PlanRequest(fs=("ext4",), devices=("emmc-8g@64M",), studies=("crashstates",),
                                 overrides={"crashstates": {"workloads": ("powercut",)}}, clocks=()))


def _run(plan, store, lab):
    return execute(plan, store, Labs(lab), LocalExecutor(1), stream=open("/dev/null", "w"))


def test_an_interrupted_attempt_leaves_nothing_the_next_one_reads(plan, tmp_path):
    store = RunStore(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):  # the first attempt lost a state before it was stopped
        _run(plan, store, Lab(LOSS, interrupt=True))
    (key,) = [c.key for c in plan.cells]
    assert store.load(key) is None
    (r,) = _run(plan, store, Lab(facts(), interrupt=False))
    assert r.ok and r.extra["failures"] == [], r.headline  # the uninterrupted twin's verdicts
    assert {m.metric: m.value for m in r.measurements}["class:clean"] == len(STATES)
    attempt = store.attempt_dir(r)
    assert attempt == store.logs_dir(key) / "attempt-2" and r.attempt_dir == str(attempt.relative_to(store.root))
    assert len((attempt / CHECKED_FILE).read_text().splitlines()) == len(STATES)
    assert len((attempt / LOG_FILE).read_text().splitlines()) == 1
    assert [p.name for p in store.logs_dir(key).iterdir()] == ["attempt-2"]  # the killed attempt's files: gone


def test_replay_reads_the_attempt_that_made_the_result(plan, tmp_path):
    store = RunStore(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        _run(plan, store, Lab(facts(), interrupt=True))
    (r,) = _run(plan, store, Lab(LOSS, interrupt=False))
    assert len(r.extra["failures"]) == len(STATES)
    t = find(str(store.root), f"{r.key.id}:101")
    assert t.logs == store.root / r.attempt_dir and (t.logs / CRASHLOG).is_dir()


def test_one_cell_alone_is_laid_out_as_a_run_that_the_store_and_replay_read(plan, tmp_path):
    """cell.run_alone (the scripts and lab tests that run one cell): the cell in a run directory
    of its own, its result stored and its failed states found by replay, as a planned run's are."""
    from flashbed.cell import run_alone
    cell = plan.cells[0]
    store, r = run_alone(cell, Lab(LOSS, interrupt=False), tmp_path / "one")
    assert store.root == tmp_path / "one" and json.loads(store.manifest_path.read_text())["run_id"] == "one"
    assert len(r.extra["failures"]) == len(STATES)
    stored = store.load(cell.key)
    assert stored is not None and stored.headline == r.headline and stored.extra["failures"] == r.extra["failures"]
    assert find(str(store.root), f"{r.key.id}:101").logs == store.logs_dir(cell.key)


def test_two_attempts_never_share_a_directory(tmp_path):
    store = RunStore(tmp_path)
    from flashbed.results import CellKey
    key = CellKey("emmc-8g@64M", "ext4", "crashstates", "powercut")
    dirs = [store.new_attempt(key) for _ in range(3)]
    assert [d.name for d in dirs] == ["attempt-1", "attempt-2", "attempt-3"] and all(d.is_dir() for d in dirs)
    (dirs[0] / "x").write_text("")
    import shutil
    shutil.rmtree(dirs[1])
    assert store.new_attempt(key).name == "attempt-4"  # after the highest, never a gap an old one had


def test_run_cell_refuses_a_directory_an_earlier_attempt_wrote(plan, tmp_path):
    from flashbed.cell import run_cell
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / CHECKED_FILE).write_text("{}\n")
    r = run_cell(plan.cells[0], Lab(facts(), interrupt=False), logs, tmp_path / "scratch")
    assert r.status == "error" and "not empty" in r.error
    assert (logs / CHECKED_FILE).read_text() == "{}\n"


def test_a_full_disk_stops_the_run_in_one_line_and_the_cell_runs_again(plan, tmp_path, monkeypatch):
    """Issue 28, 13: a full disk under --out was recorded as a lab crash, exit 0. The guest's writes
    fail there (the agent leaves no result): the cell is an error that a resume runs again, and the
    run stops with the disk's line."""
    from flashbed import cell
    from flashbed.errors import FlashbedError

    class Full(Lab):
        def boot(self, spec, host=None, kill=None):
            (spec.run_dir / "console.log").write_text("")
            return BootResult("crash", [], 1.0, 2.0, str(spec.run_dir / "console.log"), 1, "test")

    monkeypatch.setattr(cell, "_disk_full", lambda path: True)
    store = RunStore(tmp_path / "run")
    with pytest.raises(FlashbedError, match=r"the disk holding .* is full: free some space, then run the same"):
        _run(plan, store, Full(facts(), interrupt=False))
    (r,) = list(store.results())
    assert r.status == "error" and r.extra["disk_full"] and not store.finished(r.key)
