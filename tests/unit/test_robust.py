"""The robust pass: a preset's assumptions as data, variants refitted to the published rates,
their cells in the plan, and the report's footing of each answer (holds, or depends on what)."""

from __future__ import annotations

import io
import json
import re

import pytest

from flashbed import robust
from flashbed.cli import main
from flashbed.devices import presets
from flashbed.devices.assumptions import Reach
from flashbed.devices.refit import rates
from flashbed.errors import FlashbedError
from flashbed.plan import PlanRequest, make_plan
from flashbed.report import write_report
from flashbed.report.footing import footing
from flashbed.report.load import load_run
from flashbed.report.recommend import recommend
from tests.report_fixtures import generator

gen = generator()


# ---- the report's footing, on hand-made runs ---------------------------------------------------

def _robust_run(tmp_path, f2fs_seconds):
    return gen.robust_run(tmp_path / "run", f2fs_seconds)


def _media(run_dir):
    run = load_run(run_dir)
    recs = recommend(run)
    df = footing(run, recs)["emmc-1g"]
    return run, recs, next(c for c in df.cases if c.use_case.id == "media")


def test_an_assumption_that_flips_the_winner_is_what_the_answer_depends_on(tmp_path):
    # a small SLC buffer makes f2fs's big-file write slower than ext4's; nothing else moves it
    run_dir = _robust_run(tmp_path, {"slc_cache-low": 14.0, "slc_cache-high": 9.0})
    run, recs, media = _media(run_dir)
    assert media.winner == "f2fs" and not media.holds
    assert [p.variant for p in media.flips] == ["slc_cache-low"]
    (dep,) = media.depends
    assert dep.assumed.param == "ftl.slc_cache" and dep.at.winner == "ext4" and dep.side == "below"
    # the margin crosses zero between the low end (8M) and the nominal value (32M): interpolated
    # on the log scale of the sizes, where f2fs's margin 0.167 at 32M meets -0.143 at 8M
    value = float(re.match(r"([\d.]+)M", dep.threshold).group(1))
    assert 8 < value < 32 and value == pytest.approx(32 * 0.25 ** (0.1667 / (0.1667 + 0.1429)), rel=0.02)
    # the first screen says it, with what settles it; the variants' devices are not results of their own
    answer = write_report(run_dir).markdown.read_text().split("## ", 2)[1]
    line = next(x for x in answer.splitlines() if "Media recording" in x)
    assert "**depends on SLC-mode write buffer** (`ftl.slc_cache`, nominal 32M): below " + dep.threshold in line
    assert "the winner is **ext4**" in line and "the SLC-cache cliff" in line and "Holds in 4 of 5" in line
    assert run.devices() == ["emmc-1g"]
    html = (run_dir / "report.html").read_text()
    assert 'id="fig-tornado-emmc-1g-media"' in html and "Footing: the answer against the twin" in html
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["footing"]["emmc-1g"]["media"]["holds"] is False
    assert summary["footing"]["emmc-1g"]["media"]["depends"][0]["param"] == "ftl.slc_cache"


def test_when_no_variant_changes_the_choice_the_answer_holds(tmp_path):
    run_dir = _robust_run(tmp_path, {"slc_cache-low": 11.0, "slc_cache-high": 9.5, "draw-1": 10.5})
    run, recs, media = _media(run_dir)
    assert media.holds and not media.depends and len(media.points) == 5
    lo, hi = media.spread
    # f2fs's worst variant (11 s against ext4's 12 s) keeps the smallest margin: 1 - 11/12
    assert lo == pytest.approx(1 - 11 / 12, abs=1e-3) and hi > media.margin > lo
    answer = write_report(run_dir).markdown.read_text().split("## ", 2)[1]
    line = next(x for x in answer.splitlines() if "Media recording" in x)
    assert "**Holds in 5 of 5 variants of this part**" in line
    assert f"margin {media.margin:.3f} over ext4; across variants {lo:.3f} to {hi:.3f}" in line


def test_a_variant_whose_cells_are_not_all_in_is_not_counted(tmp_path):
    run_dir = _robust_run(tmp_path, {})
    for p in (run_dir / "cells").glob("*draw-1*f2fs*"):
        p.unlink()
    run = load_run(run_dir)
    df = footing(run, recommend(run))["emmc-1g"]
    assert df.unfinished == ["draw-1"] and df.ran == 4


def test_without_a_robust_pass_the_report_has_no_footing(tmp_path):
    run_dir = gen.write_run(tmp_path / "run", gen.media_cells("emmc-1g", 10.0))
    run = load_run(run_dir)
    assert footing(run, recommend(run)) == {}
    assert "Footing" not in write_report(run_dir).markdown.read_text()


# ---- assumptions as data ---------------------------------------------------------------------

def _preset(tmp_path, extra: str, name: str = "mine") -> str:
    """emmc-8g's text with `extra` appended (its own tables removed), as a preset file of one's own."""
    text = presets.preset_path("emmc-8g").read_text()
    text = text[:text.index("[fitted]")] + text[text.index("[published]"):]
    p = tmp_path / f"{name}.toml"
    p.write_text(text + "\n" + extra)
    return str(p)


def test_the_shipped_twins_declare_what_their_values_rest_on():
    emmc = presets.load("emmc-8g", 512 << 20).footing
    assert {a.param.path for a in emmc.assumptions} >= {"ftl.slc_cache", "ftl.slc_bypass", "ftl.slc_idle_ms",
                                                        "nand.planes", "ftl.cache", "nand.protect_paired_pages"}
    assert {f.key: f.figure for f in emmc.fitted} == {"ftl.read_overhead_us": "rand_read_4k_iops",
                                                      "ftl.write_overhead_us": "rand_write_4k_iops",
                                                      "nand.timing.program_us[1]": "seq_write_mb_s"}
    lexar = presets.load("lexar-c10-16g", 512 << 20).footing
    assert {m.param.path for m in lexar.measured} == {"nand.page_size", "ftl.open_aus"}
    assert {a.param.path for a in lexar.assumptions} >= {"nand.planes", "ftl.cache", "ftl.spare_ratio",
                                                         "nand.ecc_bits"}
    for f in (emmc, lexar):
        for a in f.assumptions:
            assert a.source and a.low <= a.nominal <= a.high, a
    # wear-only assumptions are declared but left alone by the robust pass
    vary, kept = robust.varied(presets.load("emmc-8g", 512 << 20))
    assert "nand.endurance" in {a.param.path for a in kept} and all(Reach.WEAR in a.param.reach for a in kept)


@pytest.mark.parametrize("extra, message", [
    ('[assumptions."ftl.slc_cache"]\nrange = ["64M", "128M"]\nsource = "s"\n',
     'range [64M, 128M] excludes the preset\'s own value 32M'),
    ('[assumptions."ftl.slc_cach"]\nrange = ["4M", "64M"]\nsource = "s"\n', "unknown parameter name 'ftl.slc_cach'"),
    ('[assumptions."published.seq_write_mb_s"]\nrange = [5, 10]\nsource = "s"\n',
     "published.seq_write_mb_s is a published figure of the part"),
    ('[assumptions."ftl.slc_cache"]\nrange = ["4M", "64M"]\n', "give the range's source"),
    ('[assumptions."nand.page_size"]\nrange = [4096, 16384]\nsource = "s"\n', "the part's geometry"),
    ('[fitted]\n"ftl.write_overhead_us" = { figure = "seq_read_mb_s", range = [0, 10], source = "s" }\n',
     "the preset publishes no seq_read_mb_s"),
])
def test_a_bad_assumption_is_one_line(tmp_path, capsys, extra, message):
    spec = _preset(tmp_path, extra)
    assert main(["devices", "show", spec]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_devices_show_lists_assumptions_with_ranges_and_sources(capsys):
    assert main(["devices", "show", "lexar-c10-16g"]) == 0
    out = capsys.readouterr().out
    assert "measured (the part's own figures):" in out and "flashbench -O in the review" in out
    line = next(x for x in out.splitlines() if "nand.planes" in x)
    assert "range 2 – 8" in line and line.lstrip().startswith("*")
    assert "source: a 4 MiB AU is two 2 MB erase blocks" in out


# ---- variants, refitted to the published rates ------------------------------------------------

def test_the_model_alone_gives_the_nominal_twin_s_rates():
    """flashbed-emu jobs: the preset's rates in model time, close to the published ones it was fitted to."""
    dev = presets.load("lexar-c10-16g", 512 << 20)
    got = rates(dev)
    assert got["rand_write_4k_iops"] == pytest.approx(293, rel=0.02)
    assert got["seq_write_mb_s"] == pytest.approx(11.2, rel=0.15) and got["seq_read_mb_s"] == pytest.approx(20.4, rel=0.15)


def test_a_variant_is_refitted_or_dropped_with_why():
    dev = presets.load("emmc-8g", 512 << 20)
    vs, limits = robust.variants(dev, draws=2, seed=1)
    by = {v.name: v for v in vs}
    # a larger SLC buffer makes the random writes faster: the write firmware time takes it back
    high = by["slc_cache-high"]
    assert high.fit.ok and high.fit.fitted["ftl.write_overhead_us"] > 100
    assert high.fit.figures["rand_write_4k_iops"] == pytest.approx(high.fit.target["rand_write_4k_iops"], rel=0.01)
    # a 4 MiB buffer cannot give the published random writes with no firmware time left to take away:
    # the variant stops at the smallest buffer that can
    low = limits["ftl.slc_cache"]["low"]
    assert low.kept is not None and 4 << 20 < low.kept < 32 << 20 and "random write 4 KiB QD1" in low.why
    assert by["slc_cache-low"].values == {"ftl.slc_cache": low.kept}
    # two planes cannot give the published 5-10 MB/s large-file writes with a program time of the class
    assert by["planes-high"].why.startswith("its sequential write 1 MiB would be") and by["planes-high"].fit is None
    assert [v.name for v in vs if v.kind is robust.VariantKind.DRAW] == ["draw-1", "draw-2"]
    # seeded: the same variants again
    again, _ = robust.variants(dev, draws=2, seed=1)
    assert [(v.name, v.values, v.why) for v in again] == [(v.name, v.values, v.why) for v in vs]


# ---- the plan ---------------------------------------------------------------------------------

def test_variants_are_devices_of_the_run_with_the_decisive_studies_only():
    req = PlanRequest(devices=("emmc-8g@512M",), fs=("ext4", "f2fs"), studies=("bigfile", "caps", "mount"),
                      robust=1)
    assert PlanRequest(robust=0).run_id() != PlanRequest().run_id() != PlanRequest(robust=8).run_id()
    plan = make_plan(req)
    nominal = {c.key.study for c in plan.cells if c.key.device == "emmc-8g@512M"}
    variant = {(c.key.device, c.key.study) for c in plan.cells if "~" in c.key.device}
    assert nominal == {"bigfile", "caps", "mount"}
    assert {s for _d, s in variant} == {"bigfile"}  # caps: the filesystem alone; mount: decides no use case
    labels = {d for d, _s in variant}
    assert "emmc-8g@512M~slc_cache-high" in labels and "emmc-8g@512M~draw-1" in labels
    assert not any("planes-high" in d for d in labels)  # dropped: no plausible twin
    dev = plan.devices["emmc-8g@512M~slc_cache-high"]
    assert dev.sets and dev.info["variant"]["of"] == "emmc-8g@512M"
    assert ("ftl.slc_cache", '"128M"') in dev.sets
    assert any("robust pass:" in n and "ruled out" not in n for n in plan.notes)
    # the same request makes the same plan: a rerun resumes it; another id than without --robust
    assert [c.key for c in make_plan(req).cells] == [c.key for c in plan.cells]
    assert req.run_id() != PlanRequest(devices=("emmc-8g@512M",), fs=("ext4", "f2fs"),
                                       studies=("bigfile", "caps", "mount")).run_id()


def test_robust_without_a_twin_or_a_decisive_study_is_one_line(tmp_path, capsys):
    for args, words in ((["--device", "emmc-8g@64M", "--fs", "ext4", "--study", "mount"], "has none of them"),
                        (["--device", "plain-file@64M", "--fs", "ext4", "--study", "bigfile"],
                         "varies an emulated twin"),
                        (["--device", "emmc-8g@64M", "--fs", "ext4", "--study", "bigfile", "--robust", "-2"],
                         "--robust '-2': give a whole number of joint draws from 0 to 100")):
        assert main(["run", "--robust", "--out", str(tmp_path / "r"), *args]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, err
        assert not (tmp_path / "r").exists()
    assert main(["run", "--robust", "x", "--device", "emmc-8g@64M"]) == 2
    err = capsys.readouterr().err
    assert "--robust 'x': give a whole number of joint draws" in err and err.count("\n") == 1


def test_a_robust_run_resumes_from_its_manifest(tmp_path):
    from dataclasses import asdict

    from flashbed.identity import request_of as _stored_request
    from flashbed.store import RunStore
    store = RunStore(tmp_path / "run")
    store.create()
    req = PlanRequest(devices=("emmc-8g@64M",), fs=("ext4",), studies=("bigfile",), robust=2)
    store.write_manifest({"schema": 1, "request": json.loads(json.dumps(asdict(req)))})
    assert _stored_request(store) == req
    store.write_manifest({"schema": 1, "request": {**json.loads(json.dumps(asdict(req))), "robust": "many"}})
    # every reader of the manifest checks its stored request (store.request_problem): one line
    with pytest.raises(FlashbedError, match="its request's robust is not a whole number of draws") as e:
        _stored_request(store)
    assert "\n" not in str(e.value)


def test_an_answer_of_none_eligible_is_tested_too(tmp_path):
    """A part without paired-page protection loses acknowledged data under every filesystem: on the
    nominal twin none is eligible for the root filesystem; with the protection one is, which is
    what that answer depends on."""
    def crash(fs, device, losses):
        return [gen.cell(fs, "crashstates", gen.crash_meas(w, {"recovered": 100 - losses, "data-loss": losses}),
                         case=w, device=device) for w in ("powercut", "sequences")]
    nominal, variant = "card-1g", "card-1g~protect_paired_pages-high"
    cells = [gen.cell(fs, "caps", gen.caps_meas(), device=nominal) for fs in ("ext4", "f2fs")]
    cells += crash("ext4", nominal, 2) + crash("f2fs", nominal, 1) + crash("ext4", variant, 0) + crash("f2fs", variant, 3)
    flag = {"param": "nand.protect_paired_pages", "label": "paired-page protection", "nominal": "false",
            "low": "false", "high": "true", "source": "s", "reach": ["power loss"], "measure": "power cuts"}
    v = {"name": "protect_paired_pages-high", "kind": "high", "values": {"nand.protect_paired_pages": "true"},
         "numbers": {"nand.protect_paired_pages": True}, "fitted": {}, "figures": {}, "dropped": ""}
    devices = {nominal: {"name": "card", "kind": "block", "ftl": "hybrid", "capacity_bytes": 1 << 30,
                         "footing": {"assumptions": [flag]},
                         "robust": {"draws": 0, "seed": 1, "varied": [flag["param"]], "not_varied": {},
                                    "ruled_out": {}, "variants": [v]}},
               variant: {"name": "card", "kind": "block", "variant": {"of": nominal, **v}}}
    run_dir = gen.write_run(tmp_path / "run", cells, devices=devices)
    run = load_run(run_dir)
    rootfs = next(c for c in footing(run, recommend(run))[nominal].cases if c.use_case.id == "rootfs")
    assert rootfs.winner is None and rootfs.choice == "none eligible" and not rootfs.holds
    (dep,) = rootfs.depends
    assert dep.at.winner == "ext4"
    line = next(x for x in write_report(run_dir).markdown.read_text().split("## ", 2)[1].splitlines()
                if "Root filesystem" in x)
    assert "no filesystem meets the requirements" in line
    assert "**depends on paired-page protection" in line and \
        "(`nand.protect_paired_pages`, nominal false): with it the winner is **ext4**" in line


@pytest.mark.parametrize("asked,said", [
    ({"clocks": ("real",)}, "drop --clock real"), ({"clocks": ("real", "virtual")}, "drop --clock real"),
    ({"kernels": ("6.12",)}, "kernel 6.12 has no virtual-time flavour: use --kernel 7.3")])
def test_a_robust_pass_in_real_time_is_refused_in_one_line(asked, said):
    """On the wall clock the host's load moves the variants' timed figures as much as an assumption
    does: the pass's variants run in virtual time or not at all."""
    req = PlanRequest(devices=("emmc-8g@512M",), fs=("ext4",), studies=("bigfile",), robust=1, **asked)
    with pytest.raises(FlashbedError, match=said):
        make_plan(req)
    assert all(c.clock.time_travel for c in make_plan(PlanRequest(devices=("emmc-8g@512M",), fs=("ext4",),
                                                                  studies=("bigfile",), robust=1)).cells)


def test_an_interrupted_robust_run_says_first_that_it_is_unfinished(tmp_path):
    """Counted against the plan (the manifest's cells): 'Holds in 4 of 4' over the variants that
    happened to finish is no footing; the first screen says the run is unfinished before any answer."""
    run_dir = _robust_run(tmp_path, {})
    cells = sorted((run_dir / "cells").glob("*.json"))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, "cells": len(cells)}))
    assert "unfinished" not in write_report(run_dir).markdown.read_text().split("## ", 2)[1].lower()
    gone = [p for p in cells if "draw-1" in p.name]
    for p in gone:
        p.unlink()
    answer = write_report(run_dir).markdown.read_text().split("## ", 2)[1]
    first = next(x for x in answer.splitlines()[1:] if x.strip())
    assert first.startswith(f"**This run is unfinished: {len(cells) - len(gone)} of its {len(cells)} planned cells "
                            f"are in** ({len(gone)} not run; robust pass: 4 of 5 variants finished)")
    line = next(x for x in answer.splitlines() if "Media recording" in x)
    assert "Footing unfinished: holds in 4 of the 4 finished variants of this part (1 of 5 planned not finished" \
        in line and "**Holds in" not in line
    from flashbed.report.text import print_results
    from flashbed.store import RunStore
    out = io.StringIO()
    print_results(RunStore(run_dir), stream=out)
    assert out.getvalue().startswith(f"run {manifest['run_id']} is UNFINISHED: {len(cells) - len(gone)} of its "
                                     f"{len(cells)} planned cells are in")
