"""The --tune search as a pure function of results: fake judgements, no lab."""

from __future__ import annotations

from flashbed import filesystems as fscat
from flashbed import fsoptions, variants
from flashbed import tune as T
from flashbed.tune import Judgement, Lead, Option, OptionSet

LZ4 = Option("compress_algorithm", "lz4", mkfs=("-O", "extra_attr,compression"))
GC = Option("background_gc", "off")
LFS = Option("mode", "lfs")
NOBAR = Option("fsync_mode", "nobarrier", risk="no cache flush on fsync")
ZSTD = Option("compress_algorithm", "zstd", mkfs=("-O", "extra_attr,compression"))
CATALOGUE = {"f2fs": [LZ4, GC, LFS, NOBAR], "ext4": [Option("commit", "60")]}
STUDIES = {"logging": ("crashstates",), "media": ("bigfile", "caps")}


class FakeRun:
    """What a run measured: option set spec -> (score, eligible, why); a spec not there was not run."""

    def __init__(self, results: dict[str, tuple[float, bool, str]]):
        self.results = results
        self.asked: list[tuple[str, str, list[str]]] = []

    def judge(self, device: str, use_case: str, sets: list[OptionSet]) -> dict[OptionSet, Judgement]:
        self.asked.append((device, use_case, [s.spec for s in sets]))
        out = {}
        for s in sets:
            r = self.results.get(s.spec)
            out[s] = Judgement(False) if r is None else \
                Judgement(True, r[1], r[0] if r[1] else None, r[2], "flashbed crashstate replay X" if r[2] else "")
        return out


def _search(run: FakeRun, leads: list[Lead]) -> T.Search:
    return T.search(leads, lambda fs: CATALOGUE.get(fs, []), lambda uc: STUDIES[uc], run.judge)


def test_spec_spells_mkfs_and_mount_options():
    assert T.variant_spec("f2fs", [LZ4, GC]) == "f2fs+mkfs:-O extra_attr,compression+o:compress_algorithm=lz4,background_gc=off"
    assert T.variant_spec("ext4", []) == "ext4"
    assert OptionSet("ext4", (Option("noauto_da_alloc"),)).spec == "ext4+o:noauto_da_alloc"


def test_leads_are_winner_and_runner_up_of_decided_use_cases():
    got = T.leads({"emmc": {"logging": ("f2fs", "ext4"), "boot": (None, None), "media": ("btrfs", None)}})
    assert got == [Lead("emmc", "logging", "f2fs", "winner"), Lead("emmc", "logging", "ext4", "runner-up"),
                   Lead("emmc", "media", "btrfs", "winner")]


def test_first_step_runs_every_single_option_on_the_use_cases_decisive_studies():
    run = FakeRun({"f2fs": (0.9, True, ""), "ext4": (0.8, True, "")})
    s = _search(run, [Lead("emmc", "logging", "f2fs", "winner"), Lead("emmc", "media", "f2fs", "winner")])
    pending = s.pending()
    assert set(pending) == {("emmc", OptionSet("f2fs", (o,)).spec) for o in CATALOGUE["f2fs"]}
    # one variant needed by two use cases runs the studies of both, once
    assert all(v == ("bigfile", "caps", "crashstates") for v in pending.values())
    assert not s.done


def test_a_filesystem_without_options_to_try_is_left_at_its_defaults():
    run = FakeRun({"xfs": (1.0, True, "")})
    s = _search(run, [Lead("emmc", "logging", "xfs", "winner")])
    # done, the lead too: a use case whose other filesystem has options still gets its answer
    assert s.done and s.leads[0].done and s.leads[0].best == OptionSet("xfs")


def test_the_options_that_helped_are_combined_once_every_single_is_in():
    single = {OptionSet("f2fs", (o,)).spec: r for o, r in
              ((LZ4, (0.95, True, "")), (GC, (0.93, True, "")), (LFS, (0.85, True, "")),
               (NOBAR, (0.99, False, "durability (lost data in 3 of 40 states)")))}
    run = FakeRun({"f2fs": (0.9, True, ""), **single})
    s = _search(run, [Lead("emmc", "logging", "f2fs", "winner")])
    combo = OptionSet("f2fs", (GC, LZ4))  # by name; the one that broke durability is left out
    assert s.pending() == {("emmc", combo.spec): ("crashstates",)}
    ls = s.leads[0]
    assert ls.helped() == [OptionSet("f2fs", (LZ4,)), OptionSet("f2fs", (GC,))]
    assert ls.broke() == [OptionSet("f2fs", (NOBAR,))]
    assert ls.best == OptionSet("f2fs", (LZ4,))  # the best measured so far, never the one that broke


def test_the_answer_is_the_combination_when_it_beats_the_singles_else_the_best_single():
    base = {"f2fs": (0.9, True, ""), OptionSet("f2fs", (LZ4,)).spec: (0.95, True, ""),
            OptionSet("f2fs", (GC,)).spec: (0.93, True, ""), OptionSet("f2fs", (LFS,)).spec: (0.8, True, ""),
            OptionSet("f2fs", (NOBAR,)).spec: (0.9, True, "")}
    combo = OptionSet("f2fs", (GC, LZ4))
    better = _search(FakeRun({**base, combo.spec: (0.97, True, "")}), [Lead("emmc", "logging", "f2fs", "winner")])
    assert better.done and better.leads[0].best == combo
    worse = _search(FakeRun({**base, combo.spec: (0.94, True, "")}), [Lead("emmc", "logging", "f2fs", "winner")])
    assert worse.done and worse.leads[0].best == OptionSet("f2fs", (LZ4,))
    broke = _search(FakeRun({**base, combo.spec: (0.99, False, "durability")}),
                    [Lead("emmc", "logging", "f2fs", "winner")])
    assert broke.leads[0].best == OptionSet("f2fs", (LZ4,)) and combo in broke.leads[0].broke()


def test_one_value_per_option_name_in_a_combination():
    helped = [OptionSet("f2fs", (ZSTD,)), OptionSet("f2fs", (LZ4,)), OptionSet("f2fs", (GC,))]
    assert T.combination("f2fs", helped) == OptionSet("f2fs", (GC, ZSTD))


def test_nothing_helped_keeps_the_defaults_and_plans_no_combination():
    run = FakeRun({"ext4": (0.8, True, ""), "ext4+o:commit=60": (0.8, True, "")})
    s = _search(run, [Lead("emmc", "logging", "ext4", "runner-up")])
    assert s.done and s.leads[0].best == OptionSet("ext4") and s.leads[0].combined is None


def test_the_search_is_a_function_of_the_results_alone():
    # a killed run resumes: the same results give the same next step, whatever came before
    results = {"f2fs": (0.9, True, ""), OptionSet("f2fs", (LZ4,)).spec: (0.95, True, "")}
    a = _search(FakeRun(results), [Lead("emmc", "logging", "f2fs", "winner")]).pending()
    b = _search(FakeRun(dict(results)), [Lead("emmc", "logging", "f2fs", "winner")]).pending()
    assert a == b and len(a) == 3  # the three singles not run yet; no combination before them


# ---- the options to try: the filesystems' catalogue, one place per idea ----------------------------


def test_the_search_tries_the_catalogues_values_with_their_mkfs_needs_and_risk():
    f2fs = {o.text: o for o in T.catalogue("f2fs")}
    lz4 = f2fs["compress_algorithm=lz4"]
    assert OptionSet("f2fs", (lz4,)).spec == "f2fs+mkfs:-O extra_attr,compression+o:compress_algorithm=lz4"
    assert f2fs["fsync_mode=nobarrier"].risk == fsoptions.risk("f2fs", "fsync_mode=nobarrier") != ""
    assert f2fs["fsync_mode=strict"].risk == ""  # the entry is risky for one value only
    nilfs = {o.text: o for o in T.catalogue("nilfs2")}
    assert OptionSet("nilfs2", (nilfs["-B 128"],)).spec == "nilfs2+mkfs:-B 128"


def test_every_value_the_catalogue_says_to_try_is_one_of_its_values_and_parses_as_a_variant():
    for fstype, entries in fsoptions.OPTIONS.items():
        for e in entries:
            assert set(e.tune) <= set(e.values), (fstype, e.name)
    for fs, f in fscat.CATALOGUE.items():
        for o in T.catalogue(fs):
            v = variants.parse(OptionSet(fs, (o,)).spec)  # the pass's spelling, read back
            assert v.mount_given or v.mkfs_given


def test_a_new_catalogue_value_to_try_is_tried_without_another_table(monkeypatch):
    extra = fsoptions.Entry("atgc", fsoptions.Kind.MOUNT, ("atgc",), "why", "cost", "src", tune=("atgc",))
    monkeypatch.setitem(fsoptions.OPTIONS, "f2fs", (*fsoptions.OPTIONS["f2fs"], extra))
    assert "atgc" in [o.text for o in T.catalogue("f2fs")]


def test_journal_options_are_not_tried_without_a_journal_nor_what_the_variant_already_sets():
    assert not {"commit=60", "data=journal", "nobarrier"} & {o.text for o in T.catalogue("ext4-nojournal")}
    assert T.catalogue("ext2") == []  # no journal, no delayed allocation
    assert "commit=60" not in [o.text for o in T.catalogue("ext4+o:commit=30")]
    assert "nobarrier" not in [o.text for o in T.catalogue("ext4+o:barrier")]  # its opposite is set
    assert T.catalogue("squashfs+zstd") == [] and T.catalogue("ext2@f2fs") == []


def test_the_catalogue_listing_says_what_the_pass_tries(capsys):
    from flashbed.cli import main
    assert main(["filesystems", "f2fs"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the listing wraps its lines
    assert "run --tune tries compress_algorithm=lz4" in out and "(needs mkfs -O extra_attr,compression)" in out


def test_a_gain_too_small_to_show_is_no_reason_to_leave_the_defaults():
    run = FakeRun({"ext4": (0.92, True, ""), "ext4+o:commit=60": (0.924, True, "")})
    s = _search(run, [Lead("emmc", "logging", "ext4", "winner")])
    assert s.done and s.leads[0].helped() == [] and s.leads[0].best == OptionSet("ext4")
    run = FakeRun({"ext4": (0.92, True, ""), "ext4+o:commit=60": (0.93, True, "")})
    assert _search(run, [Lead("emmc", "logging", "ext4", "winner")]).leads[0].best.options == (Option("commit", "60"),)
