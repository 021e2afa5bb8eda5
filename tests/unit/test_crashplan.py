"""Which crash states the lab checks (crashhost/plan.py): one check per distinct state (the
same device image and the same verifier input), a seeded stratified sample under max_states
with its stated coverage, and the parse giving every state its verdict. No kernel."""

from __future__ import annotations

import json

import pytest

from flashbed.crashhost.host import CrashHost
from flashbed.crashhost.plan import CheckPlan, Stratum, VerifierInput, plan_checks
from flashbed.lab.guest.crashstates import to_check
from flashbed.studies.crashstates import CHECKED_FILE, LOG_FILE, STATES_FILE
from tests.unit.test_crashstates import STUDY, boot, cell, lay_out, state
from tests.unit.test_powercut_classify import facts


def st(sid, kind="cut", acked=10, image=0, **kw):
    return {"id": sid, "pos": int(sid.split("+")[0]), "kind": kind, "acked": acked, "image": image, **kw}


LOG = [{"e": "begin", "m": 5}, {"e": "intent", "n": 1, "m": 8}, {"e": "ack", "n": 1, "labels": ["a=1"], "m": 12},
       {"e": "end", "m": 20}]


def test_one_check_per_image_and_verifier_input():
    states = [st("9", "flush", acked=7, image=0), st("11", acked=12, image=0),
              st("11+m1", "subset", acked=12, image=1), st("13", acked=12, image=0), st("21", "flush", acked=22, image=0)]
    plan = plan_checks(states, LOG, VerifierInput.RECORDS)
    # one image throughout but 11+m1's; the verifier of 9 reads the log's begin only, of 11 and
    # 13 the intent too, of 21 everything
    same = {s["id"]: s.get("same") for s in states}
    assert same == {"9": None, "11": None, "11+m1": None, "13": "11", "21": None}
    assert (plan.found, plan.distinct, plan.checked) == (5, 4, 4)
    assert [s["id"] for s in to_check(states)] == ["9", "11", "11+m1", "21"]
    # the user's check reads only the acknowledged labels: none before 9, 11 or 13
    plan = plan_checks(states, LOG, VerifierInput.ACKS)
    assert {s["id"]: s.get("same") for s in states} == {"9": None, "11": "9", "11+m1": None, "13": "9",
                                                        "21": None}
    assert plan.distinct == 3


def test_different_images_never_merge_and_without_images_nothing_does():
    states = [st("9", image=0), st("10", image=1), st("11", image=2)]
    assert plan_checks(states, [], VerifierInput.ACKS).distinct == 3
    bare = [{k: v for k, v in s.items() if k != "image"} for s in states]
    assert plan_checks(bare, [], VerifierInput.ACKS).distinct == 3  # an emulator that did not tell
    same = [st("9", image=0), st("10", image=0)]
    assert plan_checks(same, [], VerifierInput.ACKS, dedup=False).distinct == 2  # turned off


def test_a_sample_keeps_every_flush_and_shares_the_rest_by_kind():
    states = ([st(str(i), "flush", image=i) for i in range(10)]
              + [st(str(100 + i), "cut", image=100 + i) for i in range(30)]
              + [st(f"{200 + i}+m1", "subset", image=200 + i) for i in range(60)])
    plan = plan_checks(states, [], VerifierInput.RECORDS, max_states=40, seed=7)
    kept = [s for s in to_check(states)]
    assert plan.checked == len(kept) == 40 and plan.sampled
    kinds = {k: sum(1 for s in kept if s["kind"] == k) for k in ("flush", "cut", "subset")}
    assert kinds == {"flush": 10, "cut": 10, "subset": 20}  # 30 shared 30:60
    assert [s.to_json()["kind"] for s in plan.strata] == ["flush", "cut", "subset"]
    again = [dict(s) for s in states]
    plan_checks(again, [], VerifierInput.RECORDS, max_states=40, seed=7)
    assert [s["id"] for s in to_check(again)] == [s["id"] for s in kept], "seeded"
    plan_checks(again, [], VerifierInput.RECORDS, max_states=40, seed=8)
    assert [s["id"] for s in to_check(again)] != [s["id"] for s in kept]
    # flushes beyond the bound are all checked still
    plan = plan_checks([dict(s) for s in states], [], VerifierInput.RECORDS, max_states=4, seed=7)
    assert plan.checked == 10 and plan.strata[1].checked == 0


def test_a_class_holding_a_flush_counts_as_one():
    states = [st("9", "cut", image=3), st("10", "flush", image=3), st("11", "cut", image=4), st("12", "cut", image=5)]
    plan = plan_checks(states, [], VerifierInput.ACKS, max_states=2, seed=1)
    assert states[1]["same"] == "9" and not states[0].get("out"), "its verdict answers for a flush: always checked"
    assert plan.strata[0] == Stratum("flush", 1, 1) and plan.checked == 2


def test_coverage_states_what_a_clean_sample_bounds():
    plan = CheckPlan(found=3495, distinct=1210, checked=1210)
    assert plan.coverage() == "3495 states found, 1210 distinct, each checked" and not plan.sampled
    plan = CheckPlan(found=3495, distinct=1210, checked=400, max_states=400, seed=3,
                     strata=(Stratum("flush", 300, 300), Stratum("cut", 300, 33), Stratum("subset", 610, 67)))
    assert plan.strata[0].bound is None
    assert plan.strata[2].bound == pytest.approx(1 - 0.05 ** (1 / 67))  # 4.4 %
    text = plan.coverage()
    assert "a seeded sample of 400 checked (max_states 400, seed 3)" in text
    assert "flush 300 of 300, cut 33 of 300 (clean: fewer than 8.7 % of them fail" in text
    assert CheckPlan.from_json(plan.to_json()) == plan


def test_the_host_plans_the_checks_the_study_asks_for(tmp_path, monkeypatch):
    class Log:  # the write log's listing, as the emulator session gives it
        def crash_states(self, **kw):
            assert kw["images"] is True
            return {"states": [st("9", "flush", image=0), st("11", image=0)], "records": 30}

    import flashbed.crashhost.host as hostmod
    monkeypatch.setattr(hostmod, "session_has", lambda dev, cap: True)
    host = CrashHost(Log())  # type: ignore[arg-type]
    host.run_dir = tmp_path
    (tmp_path / LOG_FILE).write_text("".join(json.dumps(r) + "\n" for r in LOG))
    (steps,) = STUDY.boots(cell(), tmp_path)
    args = next(s for s in steps if s.name == "states").args
    assert args["verifier"] == "records" and args["images"] is True
    reply = host.crash_states(args)
    listing = json.loads((tmp_path / STATES_FILE).read_text())
    assert listing["plan"]["distinct"] == 1 and listing["states"][1]["same"] == "9" and reply["states"] == 2


def test_parse_gives_every_state_a_verdict_and_counts_the_checks(tmp_path):
    checked = [state("100", "flush", facts()),
               state("101+m1", "subset", facts(verify={"n_loss": 1, "loss": ["f00003: acked file missing"]}))]
    lay_out(tmp_path, checked)
    listed = [{"id": "100", "kind": "flush", "acked": 10, "image": 0},
              {"id": "101", "kind": "cut", "acked": 10, "image": 0, "same": "100"},
              {"id": "101+m1", "kind": "subset", "acked": 10, "image": 1},
              {"id": "101+m2", "kind": "subset", "acked": 10, "image": 1, "same": "101+m1"},
              {"id": "101+m3", "kind": "subset", "acked": 10, "image": 2, "out": True}]
    plan = CheckPlan(found=5, distinct=3, checked=2, max_states=1, seed=3,
                     strata=(Stratum("flush", 1, 1), Stratum("subset", 2, 1)))
    (tmp_path / STATES_FILE).write_text(json.dumps({"records": 50, "log_bytes": 100, "states": listed,
                                                    "plan": plan.to_json()}))
    out = STUDY.parse(cell(), [boot()], tmp_path)
    v = {m.metric: m.value for m in out.measurements}
    assert (v["states"], v["iterations"], v["distinct"], v["checked"]) == (5, 4, 3, 2)
    assert (v["class:clean"], v["class:data-loss"], v["failures"]) == (2, 2, 2)
    assert v["states_per_hour"] == pytest.approx(2 * 3600 / 2.0)  # the lab's checks, not shared verdicts
    assert v["verdicts_per_hour"] == pytest.approx(4 * 3600 / 2.0)
    assert [f["state"] for f in out.extra["failures"]] == ["101+m1", "101+m2"]
    assert out.extra["failures"][1]["same"] == "101+m1" and "f00003" in out.extra["failures"][1]["why"]
    assert out.status == "ok", out.error  # the sampled-out state is not "unchecked"
    # five found; the sampled-out one has no verdict, and the head says so rather than "4 states"
    assert out.headline.startswith("5 states (3 distinct, 2 checked; 4 with a verdict): 2 clean, 2 data-loss")
    assert "cut" not in out.extra["coverage"] and "subset 1 of 2" in out.extra["coverage"]
    assert (tmp_path / CHECKED_FILE).is_file()


def test_a_kind_the_sample_left_out_says_it_bounds_nothing():
    """Every flush is kept: when the flushes alone fill max_states, the other kinds get none, and
    their coverage must not read as a bound ("fewer than 100.0 %")."""
    from flashbed.crashhost.plan import CheckPlan, Stratum
    plan = CheckPlan(found=49, distinct=29, checked=15, max_states=10, seed=1,
                     strata=(Stratum("flush", 15, 15), Stratum("cut", 2, 0), Stratum("subset", 12, 0)))
    text = plan.coverage()
    assert "cut 0 of 2 (none checked: a clean result says nothing of them)" in text
    assert "100.0 %" not in text and text.startswith("49 states found, 29 distinct; a seeded sample of 15")
