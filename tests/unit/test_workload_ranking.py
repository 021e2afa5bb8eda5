"""Your own workload's use case: the recommendation ranks filesystems on that workload's figures,
requirements first (your check at every crash state), with the built-in use cases' machinery."""

from __future__ import annotations

import json

import pytest

from flashbed.errors import FlashbedError
from flashbed.report import weights as W
from flashbed.report.load import load_run
from flashbed.report.recommend import answer_line, not_eligible_text, recommend
from flashbed.report.rerun import measure_command
from flashbed.report.workcase import use_case
from flashbed.studies.workload import declared_better, job_figures, script_figures, unit_better
from tests.report_fixtures import generator

gen = generator()
CASE = "sqlite-logger"


def _ranked(daily: bool = False) -> list[dict]:
    found = {"commit_ms": (12.0, "ms"), "rows": (160.0, ""), "db_bytes": (90000.0, "")}
    figs = [f.to_json() for f in script_figures(CASE, found, {"db_bytes": "lower"})]
    return figs + [{"case": CASE, "metric": "lifetime_years", "better": "higher", "kind": "lifetime",
                    "label": "projected lifetime", "timed": not daily}]


def _work(fs: str, seconds: float, commit_ms: float, years: float, busy: float, pages: int,
          wall: float | None = None, db_bytes: float = 90000.0):
    meas = [(CASE, "seconds", seconds, "s"), (CASE, "commit_ms", commit_ms, "ms"), (CASE, "rows", 160.0, ""),
            (CASE, "db_bytes", db_bytes, ""), (CASE, "lifetime_years", years, "years"),
            (CASE, "steady_waf", 2.0, "x")]
    stats = {"workload": {"busy_seconds": busy, "wall_seconds": wall if wall is not None else seconds,
                          "nand_program_pages": pages, "host_write_bytes": 1 << 20, "write_amplification": 2.0}}
    return gen.cell(fs, "workload", meas, case=CASE, device_stats=stats,
                    extra={"file": "sqlite-logger.sh", "kind": "script", "ranked": _ranked()})


def _check(fs: str, losses: int = 0, stuck: int = 0):
    failures = [{"state": "f0003-c0001", "class": "data-loss", "kind": "cut", "acked": 4,
                 "why": "committed rows lost: 40 of the 60 committed are there"}] if losses else []
    meas = gen.crash_meas("user", {"recovered": 40 - losses - stuck, "data-loss": losses, "hang": stuck})
    return gen.cell(fs, "appcheck", meas, case="user", extra={"failures": failures})


def _run(tmp_path, *, checks=True, **over):
    # f2fs is best on every figure but lost committed rows in 3 crash states; ext4 beats xfs on
    # the device's busy time and wear, xfs is faster in the lab
    cells = [_work("ext4", 1.3, 14.0, 0.4, busy=0.9, pages=700), _work("f2fs", 1.0, 10.0, 0.9, busy=0.5, pages=400),
             _work("xfs", 1.1, 12.0, 0.5, busy=1.0, pages=1400)]
    if checks:
        cells += [_check("ext4"), _check("f2fs", losses=3), _check("xfs")]
    return gen.write_run(tmp_path / "run", cells, request={"fs": ["ext4", "f2fs", "xfs"], "overrides": {
        "workload": {"file": "/home/u/sqlite-logger.sh", "digest": "abc", "kind": "script", "fill": 50,
                     "passes": 6},
        "appcheck": {"file": "/home/u/sqlite-logger.sh", "digest": "abc", "kind": "script",
                     "check": "/home/u/sqlite-check.sh", "check_digest": "def"}}}, **over)


def _workload_ranking(run):
    rankings = recommend(run)["emmc-1g"]
    assert rankings[0].use_case.id == f"workload:{CASE}"  # the user's own use case comes first
    return rankings[0]


def test_the_workload_s_figures_become_its_criteria(tmp_path):
    uc = use_case(load_run(_run(tmp_path)), "emmc-1g", CASE)
    crit = {c.label: c for c in uc.criteria}
    assert uc.title == "Your workload: sqlite-logger.sh"
    # wall time, the metrics with a direction (a time unit; a declared one), the lifetime and the device's two
    assert list(crit) == ["wall time", "commit ms", "db bytes", "projected lifetime", "flash busy time",
                          "NAND pages programmed (wear of one run)"]
    assert "rows" not in crit  # a count without a direction is shown, not ranked
    assert crit["commit ms"].better == "lower" and crit["db bytes"].better == "lower"
    assert crit["projected lifetime"].better == "higher"
    assert crit["flash busy time"].source == "device" and crit["flash busy time"].decisive
    weights = W.load_weights().workload.weights
    assert crit["wall time"].weight == weights["wall_time"] and crit["commit ms"].weight == weights["metric"]
    assert [r.name for r in uc.requires] == ["app_consistent"]


def test_a_filesystem_whose_check_failed_is_not_eligible_with_a_replay_command(tmp_path):
    r = _workload_ranking(load_run(_run(tmp_path)))
    assert [e.fs for e in r.not_eligible] == ["f2fs"]  # best on every figure, never ranked
    [c] = r.not_eligible[0].failed
    assert c.req.name == "app_consistent" and c.why == "your check failed in 3 of 40 crash states"
    assert c.reproducer.command.startswith("flashbed crashstate replay run emmc-1g/f2fs/appcheck/user/r0:f0003-c0001")
    assert "replay one losing state: `flashbed crashstate replay" in not_eligible_text(r)
    assert answer_line(r).endswith("Not eligible: f2fs (your check failed in 3 of 40 crash states).")


def test_a_check_that_did_not_finish_also_makes_it_ineligible(tmp_path):
    run_dir = _run(tmp_path)
    (run_dir / "cells" / "emmc-1g__xfs__appcheck__user__r0.json").write_text(
        json.dumps(_check("xfs", stuck=2).to_json()))
    r = _workload_ranking(load_run(run_dir))
    assert {e.fs: e.failed[0].why for e in r.not_eligible}["xfs"] == \
        "2 of 40 crash states did not recover cleanly or the check did not finish"


def test_ranked_on_its_own_figures_the_lab_bound_ones_scoring_nobody(tmp_path):
    r = _workload_ranking(load_run(_run(tmp_path)))
    labels = [c.label for c in r.use_case.criteria]
    # the device was busy 0.9 s of 1.3 s (ext4) and 1.0 s of 1.1 s (xfs): device-bound, every figure scores
    assert r.decided and [e.fs for e in r.entries] == ["ext4", "xfs"]
    assert {labels[i] for i in r.scored} == set(labels)
    w = r.winner
    assert w.fs == "ext4" and "flash busy time" in r.winner.text


def test_lab_bound_timed_figures_do_not_decide(tmp_path):
    # the device busy a tenth of the wall time: the lab set the wall time, the commit time and the
    # lifetime at the measured rate; the device's own counters still rank
    cells = [_work("ext4", 1.3, 14.0, 0.4, busy=0.13, pages=700), _work("xfs", 0.6, 8.0, 0.9, busy=0.10, pages=1400)]
    r = _workload_ranking(load_run(gen.write_run(tmp_path / "run", cells)))
    labels = {r.use_case.criteria[i].label for i in r.lab_bound}
    assert labels == {"wall time", "commit ms", "projected lifetime"}
    assert {r.use_case.criteria[i].label for i in r.scored} == {"db bytes", "flash busy time",
                                                                "NAND pages programmed (wear of one run)"}
    assert r.decided and r.winner.fs == "ext4"  # less wear; xfs's faster lab time does not count


def test_lifetime_from_daily_writes_is_not_timed(tmp_path):
    cell = _work("ext4", 1.3, 14.0, 0.4, busy=0.13, pages=700)
    cell.extra["ranked"] = _ranked(daily=True)
    r = _workload_ranking(load_run(gen.write_run(tmp_path / "run", [cell])))
    assert "projected lifetime" not in {r.use_case.criteria[i].label for i in r.lab_bound}


def test_without_a_check_no_requirement_is_held_and_the_section_says_so(tmp_path):
    r = _workload_ranking(load_run(_run(tmp_path, checks=False)))
    assert not r.use_case.requires and not r.not_eligible and r.decided
    assert "your check did not run (no --check)" in r.use_case.summary
    assert [e.fs for e in r.entries][0] == "f2fs"


def test_a_measure_command_gives_the_workload_and_check_as_files(tmp_path):
    run = load_run(_run(tmp_path))
    assert measure_command(run, "emmc-1g", ["workload", "appcheck"]) == (
        "flashbed run --device emmc-1g --fs ext4,f2fs,xfs --study workload,appcheck --clock real "
        "--workload /home/u/sqlite-logger.sh --age 50 --check /home/u/sqlite-check.sh")


def test_the_report_has_the_workload_s_recommendation(tmp_path):
    from flashbed.report import write_report
    run_dir = _run(tmp_path)
    write_report(run_dir)
    md = (run_dir / "report.md").read_text()
    assert "**Your workload: sqlite-logger.sh**: **ext4**, runner-up xfs" in md
    s = json.loads((run_dir / "summary.json").read_text())["recommendation"]["emmc-1g"][f"workload:{CASE}"]
    assert s["winner"] == "ext4" and s["not_eligible"][0]["fs"] == "f2fs"
    assert s["not_eligible"][0]["replay"][0].startswith("flashbed crashstate replay")


# ---- the figures the workload study declares --------------------------------------------------------

@pytest.mark.parametrize("unit, better", [("ms", "lower"), ("s", "lower"), ("us", "lower"), ("MB/s", "higher"),
                                          ("tx/s", "higher"), ("IOPS", "higher"), ("", ""), ("B", ""),
                                          ("count", "")])
def test_a_metric_s_direction_from_its_unit(unit, better):
    assert unit_better(unit) == better


def test_a_script_declares_a_direction_its_unit_does_not_say():
    out = "rows=160\nbetter:db_bytes=lower\nbetter:rows = HIGHER\nbetter:x=sideways\ndb_bytes=9000\n"
    assert declared_better(out) == {"db_bytes": "lower", "rows": "higher"}
    figs = script_figures("w", {"rows": (160.0, ""), "lat": (3.0, "ms")}, {"rows": "higher"})
    assert [(f.metric, f.better, f.timed) for f in figs] == [("seconds", "lower", True), ("lat", "lower", True),
                                                              ("rows", "higher", False)]


def test_a_fio_job_is_ranked_on_iops_for_small_requests_and_bandwidth_for_large():
    small = job_figures("cam:index", "index", {"bandwidth": 0.4, "iops": 100.0})  # 4 KB a request
    large = job_figures("cam:main", "main", {"bandwidth": 1.0, "iops": 1.0})  # 1 MB a request
    assert [f.metric for f in small] == ["iops", "lat_p99"] and [f.metric for f in large] == ["bandwidth", "lat_p99"]
    assert all(f.timed for f in small + large) and small[0].label == "index IOPS"


@pytest.mark.parametrize("body, message", [
    ("[workload]\nwall_time = 0\n", "wall_time must be a positive number"),
    ("[workload]\nspeed = 1\n", "unknown field(s) speed"),
    ("[workload]\ndecisive = ['nope']\n", "decisive names nope"),
    ("[workload]\nrequires = ['nope']\n", "requires names nope"),
])
def test_bad_workload_weights_are_one_clear_line(tmp_path, body, message):
    p = tmp_path / "w.toml"
    p.write_text(body + "[[use_case]]\nid='x'\n[[use_case.criterion]]\nlabel='a'\nstudy='s'\ncase='c'\n"
                 "metric='m'\nbetter='higher'\nweight=1\n")
    with pytest.raises(FlashbedError) as e:
        W.load_weights(p)
    assert message in str(e.value)


def test_a_rate_limited_fio_job_is_judged_on_the_time_its_requests_waited(tmp_path):
    """A camera job idles the device by its own rate: its utilisation is the device's busy time over the
    time the jobs had requests outstanding, not over their run time."""
    from flashbed.studies.workload import io_seconds, rate_limited
    job = {"jobname": "main", "job options": {"rate": "1m"},
           "write": {"lat_ns": {"mean": 80e6}, "total_ios": 32}, "sync": {"lat_ns": {"mean": 10e6}, "total_ios": 4}}
    assert rate_limited({"jobs": [job]}) and not rate_limited({"jobs": [{"job options": {"bs": "1M"}}]})
    assert rate_limited({"global options": {"thinktime": "10ms"}, "jobs": [{}]})
    assert io_seconds(job) == pytest.approx(0.08 * 32 + 0.01 * 4)

    def cell(fs, waited):
        jc = "cam:main"
        meas = [("cam", "seconds", 32.0, "s"), (jc, "bandwidth", 1.0, "MB/s"), (jc, "lat_p99", 9e5, "us"),
                (jc, "runtime", 32.0, "s")] + ([(jc, "io_seconds", waited, "s")] if waited else [])
        ranked = [f.to_json() for f in job_figures(jc, "main", {"bandwidth": 1.0, "iops": 1.0})]
        return gen.cell(fs, "workload", meas, case="cam", extra={"file": "cam.fio", "ranked": ranked},
                        device_stats={"workload": {"busy_seconds": 2.4, "wall_seconds": 33.0,
                                                   "nand_program_pages": 100}})
    paced = load_run(gen.write_run(tmp_path / "a", [cell("ext4", 2.6), cell("xfs", 3.0)]))
    assert paced.lab_bound("emmc-1g", "ext4", "workload", "cam:main", "lat_p99") is None  # busy 2.4 of 2.6 s
    assert paced.busy_for("emmc-1g", "ext4", "workload", "cam:main").basis.startswith("the time its rate-limited")
    unpaced = load_run(gen.write_run(tmp_path / "b", [cell("ext4", None)]))
    assert unpaced.lab_bound("emmc-1g", "ext4", "workload", "cam:main", "lat_p99") is not None  # 2.4 of 32 s
