"""No evidence, no eligibility: a crash state without a verdict (the state could not be set up,
the check stopped on it, the states after it never checked, a check that gave one recovered
tree two verdicts) is evidence neither way. The cell counts them; a use case whose requirement
rests on them is not decided, with the count; a sample's bound is not claimed. No kernel."""

from __future__ import annotations

import json

from flashbed.crashhost.plan import CheckPlan, Stratum
from flashbed.lab.boundary import BootResult
from flashbed.report.eligibility import Verdict
from flashbed.report.load import load_run
from flashbed.report.recommend import recommend
from flashbed.studies.crashstates import mark_verdictless
from tests.unit.test_crashstates import boot, cell, lay_out, state, step
from tests.unit.test_powercut_classify import facts
from tests.unit.test_whose_loss import STUDY, _stick_run


def _stopped_boot(stopped: str) -> BootResult:
    b = boot()
    b.steps[-1] = step("check", json.dumps({"listed": 3, "checked": 1, "stopped": stopped}))
    return b


def test_states_after_a_stopped_check_have_no_verdict_and_are_counted(tmp_path):
    states = [state("100", "flush", facts()), state("200", "cut", facts()), state("300", "cut", facts())]
    lay_out(tmp_path, states)
    (tmp_path / "checked.jsonl").write_text(json.dumps(states[0]) + "\n")  # the lab stopped after the first
    out = STUDY.parse(cell(), [_stopped_boot("state 200: your check ran past its limit of 3 s")], tmp_path)
    v = {m.metric: m.value for m in out.measurements}
    assert (v["no_verdict"], v["to_judge"], v["fs_failures"]) == (2, 3, 0)
    assert out.extra["no_verdict"] == {"states": 2, "of": 3, "why": {"not checked (state 200 stopped the check)": 2}}
    assert "2 of 3 without a verdict" in out.headline


def test_a_use_case_resting_on_states_without_a_verdict_is_not_decided(tmp_path):
    unset = state("200", "cut", None)
    unset["switch"] = {"error": "no answer"}  # the host could not serve it: class error
    run = load_run(_stick_run(tmp_path, {"ext4": [state("100", "flush", facts()), unset],
                                         "exfat": [state("100", "flush", facts()), state("200", "cut", facts())]}))
    logging = {r.use_case.id: r for r in recommend(run)["stick-1g"]}["logging"]
    c = logging.checks["ext4"].checks[0]
    assert c.verdict is Verdict.UNCHECKED and c.pending
    assert c.why.startswith("1 of 2 crash states it set out to check have no verdict (not checked: the host could "
                            "not serve the state")
    assert logging.checks["exfat"].checks[0].verdict is Verdict.MET
    said = [u.why for u in logging.undecided]
    assert any(w.startswith("requirement durability not decided for ext4: 1 of 2") for w in said), said


def test_a_check_with_two_verdicts_for_one_tree_leaves_the_tree_without_one():
    recs = [{"state": "1", "class": "recovered", "cause": None},
            {"state": "2", "class": "data-loss", "cause": "filesystem", "unstable": "1"},
            {"state": "3", "class": "recovered", "cause": None, "tree_same": "1", "unstable": "1"},
            {"state": "4", "class": "recovered", "cause": None, "same": "1"},
            {"state": "5", "class": "recovered", "cause": None}]
    assert mark_verdictless(recs) == 4
    assert [bool(r.get("no_verdict")) for r in recs] == [True, True, True, True, False]
    assert recs[1]["cause"] is None  # not the filesystem's failure: the check's
    assert "your check gave different verdicts to one recovered tree (states 1 and 2)" in recs[0]["no_verdict"]


def test_a_hung_check_is_not_the_filesystem_s_failure():
    recs = [{"state": "1", "class": "hang", "cause": "filesystem", "no_verdict": "your check did not finish"},
            {"state": "2", "class": "hang", "cause": None, "why": "the lab stopped answering while checking it"}]
    assert mark_verdictless(recs) == 2
    assert recs[0]["cause"] is None and recs[1]["no_verdict"] == "the lab stopped answering while checking it"


def test_a_sample_whose_states_lack_verdicts_bounds_nothing():
    plan = CheckPlan(found=7, distinct=6, checked=4, max_states=4, seed=1,
                     strata=(Stratum("cut", 2, 1), Stratum("subset", 4, 3)))
    assert "95 % confidence" in plan.coverage() and "95 % confidence" in plan.coverage(judged=4)
    text = plan.coverage(judged=1)
    assert "confidence" not in text and "4 to check (a seeded sample, max_states 4), 1 with a verdict: 3 without " \
                                       "one, so a clean result bounds nothing" in text
