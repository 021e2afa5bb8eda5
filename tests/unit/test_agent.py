"""The guest agent runs on the host here (not as PID 1, so it never powers off)."""
import json
import subprocess
import sys

from flashbed.lab.boundary import AGENT
from flashbed.lab.guest.protocol import PROTOCOL_VERSION


def run_agent(tmp_path, steps):
    (tmp_path / "steps.json").write_text(json.dumps({"protocol": PROTOCOL_VERSION, "steps": steps}))
    out = subprocess.run([sys.executable, "-S", "-I", str(AGENT), str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert "FLASHBED-AGENT READY" in out.stdout
    return json.loads((tmp_path / "result.json").read_text())


def test_steps_run_in_order_with_output_and_timing(tmp_path):
    r = run_agent(tmp_path, [
        {"name": "a", "cmd": "echo hello; echo oops >&2"},
        {"name": "b", "cmd": "sleep 0.2; exit 3", "may_fail": True},
        {"name": "c", "cmd": "echo $FLASHBED_RUN"},
    ])
    assert r["status"] == "done"
    a, b, c = r["steps"]
    assert (a["stdout"], a["stderr"], a["rc"], a["status"]) == ("hello\n", "oops\n", 0, "ok")
    assert b["rc"] == 3 and b["status"] == "failed" and b["seconds"] >= 0.2
    assert c["stdout"].strip() == str(tmp_path)


def test_a_failed_step_stops_the_rest(tmp_path):
    r = run_agent(tmp_path, [{"name": "a", "cmd": "false"}, {"name": "b", "cmd": "true"}])
    assert r["status"] == "step-failed"
    assert [s["name"] for s in r["steps"]] == ["a"]


def test_a_step_over_its_timeout_is_killed_and_recorded(tmp_path):
    r = run_agent(tmp_path, [{"name": "slow", "cmd": "sleep 30", "timeout": 0.5}])
    (s,) = r["steps"]
    assert s["status"] == "timeout" and s["seconds"] < 10
    assert r["status"] == "step-failed"


def test_missing_steps_file_still_leaves_a_result(tmp_path):
    out = subprocess.run([sys.executable, "-S", "-I", str(AGENT), str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    r = json.loads((tmp_path / "result.json").read_text())
    assert r["status"] == "agent-error" and "steps.json" in r["error"]
    assert out.returncode == 0


def test_steps_of_another_protocol_version_are_refused(tmp_path):
    (tmp_path / "steps.json").write_text(json.dumps({"protocol": PROTOCOL_VERSION + 1,
                                                     "steps": [{"name": "a", "cmd": "true"}]}))
    subprocess.run([sys.executable, "-S", "-I", str(AGENT), str(tmp_path)], capture_output=True, timeout=60)
    r = json.loads((tmp_path / "result.json").read_text())
    assert r["status"] == "agent-error" and "protocol" in r["error"] and r["steps"] == []
