import json

import pytest

from flashbed.errors import FlashbedError
from flashbed.plan import PlanRequest, make_plan
from flashbed.results import CellKey, CellResult, Measurement
from flashbed.store import RunStore, resolve_run

PLAIN = "plain-file@512M"


def test_plan_crosses_filesystems_studies_cases_and_repeats():
    plan = make_plan(PlanRequest(fs=("ext4", "f2fs"), devices=(PLAIN,), studies=("mkfs", "mount"), repeat=2))
    ids = {c.key.id for c in plan.cells}
    assert len(ids) == len(plan.cells) == 2 * (1 + 2) * 2  # fs × (mkfs + mount's two fills) × repeats
    assert "plain-file@512M/f2fs/mount/fill50/r1" in ids
    assert {c.seed for c in plan.cells} == {1, 2}


def test_same_request_same_run_id_and_different_request_different_id():
    a = PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("mkfs",))
    assert a.run_id() == PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("mkfs",)).run_id()
    assert a.run_id() != PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("mkfs",), seed=2).run_id()


def test_pace_none_is_a_different_run_and_reaches_every_cell():
    real = PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("mkfs",))
    fast = PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("mkfs",), pace="none")
    assert real.run_id() != fast.run_id()
    assert {c.pace for c in make_plan(fast).cells} == {"none"}
    assert {c.pace for c in make_plan(real).cells} == {"real"}


@pytest.mark.parametrize("req,words", [
    (PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("nosuch",)), "unknown study 'nosuch'"),
    (PlanRequest(fs=("zfs",), devices=(PLAIN,)), "unknown filesystem 'zfs'"),
    (PlanRequest(fs=("ext4",), devices=("nosuch",)), "unknown device preset 'nosuch'"),
    (PlanRequest(fs=("xfs",), devices=("plain-file@128M",), studies=("mkfs",)), "xfs needs at least"),
    (PlanRequest(fs=("ext4",), devices=("plain-file@64M",), studies=("bigfile",),
                 overrides={"bigfile": {"size": 256 << 20}}), "study bigfile needs a device of at least"),
    (PlanRequest(fs=("ubifs",), devices=(PLAIN,), studies=("mkfs",)), "ubifs has no device to run on"),
    (PlanRequest(fs=("ext4",), devices=(PLAIN,), repeat=0), "--repeat must be at least 1"),
    (PlanRequest(profile="slow", fs=("ext4",), devices=(PLAIN,)), "unknown profile 'slow'"),
    (PlanRequest(fs=("ext4",), devices=(PLAIN,), pace="fast"), "--pace must be real or none"),
])
def test_bad_requests_fail_before_any_cell_runs(req, words):
    with pytest.raises(FlashbedError, match=words):
        make_plan(req)


def test_raw_and_block_filesystems_go_to_their_own_devices():
    plan = make_plan(PlanRequest(fs=("ext4", "ubifs"), devices=(PLAIN, "nand-2g-4k@128M"), studies=("mkfs",)))
    placed = {(c.key.fs, c.key.device) for c in plan.cells}
    assert placed == {("ext4", PLAIN), ("ubifs", "nand-2g-4k@128M")}


def result(key, status="ok"):
    return CellResult(key=key, status=status, measurements=[Measurement("empty", "used", 1.0, "bytes")],
                      headline="h")


def test_store_round_trip_and_finished_cells(tmp_path):
    store = RunStore(tmp_path / "run")
    store.write_manifest({"run_id": "run"})
    k1, k2, k3 = (CellKey("d", "ext4", "mkfs", "", i) for i in range(3))
    store.write(result(k1))
    store.write(result(k2, "error"))  # infrastructure error: retried on resume
    assert store.finished(k1) and not store.finished(k2) and not store.finished(k3)
    assert [r.key for r in store.results()] == [k1, k2]
    assert store.load(k1).value("empty", "used") == 1.0
    store.cell_path(k3).write_text("{ half a file")  # never written atomically by us: treated as not run
    assert not store.finished(k3)


def test_resolve_run_by_id_or_path(tmp_path):
    runs = tmp_path / "runs"
    RunStore(runs / "quick-1").write_manifest({"run_id": "quick-1"})
    assert resolve_run("quick-1", runs).root == runs / "quick-1"
    assert resolve_run(str(runs / "quick-1"), runs).root == runs / "quick-1"
    with pytest.raises(FlashbedError, match="no run 'nope'"):
        resolve_run("nope", runs)


def test_result_schema_is_checked():
    with pytest.raises(ValueError, match="schema"):
        CellResult.from_json({"schema": 99})
    k = CellKey("d", "f2fs+tuned", "bandwidth", "", 0)
    d = json.loads(json.dumps(result(k).to_json()))
    assert d["id"] == "d/f2fs+tuned/bandwidth/r0"
    assert CellResult.from_json(d) == result(k)


def test_a_run_being_run_refuses_a_second_flashbed(tmp_path):
    store = RunStore(tmp_path / "run")
    with store.running():
        with pytest.raises(FlashbedError, match="being run by another flashbed process"):
            with RunStore(tmp_path / "run").running():
                pass
    with store.running():  # released with the first
        pass


def test_studies_that_write_are_not_applicable_to_a_read_only_filesystem():
    """The plan decides it once, from the filesystem's catalogue flag and the study's fact; the
    studies that read (boot, mount, mkfs, bandwidth's reads, badblocks) run on an image of their files."""
    plan = make_plan(PlanRequest(fs=("ext4", "squashfs+zstd"), devices=(PLAIN,),
                                 studies=("bandwidth", "boot", "mount", "mkfs", "bigfile", "powercut", "badblocks")))
    ro = {(c.key.study, c.key.case) for c in plan.cells if c.key.fs == "squashfs+zstd"}
    assert ro == {("bandwidth", ""), ("boot", ""), ("mount", "fill0"), ("mount", "fill50"), ("mkfs", ""),
                  ("badblocks", "dust")}
    assert {(n.fs, n.study, n.why) for n in plan.not_applicable} == {
        ("squashfs+zstd", "bigfile", "read-only"), ("squashfs+zstd", "powercut", "read-only")}
    assert {c.key.study for c in plan.cells if c.key.fs == "ext4"} == {
        "bandwidth", "boot", "mount", "mkfs", "bigfile", "powercut", "badblocks"}
    # bandwidth on the image: its buffered reads only
    from flashbed.studies import STUDIES
    bw = next(c for c in plan.cells if c.key.fs == "squashfs+zstd" and c.key.study == "bandwidth")
    assert STUDIES["bandwidth"].matrix(bw) == [("randread", "4k", 0), ("randread", "4M", 0), ("read", "4k", 0),
                                               ("read", "4M", 0)]
    with pytest.raises(FlashbedError, match="erofs: read-only, and every study asked for writes .* boot"):
        make_plan(PlanRequest(fs=("erofs",), devices=(PLAIN,), studies=("bigfile", "powercut")))


def test_a_cell_run_again_starts_from_an_empty_log_directory(tmp_path):
    """An interrupted or errored cell is run again on resume: what the earlier attempt left in its
    log directory (a crash-state check appends to checked.jsonl) must not be read as the new one's:
    each attempt has a directory of its own (store.new_attempt)."""
    from flashbed.cell import cell_task
    from flashbed.plan import PlanRequest, make_plan
    from flashbed.store import RunStore
    spec = make_plan(PlanRequest(fs=("ext4",), devices=("plain-file@512M",), studies=("mkfs",))).cells[0]
    earlier = RunStore(tmp_path).new_attempt(spec.key)
    (earlier / "checked.jsonl").write_text('{"state": "f0001"}\n')

    class NoLab:  # the lab fails at once: the cell is an error, in a log directory of its own
        release = "none"

        def open_session(self, *a, **kw):
            raise RuntimeError("no lab here")

    result = cell_task(spec, None, labs=lambda s: NoLab(), root=tmp_path, provenance={})
    assert result.status == "error" and "no lab here" in result.error
    logs = tmp_path / result.attempt_dir
    assert logs != earlier and logs.is_dir() and not (logs / "checked.jsonl").exists()
