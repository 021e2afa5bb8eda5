"""The board's side of a boot (guest/boardrun.py), run here without SSH: the agent's
host calls go out as lines and the answers come back through stdin; KILL stops it."""
import json
import subprocess
import sys
import time

from flashbed.lab.boundary import GUEST_DIR
from flashbed.lab.guest.protocol import Step, steps_file

BOARDRUN = GUEST_DIR / "boardrun.py"


def start(run, steps):
    (run / "steps.json").write_text(json.dumps(steps_file(steps, {"FLASHBED_DEV": "/nonexistent"})))
    return subprocess.Popen([sys.executable, "-S", "-I", str(BOARDRUN), str(run)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def test_a_host_call_is_relayed_and_answered(tmp_path):
    p = start(tmp_path, [Step("ask", host="stats", args={"phase": "w"}), Step("after", "echo done")])
    lines = []
    for line in p.stdout:
        lines.append(line)
        if line.startswith("FLASHBED-CALL "):
            _, name, body = line.rstrip("\n").split(" ", 2)
            assert json.loads(body) == {"call": "stats", "args": {"phase": "w"}}
            p.stdin.write(f"ANSWER {name} " + json.dumps({"ok": True, "data": {"x": 1}, "error": ""}) + "\n")
            p.stdin.flush()
    assert p.wait(30) == 0
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "done" and json.loads(result["steps"][0]["stdout"]) == {"x": 1}
    assert any("FLASHBED-AGENT DONE done" in l for l in lines)


def test_kill_stops_the_boot_at_once(tmp_path):
    p = start(tmp_path, [Step("long", "sleep 61.5", timeout=120)])
    for line in p.stdout:
        if line.startswith("FLASHBED-AGENT STEP long"):
            break
    started = time.monotonic()
    p.stdin.write("KILL\n")
    p.stdin.flush()
    rest = p.stdout.read()
    assert p.wait(30) == 0 and time.monotonic() - started < 10
    assert "FLASHBED-BOARD agent exit -9" in rest
    assert json.loads((tmp_path / "result.json").read_text())["status"] == "running"  # no word from the agent
    left = subprocess.run(["pgrep", "-f", "sleep 61.5"], capture_output=True, text=True).stdout.split()
    assert not left, "the step's processes outlived the kill"


def test_a_session_that_vanished_still_ends_the_boot(tmp_path):
    """The power switch takes the SSH session down first: stdout is gone, stdin closes. The
    boot must still end (its workload killed), not hang on a broken pipe."""
    p = start(tmp_path, [Step("work", "sleep 600")])
    assert p.stdout.readline()  # running
    p.stdout.close()  # the host is gone: writes now fail
    p.stdin.close()
    assert p.wait(30) == 0


def test_logs_are_fsynced_where_a_power_cut_takes_the_run_directory_too(tmp_path, monkeypatch):
    import os

    from flashbed.lab.boundary import GuestLayout
    from flashbed.lab.guest import guestlib
    assert GuestLayout("/dev/x", "/t", fsync_logs=True).env()["FLASHBED_FSYNC_LOGS"] == "1"
    assert "FLASHBED_FSYNC_LOGS" not in GuestLayout("/dev/x", "/t").env()
    synced = []
    monkeypatch.setattr(guestlib.os, "fsync", lambda fd: synced.append(fd))
    with open(tmp_path / "log", "w") as f:
        monkeypatch.setenv("FLASHBED_FSYNC_LOGS", "1")
        guestlib.push(f.fileno())
        assert synced == [f.fileno()]
        monkeypatch.delenv("FLASHBED_FSYNC_LOGS")
        guestlib.push(f.fileno())  # sync_file_range: written back, no fsync
        assert synced == [f.fileno()] or os.name != "posix"
