"""The device check: figures whose workload promised the device had its writes, against what the
device received; cached figures score nobody; the studies record the claims and the phases."""

from __future__ import annotations

import json

import pytest

from flashbed.devices.session import normalize_stats
from flashbed.plan import PlanRequest, make_plan
from flashbed.report import weights as W
from flashbed.report import write_report
from flashbed.report.devcheck import Phase, Repeat, check
from flashbed.report.load import load_run
from flashbed.report.recommend import rank
from flashbed.status import DeviceVerdict
from flashbed.studies import STUDIES
from flashbed.studies.claims import Claim, claims_of
from tests.report_fixtures import generator

gen = generator()
DIRECT, SYNC = "randwrite 4k direct", "randwrite 4k sync"


def _claim(**kw) -> Claim:
    base = dict(case=DIRECT, direct=True, synced=0, write_bytes=4096 * 1000, writes=1000, random_4k=True)
    return Claim(**{**base, **kw})


def _phase(write_bytes, flushes=0, seq=0.0, sizes=None) -> Phase:
    return Phase(write_bytes=write_bytes, writes=write_bytes // 4096, flushes=flushes,
                 sequential_bytes=write_bytes * seq, write_sizes=sizes or {4096: write_bytes // 4096})


def _reps(claim, *phases, paced=True):
    return [Repeat(claim, p, paced) for p in phases]


# ---- the verdict --------------------------------------------------------------------

def test_direct_writes_the_device_did_not_receive_are_cached():
    c = check(_reps(_claim(), _phase(4096 * 30)))
    assert c.verdict is DeviceVerdict.CACHED and round(c.received_pct) == 3
    assert c.text() == "cached: the device received 3 % of these writes during the job"
    assert "3.91 MiB written direct, device received 0.117 MiB (3 %)" in c.counters_text()


def test_the_worst_repeat_decides():
    assert check(_reps(_claim(), _phase(4096 * 1100), _phase(4096 * 500))).verdict is DeviceVerdict.CACHED
    assert check(_reps(_claim(), _phase(4096 * 1100), _phase(4096 * 1000))).verdict is DeviceVerdict.SERVED


def test_the_threshold_s_boundary_one_request_in_flight_is_not_a_verdict():
    from flashbed.report.devcheck import RECEIVED_BELOW
    assert RECEIVED_BELOW == 95.0
    # a 100-write job: one write in flight at its end (99 %) and the line itself (95 %) are served,
    # one write fewer than the line (94 %) is cached; the same line for bytes and for flushes
    for got, verdict in ((100, DeviceVerdict.SERVED), (99, DeviceVerdict.SERVED), (95, DeviceVerdict.SERVED),
                         (94, DeviceVerdict.CACHED)):
        direct = check(_reps(_claim(write_bytes=4096 * 100, writes=100), _phase(4096 * got)))
        assert direct.verdict is verdict, (got, direct)
        synced = check(_reps(_claim(case=SYNC, direct=False, synced=100, write_bytes=0, writes=100),
                             _phase(4096 * 200, flushes=got)))
        assert synced.verdict is verdict, (got, synced)


def test_synchronous_writes_need_a_flush_each():
    ok = check(_reps(_claim(case=SYNC, direct=False, synced=1000), _phase(4096 * 1200, flushes=1000)))
    assert ok.verdict is DeviceVerdict.SERVED
    short = check(_reps(_claim(case=SYNC, direct=False, synced=1000), _phase(4096 * 1200, flushes=40)))
    assert short.verdict is DeviceVerdict.CACHED and "40 flushes for 1,000 synchronous writes" in short.text()
    # a commit claims flushes, no bytes
    db = check(_reps(Claim(case="wal", direct=False, synced=300, write_bytes=0, writes=0), _phase(1 << 20, flushes=310)))
    assert db.verdict is DeviceVerdict.SERVED and db.received_pct is None


def test_a_served_rate_above_the_part_s_random_rate_shows_the_request_pattern():
    c = check(_reps(_claim(), _phase(4096 * 1200, seq=0.97)), figure=4971.0, part_rate=2246.0)
    assert c.verdict is DeviceVerdict.SERVED_ABOVE_RATE and c.verdict.served
    assert c.text() == ("served above the part's random write rate (2,246 IO/s): the device saw 4 KiB requests, "
                        "97 % sequential")
    assert check(_reps(_claim(), _phase(4096 * 1200)), figure=2000.0, part_rate=2246.0).verdict is DeviceVerdict.SERVED
    # a figure the device did not serve stays cached, however fast
    assert check(_reps(_claim(), _phase(4096 * 10)), figure=30000.0, part_rate=2246.0).verdict is DeviceVerdict.CACHED


LATENCY = {"10.000000": 11.0, "50.000000": 22.9, "90.000000": 40.0, "95.000000": 900.0, "99.000000": 180000.0}


def test_writes_acknowledged_before_their_bytes_could_reach_the_device_are_cached():
    """4 MiB "direct" writes all on the device by the job's end (a buffered fallback's writeback), but
    fio was told most were done in 23 µs, where 4 MiB take 168 ms over a 25 MB/s bus."""
    claim = _claim(block_bytes=4 << 20, latency_us=LATENCY, random_4k=False)
    c = check(_reps(claim, _phase(4096 * 2000, seq=1.0)), host_bytes_per_s=25e6)
    assert c.verdict is DeviceVerdict.CACHED and c.timely_pct == pytest.approx(5.0)
    assert c.text() == ("cached: the device received at most 5 % of these writes by the time they were acknowledged "
                        "(p50 22.9 µs; 4 MiB take 167,772 µs over its 25.0 MB/s host interface, the emulator "
                        "acknowledging up to 500 µs early)")
    # slower than the bus, served; unpaced (the device's time modelled, not spent), not judged by time
    slow = _claim(block_bytes=4 << 20, latency_us={k: v + 170000 for k, v in LATENCY.items()})
    assert check(_reps(slow, _phase(4096 * 1000)), host_bytes_per_s=25e6).verdict is DeviceVerdict.SERVED
    assert check(_reps(claim, _phase(4096 * 2000), paced=False), host_bytes_per_s=25e6).verdict \
        is DeviceVerdict.SERVED
    # a 4 KiB write crosses the bus within the emulator's lead: its time decides nothing
    small = _claim(block_bytes=4096, latency_us=LATENCY)
    assert check(_reps(small, _phase(4096 * 1000)), host_bytes_per_s=25e6).timely_pct is None


def test_without_device_statistics_nothing_is_checked():
    c = check(_reps(_claim(), None))
    assert c.verdict is DeviceVerdict.UNCHECKED and not c.verdict.served


def test_the_emulator_s_counters_reach_the_phase():
    raw = {"host": {"writes": 12, "write_bytes": 49152, "flushes": 3}, "busy_seconds": 0.1,
           "request_sizes": {"write": {"4096": 12}, "read": {}}, "write_pattern": {"sequential_write_bytes": 40960}}
    s = normalize_stats(raw)
    assert s["host_writes"] == 12 and s["host_flushes"] == 3 and s["write_sizes"] == {"4096": 12}
    assert s["write_pattern_sequential_write_bytes"] == 40960


# ---- the studies record claims, each with a statistics phase of the job alone ------------

def _cell(study: str, **overrides):
    plan = make_plan(PlanRequest(fs=("ext4",), devices=("plain-file@256M",), studies=(study,),
                                 overrides={study: overrides} if overrides else {}))
    return plan.cells[0]


def test_bandwidth_phases_cover_each_job_alone(tmp_path):
    spec = _cell("bandwidth", rw=["randwrite"], bs="4k")
    steps = [s.name for s in STUDIES["bandwidth"].boots(spec, tmp_path)[0]]
    for case in ("randwrite 4k direct", "randwrite 4k buffered", SYNC):
        i = steps.index(case)
        assert steps[i - 1] == f"stats-reset-{case}" and steps[i + 1] == f"stats-{case}"
        assert steps[i + 2:i + 5] == [f"stats-reset-{case} writeback", f"sync-{case.replace(' ', '-')}",
                                      f"stats-{case} writeback"]
    # a direct job ends without an fsync (it would write a buffered fallback out inside the job);
    # the synchronous job opens its files O_SYNC
    assert "end_fsync" not in (tmp_path / "randwrite-4k-direct.fio").read_text()
    assert "end_fsync=1" in (tmp_path / "randwrite-4k-buffered.fio").read_text()
    sync = (tmp_path / "randwrite-4k-sync.fio").read_text()
    assert "sync=1" in sync and "direct=0" in sync and "end_fsync" not in sync


def test_bandwidth_claims_what_its_direct_and_sync_jobs_wrote(tmp_path):
    from flashbed.lab.boundary import BootResult, StepResult
    from flashbed.status import BootStatus, StepStatus
    spec = _cell("bandwidth", rw=["randwrite"], bs="4k")
    st = STUDIES["bandwidth"]
    cases = [f"randwrite 4k {m}" for m in ("direct", "buffered", "sync")]
    for case in cases:
        job = {"jobname": case, "write": {"io_bytes": 409600, "total_ios": 100, "bw_bytes": 204800, "iops": 50.0,
                                          "runtime": 2000, "clat_ns": {"percentile": {"99.000000": 9000}}},
               "read": {}, "sync": {"total_ios": 0}}
        (tmp_path / f"{case.replace(' ', '-')}.json").write_text(json.dumps({"jobs": [job]}))
    res = BootResult(status=BootStatus.DONE, steps=[StepResult(c, "fio", StepStatus.OK, 0, 2.0, "", "") for c in cases],
                     boot_seconds=1.0, total_seconds=10.0, console_log="", exit_code=0, kernel_release="7.3")
    out = st.parse(spec, [res], tmp_path)
    claims = {c.case: c for c in claims_of(out.extra)}
    assert set(claims) == {"randwrite 4k direct", SYNC}  # a buffered job promises nothing
    assert claims["randwrite 4k direct"] == Claim("randwrite 4k direct", True, 0, 409600, 100,
                                                  "fio rw=randwrite bs=4k direct=1 iodepth=1", True, 4096,
                                                  {"99.000000": 9.0})
    assert claims[SYNC].synced == 100 and not claims[SYNC].direct


# ---- cached figures score nobody; the fixture the issue asks for -----------------------------

DB_CRIT = """
[[use_case.criterion]]
label = "4 KiB random direct write rate"
study = "bandwidth"
case = "randwrite 4k direct"
metric = "iops"
better = "higher"
weight = 3

[[use_case.criterion]]
label = "4 KiB random synchronous write rate"
study = "bandwidth"
case = "randwrite 4k sync"
metric = "iops"
better = "higher"
weight = 1
"""


def _nilfs_run(tmp_path, received: float):
    """nilfs2's "direct" random writes are 5x ext4's; the device received `received` of them during the
    job. Its synchronous writes are served and a little slower than ext4's."""
    return gen.write_run(tmp_path / "run", [
        gen.write_job_cell("ext4", DIRECT, 1500.0, 1.02),
        gen.write_job_cell("nilfs2", DIRECT, 7500.0, received),
        gen.write_job_cell("ext4", SYNC, 400.0, 1.3, sync=True),
        gen.write_job_cell("nilfs2", SYNC, 380.0, 1.6, sync=True)])


def _weights(tmp_path, crit):
    p = tmp_path / "w.toml"
    p.write_text("[[use_case]]\nid = 'db'\ntitle = 'DB'\nsummary = 's'\n" + crit)
    return W.load_weights(p)


def test_a_cached_figure_scores_nobody_and_chooses_no_winner(tmp_path):
    w = _weights(tmp_path, DB_CRIT)
    served = rank(load_run(_nilfs_run(tmp_path / "served", 1.05), w), "emmc-1g", w.use_cases[0])
    assert served.winner.fs == "nilfs2" and not served.cached  # the same figures, served: they decide
    r = rank(load_run(_nilfs_run(tmp_path / "cached", 0.03), w), "emmc-1g", w.use_cases[0])
    assert [fs for fs, _c in r.cached[0]] == ["nilfs2"] and r.scored == [1]
    assert r.winner.fs == "ext4" and "direct write rate" not in r.entries[0].text
    assert r.entries[1].values[0].cached.text() == "cached: the device received 3 % of these writes during the job"


def test_the_packaged_database_use_case_is_not_won_on_a_cached_figure(tmp_path):
    """With the packaged weights: nilfs2's cached direct writes would win it the database; checked, they
    score nobody and ext4 wins on what the device served."""
    w = W.load_weights()
    db = next(u for u in w.use_cases if u.id == "database")

    def run(where, received):
        return gen.write_run(where, [
            gen.write_job_cell("ext4", DIRECT, 1500.0, 1.02),
            gen.write_job_cell("nilfs2", DIRECT, 7500.0, received),
            gen.write_job_cell("ext4", SYNC, 400.0, 1.3, sync=True, p99=4000.0),
            gen.write_job_cell("nilfs2", SYNC, 392.0, 1.6, sync=True, p99=4000.0),
            *(gen.cell(fs, "powercut", [("sync", "class:clean", 8, "count"), ("sync", "iterations", 8, "count")],
                       case="sync") for fs in ("ext4", "nilfs2")),
            # durability is the use case's requirement (crash states): both keep every acknowledged write
            *(gen.cell(fs, "crashstates", gen.crash_meas("powercut", {"clean": 30, "recovered": 90}),
                       case="powercut") for fs in ("ext4", "nilfs2"))])
    assert rank(load_run(run(tmp_path / "a", 1.05), w), "emmc-1g", db).winner.fs == "nilfs2"
    r = rank(load_run(run(tmp_path / "b", 0.03), w), "emmc-1g", db)
    assert r.winner.fs == "ext4"
    assert [db.criteria[i].label for i in r.cached] == ["4 KiB random direct write rate"]


def test_the_report_names_who_ignores_o_direct_and_shows_the_mark(tmp_path):
    run_dir = _nilfs_run(tmp_path, 0.03)
    write_report(run_dir)
    md = (run_dir / "report.md").read_text()
    first_screen = md.split("## Recommendation")[0]
    assert "ignore O_DIRECT for writes" in first_screen and "nilfs2" in first_screen
    assert "Filesystems that ignore O_DIRECT for writes (measured: the device did not receive their direct writes " \
           "during the job): nilfs2 (randwrite 4k direct:" in md
    assert "cached: the device received 3 % of these writes during the job" in md
    assert "served: 4 KiB requests" in md  # ext4's, beside its figure
    summary = json.loads((run_dir / "summary.json").read_text())
    db = summary["recommendation"]["emmc-1g"]
    assert any(c["criterion"] == "4 KiB random direct write rate" and c["received_pct"]["nilfs2"] == pytest.approx(3, 0.1)
               for uc in db.values() for c in uc["cached"])


def test_virtual_time_statistics_keep_the_device_clock():
    """A phase's duration in virtual time is measured on the device's clock (cell.CellHost):
    the flattened statistics must keep it."""
    from flashbed.devices.session import normalize_stats
    assert normalize_stats({"busy_seconds": 1.0, "device_ns": 123})["device_ns"] == 123
