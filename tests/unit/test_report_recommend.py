"""Recommendation: the weights file, scoring, ranking, sentences, missing and failed studies."""

from __future__ import annotations

import json

import pytest

from flashbed.errors import FlashbedError
from flashbed.report import recommendation_text
from flashbed.report import weights as W
from flashbed.report.load import load_run
from flashbed.report.recommend import answer_line, rank, recommend
from flashbed.report.rerun import measure_command
from flashbed.studies import STUDIES
from tests.report_fixtures import generator

STUDY_ORDER = list(STUDIES)

gen = generator()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return gen.make_run(tmp_path_factory.mktemp("rec") / "run")


@pytest.fixture(scope="module")
def recs(run_dir):
    return recommend(load_run(run_dir))


def _by_id(rankings):
    return {r.use_case.id: r for r in rankings}


# ---- the weights file --------------------------------------------------------------

def test_packaged_weights_mark_what_decides_each_use_case():
    w = W.load_weights()
    decisive = {u.id: {(c.study, c.metric) for c in u.criteria if c.decisive} for u in w.use_cases}
    assert decisive == {"boot": {("boot", "busy_seconds"), ("boot", "used")},
                        "rootfs": {("crashstates", "undamaged_survived")},
                        "logging": {("crashstates", "undamaged_survived")},
                        "database": {("crashstates", "undamaged_survived")},
                        "media": {("bigfile", "seconds"), ("bigfile", "write_amplification")}}
    assert 0 < w.lab_bound_below < 100
    assert "device_busy_below" in W.DEFAULT_WEIGHTS.read_text() and "decisive" in W.DEFAULT_WEIGHTS.read_text()


def test_packaged_weights_cover_the_five_use_cases():
    w = W.load_weights()
    assert [u.id for u in w.use_cases] == ["boot", "rootfs", "logging", "media", "database"]
    for u in w.use_cases:
        assert u.title and u.summary
        for c in u.criteria:
            assert c.study in STUDY_ORDER, c
            assert c.better in ("higher", "lower") and c.weight > 0
    assert set(w.outcomes) == {"powercut", "corruption", "badblocks", "crashstates", "appcheck"}
    assert "clean" in w.outcomes["powercut"]["good"] and "hang" in w.outcomes["powercut"]["bad"]


def test_weights_file_documents_itself():
    text = W.DEFAULT_WEIGHTS.read_text()
    header = text.split("[outcomes", 1)[0]
    for word in ("label", "study", "case", "metric", "source", "better", "weight", "not measured", "survived"):
        assert word in header, word


@pytest.mark.parametrize("body, message", [
    ("", "no [[use_case]]"),
    ("[[use_case]]\nid='x'\n", "has no criteria"),
    ("[[use_case]]\nid='x'\n[[use_case.criterion]]\nlabel='a'\nstudy='s'\ncase='c'\nmetric='m'\nbetter='up'\n"
     "weight=1\n", "better must be"),
    ("[[use_case]]\nid='x'\n[[use_case.criterion]]\nlabel='a'\nstudy='s'\ncase='c'\nmetric='m'\nbetter='higher'\n"
     "weight=-1\n", "weight must be a positive number"),
    ("[[use_case]]\nid='x'\n[[use_case.criterion]]\nlabel='a'\nstudy='s'\nmetric='m'\nbetter='higher'\nweight=1\n",
     "'case' is missing"),
    ("[[use_case]]\nid='x'\n[[use_case.criterion]]\nlabel='a'\nstudy='s'\ncase='c'\nmetric='m'\nbetter='higher'\n"
     "weight=1\nwieght=2\n", "unknown field"),
    ("this is = not toml [", "not valid TOML"),
    ("[[use_case]]\nid='x'\n[[use_case.criterion]]\nlabel='a'\nstudy='s'\ncase='c'\nmetric='m'\nbetter='higher'\n"
     "weight=1\ndecisive='yes'\n", "decisive must be true or false"),
    ("[lab_bound]\ndevice_busy_below=150\n[[use_case]]\nid='x'\n[[use_case.criterion]]\nlabel='a'\nstudy='s'\n"
     "case='c'\nmetric='m'\nbetter='higher'\nweight=1\n", "device_busy_below must be a percentage"),
    ("[outcomes.powercut]\ngood=['clean']\nbad=['hang']\nignore=['clean']\n", "lists clean more than once"),
])
def test_bad_weights_file_is_one_clear_line(tmp_path, body, message):
    p = tmp_path / "w.toml"
    p.write_text(body)
    with pytest.raises(FlashbedError) as e:
        W.load_weights(p)
    assert message in str(e.value) and str(p) in str(e.value)


# ---- scoring -------------------------------------------------------------------------

def _weights(tmp_path, criteria: str) -> W.Weights:
    p = tmp_path / "w.toml"
    p.write_text("[[use_case]]\nid = 'db'\ntitle = 'DB'\nsummary = 's'\n" + criteria)
    return W.load_weights(p)


CRIT = """
[[use_case.criterion]]
label = "sync write rate"
study = "bandwidth"
case = "randwrite 4k direct"
metric = "iops"
better = "higher"
weight = {w1}

[[use_case.criterion]]
label = "mount time"
study = "mount"
case = "*"
metric = "mount"
better = "lower"
weight = {w2}
"""


def _small_run(tmp_path, extra=()):
    return gen.write_run(tmp_path / "run", [
        gen.cell("ext4", "bandwidth", [("randwrite 4k direct", "iops", 100.0, "IO/s")]),
        gen.cell("f2fs", "bandwidth", [("randwrite 4k direct", "iops", 250.0, "IO/s")]),
        gen.cell("ext4", "mount", [("1024MB fill60 clean", "mount", 0.1, "s")]),
        gen.cell("f2fs", "mount", [("1024MB fill60 clean", "mount", 0.3, "s")]),
        *extra,
    ])


def test_scores_are_weighted_ratios_to_the_best(tmp_path):
    w = _weights(tmp_path, CRIT.format(w1=3, w2=1))
    run = load_run(_small_run(tmp_path), w)
    r = rank(run, "emmc-1g", w.use_cases[0])
    assert [e.fs for e in r.entries] == ["f2fs", "ext4"]
    f2fs, ext4 = r.entries
    assert f2fs.score == pytest.approx((3 * 1.0 + 1 * (0.1 / 0.3)) / 4)
    assert ext4.score == pytest.approx((3 * 0.4 + 1 * 1.0) / 4)
    # the deciding figures and the trade-off, in one sentence
    assert f2fs.text.startswith("**f2fs** (score")
    assert "2.5× ext4's sync write rate (250 IO/s vs 100 IO/s)" in f2fs.text
    assert "but mount time 3.0× ext4's (0.300 s vs 0.100 s)" in f2fs.text
    assert "only 0.4× f2fs's sync write rate" in ext4.text


def test_weights_decide(tmp_path):
    w = _weights(tmp_path, CRIT.format(w1=1, w2=5))
    run = load_run(_small_run(tmp_path), w)
    assert rank(run, "emmc-1g", w.use_cases[0]).winner.fs == "ext4"


def test_failed_scores_zero_and_missing_is_not_scored(tmp_path):
    w = _weights(tmp_path, CRIT.format(w1=1, w2=1))
    extra = [gen.cell("btrfs", "bandwidth", [], status="hang", error="fio timed out"),
             gen.cell("btrfs", "mount", [("1024MB fill60 clean", "mount", 0.2, "s")]),
             gen.cell("xfs", "bandwidth", [("randwrite 4k direct", "iops", 250.0, "IO/s")])]
    run = load_run(_small_run(tmp_path, extra), w)
    r = rank(run, "emmc-1g", w.use_cases[0])
    by = {e.fs: e for e in r.entries}
    assert by["btrfs"].values[0].status == "failed" and by["btrfs"].scores[0] == 0.0
    assert by["btrfs"].complete and by["btrfs"].score == pytest.approx((0 + 0.1 / 0.2) / 2)
    assert "sync write rate: hang (scores 0)" in by["btrfs"].text
    # xfs has no mount cell: scored on what it has, marked incomplete, ranked after complete variants
    assert by["xfs"].values[1].status == "missing" and 1 not in by["xfs"].scores
    assert not by["xfs"].complete and "incomplete" in by["xfs"].text
    assert by["xfs"].score == pytest.approx(1.0)
    assert [e.fs for e in r.entries] == ["ext4", "f2fs", "btrfs", "xfs"]


def test_a_missing_study_is_listed_never_guessed(tmp_path):
    w = _weights(tmp_path, CRIT.format(w1=1, w2=1) + """
[[use_case.criterion]]
label = "corruption survived"
study = "corruption"
case = "*"
metric = "survived"
better = "higher"
weight = 10
""")
    run = load_run(_small_run(tmp_path), w)
    r = rank(run, "emmc-1g", w.use_cases[0])
    assert [(i, why) for i, why in r.not_measured] == [(2, "study corruption is not in this run")]
    assert all(2 not in e.scores for e in r.entries)
    assert all(e.complete for e in r.entries)


def test_fixture_recommendation(recs):
    emmc = _by_id(recs["emmc-8g"])
    assert emmc["database"].winner.fs == "f2fs+discard"
    assert emmc["logging"].winner.fs == "f2fs+discard"
    # btrfs hung in the sync power-cut cell: it scores 0 there and says so
    btrfs = next(e for e in emmc["logging"].entries if e.fs == "btrfs")
    assert "hang" in btrfs.text
    # corruption did not run: listed as not measured for the root filesystem
    assert any("corruption" in why for _i, why in emmc["rootfs"].not_measured)
    # on the raw NAND device only mount/boot ran: ubifs vs jffs2, the rest is not measured
    nand = _by_id(recs["nand-mlc-2g"])
    assert nand["boot"].winner.fs == "ubifs"
    db = nand["database"]
    assert db.entries == [] and len(db.not_measured) == len(db.use_case.criteria)
    # crash states need the emulator's write log: on raw NAND through nandsim they cannot run, which holds
    # nothing up and is said
    assert ("crashstates cannot run on nand-mlc-2g (it needs the flash emulator's write log)"
            in dict(db.not_measured).values())


def test_recommendation_text(run_dir):
    md = recommendation_text(run_dir)
    assert md.startswith("## Recommendation\n")
    for title in ("Read-only / boot partition", "Root filesystem", "Data logging (small sync writes)",
                  "Media recording (big sequential writes)", "Database (random sync writes)"):
        assert f"#### {title}" in md
    assert "Choose **f2fs+discard**" in md
    assert "Not measured (not scored for anyone): corruption survived" in md
    assert "\n1. **" in md and "×" in md


def test_weights_are_read_at_run_time(run_dir, tmp_path, monkeypatch):
    """Editing the TOML changes the recommendation without touching code."""
    text = W.DEFAULT_WEIGHTS.read_text()
    before = _by_id(recommend(load_run(run_dir))["emmc-8g"])["boot"].winner.fs
    edited = tmp_path / "weights.toml"
    # make "space used when empty" dominate the boot partition use case: btrfs (3.6 MiB) wins
    edited.write_text(text.replace('label = "space used when empty"\n  study = "mkfs"\n  case = "empty"\n'
                                   '  metric = "used"\n  better = "lower"\n  weight = 1',
                                   'label = "space used when empty"\n  study = "mkfs"\n  case = "empty"\n'
                                   '  metric = "used"\n  better = "lower"\n  weight = 100'))
    monkeypatch.setattr(W, "DEFAULT_WEIGHTS", edited)
    after = _by_id(recommend(load_run(run_dir))["emmc-8g"])["boot"].winner.fs
    assert before != "btrfs" and after == "btrfs"


def test_an_infrastructure_error_is_not_held_against_the_filesystem(tmp_path):
    w = _weights(tmp_path, CRIT.format(w1=1, w2=1))
    extra = [gen.cell("btrfs", "bandwidth", [], status="error", error="emulator did not start"),
             gen.cell("btrfs", "mount", [("1024MB fill60 clean", "mount", 0.1, "s")])]
    run = load_run(_small_run(tmp_path, extra), w)
    btrfs = next(e for e in rank(run, "emmc-1g", w.use_cases[0]).entries if e.fs == "btrfs")
    assert btrfs.values[0].status == "missing" and 0 not in btrfs.scores and not btrfs.complete


# ---- decisive criteria: no winner without them ------------------------------------------

DURABILITY_USE_CASES = ("rootfs", "logging", "database")


@pytest.fixture(scope="module")
def no_crashstates():
    """The fixture run without its crash-state cells, reported (shared: do not modify)."""
    return gen.reported_run(crash_states=False)


NO_CS_COMMAND = (
    "flashbed run --profile quick --device emmc-8g --fs ext4,ext4+noatime,f2fs+discard,btrfs --study crashstates "
    "--repeat 2 --clock real")  # the fixture's run is from before the clock axis: real time


def test_without_crash_states_those_use_cases_are_not_decided(no_crashstates):
    """Crash states decide durability; the random power cuts are the second figure, not enough alone."""
    recs = _by_id(recommend(load_run(no_crashstates))["emmc-8g"])
    for uc in DURABILITY_USE_CASES:
        r = recs[uc]
        assert not r.decided and r.winner is None and r.runner_up is None, uc
        assert r.entries  # the partial ranking is still shown
        [u] = r.undecided  # the durability requirement is not asked again: the same study, the same command
        assert r.use_case.criteria[u.criterion].study == "crashstates"
        assert "not measured" in u.why and u.command == NO_CS_COMMAND
    # the rest is decided as before
    assert recs["media"].decided and recs["media"].winner.fs == "f2fs+discard"


def test_not_decided_in_markdown_html_and_summary(no_crashstates):
    md = (no_crashstates / "report.md").read_text()
    html = (no_crashstates / "report.html").read_text()
    line = ("**Root filesystem**: **not decided**: crash states survived not measured (study crashstates is not "
            f"in this run); measure it: `{NO_CS_COMMAND}`.")
    assert line in md
    assert md.index(line) < md.index("## Recommendation")  # on the first screen
    assert "Partial ranking, on the criteria that were measured: not a recommendation." in md
    assert "Choose **" in md  # the decided ones still choose
    assert f"<code>{NO_CS_COMMAND}</code>" in html and "<strong>not decided</strong>" in html
    s = json.loads((no_crashstates / "summary.json").read_text())
    for uc in DURABILITY_USE_CASES:
        rec = s["recommendation"]["emmc-8g"][uc]
        assert rec["decided"] is False and rec["winner"] is None and rec["ranking_partial"] is True
        assert rec["not_decided"][0]["command"] == NO_CS_COMMAND
    assert s["recommendation"]["emmc-8g"]["media"]["decided"] is True


def test_the_measuring_command_carries_the_run_s_own_settings(tmp_path):
    """Repeats, seed, pace and the overrides for the missing study come from the manifest; a study
    whose cells the lab itself failed is finished by resuming the run."""
    run_dir = _small_run(tmp_path)
    m = json.loads((run_dir / "manifest.json").read_text())
    m["request"] = {"profile": "paper", "fs": ["f2fs", "ext4", "xfs"], "devices": ["emmc-1g"], "repeat": 3, "seed": 7,
                    "pace": "none", "overrides": {"powercut": {"modes": ["sync"], "iterations": 5},
                                                 "bigfile": {"size": 1 << 20}}}
    m["profile"] = "paper"
    (run_dir / "manifest.json").write_text(json.dumps(m))
    run = load_run(run_dir)
    assert measure_command(run, "emmc-1g", ["powercut"]) == (
        "flashbed run --profile paper --device emmc-1g --fs f2fs,ext4 --study powercut --repeat 3 --seed 7 "
        "--pace none --clock real --set powercut.iterations=5 --set powercut.modes=sync")
    # the run's clock: real time for a run without one, by name unless it is the default, auto
    for clocks, flag in ((["virtual"], " --clock virtual"), (["auto"], ""), (["real", "virtual"], "")):
        run.manifest["request"]["clocks"] = clocks
        assert measure_command(run, "emmc-1g", ["mkfs"]).endswith("--study mkfs --repeat 3 --seed 7 --pace none"
                                                                   + flag)
    del run.manifest["request"]["clocks"]
    gen.write_run(tmp_path / "err", [gen.cell("ext4", "powercut", [], status="error", error="lab died")])
    assert measure_command(load_run(tmp_path / "err"), "emmc-1g", ["powercut"]) == "flashbed run --resume err"
    # a target of a run on two kernels: the device and its kernel, not the target's label
    run.targets["emmc-1g · kernel 6.12"] = ("emmc-1g", "6.12")
    assert measure_command(run, "emmc-1g · kernel 6.12", ["powercut"]).startswith(
        "flashbed run --profile paper --device emmc-1g --kernel 6.12 --fs ")


# ---- lab-bound figures: marked, never deciding ---------------------------------------

LAB_CRIT = """
[[use_case.criterion]]
label = "4 KiB buffered read rate"
study = "bandwidth"
case = "read 4k buffered"
metric = "bandwidth"
better = "higher"
weight = 5
""" + "\n[[use_case.criterion]]" + CRIT.split("[[use_case.criterion]]")[2].format(w2=1)  # CRIT's mount time


def lab_run(tmp_path, busy_a: float, busy_b: float):
    """ext4 reads faster than f2fs with fio running 1 s; the device busy busy_a / busy_b of it."""
    def bw(fs, rate, busy):
        return gen.cell(fs, "bandwidth", [("read 4k buffered", "bandwidth", rate, "MB/s"),
                                          ("read 4k buffered", "runtime", 1.0, "s")],
                        device_stats={"read 4k buffered": {"busy_seconds": busy, "wall_seconds": 2.0}})
    return gen.write_run(tmp_path / "run", [
        bw("ext4", 80.0, busy_a), bw("f2fs", 40.0, busy_b),
        gen.cell("ext4", "mount", [("1024MB fill60 clean", "mount", 0.3, "s")]),
        gen.cell("f2fs", "mount", [("1024MB fill60 clean", "mount", 0.1, "s")])])


def test_a_lab_bound_criterion_scores_nobody_and_decides_nothing(tmp_path):
    w = _weights(tmp_path, LAB_CRIT)
    r = rank(load_run(lab_run(tmp_path, 0.3, 0.9), w), "emmc-1g", w.use_cases[0])
    assert list(r.lab_bound) == [0] and [fs for fs, _b in r.lab_bound[0]] == ["ext4"]
    assert r.scored == [1] and all(0 not in e.scores for e in r.entries) and all(e.complete for e in r.entries)
    assert r.winner.fs == "f2fs"  # on mount time alone; ext4's lab-bound 2x read rate decides nothing
    assert "read rate" not in r.entries[0].text and "read rate" not in r.entries[1].text
    # device-bound, the same figures decide
    (tmp_path / "busy").mkdir()
    r2 = rank(load_run(lab_run(tmp_path / "busy", 0.9, 0.9), w), "emmc-1g", w.use_cases[0])
    assert not r2.lab_bound and r2.winner.fs == "ext4" and "read rate" in r2.entries[0].text


def test_a_lab_bound_decisive_criterion_leaves_the_use_case_undecided(tmp_path):
    w = _weights(tmp_path, LAB_CRIT.replace("weight = 5", "weight = 5\ndecisive = true"))
    r = rank(load_run(lab_run(tmp_path, 0.3, 0.9), w), "emmc-1g", w.use_cases[0])
    assert not r.decided and r.winner is None
    assert r.undecided[0].why.startswith("4 KiB buffered read rate is lab-bound (ext4 device busy 30 %)")
    assert r.undecided[0].command == "flashbed run --device emmc-1g --fs ext4,f2fs --study bandwidth --clock real --jobs 1"
    assert r.undecided[0].ask == "measure it again on a quiet host"


def test_a_decisive_statistic_no_run_can_measure_does_not_hold_the_choice_up(recs):
    """Raw NAND runs on nandsim, without the flash emulator: the boot partition is decided on boot time
    and image size there, and says why the flash time at boot is missing."""
    boot = _by_id(recs["nand-mlc-2g"])["boot"]
    assert boot.decided and boot.winner.fs == "ubifs"
    assert [(boot.use_case.criteria[i].label, why) for i, why in boot.not_measured
            if boot.use_case.criteria[i].decisive] == [
        ("flash time at boot", "the device has no flash emulator statistics (raw NAND through nandsim, or a plain "
                               "file)")]


# ---- read-only filesystems: n/a where they cannot be measured, no candidate where writing decides --------

def _ro_run(tmp_path):
    return _small_run(tmp_path, [
        gen.cell("squashfs+zstd", "bandwidth", [("read 4M buffered", "bandwidth", 90.0, "MB/s")]),
        gen.cell("squashfs+zstd", "mount", [("1024MB fill60 clean", "mount", 0.05, "s")]),
        gen.cell("ext4", "powercut", [("sync", "class:clean", 5, "count"), ("sync", "iterations", 5, "count")])])


def _mark_ro(run_dir):
    m = json.loads((run_dir / "manifest.json").read_text())
    m["read_only"] = ["squashfs+zstd"]
    m["not_applicable"] = [{"device": "emmc-1g", "fs": "squashfs+zstd", "study": "powercut", "why": "read-only"}]
    (run_dir / "manifest.json").write_text(json.dumps(m))
    return run_dir


def test_a_read_only_filesystem_is_no_candidate_where_a_write_figure_decides(tmp_path):
    writes = _weights(tmp_path, CRIT.format(w1=1, w2=1).replace("weight = 1\n", "weight = 1\ndecisive = true\n", 1))
    run = load_run(_mark_ro(_ro_run(tmp_path)), writes)
    r = rank(run, "emmc-1g", writes.use_cases[0])
    assert r.not_candidates == [("squashfs+zstd", "read-only: sync write rate n/a")]
    assert [e.fs for e in r.entries] == ["ext4", "f2fs"] and r.decided
    # where reading decides, it competes; the write figure it cannot have is n/a, not missing, and
    # scored on fewer criteria it ranks after the filesystems scored on all (as an incomplete one)
    reads = _weights(tmp_path, CRIT.format(w1=1, w2=1).rstrip() + "\ndecisive = true\n")  # mount time
    r = rank(load_run(tmp_path / "run", reads), "emmc-1g", reads.use_cases[0])
    assert not r.not_candidates and [e.fs for e in r.entries] == ["f2fs", "ext4", "squashfs+zstd"]
    sq = r.entries[-1]
    assert sq.values[0].status == "n/a" and sq.values[0].why == "read-only" and "(n/a: sync write rate)" in sq.text
    assert sq.scores == {1: 1.0}


def test_tables_say_n_a_read_only(tmp_path):
    from flashbed.report.tables import study_table
    run = load_run(_mark_ro(_ro_run(tmp_path)))
    rows = {(r[0].text, r[1].text): r for r in study_table(run, "emmc-1g", "bandwidth").rows}
    assert rows[("randwrite 4k direct", "squashfs+zstd")][2].text == "n/a (read-only)"
    assert rows[("read 4M buffered", "squashfs+zstd")][2].text == "90.0"
    assert ("read 4M buffered", "ext4") not in rows  # a writable filesystem's gap stays a gap
    # a study the plan left out for it (it writes) lists it, n/a, beside the others
    pc = study_table(run, "emmc-1g", "powercut")
    assert [c.text for c in pc.rows[-1][:3]] == ["sync", "squashfs+zstd", "n/a (read-only)"]
    # without the manifest's word, nothing is n/a: a missing figure stays missing
    plain = load_run(_ro_run(tmp_path / "plain"))
    assert all("n/a" not in c.text for r in study_table(plain, "emmc-1g", "bandwidth").rows for c in r)


# ---- requirements before scores ------------------------------------------------------------

POSIX = ("owners", "modes", "symlinks", "hard_links", "device_nodes", "fifos", "sockets", "xattrs")


def _durability_run(tmp_path, exfat_losses: int = 0):
    """ext4 against an exFAT that scores best on every root-filesystem and logging criterion measured:
    faster boot, small-file copy and sync overwrites, every random power cut survived. exFAT lacks
    the POSIX set (as the caps probe finds it in the lab); with `exfat_losses`, it also lost
    acknowledged data in that many crash states (one kept with its state id, as the study keeps them)."""
    def crash(fs, losses):
        failures = [{"state": "f0012-c0003", "class": "data-loss", "kind": "cut", "acked": 7,
                     "why": "A/foo: acknowledged size 9000, found 0"}] if losses else []
        return [gen.cell(fs, "crashstates", gen.crash_meas("powercut", {"recovered": 100}), case="powercut"),
                gen.cell(fs, "crashstates", gen.crash_meas("sequences", {"recovered": 100 - losses,
                                                                         "data-loss": losses}),
                         case="sequences", extra={"failures": failures})]
    return gen.write_run(tmp_path / "run", [
        gen.cell("ext4", "boot", [("boot", "seconds", 0.30, "s")]),
        gen.cell("exfat", "boot", [("boot", "seconds", 0.10, "s")]),
        gen.cell("ext4", "smallfiles", [("copy", "seconds", 20.0, "s")]),
        gen.cell("exfat", "smallfiles", [("copy", "seconds", 9.0, "s")]),
        gen.cell("ext4", "overwrite", [("1MB fsync", "bandwidth", 0.3, "MB/s")]),
        gen.cell("exfat", "overwrite", [("1MB fsync", "bandwidth", 0.9, "MB/s")]),
        gen.cell("ext4", "powercut", [(m, "class:clean", 7, "count") for m in ("sync", "async")]
                 + [(m, "class:fsck-fixed", 1, "count") for m in ("sync", "async")], case=""),
        gen.cell("exfat", "powercut", [(m, "class:clean", 8, "count") for m in ("sync", "async")], case=""),
        gen.cell("ext4", "caps", gen.caps_meas()),
        gen.cell("exfat", "caps", gen.caps_meas(missing=(*POSIX, "security_xattrs", "case_sensitive")),
                 extra={"why": {"owners": "not made: EPERM: Operation not permitted"}}),
        *crash("ext4", 0), *crash("exfat", exfat_losses)])


def test_a_filesystem_without_the_posix_set_is_not_eligible_for_the_root_filesystem(tmp_path):
    run = load_run(_durability_run(tmp_path))
    recs = _by_id(recommend(run)["emmc-1g"])
    root = recs["rootfs"]
    # exFAT would win on the scores: it is not ranked, and says what it lacks
    assert [e.fs for e in root.entries] == ["ext4"] and root.winner.fs == "ext4"
    [ne] = root.not_eligible
    assert ne.fs == "exfat" and [c.req.name for c in ne.failed] == list(POSIX)
    assert "POSIX owners (chown) (not made: EPERM: Operation not permitted)" in ne.text()
    # where no capability is required it competes, and wins
    assert recs["logging"].winner.fs == "exfat" and not recs["logging"].not_eligible
    # the first screen says it
    line = answer_line(root)
    assert line.startswith("**Root filesystem**: **ext4** — ")
    assert line.endswith(" Not eligible: exfat (no owners, modes, symlinks, hard links, device nodes, fifos, "
                         "sockets, xattrs).")
    from flashbed.report import write_report
    write_report(run.root)
    md = (run.root / "report.md").read_text()
    assert md.index(line) < md.index("## Recommendation")  # the first screen
    s = json.loads((run.root / "summary.json").read_text())["recommendation"]["emmc-1g"]["rootfs"]
    assert s["winner"] == "ext4" and [e["fs"] for e in s["not_eligible"]] == ["exfat"]
    assert s["not_eligible"][0]["lacks"] == list(POSIX)


def test_a_filesystem_that_lost_acknowledged_data_cannot_win_a_durable_use_case(tmp_path):
    run = load_run(_durability_run(tmp_path, exfat_losses=3))
    logging = _by_id(recommend(run)["emmc-1g"])["logging"]
    assert logging.winner.fs == "ext4" and [e.fs for e in logging.entries] == ["ext4"]
    [ne] = logging.not_eligible
    [c] = ne.failed
    assert c.req.name == "durable" and c.why == "acknowledged data lost in 3 of 200 crash states"
    assert c.reproducer.command == ("flashbed crashstate replay run emmc-1g/exfat/crashstates/sequences/r0:"
                                    "f0012-c0003 --image exfat-f0012-c0003.img")
    assert answer_line(logging).endswith(" Not eligible: exfat (acknowledged data lost in 3 of 200 crash states).")
    # the use case's section has the command that rebuilds that state
    from flashbed.report.recommend import not_eligible_text
    assert f"replay one losing state: `{c.reproducer.command}`" in not_eligible_text(logging)


def test_an_unchecked_requirement_leaves_the_use_case_not_decided(tmp_path):
    run_dir = _durability_run(tmp_path)
    for p in (run_dir / "cells").glob("*__caps__*"):
        p.unlink()
    root = _by_id(recommend(load_run(run_dir))["emmc-1g"])["rootfs"]
    assert not root.decided and not root.not_eligible
    [u] = root.undecided
    assert u.why.startswith("requirements POSIX owners (chown), POSIX permission bits") and "not checked for exfat, ext4 (study caps" in u.why
    assert u.command == "flashbed run --device emmc-1g --fs exfat,ext4 --study caps --clock real"


@pytest.mark.parametrize("body, message", [
    ("[requirement.x]\nlabel='a'\nstudy='caps'\nmetric='cap:x'\n", "give one bound"),
    ("[requirement.x]\nlabel='a'\nstudy='caps'\nmetric='cap:x'\nat_least=1\nat_most=0\n", "give one bound"),
    ("[requirement.x]\nstudy='caps'\nmetric='cap:x'\nat_least=1\n", "'label' is missing"),
    ("[requirement.x]\nlabel='a'\nstudy='caps'\nmetric='cap:x'\nat_least=1\nwhy=2\n", "unknown field"),
    ("[[use_case]]\nid='x'\nrequires=['nope']\n[[use_case.criterion]]\nlabel='a'\nstudy='s'\ncase='c'\n"
     "metric='m'\nbetter='higher'\nweight=1\n", "requires nope, which no [requirement.NAME] table defines"),
])
def test_bad_requirements_are_one_clear_line(tmp_path, body, message):
    p = tmp_path / "w.toml"
    p.write_text(body)
    with pytest.raises(FlashbedError) as e:
        W.load_weights(p)
    assert message in str(e.value)


def test_packaged_requirements():
    w = _by_id_uc(W.load_weights())
    assert [r.name for r in w["rootfs"].requires] == [*POSIX, "durable"]
    assert [r.name for r in w["logging"].requires] == ["durable"]
    assert [r.name for r in w["database"].requires] == ["durable"]
    assert [r.name for r in w["media"].requires] == ["large_files"]
    assert not w["boot"].requires
    # every capability a requirement names is one the caps probe makes
    from flashbed.lab.guest.caps import PROBES
    caps = {r.metric.removeprefix("cap:") for u in w.values() for r in u.requires if r.study == "caps"}
    assert caps <= set(PROBES)


def _by_id_uc(weights):
    return {u.id: u for u in weights.use_cases}
