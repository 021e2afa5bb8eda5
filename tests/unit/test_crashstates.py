"""The crashstates study on fake boots: its steps, its reading of the checked states
(powercut's classes), the failures it keeps with their replay commands, and the
plan's refusal of a device without a write log. No kernel, no emulator."""

from __future__ import annotations

import dataclasses
import json

import pytest

from flashbed import variants
from flashbed.crashreplay import find
from flashbed.devices import presets
from flashbed.errors import FlashbedError
from flashbed.lab.boundary import BootResult, StepResult
from flashbed.lab.guest.guestlib import mount_args
from flashbed.lab.guest.protocol import CrashCheckSpec, CrashWorkSpec, RecoverSpec
from flashbed.plan import PlanRequest, make_plan
from flashbed.results import CellKey, CellResult
from flashbed.status import BootStatus
from flashbed.store import RunStore
from flashbed.studies import STUDIES
from flashbed.studies.base import CRASHLOG, CellSpec
from flashbed.studies.crashstates import CHECKED_FILE, STATES_FILE, replay_command
from tests.unit.test_powercut_classify import facts

STUDY = STUDIES["crashstates"]


def cell(fs="ext4", workload="powercut", **params) -> CellSpec:
    dev = presets.load_spec("emmc-8g@64M")
    p = STUDY.params(**{"workload": workload, **params})
    return CellSpec(key=CellKey(dev.label, fs, "crashstates", workload), device=dev, variant=variants.parse(fs, dev),
                    params=p, seed=3, pace="none")


def step(name, stdout="", status="ok", seconds=1.0):
    return StepResult(name=name, cmd="x", status=status, rc=0 if status == "ok" else 1, seconds=seconds,
                      stdout=stdout, stderr="")


def boot(check_seconds=2.0):
    return BootResult(status="done", steps=[
        step("log-start", "{}"), step("mkfs"), step("work", json.dumps({"ops": 5, "marks": 12})),
        step("states", json.dumps({"states": 3})),
        step("check", json.dumps({"listed": 3, "checked": 3, "stopped": ""}), seconds=check_seconds)],
        boot_seconds=1.0, total_seconds=10.0, console_log="console.log", exit_code=0, kernel_release="6.12")


def state(sid, kind, f):
    return {"id": sid, "kind": kind, "acked": 10, "damaged": 0, "facts": f,
            "switch": {"ns": 1000}, "seconds": {"switch": 0.002, "mount": 0.01, "fsck": 0.05, "total": 0.1}}


def lay_out(run_dir, states):
    (run_dir / STATES_FILE).write_text(json.dumps({"records": 50, "flushes": 4, "log_bytes": 100, "states": [
        {"id": s["id"], "kind": s["kind"], "acked": 10} for s in states]}))
    (run_dir / CHECKED_FILE).write_text("".join(json.dumps(s) + "\n" for s in states))
    (run_dir / CRASHLOG).mkdir()
    (run_dir / CRASHLOG / "crashlog.events").write_bytes(b"x" * 100)


def test_the_boot_starts_the_log_before_mkfs_and_checks_in_the_same_boot(tmp_path):
    (steps,) = STUDY.boots(cell(), tmp_path)
    assert [s.name for s in steps] == ["log-start", "mkfs", "work", "states", "check"]
    assert steps[0].host == "log-start" and steps[3].host == "crash-states"
    check = CrashCheckSpec.from_json(json.loads(steps[4].cmd.split(" check ", 1)[1].strip("'")))
    rs = RecoverSpec.from_json(check.recover)
    # no lazyinit thread at a random instant: the states are the workload's (variants.quiet)
    assert rs.direct == {"device": "${FLASHBED_DEV}", "fstype": "ext4", "options": list(variants.QUIET_EXT4_MOUNT)}
    assert rs.check == "e2fsck -f -n ${FLASHBED_DEV}" and rs.out == ""
    assert CrashWorkSpec.from_json(check.work).skip_fsync == 0


def test_unsafe_variants_and_the_sabotage_reach_the_guest(tmp_path):
    (steps,) = STUDY.boots(cell("ext4+nobarrier", sabotage=True, ops=30), tmp_path)
    work = CrashWorkSpec.from_json(json.loads(steps[2].cmd.split(" work ", 1)[1].strip("'")))
    assert work.skip_fsync == 10 and "-o nobarrier" in work.mount[0]
    check = CrashCheckSpec.from_json(json.loads(steps[4].cmd.split(" check ", 1)[1].strip("'")))
    assert RecoverSpec.from_json(check.recover).direct["options"] == ["nobarrier", *variants.QUIET_EXT4_MOUNT]


def test_ext4s_lazyinit_thread_stays_idle_in_the_workload_and_every_recovery_on_any_clock(tmp_path):
    # its first inode-table zeroing flushes the cache whatever the barrier option: in a
    # nobarrier cell's write log a flush or none, as its random first instant fell
    quiet = ",".join(variants.QUIET_EXT4_MOUNT)
    for fs in ("ext4", "ext4+nobarrier", "ext3"):
        (steps,) = STUDY.boots(cell(fs), tmp_path)
        work = CrashWorkSpec.from_json(json.loads(steps[2].cmd.split(" work ", 1)[1].strip("'")))
        assert quiet in work.mount[0], work.mount
        check = CrashCheckSpec.from_json(json.loads(steps[4].cmd.split(" check ", 1)[1].strip("'")))
        assert RecoverSpec.from_json(check.recover).direct["options"][-2:] == list(variants.QUIET_EXT4_MOUNT)
    # asked for by name, it runs
    (steps,) = STUDY.boots(cell("ext4+o:init_itable=5"), tmp_path)
    work = CrashWorkSpec.from_json(json.loads(steps[2].cmd.split(" work ", 1)[1].strip("'")))
    assert "noinit_itable" not in work.mount[0] and "no_prefetch_block_bitmaps" in work.mount[0]
    (steps,) = STUDY.boots(cell("f2fs"), tmp_path)  # other filesystems as they are
    assert "noinit_itable" not in steps[2].cmd


def test_mount_options_become_flags_and_data():
    assert mount_args(["ro", "noatime", "nobarrier", "rw", "data=journal"]) == (1 | 1024, "nobarrier,data=journal")
    assert mount_args([]) == (0, "")
    assert mount_args(["sync"]) == (16, "")


def test_parse_classifies_each_state_as_a_power_cut_and_keeps_the_log_of_failures(tmp_path):
    states = [state("100", "flush", facts()),
              state("101", "cut", facts(mount1={"kmsg": ["EXT4-fs (ubda): recovery complete"]})),
              state("101+m1", "subset", facts(verify={"n_loss": 1, "loss": ["f00003: acked file missing"]}))]
    lay_out(tmp_path, states)
    out = STUDY.parse(cell(), [boot()], tmp_path)
    v = {m.metric: m.value for m in out.measurements}
    assert (v["states"], v["iterations"], v["class:clean"], v["class:recovered"], v["class:data-loss"]) == \
        (3, 3, 1, 1, 1)
    assert (v["kind:flush"], v["kind:cut"], v["kind:subset"], v["failures"]) == (1, 1, 1, 1)
    assert v["states_per_hour"] == pytest.approx(3 * 3600 / 2.0)
    assert v["fsck_ms"] == pytest.approx(50)
    (f,) = out.extra["failures"]
    assert (f["state"], f["class"], f["workload"], f["seed"]) == ("101+m1", "data-loss", "powercut", 300009)
    assert "f00003" in f["why"]
    assert (tmp_path / CRASHLOG).is_dir() and out.extra["log"] == CRASHLOG and out.extra["log_bytes"] == 100
    assert "1 data-loss" in out.headline and "1 to replay" in out.headline


def test_parse_drops_the_log_when_every_state_survived(tmp_path):
    lay_out(tmp_path, [state("100", "flush", facts())])
    out = STUDY.parse(cell(), [boot()], tmp_path)
    assert out.status == "ok" and out.extra["failures"] == [] and out.extra["log"] is None
    assert not (tmp_path / CRASHLOG).exists()


def test_a_state_the_host_could_not_serve_is_an_error_not_a_verdict(tmp_path):
    s = state("100", "flush", None)
    s["switch"] = {"error": "EmulatorError: no stopped write log"}
    lay_out(tmp_path, [s])
    out = STUDY.parse(cell(), [boot()], tmp_path)
    assert {m.metric: m.value for m in out.measurements}["class:error"] == 1


def test_a_cell_whose_workload_failed_says_why(tmp_path):
    b = boot()
    b.steps[2] = StepResult(name="work", cmd="x", status="failed", rc=1, seconds=1.0, stdout="",
                            stderr="RuntimeError: mount failed: wrong fs type")
    out = STUDY.parse(cell(), [b], tmp_path)
    assert out.status == "failed" and "mount failed" in out.error


def test_failures_come_with_their_replay_command_and_resolve(tmp_path):
    store = RunStore(tmp_path / "runs" / "quick-abc")
    store.create()
    store.write_manifest({"schema": 1, "run_id": "quick-abc"})
    spec = cell()
    r = CellResult(key=spec.key, status="ok", extra={"failures": [{"state": "812+k5", "class": "data-loss",
                                                                    "why": "f1: acked file missing"}]})
    store.write(r)
    (x,) = STUDY.reproducers("quick-abc", r)
    assert x.command == replay_command("quick-abc", spec.key.id, "ext4", "812+k5") == \
        "flashbed crashstate replay quick-abc emmc-8g@64M/ext4/crashstates/powercut/r0:812+k5 " \
        "--image ext4-812+k5.img"
    t = find(str(store.root), f"{spec.key.id}:812+k5")
    assert t.failure["class"] == "data-loss" and t.state == "812+k5"
    assert find(str(store.root), "812+k5").result.key == spec.key  # one cell has it: the id alone will do
    with pytest.raises(FlashbedError, match="no crash-state cell"):
        find(str(store.root), "emmc-8g@64M/f2fs/crashstates/powercut/r0:812+k5")


def test_the_plan_refuses_a_device_without_a_write_log():
    with pytest.raises(FlashbedError, match="needs an emulated device"):
        make_plan(PlanRequest(fs=("ext4",), devices=("plain-file@256M",), studies=("crashstates",)))
    plan = make_plan(PlanRequest(fs=("ext4",), devices=("emmc-8g@64M",), studies=("crashstates",)))
    assert [c.key.case for c in plan.cells] == ["powercut", "sequences"]
    quick = dataclasses.asdict(plan.cells[0].params)
    from flashbed.profiles import PROFILES
    sizes = PROFILES["quick"]["crashstates"]
    assert {k: quick[k] for k in sizes} == sizes and sizes["ops"] < quick["max_files"] * 10


def test_a_lab_stuck_on_a_state_is_a_hang_there_and_the_rest_unchecked(tmp_path):
    states = [state("100", "flush", facts()), state("101", "cut", facts()), state("102", "cut", facts())]
    lay_out(tmp_path, states[:1])
    (tmp_path / STATES_FILE).write_text(json.dumps({"states": [{"id": s["id"], "kind": s["kind"], "acked": 10}
                                                               for s in states]}))
    b = boot()
    b.status = BootStatus.KILLED  # the host's watchdog
    b.steps = b.steps[:4]
    out = STUDY.parse(cell(), [b], tmp_path)
    v = {m.metric: m.value for m in out.measurements}
    assert (v["class:clean"], v["class:hang"], v["iterations"]) == (1, 1, 2)
    assert out.extra["failures"][0]["state"] == "101" and out.status == "ok"
    assert "1 states after it not checked" in out.headline


def test_states_left_unchecked_without_a_hang_are_flashbeds_error(tmp_path):
    states = [state("100", "flush", facts()), state("101", "cut", facts())]
    lay_out(tmp_path, states[:1])
    (tmp_path / STATES_FILE).write_text(json.dumps({"states": [{"id": s["id"], "kind": s["kind"], "acked": 10}
                                                               for s in states]}))
    b = boot()
    b.steps[4] = step("check", "", status="failed")
    out = STUDY.parse(cell(), [b], tmp_path)
    assert out.status == "error" and "1 of 2 states were not checked" in out.error


def test_a_loss_says_whether_its_operation_was_flushed_before_it_was_acknowledged():
    from flashbed.studies.crashstates import loss_evidence
    recs = [{"e": "begin", "m": 10}, {"e": "intent", "n": 1, "name": "f00001", "m": 11}, {"e": "ack", "n": 1, "m": 20},
            {"e": "intent", "n": 2, "name": "f00002", "m": 21}, {"e": "ack", "n": 2, "m": 30},
            {"e": "intent", "n": 3, "name": "f00001", "m": 31}]
    ev = loss_evidence(["f00001: acked file missing", "f00002: acked content differs", "directory missing"], 40,
                       recs, flush_pos=[15, 18, 35])
    assert ev == [{"name": "f00001", "intent": 11, "ack": 20, "flushes": 2},
                  {"name": "f00002", "intent": 21, "ack": 30, "flushes": 0}]
    seq = [{"e": "intent", "seq": 3, "k": 0, "m": 5}, {"e": "ack", "seq": 3, "k": 0, "m": 9}]
    assert loss_evidence(["s0003/A/foo: acked content differs"], 12, seq, [7]) == \
        [{"name": "s0003", "intent": 5, "ack": 9, "flushes": 1}]
