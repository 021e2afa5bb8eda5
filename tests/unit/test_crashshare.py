"""Several labs sharing one cell's crash states (crashhost/share.py), without a kernel: claims give
each state to exactly one lab, the local pool runs offered helpers only on slots no cell
waits for, the cell's host waits for helpers that started, and the parse reads every lab's
verdicts and the state a helper's lab died on."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from flashbed import executors
from flashbed.crashhost.claims import CLAIMS, Claims
from flashbed.crashhost.host import CrashHost
from flashbed.crashhost.share import DONE, HELPERS, SHARE_FILE, STARTED, Share, records
from flashbed.errors import FlashbedError
from flashbed.executors import LocalExecutor
from flashbed.progress import Progress
from flashbed.studies.crashstates import CHECKED_FILE, STATES_FILE
from tests.unit.test_crashstates import STUDY, boot, cell, lay_out, state
from tests.unit.test_powercut_classify import facts

STATES = [{"id": str(100 + i), "kind": "cut", "acked": 10} for i in range(40)]


def test_claims_give_each_state_to_exactly_one_lab(tmp_path):
    labs = [Claims(tmp_path / CLAIMS, STATES, f"lab{k}") for k in range(3)]
    taken: dict[str, list[str]] = {f"lab{k}": [] for k in range(3)}

    def work(c: Claims) -> None:
        while (st := c.take()) is not None:
            taken[c.owner].append(st["id"])

    with ThreadPoolExecutor(3) as pool:
        list(pool.map(work, labs))
    every = [s for ids in taken.values() for s in ids]
    assert sorted(every) == sorted(s["id"] for s in STATES) and len(every) == len(set(every))
    assert not labs[0].left()
    assert (tmp_path / CLAIMS / "000000").read_text() in taken


def test_a_stop_ends_every_labs_taking(tmp_path):
    a, b = Claims(tmp_path / CLAIMS, STATES, "a"), Claims(tmp_path / CLAIMS, STATES, "b")
    assert a.take()["id"] == "100" and b.take()["id"] == "101" and b.left()
    a.stop()
    assert b.take() is None and a.take() is None and not b.left()


class FakeLog:
    def __init__(self):
        self.served: list[str] = []

    def crash_switch(self, state):
        if state == "102":
            raise FlashbedError("crash state 102: the log has 20 records")
        self.served.append(state)
        return {"switch_ns": 7}


def test_the_host_hands_out_states_until_none_is_left(tmp_path, monkeypatch):
    import flashbed.crashhost.host as hostmod
    monkeypatch.setattr(hostmod, "session_has", lambda dev, cap: True)
    parts = []
    log = FakeLog()
    host = CrashHost(log, on_part=lambda done, total, what: parts.append((done, total, what)))  # type: ignore[arg-type]
    host.claims = Claims(tmp_path / CLAIMS, STATES[:3], "main")
    host._states = [0, 3]
    got = [host.crash_next({}) for _ in range(4)]
    assert got[0] == {"state": STATES[0], "switch_ns": 7}
    assert got[2] == {"state": STATES[2], "error": "crash state 102: the log has 20 records"}
    assert got[3] == {"done": True} and host.current_state is None
    assert log.served == ["100", "101"] and parts[-1] == (3, 3, "crash states")


def test_offered_work_runs_only_where_no_cell_waits(tmp_path):
    ran: list[str] = []
    lock = threading.Lock()

    def task(item, on_part):
        sp = executors.spawner()
        assert sp is not None
        if item == "long":
            offered = [sp.spawn(lambda k=k: ran.append(f"helper{k}"), f"h{k}") for k in range(sp.capacity())]
            # the other cells come and go meanwhile, then the helpers run: waited for, not a fixed time,
            # which a loaded host (make test beside lab boots) may not give the other cells
            deadline = time.monotonic() + 60
            while not all(f"helper{k}" in ran for k in range(len(offered))) and time.monotonic() < deadline:
                time.sleep(0.01)
            for o in offered:
                o.cancel()
        with lock:
            ran.append(item)
        return item

    def run(jobs, items):
        ran.clear()
        LocalExecutor(jobs).run(task, items, str, lambda i, r: r, Progress(len(items), stream=open("/dev/null", "w")))
        return list(ran)

    # two slots: the short cells first; the helper only once no cell waits
    order = run(2, ["long", "a", "b"])
    assert order.index("helper0") > max(order.index("a"), order.index("b")) and order[-1] == "long"
    assert run(1, ["long"]) == ["long"]  # no slot to spare: never started, then cancelled
    assert executors.spawner() is None  # outside the pool's tasks


def test_the_cell_waits_for_started_helpers_and_records_how_labs_ended(tmp_path):
    share = Share(tmp_path, STATES, None, watchdog=30)
    d = tmp_path / HELPERS / "1"
    d.mkdir(parents=True)
    (d / STARTED).touch()

    def finish():
        time.sleep(0.5)
        (d / DONE).write_text(json.dumps({"lab": "helper-1", "boot": "done", "in_flight": None}))

    threading.Thread(target=finish).start()
    t = time.monotonic()
    share.settle({"boot": "done", "in_flight": None})
    assert time.monotonic() - t >= 0.4
    labs = json.loads((tmp_path / SHARE_FILE).read_text())["labs"]
    assert [x["lab"] for x in labs] == ["main", "helper-1"] and not (tmp_path / CLAIMS).exists()


def test_a_helper_gone_silent_is_given_up_and_said(tmp_path):
    share = Share(tmp_path, STATES, None, watchdog=0.5)
    d = tmp_path / HELPERS / "2"
    d.mkdir(parents=True)
    (d / STARTED).touch()
    share.settle({"boot": "done"})
    (lost,) = [x for x in json.loads((tmp_path / SHARE_FILE).read_text())["labs"] if x["lab"] == "helper-2"]
    assert lost["boot"] == "lost" and "no word from it" in lost["error"]


def test_parse_reads_every_labs_verdicts_and_the_state_a_helper_died_on(tmp_path):
    mine = [state("100", "flush", facts()), state("101", "cut", facts())]
    lay_out(tmp_path, mine)
    listed = [{"id": s, "kind": "cut", "acked": 10} for s in ("100", "101", "102", "103")]
    (tmp_path / STATES_FILE).write_text(json.dumps({"records": 50, "log_bytes": 100, "states": listed}))
    h = tmp_path / HELPERS / "1"
    h.mkdir(parents=True)
    (h / CHECKED_FILE).write_text(json.dumps(state("102", "cut", facts())) + "\n")
    (tmp_path / SHARE_FILE).write_text(json.dumps({"labs": [
        {"lab": "main", "boot": "done", "in_flight": None},
        {"lab": "helper-1", "boot": "killed", "in_flight": "103", "state": listed[3], "console": "c.log"}]}))
    assert [r["id"] for r in records(tmp_path, CHECKED_FILE)] == ["100", "101", "102"]
    out = STUDY.parse(cell(), [boot()], tmp_path)
    v = {m.metric: m.value for m in out.measurements}
    assert (v["iterations"], v["class:hang"]) == (4, 1)
    (f,) = out.extra["failures"]
    assert f["state"] == "103" and "stopped answering" in f["why"] and out.status == "ok"


def test_a_lost_helper_leaves_its_states_unchecked_as_flashbeds_error(tmp_path):
    lay_out(tmp_path, [state("100", "flush", facts())])
    listed = [{"id": s, "kind": "cut", "acked": 10} for s in ("100", "101")]
    (tmp_path / STATES_FILE).write_text(json.dumps({"records": 50, "states": listed}))
    (tmp_path / SHARE_FILE).write_text(json.dumps({"labs": [
        {"lab": "main", "boot": "done"}, {"lab": "helper-1", "boot": "lost", "error": "no word from it for 60 s"}]}))
    out = STUDY.parse(cell(), [boot()], tmp_path)
    assert out.status == "error" and "1 of 2 states were not checked" in out.error
    assert "helper-1: no word from it" in out.error


@pytest.mark.parametrize("n, jobs, want", [(100, 2, 1), (100, 8, 4), (10, 8, 0)])
def test_helpers_are_offered_only_for_enough_states(tmp_path, n, jobs, want):
    offered = []

    class Sp:
        def capacity(self):
            return jobs - 1

        def spawn(self, fn, name):
            offered.append(name)
            return type("H", (), {"cancel": lambda self: None})()

    from flashbed.cell import help_check
    from flashbed.crashhost.share import Helpers
    states = [{"id": str(i), "kind": "cut", "acked": 1} for i in range(n)]
    Share(tmp_path, states, Helpers(Sp(), None, cell(), tmp_path / "scratch", help_check), watchdog=1)  # type: ignore[arg-type]
    assert len(offered) == want


def test_the_guest_takes_states_from_the_host_until_it_says_done(monkeypatch):
    from flashbed.lab.guest import crashstates as guest
    from flashbed.lab.guest.protocol import CrashCheckSpec, HostAnswer
    answers = [HostAnswer(True, {"state": STATES[0], "switch_ns": 5, "damaged_ranges": []}),
               HostAnswer(True, {"state": STATES[1], "error": "crash state 101: the log has 20 records"}),
               HostAnswer(True, {"done": True})]
    calls = []
    monkeypatch.setattr(guest, "call_host", lambda run, name, call, timeout, keep: calls.append(call) or answers.pop(0))
    c = CrashCheckSpec(work={}, states="", device="", recover={}, out="", claim=True, watchdog=9.0)
    got = list(guest.served(c, []))
    assert [(i, st["id"]) for i, st, _, _ in got] == [(0, "100"), (1, "101")]
    assert got[0][2].ok and got[0][2].data["switch_ns"] == 5
    assert not got[1][2].ok and "the log has 20 records" in got[1][2].error
    assert [x.call for x in calls] == ["crash-next"] * 3 and calls[0].args == {"watchdog": 9.0}
    # a replay: the listing's states, nobody serving them
    plain = CrashCheckSpec(work={}, states="", device="", recover={}, out="", serve=False)
    assert [(i, st["id"], a) for i, st, a, _ in guest.served(plain, STATES[:2])] == [(0, "100", None), (1, "101", None)]


def test_a_helper_gets_the_checks_inputs_as_they_are(tmp_path):
    """A helper lab runs the user's check from its own directory: staged executable, as the cell's."""
    from flashbed.crashhost.share import stage_inputs
    from flashbed.studies import STUDIES
    cell_dir, mine = tmp_path / "cell", tmp_path / "helper"
    (cell_dir / "fio-state").mkdir(parents=True)
    mine.mkdir()
    for name in STUDIES["appcheck"].check_inputs:
        if name != "fio-state":
            (cell_dir / name).write_text(name)
    (cell_dir / "check.sh").chmod(0o755)
    (cell_dir / "fio-state" / "local-job-0").write_text("state")
    (cell_dir / "console.log").write_text("not an input")
    stage_inputs(STUDIES["appcheck"].check_inputs, cell_dir, mine)
    assert (mine / "check.sh").stat().st_mode & 0o777 == 0o755
    assert (mine / "fio-state" / "local-job-0").read_text() == "state"
    assert {"cslog.jsonl", "states.json", "check.sh", "fio-check.sh", "verify.fio"} <= {p.name for p in mine.iterdir()}
    assert not (mine / "console.log").exists()
