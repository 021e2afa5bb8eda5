"""Every study's parse() and a whole plan -> cell -> store -> report pass, on guest
results recorded from real lab runs (tests/replay.py): no kernel, no emulator."""

from __future__ import annotations

import io
import json

import pytest

from flashbed.execute import execute
from flashbed.executors import LocalExecutor
from flashbed.lab.replay import ReplayLab, cell_dir
from flashbed.plan import make_plan
from flashbed.store import RunStore
from flashbed.studies import STUDIES
from flashbed.targets.replay import ReplayTarget
from tests.replay import DATA, REQUESTS


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    root = tmp_path_factory.mktemp("replay")
    runs = []
    target = ReplayTarget(root=DATA)  # the replay lab: the lab's plan, boots from the recording
    for i, req in enumerate(REQUESTS):
        plan = make_plan(req, target)
        store = RunStore(root / f"run{i}")
        execute(plan, store, target.labs(plan, store, print), LocalExecutor(2), stream=io.StringIO())
        runs.append((plan, store))
    return runs


def comparable(cell: dict) -> dict:
    """A cell result without what differs between two runs of the same guest output
    (wall times, where the logs are, the run's provenance)."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "console"}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return strip({k: v for k, v in cell.items() if k not in ("seconds", "provenance", "logs", "attempt_dir")})


def test_every_study_has_a_recording():
    assert {c.key.study for req in REQUESTS for c in make_plan(req).cells} == set(STUDIES)


def test_each_cell_reads_as_it_did_in_the_real_lab(replayed):
    for plan, store in replayed:
        for spec in plan.cells:
            got = json.loads(store.cell_path(spec.key).read_text())
            want = json.loads((cell_dir(DATA, spec) / "cell.json").read_text())
            assert comparable(got) == comparable(want), spec.key.id
            assert got["measurements"] or got["status"] != "ok", spec.key.id


def test_a_replayed_cell_keeps_its_provenance(replayed):
    plan, store = replayed[0]
    r = store.load(plan.cells[0].key)
    assert r.provenance["kernel"] == json.loads((DATA / "manifest.json").read_text())["kernel"]["release"]
    assert r.provenance["params"]["size"] == 16 << 20  # bandwidth, as requested


def test_a_replay_refuses_steps_it_did_not_record(tmp_path):
    from flashbed.errors import FlashbedError
    from flashbed.lab.boundary import BootSpec, Step
    spec = make_plan(REQUESTS[0]).cells[0]
    with pytest.raises(FlashbedError, match="record it again"):
        ReplayLab(cell_dir(DATA, spec)).boot(BootSpec(run_dir=tmp_path, steps=(Step("other", "true"),)))


def test_a_replayed_run_makes_a_report(replayed):
    from flashbed.report import write_report
    from flashbed.report.units import slug
    plan, store = replayed[0]
    s = json.loads(write_report(store.root).summary.read_text())
    assert s["missing_studies"] == []
    dev = plan.cells[0].key.device
    # every study a plain file can hold (crash states need the emulator's write log: the next test;
    # caps has a request of its own, ext4 beside FAT; the user's own workload and check come with their
    # files, in requests of their own)
    studies = {c.key.study for c in plan.cells}
    assert studies == set(STUDIES) - {"crashstates", "caps", "workload", "appcheck"}
    for study in studies:
        assert slug("tab", dev, study) in s["tables"], study
    assert s["studies"]["powercut"]["cells"] == {"ok": 1}
    assert {r["study"] for r in s["results"]} == studies


def test_read_only_images_in_a_replayed_report(replayed):
    """The read-only request: squashfs and erofs images measured where they apply, the studies
    that write left out by the plan and shown as n/a (read-only), and the images compared in
    the boot partition's use case (no candidates where power cuts decide)."""
    from flashbed.report import write_report
    from flashbed.report.load import load_run
    from flashbed.report.recommend import recommend
    from flashbed.report.tables import study_table
    plan, store = replayed[1]
    assert {(n.fs, n.study) for n in plan.not_applicable} == {("squashfs+zstd", "powercut"),
                                                             ("erofs+lz4", "powercut")}
    run = load_run(store.root)
    dev = plan.cells[0].key.device
    assert run.read_only == {"squashfs+zstd", "erofs+lz4"}
    for fs in run.read_only:
        assert run.get(dev, fs, "boot", "boot", "used").mean > 0  # the image's size
        assert run.get(dev, fs, "boot", "boot", "flash").mean > 0  # written with dd
        assert run.get(dev, fs, "bandwidth", "read 4k buffered", "bandwidth").mean > 0
        assert run.not_applicable(dev, fs, "mount", "256MiB fill0 unclean") == "read-only"
    # powercut: asked for, n/a for every filesystem of this request: not missing
    assert "powercut" not in run.missing_studies() and study_table(run, dev, "powercut") is None
    from flashbed.report.tables import overview_table
    assert any(r[0].text == "powercut" and r[-1].text == "n/a (read-only) for every filesystem"
               for r in overview_table(run).rows)
    by = {r.use_case.id: r for r in recommend(run)[dev]}
    assert {e.fs for e in by["boot"].entries} == {"squashfs+zstd", "erofs+lz4"}
    assert [fs for fs, _why in by["rootfs"].not_candidates] == ["erofs+lz4", "squashfs+zstd"]
    assert "n/a (read-only)" in write_report(store.root).markdown.read_text()


def test_a_replayed_crash_state_run_lists_its_failures_with_their_commands(replayed):
    from flashbed.report import write_report
    from flashbed.report.units import slug
    plan, store = next((p, st) for p, st in replayed if p.cells[0].key.study == "crashstates")
    s = json.loads(write_report(store.root).summary.read_text())
    dev = plan.cells[0].key.device
    assert slug("tab", dev, "crashstates") in s["tables"]
    assert slug("tab", dev, "crashstates", "reproducers") in s["tables"]  # the sabotage made failures
    out = io.StringIO()
    from flashbed.report.text import print_results
    print_results(store, stream=out)
    assert f"flashbed crashstate replay {store.root.name} {plan.cells[0].key.id}:" in out.getvalue()


def test_a_replayed_run_of_your_workload_shows_your_check_failing_with_replay_commands(replayed):
    from flashbed.report import write_report
    from flashbed.report.text import print_results
    from flashbed.report.units import slug
    plan, store = next((p, st) for p, st in replayed if p.cells[0].key.study == "appcheck")
    s = json.loads(write_report(store.root).summary.read_text())
    dev = plan.cells[0].key.device
    assert slug("tab", dev, "appcheck", "reproducers") in s["tables"]  # synchronous=OFF lost committed rows
    out = io.StringIO()
    print_results(store, stream=out)
    assert "the check failed (exit 1)" in out.getvalue()
    assert f"flashbed crashstate replay {store.root.name} {plan.cells[0].key.id}:" in out.getvalue()
    wplan, wstore = next((p, st) for p, st in replayed if p.cells[0].key.study == "workload")
    out = io.StringIO()
    print_results(wstore, stream=out)
    text = out.getvalue()
    assert "== your workload, per filesystem ==" in text and "not checked (no --check)" in text
    r = next(iter(wstore.results()))
    assert r.extra["age"]["fill"] >= 0.3 and {m.metric for m in r.measurements} >= {"rows", "seconds", "flushes"}
