"""`flashbed run`'s default clock, auto (issue 17): each cell in virtual time where it can
run there, in real time where it cannot, one line per reason; an explicit clock as before;
a run made in real time before auto is never finished in virtual time."""

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from flashbed import clock, cpus
from flashbed.cli import main
from flashbed.identity import real_time_run as _real_time_run
from flashbed.identity import request_of as _stored_request
from flashbed.plan import PlanRequest, clock_notes, make_plan
from flashbed.store import RunStore

EMMC = dict(fs=("ext4",), devices=("emmc-8g@256M",))
SCALING = {"mixed": {"scale_cpus": [1, 2]}}


@pytest.fixture
def four_cpus(monkeypatch):
    monkeypatch.setattr(cpus, "available", lambda: 4)


def _clocks(plan) -> dict[str, str]:
    return {c.key.id: c.clock for c in plan.cells}


def test_auto_runs_an_emulated_device_in_virtual_time_silently():
    plan = make_plan(PlanRequest(**EMMC, studies=("mkfs", "bigfile")))
    assert set(_clocks(plan).values()) == {"virtual"} and clock_notes(plan) == []
    assert [c.key.id for c in plan.cells] == ["emmc-8g@256M/ext4/mkfs/r0", "emmc-8g@256M/ext4/bigfile/r0"]
    assert all(c.cpu_profile for c in plan.cells)  # virtual time charges the default CPU profile


def test_auto_runs_nandsim_in_real_time_in_one_line_for_all_its_cells():
    plan = make_plan(PlanRequest(fs=("ext4", "ubifs"), devices=("emmc-8g@256M", "nand-2g-4k@128M"),
                                 studies=("mkfs", "mount")))
    clocks = _clocks(plan)
    assert {i: c for i, c in clocks.items() if i.startswith("nand")} and \
        all(c == ("real" if i.startswith("nand") else "virtual") for i, c in clocks.items())
    nand = sum(1 for i in clocks if i.startswith("nand"))
    assert nand > 1 and clock_notes(plan) == [
        f"{nand} cells on nand-2g-4k@128M (nandsim) run in real time: virtual time needs a device the emulator "
        f"serves (nandsim and real devices have no model clock)"]
    assert all(c.cpu_profile == "" for c in plan.cells if c.clock == "real")


def test_auto_on_a_kernel_without_a_virtual_time_flavour_runs_it_in_real_time():
    plan = make_plan(PlanRequest(**EMMC, studies=("mkfs",), kernels=("6.12", "7.3")))
    assert _clocks(plan) == {"emmc-8g@256M/kernel-6.12/ext4/mkfs/r0": "real",
                             "emmc-8g@256M/kernel-7.3/ext4/mkfs/r0": "virtual"}
    assert clock_notes(plan) == ["1 cell on lab kernel 6.12 runs in real time: it has no virtual-time flavour "
                                 "(virtual time runs on lab kernel 7.3)"]
    # asked for by name, virtual time is refused there, in one line (as before auto)
    with pytest.raises(Exception, match="lab kernel 6.12 has no virtual-time flavour"):
        make_plan(PlanRequest(**EMMC, studies=("mkfs",), kernels=("6.12",), clocks=("virtual",)))


def test_auto_runs_several_vcpus_in_real_time(four_cpus):
    plan = make_plan(PlanRequest(**EMMC, studies=("mkfs", "bigfile"), cpus=2))
    assert set(_clocks(plan).values()) == {"real"}
    assert clock_notes(plan) == ["2 cells (mkfs at 2 vCPUs, bigfile at 2 vCPUs) run in real time: the "
                                 "virtual-time lab kernel runs one vCPU (it has no SMP)"]
    with pytest.raises(Exception, match="--clock virtual runs one vCPU"):
        make_plan(PlanRequest(**EMMC, studies=("mkfs",), cpus=2, clocks=("virtual",)))


def test_auto_runs_a_scaling_case_of_two_vcpus_in_real_time_and_the_rest_in_virtual(four_cpus):
    plan = make_plan(PlanRequest(**EMMC, studies=("mixed",), overrides=SCALING))
    clocks = {c.key.case: c.clock for c in plan.cells}
    assert clocks == {"": "virtual", "scale-1vcpu": "virtual", "scale-2vcpu": "real"}
    assert clock_notes(plan) == ["1 cell (mixed at 2 vCPUs) runs in real time: the virtual-time lab kernel runs "
                                 "one vCPU (it has no SMP)"]
    # virtual time by name leaves that case out, as before
    strict = make_plan(PlanRequest(**EMMC, studies=("mixed",), overrides=SCALING, clocks=("virtual",)))
    assert {c.key.case for c in strict.cells} == {"", "scale-1vcpu"} and len(strict.skipped) == 1


def test_auto_runs_the_cpu_study_in_real_time_as_virtual_does():
    for clocks in (("auto",), ("virtual",)):
        plan = make_plan(PlanRequest(**EMMC, studies=("cpu", "mkfs"), clocks=clocks))
        assert {c.key.study: c.clock for c in plan.cells} == {"cpu": "real", "mkfs": "virtual"}
        assert clock_notes(plan) == ["study cpu measures the lab's real CPU time, apart from the timed figures: "
                                     "its cells run in real time"]
        # issue 40: on the time-travel build with time travel off, so the run needs one lab kernel
        assert {c.key.study: c.flavour for c in plan.cells} == {"cpu": "timetravel", "mkfs": ""}


@pytest.fixture
def builds(monkeypatch):
    """The lab kernel builds asked for (True: the time-travel build), each a fake KernelInfo."""
    from flashbed.lab import kernel

    built = []

    def ensure(name=None, log=None, time_travel=False):
        built.append(time_travel)
        return kernel.KernelInfo(path="/x/linux", key=f"k{int(time_travel)}", name="7.3", source_package="p",
                                 source_version="v", release="7.3.4", patches=[], boot_mode="seccomp",
                                 max_cpus=1 if time_travel else 8, build_seconds=1.0, built_at="now",
                                 flavour=kernel.TIME_TRAVEL if time_travel else "")
    monkeypatch.setattr(kernel, "ensure_kernel", ensure)
    monkeypatch.setattr("flashbed.lab.labs.ensure_kernel", ensure)
    monkeypatch.setattr("flashbed.lab.labs._RESOLVED", {})  # these fakes stay out of the process's cache
    return built


def _booted(plan, built) -> dict[str, tuple[str, str | None]]:
    """Each cell's build as its lab boots it: (flavour, time travel as provenance names it)."""
    from flashbed.targets.lab import LabTarget
    labs = LabTarget().labs(plan, RunStore(Path("/nonexistent/run")), lambda line: None)
    return {c.key.id: (labs(c).kernel.flavour, labs(c).kernel.provenance().get("time_travel")) for c in plan.cells}


def test_the_default_path_needs_one_lab_kernel(builds):
    """The quick profile in auto boots only the time-travel build (its cpu cells with time travel off)."""
    plan = make_plan(PlanRequest(profile="quick"))
    booted = _booted(plan, builds)
    assert set(builds) == {True} and any(c.key.study == "cpu" for c in plan.cells)
    for cell in plan.cells:
        assert booted[cell.key.id] == ("timetravel", None if cell.clock == "virtual" else "off")


@pytest.mark.parametrize("request_", [
    dict(fs=("ext4",), devices=("plain-file@512M",), studies=("mkfs", "bigfile")),  # no model clock: real time
    dict(fs=("ubifs",), devices=("nand-2g-4k@128M",), studies=("mkfs",)),  # nandsim: real time
    dict(**EMMC, studies=("cpu", "mkfs"), clocks=("real",)),  # real time by name
    dict(**EMMC, studies=("mkfs",), clocks=("real", "virtual"))])
def test_a_real_time_cell_of_one_vcpu_boots_the_time_travel_build_with_time_travel_off(builds, request_):
    """Issue 40: real time on one vCPU asks for no SMP, so it builds no second kernel."""
    plan = make_plan(PlanRequest(**request_))
    real = [c for c in plan.cells if c.clock == "real"]
    assert real and all(c.flavour == "timetravel" for c in real)
    booted = _booted(plan, builds)
    assert set(builds) == {True} and {booted[c.key.id] for c in real} == {("timetravel", "off")}


def test_only_a_cell_of_several_vcpus_boots_the_smp_build(builds, four_cpus):
    plan = make_plan(PlanRequest(**EMMC, studies=("mixed",), overrides=SCALING))
    booted = {c.key.case: v for c, v in zip(plan.cells, _booted(plan, builds).values())}
    assert set(builds) == {False, True}
    assert booted == {"": ("timetravel", None), "scale-1vcpu": ("timetravel", None), "scale-2vcpu": ("", None)}
    # a kernel without a time-travel build runs as configured
    six = make_plan(PlanRequest(**EMMC, studies=("mkfs",), kernels=("6.12",)))
    assert [c.flavour for c in six.cells] == [""]


def test_a_lab_outside_a_run_asks_for_the_smp_build_only_for_several_vcpus(builds):
    """lab exec, smoke, the probe, option trials: kernel.lab_kernel picks the build as the planner does."""
    from flashbed.lab import kernel
    assert kernel.lab_kernel("7.3").provenance().get("time_travel") == "off"  # lab exec's default, real time
    assert kernel.lab_kernel(time_travel=True).time_travel
    assert builds == [True, True]
    assert kernel.lab_kernel("7.3", cpus=2).flavour == "" and kernel.lab_kernel("6.12").flavour == ""
    assert builds == [True, True, False, False]


def test_one_line_per_reason_not_per_cell(four_cpus):
    plan = make_plan(PlanRequest(fs=("ext4", "f2fs", "ubifs"), devices=("emmc-8g@256M", "nand-2g-4k@128M"),
                                 studies=("mkfs", "cpu", "mixed"), overrides=SCALING, kernels=("6.12", "7.3"),
                                 repeat=2))
    notes = clock_notes(plan)
    assert len(notes) == 4 and len(plan.real_time) == 16 + 8 + 4 + 4
    assert [n.split(" run in real time")[0] for n in notes] == [
        "8 cells on nand-2g-4k@128M (nandsim)", "16 cells on lab kernel 6.12", "4 cells (mixed at 2 vCPUs)",
        "study cpu measures the lab's real CPU time, apart from the timed figures: its cells"]
    # every cell of kernel 6.12 is real time for the kernel; on 7.3 only the reasons of its own
    assert all(c.clock == "real" for c in plan.cells if c.kernel == "6.12")
    assert {c.clock for c in plan.cells if c.kernel == "7.3" and c.device.backend == "emulator"
            and c.key.study == "mkfs"} == {"virtual"}


def test_explicit_real_keeps_real_time_everywhere_and_both_clocks_as_before():
    plan = make_plan(PlanRequest(**EMMC, studies=("mkfs", "cpu"), clocks=("real",)))
    assert set(_clocks(plan).values()) == {"real"} and clock_notes(plan) == []
    both = make_plan(PlanRequest(**EMMC, studies=("mkfs", "cpu"), clocks=("real", "virtual")))
    assert _clocks(both) == {"emmc-8g@256M/clock-real/ext4/mkfs/r0": "real",
                             "emmc-8g@256M/clock-virtual/ext4/mkfs/r0": "virtual",
                             "emmc-8g@256M/clock-real/ext4/cpu/r0": "real"}


def test_a_board_keeps_its_own_time_and_its_runs_their_ids():
    target = dict(devices=("/dev/mmcblk0p3",), target="ssh://root@board", fs=("ext4",), studies=("mkfs",))
    assert PlanRequest(**target).resolved().clocks == ()
    assert PlanRequest(**target).run_id() == PlanRequest(**target, clocks=("real",)).run_id()
    assert PlanRequest(**target, clocks=("virtual",)).resolved().clocks == ("virtual",)  # make_plan refuses it


def test_the_pace_rule_is_unchanged_and_virtual_time_replaces_it_in_the_lab():
    plan = make_plan(PlanRequest(**EMMC, studies=("mkfs", "powercut")))
    # the failure study's cells keep pace none for real time; in virtual time the emulator runs
    # --pace virtual (cell.run_cell): the device's delays cost no wall-clock time there
    assert {c.key.study: (c.pace, c.clock) for c in plan.cells} == {"mkfs": ("real", "virtual"),
                                                                    "powercut": ("none", "virtual")}


def _old_real_time_run(root, with_clocks_field: bool) -> PlanRequest:
    """A run dir as flashbed made it before auto: its request in real time (before the clock
    axis its request had no clocks field at all)."""
    req = PlanRequest(**EMMC, studies=("mkfs",), clocks=("real",)).resolved()
    stored = json.loads(json.dumps(asdict(req)))
    if not with_clocks_field:
        del stored["clocks"], stored["cpu_profiles"]
    RunStore(root).write_manifest({"schema": 1, "run_id": root.name, "request": stored})
    return req


@pytest.mark.parametrize("with_clocks_field", [True, False])
def test_the_same_command_in_an_old_real_time_run_dir_is_refused_in_one_line(tmp_path, capsys, with_clocks_field):
    root = tmp_path / "old"
    _old_real_time_run(root, with_clocks_field)
    argv = ["run", "--fs", "ext4", "--device", "emmc-8g@256M", "--study", "mkfs", "--out", str(root)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds a run of a different request" in err and "--resume old" in err
    assert not (root / "cells").exists()


@pytest.mark.parametrize("with_clocks_field", [True, False])
def test_resuming_an_old_real_time_run_keeps_real_time(tmp_path, with_clocks_field):
    root = tmp_path / "old"
    req = _old_real_time_run(root, with_clocks_field)
    stored = _stored_request(RunStore(root))
    assert stored.clocks == () and stored.run_id() == req.run_id()
    assert {c.clock for c in make_plan(stored).cells} == {"real"}
    from flashbed.execute import check_resume
    check_resume(make_plan(stored), RunStore(root))  # the same request: finished as it was made


def test_the_same_command_says_its_old_real_time_run_is_left_as_it_is(tmp_path):
    req = PlanRequest(**EMMC, studies=("mkfs",))
    old = replace(req, clocks=())
    _old_real_time_run(tmp_path / old.run_id(), True)
    new = RunStore(tmp_path / req.run_id())
    assert _real_time_run(req, new) == (
        f"run {old.run_id()}, this command's run in real time (the default before auto), is left as it is: "
        f"`flashbed run --resume {old.run_id()}` finishes it in real time")
    assert _real_time_run(replace(req, clocks=("virtual",)), new) == ""  # not the default: nothing to say
    assert _real_time_run(req, RunStore(tmp_path / old.run_id())) == ""  # --clock real's own run


def test_clock_labels():
    assert clock.labels([]) == ("auto",) and clock.labels(["virtual", "real", "virtual"]) == ("virtual", "real")
    for bad in (["auto", "real"], ["sundial"], ["Auto"]):
        with pytest.raises(Exception):
            clock.labels(bad)


def test_run_help_names_auto_as_the_default_clock(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the lab's clock: auto (default), real or virtual" in text and "the cpu study" in text
