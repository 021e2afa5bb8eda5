"""Report loading: aggregation over repeats, failures, missing studies, derived metrics, errors."""

from __future__ import annotations

import json
import statistics

import pytest

from tests.report_fixtures import generator

from flashbed.errors import FlashbedError
from flashbed.report.load import load_run

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
