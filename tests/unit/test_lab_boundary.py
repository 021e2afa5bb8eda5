"""The lab boundary (lab/boundary.py): a lab's layout reaches the guest's steps, device
sessions declare their capabilities, the plan refuses by them, the cell's host
calls use only what a session has."""
import json
import subprocess
import sys
import threading

import pytest

from flashbed.cell import CellHost
from flashbed.devices import presets
from flashbed.devices.session import EmulatorSession, FileSession, NandsimSession, RealDeviceSession, session_class
from flashbed.errors import FlashbedError
from flashbed.lab.boundary import AGENT, DeviceStats, GuestLayout, Pacing, PowerSwitch, WriteLog, session_has
from flashbed.lab.guest.protocol import Call, Step, steps_file
from flashbed.plan import PlanRequest, make_plan
from flashbed.shellwords import DEV, TOOLS, shell_join
from flashbed.variants import parse


def test_steps_name_the_device_and_tools_by_the_labs_layout(tmp_path):
    v = parse("ext4+noatime")
    layout = GuestLayout(device=str(tmp_path / "disk"), tools=str(tmp_path / "tools"))
    steps = [Step("dev", f"echo {v.device_path()}"), Step("mkfs", "echo " + v.make_cmds()[0]),
             Step("tool", f"echo {TOOLS}/fbtool.py")]
    (tmp_path / "steps.json").write_text(json.dumps(steps_file(steps, layout.env())))
    subprocess.run([sys.executable, "-S", "-I", str(AGENT), str(tmp_path)], capture_output=True, timeout=60)
    out = {s["name"]: s["stdout"].strip() for s in json.loads((tmp_path / "result.json").read_text())["steps"]}
    assert out["dev"] == layout.device
    assert out["mkfs"].endswith(" " + layout.device) and out["mkfs"].startswith("mkfs.ext4")
    assert out["tool"] == f"{layout.tools}/fbtool.py"


def test_the_layouts_words_are_left_to_the_guests_shell_the_rest_quoted():
    assert shell_join(["mkfs.ext4", "-L", "a b", DEV]) == "mkfs.ext4 -L 'a b' " + DEV
    assert shell_join(["mount", "$(reboot)", "/mnt"]) == "mount '$(reboot)' /mnt"


@pytest.mark.parametrize("kind,has,lacks", [
    (EmulatorSession, (PowerSwitch, DeviceStats, WriteLog, Pacing), ()),
    (FileSession, (PowerSwitch,), (DeviceStats, WriteLog, Pacing)),
    (NandsimSession, (PowerSwitch, Pacing), (DeviceStats, WriteLog)),
    (RealDeviceSession, (), (PowerSwitch, DeviceStats, WriteLog, Pacing)),
])
def test_each_session_kind_declares_what_it_can_do(kind, has, lacks):
    assert all(session_has(kind, c) for c in has)
    assert not any(session_has(kind, c) for c in lacks)
    # and carries none of their methods (no method that would only raise)
    missing = {m for c in lacks for m in vars(c) if not m.startswith("_")}
    assert missing >= ({"stats"} if DeviceStats in lacks else set())
    assert not any(hasattr(kind, m) for m in missing)


def test_the_plan_asks_the_session_class():
    assert session_class(presets.load_spec("plain-file@256M")) is FileSession
    assert session_class(presets.load_spec("emmc-8g@64M")) is EmulatorSession


def test_crash_states_on_a_device_without_a_write_log_are_one_line():
    req = PlanRequest(fs=("ext4",), devices=("plain-file@256M",), studies=("crashstates",))
    with pytest.raises(FlashbedError) as e:
        make_plan(req)
    assert "needs an emulated device (its write log)" in str(e.value) and "\n" not in str(e.value)


class _Bare:
    """A session with no capability (a replay's, a board's without power switch)."""

    def disks(self):
        return ()


class _Counting(_Bare):
    def __init__(self):
        self.cuts = 0
        self.resets = 0

    def cut_power(self):
        self.cuts += 1
        return {"cache_bytes_lost": 7}

    def restart_if_cut(self):
        self.resets += 1

    def reset_stats(self):
        return {}

    def stats(self):
        return {"write_amplification": 1.5}


def test_a_host_without_statistics_or_a_write_log_answers_none_or_one_line(tmp_path):
    host = CellHost(_Bare())
    with host.boot(tmp_path) as kill:
        assert host(Call.RESET_STATS, {}) is None and host(Call.STATS, {"phase": "w"}) is None
        with pytest.raises(FlashbedError, match="no write log"):
            host(Call.LOG_START, {})
        host(Call.CUT_POWER, {})  # no power switch: the lab's death alone
        assert kill.is_set()
    assert json.loads((tmp_path / "cut.json").read_text())["emulator"] is None
    with pytest.raises(FlashbedError, match="unknown host call 'nope'"):
        host("nope", {})


def test_a_host_with_a_power_switch_cuts_and_restarts_and_keeps_phase_statistics(tmp_path):
    dev = _Counting()
    host = CellHost(dev)
    with host.boot(tmp_path / "b0") as kill:
        (tmp_path / "b0").mkdir()
        host(Call.RESET_STATS, {"phase": "w"})
        assert host(Call.STATS, {"phase": "w"})["write_amplification"] == 1.5
        host(Call.CUT_POWER_IN, {"seconds": 0.01})
        assert kill.wait(5)
    assert dev.cuts == 1 and dev.resets == 1
    assert json.loads((tmp_path / "b0" / "cut.json").read_text())["emulator"] == {"cache_bytes_lost": 7}
    assert "wall_seconds" in host.phases["w"]
    with host.boot(tmp_path / "b1") as kill:  # the next boot: the device back, the kill cleared
        assert not kill.is_set()
    assert dev.resets == 2


def test_a_pending_cut_does_not_outlive_its_boot(tmp_path):
    dev = _Counting()
    host = CellHost(dev)
    with host.boot(tmp_path):
        host(Call.CUT_POWER_IN, {"seconds": 30})
    assert threading.active_count() < 50 and dev.cuts == 0


class _TimedCut(_Counting):
    """A device that cuts itself at an armed guest instant (the emulator in virtual time)."""

    def __init__(self, lands: bool):
        super().__init__()
        self.lands, self.armed, self.disarmed = lands, None, 0

    def arm_cut(self, seconds):
        self.armed = seconds
        return {"cut_at_ns": 5, "guest_ns": 1_000 + round(seconds * 1e9)}

    def cut_landed(self):
        return {"cut_at_ns": 5, "guest_ns": 1_000 + round(self.armed * 1e9)} if self.lands and self.armed else None

    def disarm_cut(self):
        self.disarmed += 1


def test_in_virtual_time_the_device_cuts_at_the_guest_instant_and_the_host_kills_the_lab(tmp_path):
    dev = _TimedCut(lands=True)
    host = CellHost(dev, virtual=True)
    with host.boot(tmp_path) as kill:
        answer = host(Call.CUT_POWER_IN, {"seconds": 0.5})
        assert answer == {"guest_ns": 500_001_000} and dev.armed == 0.5
        assert kill.wait(5), "the cut landed but the lab was not killed"
        assert dev.cuts == 0, "the device was stopped before the lab was gone"
    assert dev.cuts == 1 and dev.disarmed == 0  # after the boot: what the cut left, kept
    said = json.loads((tmp_path / "cut.json").read_text())
    assert said["clock"] == "virtual" and said["guest_ns"] == 500_001_000


def test_in_virtual_time_a_cut_the_workload_never_reached_is_taken_back(tmp_path):
    dev = _TimedCut(lands=False)
    host = CellHost(dev, virtual=True)
    with host.boot(tmp_path) as kill:
        host(Call.CUT_POWER_IN, {"seconds": 0.5})
    assert not kill.is_set() and dev.cuts == 0 and dev.disarmed == 1
    assert not (tmp_path / "cut.json").exists()
