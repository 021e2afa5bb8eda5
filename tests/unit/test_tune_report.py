"""The tuning pass judged from a run's results (report/tuning.py): what is still to run, the answer
with its options, each option's effect and the options that break a requirement. Hand-made cells,
no lab."""

from __future__ import annotations

import json

import pytest

from flashbed import fsoptions
from flashbed import tune as T
from flashbed.report import write_report
from flashbed.report.load import load_run
from flashbed.report.recommend import answer_line, recommend
from flashbed.report.tuning import Tuning, answer_text, decisive_studies
from tests.report_fixtures import generator

gen = generator()
LZ4 = T.Option("compress_algorithm", "lz4", mkfs=("-O", "extra_attr,compression"))
NOBAR = T.Option("fsync_mode", "nobarrier", risk=fsoptions.risk("f2fs", "fsync_mode=nobarrier"))
COMMIT = T.Option("commit", "60")
SPEC_LZ4 = T.OptionSet("f2fs", (LZ4,)).spec
SPEC_NOBAR = T.OptionSet("f2fs", (NOBAR,)).spec
SPEC_COMMIT = T.OptionSet("ext4", (COMMIT,)).spec


@pytest.fixture(autouse=True)
def small_catalogue(monkeypatch):
    monkeypatch.setattr(T, "catalogue", lambda spec: {"f2fs": [LZ4, NOBAR], "ext4": [COMMIT]}.get(spec, []))


def _cells(fs: str, overwrite: float, wa: float, losses: int = 0) -> list:
    failures = [{"state": "f0012-c0003", "class": "data-loss", "kind": "cut", "acked": 7,
                 "why": "A/foo: acknowledged size 9000, found 0"}] if losses else []
    return [gen.cell(fs, "overwrite", [("1MB fsync", "bandwidth", overwrite, "MB/s")],
                     device_stats={"workload": {"write_amplification": wa, "erase_spread": 2}}),
            gen.cell(fs, "crashstates", gen.crash_meas("sequences", {"recovered": 100 - losses, "data-loss": losses}),
                     case="sequences", extra={"failures": failures})]


def _run(tmp_path, tuned: bool):
    cells = _cells("ext4", 0.3, 3.0) + _cells("f2fs", 0.6, 2.0)
    if tuned:
        cells += _cells(SPEC_LZ4, 0.9, 1.2) + _cells(SPEC_NOBAR, 1.2, 1.9, losses=3) + _cells(SPEC_COMMIT, 0.3, 3.0)
    return gen.write_run(tmp_path / "run", cells, request={"tune": True, "fs": ["ext4", "f2fs"]})


def test_a_use_case_tries_its_decisive_studies_and_the_weightiest():
    from flashbed.report.weights import load_weights
    ucs = {uc.id: uc for uc in load_weights().use_cases}
    assert "crashstates" in decisive_studies(ucs["logging"]) and "overwrite" in decisive_studies(ucs["logging"])
    assert "caps" in decisive_studies(ucs["rootfs"])  # a requirement's study: an option can break it


def test_before_any_option_ran_every_single_option_is_pending(tmp_path):
    run = load_run(_run(tmp_path, tuned=False))
    tn = Tuning(run, recommend(run))
    pending = tn.search.pending()
    assert {spec for _d, spec in pending} == {SPEC_LZ4, SPEC_NOBAR, SPEC_COMMIT}
    assert pending[("emmc-1g", SPEC_LZ4)] == ("crashstates", "overwrite")
    logging = next(r for r in recommend(run)["emmc-1g"] if r.use_case.id == "logging")
    assert "not tuned yet" in answer_text(tn, logging)


def test_the_answer_names_the_options_their_effect_and_what_breaks(tmp_path):
    run = load_run(_run(tmp_path, tuned=True))
    recs = recommend(run)
    logging = next(r for r in recs["emmc-1g"] if r.use_case.id == "logging")
    # the plain ranking is the plain variants' alone
    assert logging.winner.fs == "f2fs" and {e.fs for e in logging.entries} == {"ext4", "f2fs"}
    tn = Tuning(run, recs)
    assert tn.search.done
    a = tn.answer("emmc-1g", "logging")
    assert a.options == T.OptionSet("f2fs", (LZ4,)) and a.judged.score > a.defaults.score
    text = answer_text(tn, logging)
    assert text.startswith(" Options: **f2fs** with `compress_algorithm=lz4` (score ")
    assert "`compress_algorithm=lz4`: crash states survived still 100 %" in text
    assert "1 KiB overwrite rate with fsync +50 %" in text and "write amplification (overwrites) −40 %" in text
    assert "Breaks a requirement: `fsync_mode=nobarrier` (durability (acknowledged data lost in 3 of 100 crash " \
           "states); replay: `flashbed crashstate replay " in text
    # an option that helped nobody is no answer: ext4 keeps its defaults
    ext4 = next(ls for ls in tn.search.leads if ls.lead.use_case == "logging" and ls.lead.fs == "ext4")
    assert ext4.best == T.OptionSet("ext4")


def test_the_report_says_it_on_the_first_screen_and_in_a_section(tmp_path):
    root = _run(tmp_path, tuned=True)
    write_report(root)
    md = (root / "report.md").read_text()
    first = md[:md.index("## Recommendation")]
    assert "Options: **f2fs** with `compress_algorithm=lz4`" in first
    assert "## Tuning: which options" in md
    s = json.loads((root / "summary.json").read_text())["tuning"]["emmc-1g"]["logging"]
    assert s["answer"]["spec"] == SPEC_LZ4
    broke = [t for t in s["tried"] if t["options"] == "fsync_mode=nobarrier"]
    assert broke and not broke[0]["eligible"] and broke[0]["replay"].startswith("flashbed crashstate replay")
    # the glance picture shows the plain variants only
    assert SPEC_LZ4 not in (root / "report-figures" / "fig-glance.svg").read_text()


def test_a_run_without_tuning_has_no_tuning(tmp_path):
    root = gen.write_run(tmp_path / "run", _cells("ext4", 0.3, 3.0) + _cells("f2fs", 0.6, 2.0))
    write_report(root)
    assert json.loads((root / "summary.json").read_text())["tuning"] is None
    assert "Options:" not in (root / "report.md").read_text()
    run = load_run(root)
    assert answer_line(next(r for r in recommend(run)["emmc-1g"] if r.use_case.id == "logging"))


def test_an_option_that_can_lose_acknowledged_data_by_design_is_marked_where_it_is_chosen(tmp_path):
    # fsync_mode=nobarrier lost nothing in these crash states (a twin whose cache keeps what it took):
    # it may be the answer, and the first screen says what its design allows, in both reports
    cells = _cells("ext4", 0.3, 3.0) + _cells("f2fs", 0.6, 2.0) + _cells(SPEC_LZ4, 0.5, 2.0) + \
        _cells(SPEC_NOBAR, 1.2, 1.9) + _cells(SPEC_COMMIT, 0.3, 3.0)  # nobarrier alone helped: no combination
    root = gen.write_run(tmp_path / "run", cells, request={"tune": True, "fs": ["ext4", "f2fs"]})
    write_report(root)
    why = fsoptions.risk("f2fs", "fsync_mode=nobarrier")
    md = (root / "report.md").read_text()
    first = md[:md.index("## Recommendation")]
    assert "Options: **f2fs** with `fsync_mode=nobarrier`" in first
    assert f"**Risky by design**: `fsync_mode=nobarrier` can lose acknowledged data ({why})" in first
    html = (root / "report.html").read_text()
    assert "Risky by design" in html and "fsync_mode=nobarrier</code> can lose acknowledged data" in html


def test_a_plain_variant_with_a_risky_option_is_marked_on_the_first_screen(tmp_path):
    cells = _cells("ext4+o:nobarrier", 0.9, 2.0) + _cells("f2fs", 0.6, 2.0)
    root = gen.write_run(tmp_path / "run", cells)
    write_report(root)
    md = (root / "report.md").read_text()
    first = md[:md.index("## Recommendation")]
    line = next(x for x in first.splitlines() if "Data logging" in x)
    assert "**Risky by design**: ext4+o:nobarrier: `nobarrier` can lose acknowledged data by design (" in line
    assert "Risky by design" in (root / "report.html").read_text()


# ---- --tune --robust: the tuned answer across the twin's assumptions -----------------------------

GC = T.Option("background_gc", "off")
SPEC_GC = T.OptionSet("f2fs", (GC,)).spec


def _tuned_robust_run(tmp_path, monkeypatch, on_variants: dict[str, float] | None):
    """gen.robust_run's media case (f2fs 10 s, ext4 12 s for the big file on every variant) tuned:
    f2fs+background_gc=off writes it in 8 s on the nominal twin, and per variant as `on_variants`
    says (8 s where not named; None: not run on the variants yet). ext4 has no option to try."""
    monkeypatch.setattr(T, "catalogue", lambda spec: [GC] if spec == "f2fs" else [])
    root = gen.robust_run(tmp_path / "run", {})
    man = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**man, "request": {"tune": True, "fs": ["ext4", "f2fs"],
                                                                       "robust": 1}}))
    cells = [gen.cell(SPEC_GC, "caps", gen.caps_meas()), gen.cell(SPEC_GC, "bigfile", [("write", "seconds", 8.0, "s")])]
    for v in gen.VARIANTS if on_variants is not None else ():
        cells.append(gen.cell(SPEC_GC, "bigfile", [("write", "seconds", on_variants.get(v["name"], 8.0), "s")],
                              device=f"emmc-1g~{v['name']}"))
    for c in cells:
        (root / "cells" / c.key.file_name).write_text(json.dumps(c.to_json()))
    return root


def test_with_robust_the_tuned_answer_is_planned_on_the_twins_variants(tmp_path, monkeypatch):
    run = load_run(_tuned_robust_run(tmp_path, monkeypatch, None))
    tn = Tuning(run, recommend(run))
    assert tn.search.done and tn.answer("emmc-1g", "media").options == T.OptionSet("f2fs", (GC,))
    # the study the robust pass reruns (caps is what the filesystem holds, the same on any variant)
    assert tn.robust_pending() == {("emmc-1g", SPEC_GC): ("bigfile",)}
    media = next(r for r in recommend(run)["emmc-1g"] if r.use_case.id == "media")
    assert "Tuned footing: `background_gc=off` not yet run on 5 of the part's 5 variants" in answer_text(tn, media)


def test_with_robust_the_first_screen_says_where_the_tuned_answer_holds(tmp_path, monkeypatch):
    # a small SLC buffer makes the option slower than f2fs's defaults there (11 s against 10 s)
    root = _tuned_robust_run(tmp_path, monkeypatch, {"slc_cache-low": 11.0})
    run = load_run(root)
    tn = Tuning(run, recommend(run))
    assert tn.robust_pending() == {}
    tf = tn.robust_footing("emmc-1g", "media")
    assert [p.variant for p in tf.points if not p.holds] == ["slc_cache-low"] and len(tf.points) == 5
    write_report(root)
    md = (root / "report.md").read_text()
    line = next(x for x in md[:md.index("## Recommendation")].splitlines() if "Media recording" in x)
    assert "Options: **f2fs** with `background_gc=off`" in line
    assert "Tuned footing: `background_gc=off` holds in 4 of 5 variants of this part (keeps every requirement " \
           "and its gain over f2fs's defaults; first in 4 of 5); not at slc_cache-low: score " in line
    assert "**Holds in 5 of 5 variants of this part**" in line  # the plain choice's footing, its own cells only
    s = json.loads((root / "summary.json").read_text())["tuning"]["emmc-1g"]["media"]["answer"]["footing"]
    assert s["held"] == 4 and s["of"] == 5 and s["variants"]["slc_cache-low"]["holds"] is False


def test_every_option_that_breaks_a_requirement_is_named_with_its_state_and_replay(tmp_path):
    cells = _cells("ext4", 0.3, 3.0) + _cells("f2fs", 0.6, 2.0) + _cells(SPEC_LZ4, 0.9, 1.2, losses=2) + \
        _cells(SPEC_NOBAR, 1.2, 1.9, losses=3) + _cells(SPEC_COMMIT, 0.3, 3.0)
    run = load_run(gen.write_run(tmp_path / "run", cells, request={"tune": True, "fs": ["ext4", "f2fs"]}))
    recs = recommend(run)
    logging = next(r for r in recs["emmc-1g"] if r.use_case.id == "logging")
    text = answer_text(Tuning(run, recs), logging)
    assert "Options: **f2fs** at its defaults" in text
    for option, lost in (("compress_algorithm=lz4", "2 of 100"), ("fsync_mode=nobarrier", "3 of 100")):
        assert f"`{option}` (durability (acknowledged data lost in {lost} crash states); replay: " \
               f"`flashbed crashstate replay " in text


def test_a_choice_with_no_option_to_try_says_so_and_what_the_other_tried(tmp_path, monkeypatch):
    monkeypatch.setattr(T, "catalogue", lambda spec: [COMMIT] if spec == "ext4" else [])  # f2fs: none (as erofs)
    cells = _cells("ext4", 0.3, 3.0) + _cells("f2fs", 0.6, 2.0) + _cells(SPEC_COMMIT, 0.3, 3.0)
    run = load_run(gen.write_run(tmp_path / "run", cells, request={"tune": True, "fs": ["ext4", "f2fs"]}))
    recs = recommend(run)
    logging = next(r for r in recs["emmc-1g"] if r.use_case.id == "logging")
    assert answer_text(Tuning(run, recs), logging) == " Options: **f2fs** has none to try; no option of ext4 " \
        "(1 tried) ranks it above."
