"""Virtual time (issue 17): the clock option, the time-travel kernel flavour, the lab's
command line in virtual time, and the guest's time limits."""

from dataclasses import replace
from pathlib import Path

import pytest

from flashbed import clock
from flashbed.cli import main
from flashbed.errors import FlashbedError
from flashbed.lab import kernel
from flashbed.lab.boundary import BlockDevice, BootSpec
from flashbed.lab.uml import kernel_cmdline


@pytest.mark.parametrize("argv,words", [
    (["lab", "exec", "--clock", "sundial", "--", "true"], "--clock 'sundial' must be real or virtual"),
    (["lab", "smoke", "--clock", "fast"], "--clock 'fast' must be real or virtual"),
    (["lab", "exec", "--kernel", "6.12", "--clock", "virtual", "--", "true"],
     "lab kernel 6.12 has no virtual-time flavour: use --kernel 7.3 or --clock real"),
    (["lab", "smoke", "--kernel", "6.12", "--clock", "virtual"], "lab kernel 6.12 has no virtual-time flavour"),
    (["lab", "exec", "--clock", "virtual", "--cpus", "2", "--", "nproc"], "--clock virtual runs one vCPU"),
])
def test_bad_clock_input_is_one_line(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_only_emulated_devices_run_in_virtual_time():
    assert clock.effective(clock.Clock.VIRTUAL, "emulator") == (clock.Clock.VIRTUAL, "")
    for backend in ("nandsim", "real", "file"):
        clk, note = clock.effective(clock.Clock.VIRTUAL, backend)
        assert clk is clock.Clock.REAL and f"a {backend} device runs in real time" in note
    assert clock.effective(clock.Clock.REAL, "nandsim") == (clock.Clock.REAL, "")
    assert clock.emulator_pace(clock.Clock.VIRTUAL, "real") == "virtual" and \
        clock.emulator_pace(clock.Clock.REAL, "none") == "none"


def test_time_travel_flavour_is_uniprocessor_with_its_own_patches_and_key():
    plain = kernel.KERNELS["7.3"]
    tt = plain.time_travel_flavour()
    opts = kernel.required_options(tt)
    assert opts["CONFIG_UML_TIME_TRAVEL_SUPPORT"] == "y" and opts["CONFIG_SMP"] == "n"
    assert opts["CONFIG_RAID6_PQ_BENCHMARK"] == "n" and tt.max_cpus() == 1
    assert plain.max_cpus() == 8  # the SMP flavour is untouched
    tt_only = {p.name for p in tt.patch_files()} - {p.name for p in plain.patch_files()}
    assert any("time-travel" in n for n in tt_only) and any("sched-clock" in n for n in tt_only)
    v = kernel.source_version(plain)
    assert kernel.cache_key(v, tt) != kernel.cache_key(v, plain)
    with pytest.raises(FlashbedError, match="6.12 has no virtual-time flavour"):
        kernel.KERNELS["6.12"].time_travel_flavour()


def test_plain_kernel_key_does_not_depend_on_the_flavour_machinery():
    # the plain build hashes what it hashed before flavours existed: a patch for the
    # time-travel flavour only must not change it
    plain = kernel.KERNELS["7.3"]
    assert all("7.3+timetravel" not in kernel._patch_kernels(p) for p in plain.patch_files())
    assert kernel.TIME_TRAVEL_FRAGMENT not in plain.fragments


def _info(time_travel: bool) -> kernel.KernelInfo:
    return kernel.KernelInfo(path="/x/linux", key="k", name="7.3", source_package="linux-source-7.3",
                             source_version="v", release="7.3.4", patches=[], boot_mode="seccomp",
                             max_cpus=1 if time_travel else 8, build_seconds=1.0, built_at="now",
                             flavour=kernel.TIME_TRAVEL if time_travel else "")


def test_virtual_time_cmdline_has_inf_cpu_time_travel_and_the_model_clock_flag(tmp_path):
    spec = BootSpec(run_dir=tmp_path, steps=(), disks=(BlockDevice(Path("/m/device"), shared=True,
                                                                   model_clock=True),))
    args = kernel_cmdline(spec, _info(True))
    assert "time-travel=inf-cpu" in args and "flashbed.clock=virtual" in args
    assert "ubd0cv=disk0/device" in args  # ubd opens the model's clock beside it (disk0 -> /m)
    real = kernel_cmdline(replace(spec, disks=(BlockDevice(Path("/m/device"), shared=True),)), _info(False))
    assert not any(a.startswith("time-travel") or a.startswith("flashbed.clock") for a in real)
    assert _info(True).provenance()["flavour"] == "timetravel" and "flavour" not in _info(False).provenance()


def test_a_model_clock_disk_needs_the_time_travel_kernel(tmp_path):
    from flashbed.lab import uml
    spec = BootSpec(run_dir=tmp_path, steps=(), disks=(BlockDevice(Path("/m/device"), model_clock=True),))
    with pytest.raises(FlashbedError, match="time-travel flavour"):
        uml.boot(spec, _info(False))


def test_guest_time_limits_are_off_in_virtual_time(monkeypatch):
    from flashbed.lab.guest import guestlib
    monkeypatch.setattr(guestlib, "_VIRTUAL", [True])
    assert guestlib.limit(30.0) is None
    monkeypatch.setattr(guestlib, "_VIRTUAL", [False])
    assert guestlib.limit(30.0) == 30.0


def test_one_clock_keeps_todays_ids_and_both_clocks_key_their_cells():
    from flashbed.plan import PlanRequest, make_plan
    base = dict(fs=("ext4",), devices=("emmc-8g@256M",), studies=("mkfs",))
    today = make_plan(PlanRequest(**base))
    assert {c.clock for c in today.cells} == {"virtual"}  # auto, the default
    for clocks in (("real",), ("virtual",), ("auto",)):
        plan = make_plan(PlanRequest(**base, clocks=clocks))
        assert [c.key.id for c in plan.cells] == [c.key.id for c in today.cells]
        assert {c.clock for c in plan.cells} == {"real" if clocks == ("real",) else "virtual"}
    # real time keeps the ids of the runs from before the clock axis (then: no clocks field)
    assert PlanRequest(**base, clocks=("real",)).run_id() == PlanRequest(**base, clocks=()).run_id()
    ids = {PlanRequest(**base, clocks=c).run_id() for c in (("real",), ("virtual",), ("auto",))}
    assert len(ids) == 3 and PlanRequest(**base).run_id() == PlanRequest(**base, clocks=("auto",)).run_id()
    both = make_plan(PlanRequest(**base, clocks=("real", "virtual")))
    assert sorted(c.key.id for c in both.cells) == ["emmc-8g@256M/clock-real/ext4/mkfs/r0",
                                                   "emmc-8g@256M/clock-virtual/ext4/mkfs/r0"]


def test_virtual_time_on_nandsim_runs_in_real_time_and_says_so():
    from flashbed.plan import PlanRequest, clock_notes, make_plan
    plan = make_plan(PlanRequest(fs=("ubifs",), devices=("nand-2g-4k@128M",), studies=("mkfs",), clocks=("virtual",)))
    assert {c.clock for c in plan.cells} == {"real"}
    notes = clock_notes(plan)
    assert notes == ["1 cell on nand-2g-4k@128M (nandsim) runs in real time: virtual time needs a device the "
                     "emulator serves (nandsim and real devices have no model clock)"]


@pytest.mark.parametrize("argv,words", [
    (["run", "--clock", "lunar", "--study", "mkfs"], "--clock 'lunar' must be auto (the default: virtual time "
                                                      "where a cell can run in it), real or virtual"),
    (["run", "--clock", "auto,virtual", "--study", "mkfs"], "--clock auto,virtual: auto already picks real or "
                                                            "virtual per cell: give it alone"),
    (["run", "--clock", "real", "--clock", "auto", "--study", "mkfs"], "--clock real,auto: auto already picks"),
    (["run", "--clock", "", "--study", "mkfs"], "--clock '': an empty value: give one"),
    (["run", "--clock", "virtual", "--kernel", "6.12", "--study", "mkfs"], "lab kernel 6.12 has no virtual-time"),
    (["run", "--clock", "virtual", "--cpus", "2", "--study", "mkfs"], "--clock virtual runs one vCPU"),
])
def test_bad_run_clock_is_one_line(argv, words, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


def test_a_cell_file_of_one_clock_is_as_before_and_one_of_two_reads_back():
    import json

    from flashbed.results import CellKey, CellResult
    one = CellResult(key=CellKey("emmc-8g", "ext4", "bigfile"), status="ok")
    assert "clock" not in one.to_json()["key"]
    two = CellResult(key=CellKey("emmc-8g", "ext4", "bigfile", clock="virtual"), status="ok")
    assert CellResult.from_json(json.loads(json.dumps(two.to_json()))).key == two.key


def test_kernel_build_clock_is_checked(capsys):
    assert main(["kernel", "build", "--clock", "quartz"]) == 2
    assert "--clock 'quartz' must be real or virtual" in capsys.readouterr().err
    assert main(["kernel", "build", "--kernel", "6.12", "--clock", "virtual"]) == 2
    assert "6.12 has no virtual-time flavour" in capsys.readouterr().err
