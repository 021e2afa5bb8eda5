"""The board's side of a boot (guest/boardrun.py), run here without SSH: the agent's
host calls go out as lines and the answers come back through stdin; KILL stops it."""
import json
import subprocess
import sys
import time

from flashbed.lab.guest.protocol import Step, steps_file
from flashbed.lab.target import GUEST_DIR

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
