"""Report loading: aggregation over repeats, failures, missing studies, derived metrics, errors."""

from __future__ import annotations

import json
import statistics

import pytest

from flashbed.errors import FlashbedError
from flashbed.report.load import load_run
from tests.report_fixtures import generator

gen = generator()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return gen.make_run(tmp_path_factory.mktemp("load") / "run")


@pytest.fixture(scope="module")
def run(run_dir):
    return load_run(run_dir)


def test_structure(run):
    assert run.devices() == ["emmc-8g", "nand-mlc-2g"]
    assert run.studies("nand-mlc-2g") == ["mount", "boot"]
    assert run.studies()[:3] == ["bandwidth", "mixed", "bigfile"]
    assert run.filesystems("emmc-8g") == ["btrfs", "ext4", "ext4+noatime", "f2fs+discard"]
    assert run.cases("emmc-8g", "bandwidth")[:2] == ["read 4k direct", "read 4k buffered"]
    assert run.cases("nand-mlc-2g", "mount")[0] == "128MB fill0 clean"
    assert run.cases("nand-mlc-2g", "mount")[-1] == "1024MB fill75 unclean"


def test_mean_over_repeats_from_the_cell_files(run, run_dir):
    values = []
    for p in sorted((run_dir / "cells").glob("emmc-8g__ext4__bandwidth__randwrite_4k_direct__r*.json")):
        d = json.loads(p.read_text())
        values += [m["value"] for m in d["measurements"] if m["metric"] == "iops"]
    assert len(values) == 2
    st = run.get("emmc-8g", "ext4", "bandwidth", "randwrite 4k direct", "iops")
    assert st.n == 2 and st.unit == "IO/s"
    assert st.mean == pytest.approx(statistics.mean(values))
    assert st.sd == pytest.approx(statistics.stdev(values))
    assert (st.lo, st.hi) == (min(values), max(values))


def test_failed_cell_is_a_failure_not_a_value(run):
    assert [(f.fs, f.study, f.case, f.status) for f in run.failures] == [("btrfs", "powercut", "sync", "hang")]
    assert run.get("emmc-8g", "btrfs", "powercut", "sync", "iterations") is None
    assert "sync" in run.cases("emmc-8g", "powercut")
    assert run.failures_for("emmc-8g", "btrfs", "powercut", "sync")
    assert not run.failures_for("emmc-8g", "btrfs", "powercut", "async")


def test_missing_study_is_missing(run):
    assert run.missing_studies() == ["corruption"]
    assert "corruption" not in run.studies()


def test_derived_survived_and_erase_spread(run):
    # fixture: ext4 sync: 47 clean + 1 recovered of 50 -> 96 %
    st = run.get("emmc-8g", "ext4", "powercut", "sync", "survived")
    assert st.unit == "%" and st.mean == pytest.approx(96.0)
    ds = run.device_stat("emmc-8g", "ext4", "overwrite")
    assert ds["erase_spread"].mean == pytest.approx(ds["erase_count_max"].mean - ds["erase_count_min"].mean)
    # the "workload" phase is used, not "prepare"
    assert ds["write_amplification"].mean > 2


def test_study_device_stats_weight_write_amplification_by_host_bytes(tmp_path):
    def ds(wa, host):
        return {"workload": {"write_amplification": wa, "host_write_bytes": host}}
    d = gen.write_run(tmp_path / "r", [
        gen.cell("ext4", "bandwidth", [("a", "bandwidth", 1.0, "MB/s")], case="a", device_stats=ds(2.0, 100)),
        gen.cell("ext4", "bandwidth", [("b", "bandwidth", 1.0, "MB/s")], case="b", device_stats=ds(5.0, 300)),
    ])
    run = load_run(d)
    assert run.device_stat("emmc-1g", "ext4", "bandwidth")["write_amplification"].mean == pytest.approx(4.25)
    assert run.device_stat("emmc-1g", "ext4", "bandwidth", "a")["write_amplification"].mean == 2.0


def test_unclassified_outcomes_leave_survived_unknown(tmp_path):
    d = gen.write_run(tmp_path / "r", [
        gen.cell("ext4", "powercut", [("sync", "class:clean", 3, "count"), ("sync", "class:exploded", 1, "count")]),
    ])
    run = load_run(d)
    assert run.get("emmc-1g", "ext4", "powercut", "sync", "survived") is None
    assert any("exploded" in n and "weights.toml" in n for n in run.notes)


def test_ignored_outcomes_count_neither_way(tmp_path):
    # an iteration flashbed could not set up says nothing about the filesystem
    d = gen.write_run(tmp_path / "r", [
        gen.cell("ext4", "powercut", [("sync", "class:recovered", 3, "count"), ("sync", "class:error", 1, "count"),
                                      ("sync", "class:data-loss", 1, "count")]),
    ])
    assert load_run(d).get("emmc-1g", "ext4", "powercut", "sync", "survived").mean == pytest.approx(75.0)


def test_non_numeric_values_are_skipped(tmp_path):
    d = gen.write_run(tmp_path / "r", [
        gen.cell("ext4", "mkfs", [("empty", "used", float("nan"), "bytes"), ("empty", "mkfs", 0.5, "s")]),
    ])
    run = load_run(d)
    assert run.metrics("emmc-1g", "mkfs") == ["mkfs"]


@pytest.mark.parametrize("setup, message", [
    ("nodir", "no such run directory"),
    ("nomanifest", "not a flashbed run"),
    ("schema", "manifest schema"),
    ("nocells", "no cell results yet"),
    ("badcell", "not a flashbed cell result"),
])
def test_errors_are_one_clear_line(tmp_path, setup, message):
    d = tmp_path / "run"
    if setup != "nodir":
        d.mkdir()
    if setup in ("schema", "nocells", "badcell"):
        (d / "manifest.json").write_text(json.dumps({"schema": 2 if setup == "schema" else 1, "run_id": "x"}))
    if setup == "badcell":
        (d / "cells").mkdir()
        (d / "cells" / "x.json").write_text("{not json")
    with pytest.raises(FlashbedError) as e:
        load_run(d)
    assert message in str(e.value) and "\n" not in str(e.value)


# ---- statistics phases and device utilisation ---------------------------------------

def _phase(busy, wall=None, wa=None, host=None):
    d = {"busy_seconds": busy}
    for k, v in (("wall_seconds", wall), ("write_amplification", wa), ("host_write_bytes", host)):
        if v is not None:
            d[k] = v
    return d


def test_a_cell_with_a_phase_per_case_combines_them_and_keeps_each(tmp_path):
    """bandwidth samples the device around each job: the study's statistics are all its phases
    (write amplification weighted by host bytes, a read phase adding nothing), each phase kept."""
    d = gen.write_run(tmp_path / "r", [gen.cell("ext4", "bandwidth", [
        ("read 4k buffered", "bandwidth", 40.0, "MB/s"), ("read 4k buffered", "runtime", 1.6, "s"),
        ("write 4M direct", "bandwidth", 30.0, "MB/s"), ("write 4M direct", "runtime", 2.0, "s")],
        device_stats={"read 4k buffered": _phase(0.4, 2.5, wa=0.0, host=0),
                      "write 4M direct": _phase(1.8, 3.0, wa=1.5, host=100)})])
    run = load_run(d)
    whole = run.device_stat("emmc-1g", "ext4", "bandwidth")
    assert whole["write_amplification"].mean == pytest.approx(1.5)
    assert whole["busy_seconds"].mean == pytest.approx(2.2) and whole["wall_seconds"].mean == pytest.approx(5.5)
    assert run.phase_stat("emmc-1g", "ext4", "bandwidth", "read 4k buffered")["busy_seconds"].mean == 0.4
    # utilisation: busy time over the figure's own duration (fio's run time), not the phase's wall time
    read = run.busy_for("emmc-1g", "ext4", "bandwidth", "read 4k buffered")
    assert read.util.mean == pytest.approx(25.0) and "fio" in read.basis
    assert run.busy_for("emmc-1g", "ext4", "bandwidth", "write 4M direct").util.mean == pytest.approx(90.0)
    assert run.lab_bound("emmc-1g", "ext4", "bandwidth", "read 4k buffered", "bandwidth") is read
    assert run.lab_bound("emmc-1g", "ext4", "bandwidth", "read 4k buffered", "runtime") is None  # not a figure
    assert run.lab_bound("emmc-1g", "ext4", "bandwidth", "write 4M direct", "bandwidth") is None


def test_utilisation_needs_a_phase_of_the_figure_and_real_pace(tmp_path):
    cells = [
        # a measured time and a phase named after its case
        gen.cell("ext4", "bigfile", [("write", "seconds", 2.0, "s"), ("read", "seconds", 0.5, "s")],
                 device_stats={"write": _phase(1.6, 2.1)}),
        # several figures one after another in one phase: none has its own share
        gen.cell("ext4", "appio", [("write 1M fsync", "throughput", 900.0, "KB/s"),
                                   ("read 1M fsync", "throughput", 60000.0, "KB/s")],
                 device_stats={"workload": _phase(3.0, 10.0)}),
        # one figure in the cell's phase, no duration of its own: the phase's wall time
        gen.cell("ext4", "smallfiles", [("copy", "bandwidth", 1.0, "MB/s")], device_stats={"workload": _phase(1.0, 4.0)}),
        # fio jobs at once: the longest job's run time
        gen.cell("ext4", "mixed", [("seqread", "runtime", 3.0, "s"), ("randwrite", "runtime", 2.5, "s"),
                                   ("total", "bandwidth", 20.0, "MB/s")], device_stats={"workload": _phase(2.4, 4.0)}),
    ]
    run = load_run(gen.write_run(tmp_path / "r", cells))
    assert run.busy_for("emmc-1g", "ext4", "bigfile", "write").util.mean == pytest.approx(80.0)
    assert run.busy_for("emmc-1g", "ext4", "bigfile", "read") is None
    assert run.busy_for("emmc-1g", "ext4", "appio", "write 1M fsync") is None
    assert run.busy_for("emmc-1g", "ext4", "smallfiles", "copy").util.mean == pytest.approx(25.0)
    assert run.busy_for("emmc-1g", "ext4", "mixed", "total").util.mean == pytest.approx(80.0)
    paced_off = load_run(gen.write_run(tmp_path / "none", cells, request={"pace": "none"}))
    assert not paced_off.busy and not paced_off.paced


def test_device_part_kernel_name_and_sources_when_the_manifest_has_them(tmp_path):
    cells = [gen.cell("ext4", "mkfs", [("empty", "mkfs", 0.5, "s")])]
    plain = load_run(gen.write_run(tmp_path / "a", cells))
    assert plain.device_part("emmc-1g") == plain.real_part("emmc-1g") == ""
    assert plain.kernel_text == "6.12.38-flashbed"
    info = {"name": "emmc-8g", "kind": "block", "model": "Example eMMC 8GB", "part": "EX8G-123",
            "description": "8 GB eMMC 4.5 class",
            "sources": {"seq_read_mb_s": "vendor datasheet rev 2", "rand_write_4k_iops": ["bench A", "bench B"]}}
    run = load_run(gen.write_run(tmp_path / "b", cells, devices={"emmc-1g": info},
                                 kernel={"release": "7.3.1", "name": "7.3", "source_version": "7.3.1-1"}))
    assert run.real_part("emmc-1g") == "Example eMMC 8GB / EX8G-123"
    assert run.device_text("emmc-1g") == "emmc-1g (preset emmc-8g: block, models Example eMMC 8GB / EX8G-123)"
    assert run.device_part("emmc-1g") == ("8 GB eMMC 4.5 class; sources: seq_read_mb_s: vendor datasheet rev 2; "
                                          "rand_write_4k_iops: bench A; bench B")
    assert run.kernel_text == "7.3.1 (7.3 kernel, from linux-source 7.3.1-1)"
    # a twin's [part] table is named by its model, not printed as a table
    twin = {**info, "part": {"model": "SanDisk Ultra Fit 32 GB", "interface": "USB 2.0"}}
    del twin["model"]
    run = load_run(gen.write_run(tmp_path / "c", cells, devices={"emmc-1g": twin}))
    assert run.real_part("emmc-1g") == "SanDisk Ultra Fit 32 GB"
    assert "{" not in run.device_text("emmc-1g")
