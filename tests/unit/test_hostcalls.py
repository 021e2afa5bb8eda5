"""Host calls without a kernel: the guest's side (guestlib.call_host) and the host's
server (uml._serve_host_calls) talk through a directory here as they do through
hostfs in the lab: every call answered once, in time, with or without inotify."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from flashbed.lab import uml
from flashbed.lab.dirwatch import DirWatch
from flashbed.lab.guest import guestlib
from flashbed.lab.guest.protocol import HostCall


@pytest.fixture(params=["inotify", "polling"])
def server(request, tmp_path, monkeypatch):
    if request.param == "polling":
        monkeypatch.setattr(uml.DirWatch, "open", classmethod(lambda cls, path: None))
    seen: list[tuple[str, dict]] = []
    lock = threading.Lock()

    def handler(call, args):
        with lock:
            seen.append((call, args))
        if call == "boom":
            raise RuntimeError("no such thing")
        return {"twice": args.get("x", 0) * 2}

    (tmp_path / "host-calls").mkdir()
    stop = threading.Event()
    t = threading.Thread(target=uml._serve_host_calls, args=(tmp_path / "host-calls", handler, stop), daemon=True)
    t.start()
    yield tmp_path, seen
    stop.set()
    t.join(timeout=5)
    assert not t.is_alive()


def test_a_call_is_answered_and_an_error_travels_back(server):
    run, seen = server
    a = guestlib.call_host(str(run), "0001", HostCall("double", {"x": 21}), 10)
    assert a.ok and a.data == {"twice": 42}
    b = guestlib.call_host(str(run), "0002", HostCall("boom"), 10)
    assert not b.ok and "no such thing" in b.error
    assert seen == [("double", {"x": 21}), ("boom", {})]
    assert (run / "host-calls" / "0001.resp").exists()  # kept by default


def test_many_callers_at_once_are_each_answered_once(server):
    run, seen = server

    def ask(i: int) -> int:
        a = guestlib.call_host(str(run), f"c{i:05d}", HostCall("double", {"x": i}), 30, keep=False)
        return a.data["twice"]

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(ask, range(400)))
    assert got == [2 * i for i in range(400)]
    assert sorted(a["x"] for _, a in seen) == list(range(400))
    assert list((run / "host-calls").iterdir()) == []  # keep=False cleaned up


def test_no_answer_in_time_is_none(tmp_path):
    (tmp_path / "host-calls").mkdir()
    t = time.monotonic()
    assert guestlib.call_host(str(tmp_path), "0001", HostCall("x"), 0.2) is None
    # not before its limit, and not far past it: the upper bound is generous, since a loaded host (make
    # test beside lab boots) may run the caller seconds late; a limit ignored or read in ms still fails
    assert 0.2 <= time.monotonic() - t < 30


def test_the_watch_reports_renamed_names(tmp_path):
    w = DirWatch.open(tmp_path)
    assert w is not None
    try:
        assert w.wait(0.01) == []
        (tmp_path / "a.tmp").write_text("x")
        (tmp_path / "a.tmp").rename(tmp_path / "a.req")
        assert w.wait(1) == ["a.req"]
    finally:
        w.close()


def _state(pid: int) -> str:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def test_the_lab_is_stopped_while_the_host_answers_a_crash_state_call_and_only_then(tmp_path):
    # a stand-in for the lab's kernel process: in virtual time the guest would spin meanwhile
    import subprocess

    from flashbed.lab.guest.protocol import Call
    lab = subprocess.Popen(["sleep", "60"])
    pause = uml.Pause.of(lab)
    assert pause is not None
    states: dict[str, str] = {}

    def handler(call, args):
        deadline = time.monotonic() + 5  # a stop takes effect once the process is scheduled
        while _state(lab.pid) != "T" and time.monotonic() < deadline and call != Call.STATS:
            time.sleep(0.001)
        states[call] = _state(lab.pid)
        return {}

    (tmp_path / "host-calls").mkdir()
    stop = threading.Event()
    t = threading.Thread(target=uml._serve_host_calls, args=(tmp_path / "host-calls", handler, stop, None, pause),
                         daemon=True)
    t.start()
    try:
        for i, call in enumerate((Call.USER_CHECK, Call.STATS, Call.CRASH_NEXT)):
            assert guestlib.call_host(str(tmp_path), f"{i:04d}", HostCall(call, {}), 10).ok
            deadline = time.monotonic() + 5  # going on once its answer is in place (just after)
            while _state(lab.pid) == "T" and time.monotonic() < deadline:
                time.sleep(0.001)
            assert _state(lab.pid) != "T"
        assert states[Call.USER_CHECK] == states[Call.CRASH_NEXT] == "T" and states[Call.STATS] in "RS"
    finally:
        stop.set()
        t.join(timeout=5)
        pause.close()
        lab.kill()
        lab.wait()
