"""The kernel axis (--kernel, repeatable), guest vCPUs (--cpus, mixed's scaling case), what a
plan leaves out, and the nanosecond CPU accounting of the cpu study: no kernel needed."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from flashbed import cpus
from flashbed.cli import main
from flashbed.errors import FlashbedError
from flashbed.identity import run_kernels
from flashbed.lab.guest import fbtool
from flashbed.lab.kernel import DEFAULT_KERNEL, labels, recorded_label
from flashbed.plan import PlanRequest, make_plan
from flashbed.results import CellKey, CellResult, Measurement
from flashbed.studies import STUDIES
from flashbed.studies.mixed import SCALE
from tests.report_fixtures import generator

PLAIN = "plain-file@1G"
gen = generator()

# the scaling cases (the quick profile leaves them out)
SCALING = {"mixed": {"scale_cpus": [1, 2]}}


@pytest.fixture
def four_host_cpus(monkeypatch):
    """The plan's own rules, not this host's CPU count (a 7.3 case of 2 vCPUs needs 2 host CPUs)."""
    monkeypatch.setattr(cpus, "available", lambda: 4)


# ---- the cell key and the run id --------------------------------------------------------------
def test_the_cell_key_names_the_kernel_only_when_the_run_has_several():
    one = CellKey("emmc-8g", "ext4", "bigfile")
    two = CellKey("emmc-8g", "ext4", "bigfile", kernel="6.12")
    assert one.id == "emmc-8g/ext4/bigfile/r0"
    assert two.id == "emmc-8g/kernel-6.12/ext4/bigfile/r0"
    assert CellKey("emmc-8g", "ext4", "mount", "fill0", 1, "7.3:ptrace").file_name == \
        "emmc-8g__kernel-7.3_ptrace__ext4__mount__fill0__r1.json"
    # a cell file of one kernel is what it was before the axis; one of several reads back whole
    plain = CellResult(key=one, status="ok", measurements=[Measurement("", "bandwidth", 1.0, "MB/s")])
    assert "kernel" not in plain.to_json()["key"]
    back = CellResult.from_json(json.loads(json.dumps(CellResult(key=two, status="ok").to_json())))
    assert back.key == two and CellResult.from_json(plain.to_json()).key == one


def test_one_kernel_keeps_the_run_id_and_cell_ids_and_a_named_kernel_or_vcpus_change_the_id():
    req = PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("bigfile",), clocks=("real",))
    # the id as it was computed before --kernel, --cpus, --target and --clock (their defaults, real time
    # for the clock, are not part of it)
    old = {k: v for k, v in asdict(req.resolved()).items() if k not in ("kernels", "cpus", "pace", "target", "clocks",
                                                                               "cpu_profiles", "robust", "tune")}
    assert req.run_id() == "quick-" + hashlib.sha256(json.dumps(old, sort_keys=True).encode()).hexdigest()[:8]
    ids = {req.run_id(), PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("bigfile",), kernels=("6.12",)).run_id(),
           PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("bigfile",), cpus=2).run_id()}
    assert len(ids) == 3
    # the stored request (JSON lists) finds the same run again
    stored = PlanRequest(**{k: tuple(v) if isinstance(v, list) else v for k, v in
                            json.loads(json.dumps(asdict(PlanRequest(kernels=("6.12", "7.3"))))).items()})
    assert stored.run_id() == PlanRequest(kernels=("6.12", "7.3")).run_id()
    plan = make_plan(PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("bigfile",), kernels=("6.12",)))
    dev = plan.cells[0].key.device
    assert [c.key.id for c in plan.cells] == [f"{dev}/ext4/bigfile/r0"] and plan.cells[0].kernel == "6.12"


def test_several_kernels_give_cells_of_each_with_the_kernel_in_the_key():
    plan = make_plan(PlanRequest(fs=("ext4", "f2fs"), devices=(PLAIN,), studies=("bigfile",),
                                 kernels=labels(["6.12", "7.3", "6.12"])))
    assert plan.kernels == ("6.12", "7.3")
    dev = plan.cells[0].key.device
    assert sorted(c.key.id for c in plan.cells) == sorted(
        f"{dev}/kernel-{k}/{fs}/bigfile/r0" for k in ("6.12", "7.3") for fs in ("ext4", "f2fs"))
    assert {(c.key.kernel, c.kernel) for c in plan.cells} == {("6.12", "6.12"), ("7.3", "7.3")}
    # the default mode is the bare name; another mode is part of the label
    assert labels(["7.3:seccomp", "7.3:ptrace"]) == ("7.3", "7.3:ptrace")


# ---- which kernels a run's cells run on -------------------------------------------------------
def test_run_kernels_finishes_an_existing_run_on_its_recorded_kernels():
    assert run_kernels((), None) == ((DEFAULT_KERNEL,), "")  # a new run: the default
    assert run_kernels(("6.12",), None) == (("6.12",), "")
    assert run_kernels((), (DEFAULT_KERNEL,)) == ((DEFAULT_KERNEL,), "")
    # a run made on 6.12 when it was the default is finished on 6.12, and says so in one line
    kernels, note = run_kernels((), ("6.12",))
    assert kernels == ("6.12",) and "finished on it" in note and "\n" not in note
    assert run_kernels(("6.12", "7.3"), ("6.12", "7.3")) == (("6.12", "7.3"), "")
    with pytest.raises(FlashbedError, match="lab kernel 3.19, which this flashbed does not have"):
        run_kernels((), ("3.19",))


def test_a_manifest_names_its_kernel_by_label_even_from_before_the_kernel_axis():
    assert recorded_label({"release": "6.12.117", "source_version": "6.12.117-1~deb12u1"}) == "6.12"
    assert recorded_label({"name": "7.3", "release": "7.3.4", "boot_mode": "seccomp"}) == "7.3"
    assert recorded_label({"name": "7.3", "release": "7.3.4", "boot_mode": "ptrace"}) == "7.3:ptrace"
    assert recorded_label({}) is None


def test_the_cli_resumes_a_run_on_the_kernel_its_manifest_records(tmp_path):
    from flashbed.identity import recorded_kernels as _recorded_kernels
    from flashbed.store import RunStore
    store = RunStore(tmp_path / "run")
    assert _recorded_kernels(store) is None
    store.create()
    man = json.loads(store.manifest_path.read_text()) if store.manifest_path.exists() else {}
    man["kernel"] = {"release": "6.12.117"}
    store.manifest_path.write_text(json.dumps(man))
    assert _recorded_kernels(store) == ("6.12",)
    man["kernels"] = {"6.12": {"name": "6.12", "boot_mode": "ptrace"}, "7.3": {"name": "7.3", "boot_mode": "seccomp"}}
    store.manifest_path.write_text(json.dumps(man))
    assert _recorded_kernels(store) == ("6.12", "7.3")


# ---- vCPUs and what a plan leaves out ---------------------------------------------------------
def test_mixed_gains_a_scaling_case_per_vcpu_count_of_1_2_4_writers(four_host_cpus, tmp_path):
    plan = make_plan(PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("mixed",), overrides=SCALING))
    assert {c.key.case: c.cpus for c in plan.cells} == {"": 1, "scale-1vcpu": 1, "scale-2vcpu": 2}
    assert not plan.skipped and plan.skipped_lines() == []
    scale = next(c for c in plan.cells if c.key.case == "scale-2vcpu")
    steps = [s.name for s in STUDIES["mixed"].boots(scale, tmp_path)[0]]
    writers = [SCALE.format(cpus=2, jobs=n) for n in (1, 2, 4)]
    assert [s for s in steps if s in writers] == writers == \
        ["scale-2vcpu 1 writers", "scale-2vcpu 2 writers", "scale-2vcpu 4 writers"]
    assert SCALE.parse("scale-2vcpu 4 writers") == {"cpus": 2, "jobs": 4}
    # --cpus does not move a case that sets its own vCPUs; the mix takes it
    two = make_plan(PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("mixed",), cpus=2, overrides=SCALING))
    assert {c.key.case: c.cpus for c in two.cells} == {"": 2, "scale-1vcpu": 1, "scale-2vcpu": 2}
    none = make_plan(PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("mixed",),
                                 overrides={"mixed": {"scale_cpus": [0]}}))
    assert [c.key.case for c in none.cells] == [""]


def test_a_kernel_without_smp_skips_the_2_vcpu_case_with_one_line_per_group(four_host_cpus):
    plan = make_plan(PlanRequest(fs=("ext4", "f2fs"), devices=(PLAIN,), studies=("mixed",), kernels=("6.12", "7.3"),
                                 overrides=SCALING))
    run = {(c.key.kernel, c.key.case) for c in plan.cells}
    assert ("6.12", "scale-1vcpu") in run and ("7.3", "scale-2vcpu") in run and ("6.12", "scale-2vcpu") not in run
    assert {(s.kernel, s.fs, s.case, s.cpus) for s in plan.skipped} == {
        ("6.12", "ext4", "scale-2vcpu", 2), ("6.12", "f2fs", "scale-2vcpu", 2)}
    lines = plan.skipped_lines()
    assert lines == ["mixed: 2 cells at 2 vCPUs not run on lab kernel 6.12: lab kernel 6.12 has no SMP "
                     "(its UML runs one vCPU)"]
    # 6.12 alone: the scaling case at 1 vCPU runs, the one at 2 is left out
    alone = make_plan(PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("mixed",), kernels=("6.12",), overrides=SCALING))
    assert sorted(c.key.case for c in alone.cells) == ["", "scale-1vcpu"] and len(alone.skipped_lines()) == 1


def test_a_case_needing_more_host_cpus_than_there_are_is_left_out(monkeypatch):
    monkeypatch.setattr(cpus, "available", lambda: 1)
    plan = make_plan(PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("mixed",), overrides=SCALING))
    assert "scale-2vcpu" not in {c.key.case for c in plan.cells}
    assert plan.skipped_lines() == ["mixed: 1 cell at 2 vCPUs not run on lab kernel 7.3: 2 vCPUs need 2 host "
                                    "CPUs, this host has 1"]


@pytest.mark.parametrize("req,words", [
    (PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("bigfile",), kernels=("6.12",), cpus=2),
     "lab kernel 6.12 has no SMP"),
    (PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("bigfile",), cpus=0), "--cpus must be at least 1"),
    (PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("bigfile",), kernels=("5.10",)),
     "unknown lab kernel '5.10': choose 6.12 or 7.3"),
])
def test_bad_kernel_and_vcpu_requests_fail_before_any_cell_runs(req, words, four_host_cpus):
    with pytest.raises(FlashbedError, match=words):
        make_plan(req)


@pytest.mark.parametrize("argv,words", [
    (["--kernel", "5.10"], "unknown lab kernel '5.10': choose 6.12 or 7.3"),
    (["--cpus", "0"], "--cpus must be at least 1 (got 0)"),
    (["--cpus", "2", "--kernel", "6.12"], "lab kernel 6.12 has no SMP (its UML runs one vCPU): drop --cpus 2"),
])
def test_bad_kernel_options_are_one_line_and_exit_2(argv, words, capsys, tmp_path):
    assert main(["run", "--study", "bigfile", "--fs", "ext4", "--out", str(tmp_path / "r")] + argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_resume_takes_no_kernel_or_vcpus(capsys):
    for opt in ("--kernel", "--cpus"):
        assert main(["run", "--resume", "x", opt, "2"]) == 2
        assert f"--resume finishes the run's own plan; drop {opt}" in capsys.readouterr().err


# ---- nanosecond CPU accounting (fbtool, in the guest) -----------------------------------------
SCHEDSTAT = "1234567891 20480 17\n"  # run ns, wait ns, time slices (saved from a lab guest)
STAT_KWORKER = ("61 (kworker/u2:3-flush-98:0) I 2 0 0 0 -1 69238880 0 0 0 0 0 3 0 0 20 0 1 0 312 0 0 "
                "18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
STAT_USER = ("412 (dd (weird) name) R 410 412 1 34816 412 4194304 120 0 0 0 1 9 0 0 20 0 1 0 4870 3158016 "
             "242 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")


def test_schedstat_gives_run_time_in_ns_and_stat_tells_kernel_threads():
    assert fbtool.schedstat_ns(SCHEDSTAT) == 1234567891
    assert fbtool.kthread_name(STAT_KWORKER) == "kworker/u2:3-flush-98:0"
    assert fbtool.kthread_name(STAT_USER) is None  # a user task, even with parentheses in its name
    with pytest.raises((ValueError, IndexError)):  # no text: the task has gone (run_ns gives None)
        fbtool.schedstat_ns("")


@pytest.mark.parametrize("name,group", [
    ("kworker/u2:3-flush-98:0", "kworker (writeback)"),
    ("kworker/u2:0-flush-hostfs-2", "kworker (writeback)"),
    ("kworker/0:1H-kblockd", "kworker (kblockd)"),
    ("kworker/1:0", "kworker"),
    ("ksoftirqd/1", "ksoftirqd"),
    ("jbd2/ubda-8", "jbd2/ubda-8"),
    ("f2fs_ckpt-98:0", "f2fs_ckpt-98:0"),
])
def test_kernel_threads_are_counted_by_role(name, group):
    assert fbtool.thread_group(name) == group


def test_the_cpu_study_reads_ns_figures_and_keeps_the_busiest_kernel_threads(tmp_path):
    from flashbed.lab.boundary import BootResult
    from flashbed.studies.base import CellSpec
    st = STUDIES["cpu"]
    plan = make_plan(PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("cpu",)))
    spec: CellSpec = plan.cells[0]
    step = {"write": {"rc": 0, "real": 2.0, "user": 0.0, "sys": 0.01, "workload_cpu": 0.3125, "kthread_cpu": 0.1875,
                      "kthreads": {"jbd2/ubda-8": 0.125, "kworker (writeback)": 0.0625}, "clock": "schedstat"}}
    boot = BootResult(status="done", steps=[_step("write", step["write"])], boot_seconds=1.0, total_seconds=3.0,
                      console_log="", exit_code=0, kernel_release="7.3.4")
    out = st.parse(spec, [boot], tmp_path)
    got = {(m.case, m.metric): m.value for m in out.measurements}
    # the workload's own ns figure, not rusage's ticks
    assert got[("write", "workload_cpu")] == 0.3125 and got[("write", "kthread_cpu")] == 0.1875
    assert got[("write", "cpu_per_io")] == pytest.approx((0.3125 + 0.1875) / 2.0)
    assert out.extra["write_kthreads"]["jbd2/ubda-8"] == 0.125 and "jbd2/ubda-8 125.00 ms" in out.headline


def _step(name: str, data: dict):
    from flashbed.lab.boundary import StepResult
    return StepResult(name=name, cmd="fbtool cpu -- dd", status="ok", rc=0, seconds=1.0, stdout=json.dumps(data),
                      stderr="")


# ---- the report: two kernels --------------------------------------------------------------------
def _kernel_run(root: Path, release: str, name: str, bw: float, lat: float) -> Path:
    cells = [gen.cell(fs, "bigfile", [("write", "bandwidth", bw * k, "MB/s"), ("write", "lat_p50", lat, "µs"),
                                      ("read", "bandwidth", 100.0 * k, "MB/s")])
             for fs, k in (("ext4", 1.0), ("f2fs", 1.1))]
    return gen.write_run(root, cells, kernel={"name": name, "release": release, "source_version": release})


def test_report_compares_two_runs_on_two_kernels_and_lists_what_moved(tmp_path):
    from flashbed.report import compare
    a = _kernel_run(tmp_path / "a", "6.12.117", "6.12", bw=20.0, lat=400.0)
    b = _kernel_run(tmp_path / "b", "7.3.4", "7.3", bw=30.0, lat=410.0)
    paths = compare(a, b, tmp_path / "out")
    s = json.loads(paths.summary.read_text())
    moved = {(m["fs_a"], m["case"], m["metric"]): m for m in s["moved"]}
    # write bandwidth moved by 50 % on both filesystems; latency (2.5 %) and reads (same) did not
    assert set(moved) == {("ext4", "write", "bandwidth"), ("f2fs", "write", "bandwidth")}
    assert moved[("ext4", "write", "bandwidth")]["ratio"] == pytest.approx(1.5)
    assert moved[("ext4", "write", "bandwidth")]["verdict"] == "better"
    md = paths.markdown.read_text()
    assert "A ran on lab kernel 6.12.117 (6.12 kernel), B on 7.3.4 (7.3 kernel)" in md
    assert "tab-cmp-moved" in s["tables"]


def test_one_run_of_two_kernels_reports_each_kernel_as_its_own_target(tmp_path):
    from flashbed.report.load import load_run
    cells = [CellResult(key=CellKey("emmc-1g", "ext4", "bigfile", kernel=k), status="ok",
                        measurements=[Measurement("write", "bandwidth", v, "MB/s")])
             for k, v in (("6.12", 20.0), ("7.3", 30.0))]
    kernels = {"6.12": {"name": "6.12", "release": "6.12.117"}, "7.3": {"name": "7.3", "release": "7.3.4"}}
    run = load_run(gen.write_run(tmp_path / "r", cells, kernels=kernels,
                                 kernel={"name": "6.12, 7.3", "release": "6.12.117, 7.3.4"}))
    assert run.devices() == ["emmc-1g · kernel 6.12", "emmc-1g · kernel 7.3"]
    assert run.get("emmc-1g · kernel 7.3", "ext4", "bigfile", "write", "bandwidth").mean == 30.0
    assert run.kernel_for("emmc-1g · kernel 6.12") == "6.12.117 (6.12)"
    assert run.device_of("emmc-1g · kernel 7.3") == "emmc-1g"
    assert "6.12.117" in run.kernel_text and "7.3.4" in run.kernel_text


def test_the_report_answers_who_scales_with_writers_and_vcpus_and_says_what_was_left_out(tmp_path):
    from flashbed.report import scaling
    from flashbed.report.load import load_run
    from flashbed.studies.views import Scaling
    rate = {("ext4", 1): (2.0, 2.0, 2.0), ("ext4", 2): (2.0, 2.0, 3.0),
            ("f2fs", 1): (1.0, 1.5, 2.0), ("f2fs", 2): (1.0, 2.0, 4.0)}
    cells = [gen.cell(fs, "mixed", [(SCALE.format(cpus=c, jobs=j), "bandwidth", v, "MB/s")
                                    for j, v in zip((1, 2, 4), rates)], case=f"scale-{c}vcpu")
             for (fs, c), rates in rate.items()]
    skipped = [{"device": "emmc-1g", "kernel": "6.12", "fs": "ext4", "study": "mixed", "case": "scale-4vcpu",
                "cpus": 4, "why": "lab kernel 6.12 has no SMP"}]
    run = load_run(gen.write_run(tmp_path / "r", cells, skipped=skipped))
    spec = next(f for f in STUDIES["mixed"].figures if isinstance(f, Scaling))
    text = scaling.answer(run, "emmc-1g", "mixed", spec).text
    # with writers at 1 vCPU: f2fs 2x, ext4 1x; with vCPUs at 4 writers: f2fs 2x, ext4 1.5x
    assert "with writers (4 writers / 1, at 1 vCPU): **f2fs** 2.0×, ext4 1.00×" in text
    assert "with vCPUs (2 vCPU / 1 vCPU, at 4 writers): **f2fs** 2.0×, ext4 1.50×" in text
    assert "lab-bound" not in text  # no device statistics: nothing says the lab set these
    table = scaling.table(run, "emmc-1g", "mixed", spec)
    assert [[c.text for c in row[:2]] for row in table.rows] == [
        ["ext4", "1 vCPU"], ["ext4", "2 vCPU"], ["f2fs", "1 vCPU"], ["f2fs", "2 vCPU"]]
    assert "4 vCPU not run: lab kernel 6.12 has no SMP" in table.note


def test_results_text_names_each_kernel_and_says_once_what_was_left_out(tmp_path):
    import io

    from flashbed.report.text import print_results
    from flashbed.store import RunStore
    cells = [CellResult(key=CellKey("emmc-1g", "ext4", "mixed", "scale-1vcpu", r, k), status="ok", headline="h",
                        measurements=[Measurement("scale-1vcpu 1 writers", "bandwidth", 2.0, "MB/s")])
             for k in ("6.12", "7.3") for r in (0, 1)]
    skipped = [{"device": "emmc-1g", "kernel": "6.12", "fs": "ext4", "study": "mixed", "case": "scale-2vcpu",
                "cpus": 2, "why": "lab kernel 6.12 has no SMP"}] * 2
    kernels = {"6.12": {"release": "6.12.117"}, "7.3": {"release": "7.3.4"}}
    out = io.StringIO()
    print_results(RunStore(gen.write_run(tmp_path / "r", cells, kernels=kernels, skipped=skipped, cells=4)), stream=out)
    text = out.getvalue()
    assert "kernel 6.12 (6.12.117), 7.3 (7.3.4)" in text and "ext4 (6.12)" in text and "ext4 (7.3)" in text
    lines = [ln for ln in text.splitlines() if "not run" in ln]
    assert len(lines) == 1 and "scale-2vcpu not run on lab kernel 6.12 (2 cells)" in lines[0]
