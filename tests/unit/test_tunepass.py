"""`flashbed run --tune`'s steps as cells of the run: planned by make_plan from the cells before them,
run by the run's executor (here a fake that writes results), resumed from whatever was finished."""

from __future__ import annotations

import dataclasses
import json

import pytest

from flashbed import tune as T
from flashbed import tunepass
from flashbed.errors import FlashbedError
from flashbed.execute import manifest_for
from flashbed.identity import PlanRequest
from flashbed.plan import make_plan
from flashbed.results import CellResult, Measurement
from flashbed.status import CellStatus
from flashbed.store import RunStore
from flashbed.targets import LabTarget
from tests.report_fixtures import generator

DEVICE = "emmc-8g@512M"
# options spelled as today's mount tags, so that the plan parses them whatever the option syntax is
NOATIME, DISCARD = T.Option("noatime"), T.Option("discard")


@pytest.fixture(autouse=True)
def catalogue(monkeypatch):
    monkeypatch.setattr(T, "catalogue", lambda spec: {"f2fs": [NOATIME, DISCARD], "ext4": [NOATIME]}.get(spec, []))
    monkeypatch.setattr(T, "variant_spec", lambda base, opts: "+".join([base, *(o.text for o in opts)]))


# the 1 KiB overwrite rate with fsync of each variant (MB/s): logging's weightiest figure
RATE = {"ext4": 0.3, "f2fs": 0.6, "f2fs+noatime": 0.7, "f2fs+discard": 0.65, "f2fs+discard+noatime": 0.8,
        "ext4+noatime": 0.3}


def _result(spec) -> CellResult:
    k = spec.key
    if k.study == "overwrite":
        meas = [Measurement("1MB fsync", "bandwidth", RATE[k.fs], "MB/s")]
    else:  # every crash state recovered
        meas = [Measurement(*m) for m in generator().crash_meas(k.case or "sequences", {"recovered": 10})]
    return CellResult(key=k, status=CellStatus.OK, measurements=meas)


class FakeLabs:
    def describe(self) -> dict:
        return {"kernel": {"release": "7.3.4"}}


def _execute(calls):
    def execute(plan, store, labs, executor):
        calls.append(sorted(c.key.id for c in plan.cells))
        if not store.exists():
            store.write_manifest(manifest_for(plan, labs, store.root.name))
        for c in plan.cells:
            if not store.finished(c.key):
                store.write(_result(c))
        return list(store.results())
    return execute


@pytest.fixture
def plan():
    return make_plan(PlanRequest(fs=("ext4", "f2fs"), devices=(DEVICE,), studies=("overwrite", "crashstates"),
                                 tune=True))


def test_each_step_is_planned_from_the_cells_before_it(tmp_path, plan, monkeypatch):
    monkeypatch.setattr("flashbed.execute.tool_versions", lambda: {})
    store, calls = RunStore(tmp_path / "run"), []
    execute = _execute(calls)
    execute(plan, store, FakeLabs(), None)  # the plain cells
    first, n = tunepass.next_plan(plan, store, None)
    assert n == 3 and first.request == plan.request  # the run's own request: a resume is the same run
    assert {(c.key.fs, c.key.study) for c in first.cells} == \
        {(fs, s) for fs in ("f2fs+noatime", "f2fs+discard", "ext4+noatime") for s in ("crashstates", "overwrite")}
    said = []
    tunepass.run_tuning(plan, store, FakeLabs(), LabTarget(), execute, said.append)
    # singles, then the two that helped f2fs together, then nothing pending
    per_set = len(first.cells) // 3
    assert calls[1] == sorted(c.key.id for c in first.cells) and len(calls) == 3
    assert {k.split("/")[1] for k in calls[2]} == {"f2fs+discard+noatime"} and len(calls[2]) == per_set
    assert said == [f"tuning: 3 option sets to try, {3 * per_set} cells", f"tuning: 1 option set to try, {per_set} cells",
                    f"tuning: done, 4 option sets tried in {4 * per_set} cells (the plain run: {len(plan.cells)} cells)"]
    assert tunepass.next_plan(plan, store, None) == (None, 0)


def test_a_killed_pass_resumes_from_its_finished_cells(tmp_path, plan, monkeypatch):
    monkeypatch.setattr("flashbed.execute.tool_versions", lambda: {})
    store, calls = RunStore(tmp_path / "run"), []
    execute = _execute(calls)
    execute(plan, store, FakeLabs(), None)
    first, _n = tunepass.next_plan(plan, store, None)
    per_set = len(first.cells) // 3
    half = dataclasses.replace(first, cells=first.cells[:per_set + 1])
    execute(half, store, FakeLabs(), None)  # killed after one option set and a cell of the next
    again, n = tunepass.next_plan(plan, store, None)
    # the same step: the two option sets not finished, the cell of one finished kept (execute skips it)
    assert n == 2 and {c.key.id for c in again.cells} == {c.key.id for c in first.cells[per_set:]}
    assert json.loads(store.manifest_path.read_text())["request"]["tune"] is True


def test_tune_is_part_of_the_run_id_only_when_asked():
    plain = PlanRequest(fs=("ext4",), devices=(DEVICE,))
    assert dataclasses.replace(plain, tune=False).run_id() == plain.run_id()
    assert dataclasses.replace(plain, tune=True).run_id() != plain.run_id()


class TrialTarget(LabTarget):
    """The lab target, its plan check (the trial mkfs and mount of options) recorded, not booted."""

    def __init__(self):
        super().__init__()
        self.checked: list[list[str]] = []

    def check_plan(self, plan) -> None:
        self.checked.append(sorted({c.key.fs for c in plan.cells}))


def test_every_option_the_pass_may_try_is_checked_before_a_cell_runs(plan, monkeypatch):
    target = TrialTarget()
    assert tunepass.check(plan, target) == 3  # f2fs: noatime, discard; ext4: noatime
    # the target checks them all as one plan: the lab's trial makes and mounts them in one boot
    assert target.checked == [["ext4+noatime", "f2fs+discard", "f2fs+noatime"]]
    monkeypatch.setattr(T, "catalogue", lambda spec: [T.Option("frobnicate")] if spec == "f2fs" else [])
    with pytest.raises(FlashbedError, match="frobnicate"):
        tunepass.check(plan, LabTarget())


def test_a_tuned_run_says_and_keeps_its_phases_wall_times(tmp_path, plan, monkeypatch, capsys):
    from flashbed.commands.run import _phases
    monkeypatch.setattr("flashbed.execute.tool_versions", lambda: {})
    store = RunStore(tmp_path / "run")
    store.write_manifest(manifest_for(plan, FakeLabs(), "run"))
    _phases(store, 600.0, 900.0)
    assert "wall time: plain cells 10m00s, tuning pass 15m00s (1.50x the plain cells)" in capsys.readouterr().err
    assert store.manifest()["phases"] == {"plain_seconds": 600.0, "tuning_seconds": 900.0}


def test_the_bench_says_what_tune_would_add_to_a_finished_run_without_running_it(tmp_path, plan, monkeypatch,
                                                                                capsys):
    from flashbed.bench import tunecost
    monkeypatch.setattr("flashbed.execute.tool_versions", lambda: {})
    store, calls = RunStore(tmp_path / "run"), []
    _execute(calls)(plan, store, FakeLabs(), None)
    first, _n = tunepass.next_plan(plan, store, None)
    tunecost.bench(store.root)
    out = capsys.readouterr().out
    assert f"plain run: {len(plan.cells)} cells planned, {len(plan.cells)} finished" in out
    assert f"tuning pass, first step: 3 option sets, {len(first.cells)} cells" in out
    assert len(calls) == 1  # nothing ran


def test_with_robust_the_pass_ends_with_each_tuned_answer_on_the_twins_variants(tmp_path, monkeypatch):
    monkeypatch.setattr("flashbed.execute.tool_versions", lambda: {})
    plan = make_plan(PlanRequest(fs=("ext4", "f2fs"), devices=(DEVICE,), studies=("overwrite", "crashstates"),
                                 tune=True, robust=0))
    variants = {c.key.device for c in plan.cells if c.device.variant}
    assert variants  # the plain cells on the twin's variants, as --robust plans them
    store, calls, said = RunStore(tmp_path / "run"), [], []
    execute = _execute(calls)
    execute(plan, store, FakeLabs(), None)
    tunepass.run_tuning(plan, store, FakeLabs(), LabTarget(), execute, said.append)
    # singles, the combination, then the answer (f2fs+discard+noatime) on every variant of the twin
    last = [k.split("/") for k in calls[-1]]
    assert len(calls) == 4 and {d for d, *_ in last} == variants
    assert {fs for _d, fs, *_ in last} == {"f2fs+discard+noatime"}
    assert said[2].startswith("tuning: 1 option set to try on the twin's variants (--robust), ")
    assert tunepass.next_plan(plan, store, None) == (None, 0)
