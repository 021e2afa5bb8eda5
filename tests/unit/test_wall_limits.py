"""Issue 28: limits on the host's clock too. In virtual time a program that only computes stops
the guest's clock, so no guest-side limit fires: the guest asks the lab to bound it in wall-clock
time (Call.WALL_LIMIT, guestlib.wall_limit), the lab (uml.WallLimits) kills itself when one runs
out and says which; a crash-state cell records that state's hang with the reason. No kernel."""

from __future__ import annotations

import json
import threading
import time

from flashbed.lab import uml
from flashbed.lab.guest import guestlib
from flashbed.lab.guest.protocol import Call, HostCall
from flashbed.status import BootStatus
from flashbed.studies.crashstates import STATES_FILE
from tests.unit.test_crashstates import STUDY, boot, cell, lay_out, state
from tests.unit.test_powercut_classify import facts

# how long a test waits for what a limit's timer does: the timer fires at its limit, but a loaded host
# (make test beside lab boots) may run its thread much later; a test waits for the effect, not a time
PATIENCE_S = 60.0


def _until(done) -> bool:
    deadline = time.monotonic() + PATIENCE_S
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    return done()


def _served(tmp_path, limits):
    stop = threading.Event()
    t = threading.Thread(target=uml._serve_host_calls, args=(tmp_path / "host-calls", None, stop, limits),
                         daemon=True)
    (tmp_path / "host-calls").mkdir(exist_ok=True)
    t.start()
    return stop, t


def test_the_lab_takes_a_wall_limit_itself_and_notes_the_one_that_ran_out(tmp_path, monkeypatch):
    monkeypatch.setattr(uml.WallLimits, "GRACE", 0.0)
    limits = uml.WallLimits(tmp_path)
    stop, t = _served(tmp_path, limits)
    try:
        # no cell handler (lab exec): the lab takes it all the same, and answers nothing (the guest waits for none)
        guestlib.post_call(str(tmp_path), "x1", HostCall(Call.WALL_LIMIT, {"key": "k", "what": "your check",
                                                                          "seconds": 0.2, "seq": 1}))
        guestlib.post_call(str(tmp_path), "x2", HostCall(Call.WALL_LIMIT, {"key": "w", "what": "step 'work'",
                                                                          "seconds": 30, "seq": 1}))
        guestlib.post_call(str(tmp_path), "x3", HostCall(Call.WALL_LIMIT, {"key": "w", "seconds": 0, "seq": 1}))
        # the three calls taken and the 0.2 s one run out (the 30 s one is lifted before it could)
        assert _until(lambda: limits.hit is not None and not list((tmp_path / "host-calls").iterdir()))
    finally:
        stop.set()
        t.join()
        limits.close()
    assert limits.hit["what"] == "your check" and limits.hit["seconds"] == 0.2
    assert json.loads((tmp_path / guestlib.WALL_FILE).read_text())["what"] == "your check"
    assert limits.reason().startswith("your check ran past its limit of 0.2 s of wall-clock time")
    assert list((tmp_path / "host-calls").iterdir()) == []  # taken and removed: thousands of checks leave nothing


def test_an_arm_read_after_its_own_lift_stays_lifted(tmp_path, monkeypatch):
    """The guest posts without waiting, so the host may read a short step's lift before its arm."""
    monkeypatch.setattr(uml.WallLimits, "GRACE", 0.0)
    limits = uml.WallLimits(tmp_path)
    limits.handle({"key": "k", "what": "x", "seconds": 0, "seq": 4})
    limits.handle({"key": "k", "what": "x", "seconds": 0.1, "seq": 4})
    limits.handle({"key": "k", "what": "x", "seconds": 0.1, "seq": 3})
    time.sleep(0.3)
    assert limits.hit is None and not (tmp_path / guestlib.WALL_FILE).exists()
    limits.handle({"key": "k", "what": "the next one", "seconds": 0.1, "seq": 5})  # a later arm still arms
    assert _until(lambda: limits.hit is not None)
    limits.close()
    assert limits.hit["what"] == "the next one"


def test_a_lifted_limit_never_runs_out(tmp_path, monkeypatch):
    monkeypatch.setattr(uml.WallLimits, "GRACE", 0.0)
    limits = uml.WallLimits(tmp_path)
    limits.handle({"key": "k", "what": "x", "seconds": 0.1})
    limits.handle({"key": "k", "what": "x", "seconds": 0})
    time.sleep(0.3)
    assert limits.hit is None and not (tmp_path / guestlib.WALL_FILE).exists()


def test_the_guest_asks_only_in_virtual_time_and_lifts_its_limit_after(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(guestlib, "post_call", lambda run, name, call: calls.append((name, call.args)))
    monkeypatch.setattr(guestlib, "_VIRTUAL", [False])
    with guestlib.wall_limit(str(tmp_path), "ucheck", "your check", 3.0):
        pass
    assert calls == []
    monkeypatch.setattr(guestlib, "_VIRTUAL", [True])
    for _ in range(2):
        with guestlib.wall_limit(str(tmp_path), "ucheck", "your check", 3.0):
            pass
    assert [a["seconds"] for _, a in calls] == [3.0, 0, 3.0, 0]
    assert [a["seq"] for _, a in calls] == [calls[0][1]["seq"]] * 2 + [calls[0][1]["seq"] + 1] * 2
    assert len({n for n, _ in calls}) == 4  # a name answered once is never asked again


def test_a_state_over_its_wall_limit_is_a_hang_with_the_reason(tmp_path):
    states = [state("100", "flush", facts()), state("101", "cut", facts()), state("102", "cut", facts())]
    lay_out(tmp_path, states[:1])
    (tmp_path / STATES_FILE).write_text(json.dumps({"states": [{"id": s["id"], "kind": s["kind"], "acked": 10}
                                                               for s in states]}))
    (tmp_path / guestlib.WALL_FILE).write_text(json.dumps({"what": "your check", "seconds": 3}))
    b = boot()
    b.status, b.steps = BootStatus.HANG, b.steps[:4]
    b.error = "your check ran past its limit of 3 s of wall-clock time (the lab was killed: ...)"
    out = STUDY.parse(cell(), [b], tmp_path)
    (f,) = out.extra["failures"]
    assert f["state"] == "101" and f["class"] == "hang" and f["why"].startswith("your check ran past its limit")
    assert out.status == "ok" and "1 states after it not checked" in out.headline
