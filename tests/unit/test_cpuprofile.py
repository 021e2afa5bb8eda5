"""The guest CPU cost model of virtual time (issue 17): the profile catalogue, --cpu-profile
as an axis, the lab's command line, the phase's CPU share and the report's CPU-bound mark."""

from __future__ import annotations

from dataclasses import replace

import pytest

from flashbed.cli import main
from flashbed.errors import FlashbedError
from flashbed.lab import cpuprofile, kernel
from flashbed.lab.boundary import BootSpec, CpuCosts
from flashbed.lab.uml import kernel_cmdline
from flashbed.report.load import load_run
from tests.report_fixtures import generator
from tests.unit.test_clock import _info

gen = generator()


def test_the_catalogue_cites_every_profile_and_marks_its_estimates():
    cat = cpuprofile.catalogue()
    assert cat.default in cat.profiles and {"none", "cortex-a8", "cortex-a72"} <= set(cat.profiles)
    assert cpuprofile.get("none").costs == CpuCosts(0, 0, 0)
    for p in cat.profiles.values():
        assert p.source.strip(), p.name
        if p.name != "none":
            assert p.costs.syscall_ns > 0 and p.costs.fault_ns > 0 and p.costs.switch_ns > 0
    # a figure that is no measurement of its board says so, and says how it was made
    assert cpuprofile.get("rpi4").estimate and "(estimate)" in cpuprofile.get("rpi4").summary()
    assert "estimate" not in cpuprofile.get("cortex-a8").describe()
    assert cpuprofile.get(None) is cpuprofile.default() and cpuprofile.get("") is cpuprofile.default()


@pytest.mark.parametrize("text,words", [
    ('default = "a"\n[profile.a]\nsyscall_ns = -1\nfault_ns = 1\nswitch_ns = 1\nsource = "x"',
     "syscall_ns must be whole ns"),
    ('default = "a"\n[profile.a]\nsyscall_ns = 1\nfault_ns = 1.5\nswitch_ns = 1\nsource = "x"',
     "fault_ns must be whole ns"),
    ('default = "a"\n[profile.a]\nsyscall_ns = 1\nfault_ns = 1\nswitch_ns = 1',
     "profile a names no source"),
    ('default = "b"\n[profile.a]\nsyscall_ns = 1\nfault_ns = 1\nswitch_ns = 1\nsource = "x"',
     "the default profile 'b' is not one of its profiles"),
    ('default = ', "cpuprofiles.toml"),
])
def test_a_bad_catalogue_is_one_line(text, words):
    with pytest.raises(FlashbedError) as e:
        cpuprofile.parse_catalogue(text)
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("argv", [
    ["run", "--clock", "virtual", "--study", "mkfs", "--cpu-profile", "pentium"],
    ["run", "--clock", "virtual", "--study", "mkfs", "--cpu-profile", "none,pentium"],
    ["lab", "exec", "--clock", "virtual", "--cpu-profile", "pentium", "--", "true"],
])
def test_an_unknown_cpu_profile_is_one_line(argv, capsys, tmp_path):
    assert main(argv + (["--out", str(tmp_path / "run")] if argv[0] == "run" else [])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown CPU profile 'pentium': choose none, cortex-a8" in err
    assert "Traceback" not in err


def test_an_empty_cpu_profile_item_is_one_line(capsys, tmp_path):
    assert main(["run", "--study", "mkfs", "--cpu-profile", "none,", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--cpu-profile 'none,' has an empty item" in err


BASE = dict(fs=("ext4",), devices=("emmc-8g@256M",), studies=("mkfs",))


def test_one_profile_keeps_the_cell_ids_and_several_are_an_axis_of_virtual_cells():
    from flashbed.plan import PlanRequest, clock_notes, cpu_profiles, make_plan
    virtual = make_plan(PlanRequest(**BASE, clocks=("virtual",)))
    assert [c.cpu_profile for c in virtual.cells] == [cpuprofile.default().name]
    one = make_plan(PlanRequest(**BASE, clocks=("virtual",), cpu_profiles=("none",)))
    assert [c.key.id for c in one.cells] == [c.key.id for c in virtual.cells]
    assert [c.cpu_profile for c in one.cells] == ["none"] and list(cpu_profiles(one)) == ["none"]
    # given, it is the run's identity; left out, the default is not (runs from before keep their ids)
    assert PlanRequest(**BASE, clocks=("virtual",)).run_id() != \
        PlanRequest(**BASE, clocks=("virtual",), cpu_profiles=("none",)).run_id()
    assert PlanRequest(**BASE).run_id() == make_plan(PlanRequest(**BASE)).request.run_id()
    two = make_plan(PlanRequest(**BASE, clocks=("real", "virtual"), cpu_profiles=("none", "cortex-a72")))
    assert sorted(c.key.id for c in two.cells) == [
        "emmc-8g@256M/clock-real/ext4/mkfs/r0",
        "emmc-8g@256M/clock-virtual/cpu-cortex-a72/ext4/mkfs/r0",
        "emmc-8g@256M/clock-virtual/cpu-none/ext4/mkfs/r0"]
    assert {c.cpu_profile for c in two.cells if c.clock == "real"} == {""}
    assert clock_notes(two) == [cpuprofile.REAL_TIME_NOTE]
    assert clock_notes(virtual) == []


def test_real_time_ignores_a_cpu_profile_and_says_so_once():
    from flashbed.plan import PlanRequest, clock_notes, make_plan
    plan = make_plan(PlanRequest(**BASE, cpu_profiles=("cortex-a8", "none"), clocks=("real",)))
    assert [c.key.id for c in plan.cells] == ["emmc-8g@256M/ext4/mkfs/r0"]
    assert [c.cpu_profile for c in plan.cells] == [""]
    assert clock_notes(plan) == [cpuprofile.REAL_TIME_NOTE]


def test_the_costs_go_on_the_time_travel_kernels_command_line_only(tmp_path):
    spec = BootSpec(run_dir=tmp_path, steps=(), cpu=CpuCosts(510, 1820, 17520))
    assert "flashbed_cpu=510,1820,17520" in kernel_cmdline(spec, _info(True))
    assert not any(a.startswith("flashbed_cpu") for a in kernel_cmdline(spec, _info(False)))
    assert not any(a.startswith("flashbed_cpu") for a in kernel_cmdline(replace(spec, cpu=None), _info(True)))


def test_the_cpu_charge_patch_is_the_time_travel_flavours_only():
    plain, tt = kernel.KERNELS["7.3"], kernel.KERNELS["7.3"].time_travel_flavour()
    names = {p.name for p in tt.patch_files()} - {p.name for p in plain.patch_files()}
    assert any("cpu-cost" in n for n in names)


def test_a_phase_cpu_share_comes_from_the_guests_counts_at_its_start_and_end():
    assert cpuprofile.guest_cpu({"ns": 1_000, "cpu_ns": 100}, {"ns": 2_001_000, "cpu_ns": 1_500_100}) == \
        {"guest_seconds": 0.002, "cpu_seconds": 0.0015}
    assert cpuprofile.guest_cpu(None, {"ns": 5, "cpu_ns": 1}) == {}  # real time: the guest said nothing
    assert cpuprofile.guest_cpu({"ns": 9, "cpu_ns": 0}, {"ns": 5, "cpu_ns": 1}) == {}


def _virtual_cell(fs, runtime, busy, guest, cpu, repeat=0):
    phase = {"busy_seconds": busy, "wall_seconds": guest, "guest_seconds": guest, "cpu_seconds": cpu}
    r = gen.cell(fs, "bandwidth", [("randread 4k direct", "iops", 2000.0, "IO/s"),
                                   ("randread 4k direct", "runtime", runtime, "s")],
                 device_stats={"randread 4k direct": phase}, repeat=repeat)
    r.provenance = {"pace": "virtual", "clock": "virtual", "cpu_profile": {"name": "cortex-a8"}}
    return r


def test_a_virtual_figure_is_cpu_bound_when_the_cpu_charge_is_most_of_its_guest_time(tmp_path):
    cells = [_virtual_cell("ext4", 2.0, 0.6, 2.1, 1.4),  # CPU 67 % of the phase: CPU-bound
             _virtual_cell("f2fs", 2.0, 1.7, 2.1, 0.3)]  # CPU 14 %, device 85 %: the device's
    run = load_run(gen.write_run(tmp_path / "r", cells))
    b = run.lab_bound("emmc-1g", "ext4", "bandwidth", "randread 4k direct", "iops")
    assert b is not None and b.mark == "CPU-bound" and b.cpu.mean == pytest.approx(100 * 1.4 / 2.1)
    assert b.text() == "CPU 67 %, device busy 30 %"
    assert run.lab_bound("emmc-1g", "f2fs", "bandwidth", "randread 4k direct", "iops") is None
    # a low device share in virtual time is not the lab's doing: never lab-bound
    idle = load_run(gen.write_run(tmp_path / "idle", [_virtual_cell("ext4", 2.0, 0.2, 2.1, 0.1)]))
    assert idle.busy_for("emmc-1g", "ext4", "bandwidth", "randread 4k direct").util.mean == pytest.approx(10.0)
    assert idle.lab_bound("emmc-1g", "ext4", "bandwidth", "randread 4k direct", "iops") is None


def test_the_tables_say_cpu_bound_with_both_shares(tmp_path):
    from flashbed.report import tables
    run = load_run(gen.write_run(tmp_path / "r", [_virtual_cell("ext4", 2.0, 0.6, 2.1, 1.4),
                                                 _virtual_cell("f2fs", 2.0, 1.7, 2.1, 0.3)]))
    cell = tables._lab_mark(tables.Cell("2000", 2000.0), run.lab_bound_case("emmc-1g", "ext4", "bandwidth",
                                                                            "randread 4k direct"))
    assert "(CPU-bound, CPU 67 %, device busy 30 %)" in cell.text
    busy = tables._busy_cell(run, "emmc-1g", "ext4", "bandwidth", "randread 4k direct")
    assert busy.text == "30 CPU-bound"


@pytest.mark.parametrize("argv,words", [
    (["bench", "cpu", "--cpu-profile", "pentium"], "unknown CPU profile 'pentium'"),
    (["bench", "cpu", "--calls", "0"], "--calls must be at least 1"),
    (["bench", "cpu", "--device", "nand-2g-4k@128M"], "bench cpu measures an emulated block device"),
])
def test_bench_cpu_bad_input_is_one_line(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


def test_the_report_names_the_clock_and_cpu_profile_of_a_target(tmp_path):
    prof = cpuprofile.get("rpi4")
    run = load_run(gen.write_run(tmp_path / "r", [_virtual_cell("ext4", 2.0, 0.6, 2.1, 1.4)],
                                 cpu_profiles={"cortex-a8": cpuprofile.get("cortex-a8").describe(),
                                               "rpi4": prof.describe()}))
    assert run.timing_for("emmc-1g") == ("virtual time, CPU profile cortex-a8 (ARM Cortex-A8 at 1 GHz (TI AM335x, "
                                         "the BeagleBone Black's AM3358))")
    real = gen.cell("ext4", "mkfs", [("empty", "mkfs", 0.5, "s")])
    real.provenance = {"clock": "real"}
    assert load_run(gen.write_run(tmp_path / "real", [real])).timing_for("emmc-1g") == "real time"
    # beside a real-time cell sorted first (auto runs the cpu study and cases of several vCPUs in real
    # time) the target's timed figures are still virtual time
    cpu = gen.cell("ext4", "appio", [("write", "runtime", 0.5, "s")])
    cpu.provenance = {"clock": "real"}
    both = load_run(gen.write_run(tmp_path / "both", [cpu, _virtual_cell("ext4", 2.0, 0.6, 2.1, 1.4)],
                                  cpu_profiles={"cortex-a8": cpuprofile.get("cortex-a8").describe()}))
    assert both.timing_for("emmc-1g").startswith("virtual time, CPU profile cortex-a8")


def test_the_cpu_study_measures_real_cpu_time_in_a_virtual_run():
    from flashbed.plan import PlanRequest, clock_notes, make_plan
    base = dict(fs=("ext4",), devices=("emmc-8g@256M",), studies=("cpu", "mkfs"))
    plan = make_plan(PlanRequest(**base, clocks=("virtual",)))
    assert {(c.key.study, c.clock, c.cpu_profile) for c in plan.cells} == \
        {("cpu", "real", ""), ("mkfs", "virtual", cpuprofile.default().name)}
    assert any("study cpu measures the lab's real CPU time" in n for n in clock_notes(plan))
    both = make_plan(PlanRequest(**base, clocks=("real", "virtual")))
    assert sorted(c.key.id for c in both.cells if c.key.study == "cpu") == ["emmc-8g@256M/clock-real/ext4/cpu/r0"]
