"""Device twins: presets of one's own (files), renamed presets, `devices show`,
nandsim's datasheet delays, probe and bench arguments. The preset files are
checked by the real emulator binary (flashbed-emu describe)."""

import shutil

import pytest

from flashbed.cli import main
from flashbed.devices import presets
from flashbed.devices.emulator import find_binary
from flashbed.devices.nandsim import NandTiming
from flashbed.errors import FlashbedError
from flashbed.sizes import format_size

MiB = 1 << 20


def _emulator():
    try:
        find_binary()
    except FlashbedError:
        pytest.skip("flashbed-emu is not built")


@pytest.fixture
def own_part(tmp_path):
    _emulator()
    p = tmp_path / "mypart.toml"
    shutil.copy(presets.presets_dir() / "samsung-evo-plus-32g.toml", p)
    return p


@pytest.mark.emulator
def test_a_preset_file_is_a_device(own_part, monkeypatch):
    dev = presets.load_spec(f"{own_part}@256M")
    assert dev.label == "mypart@256M" and dev.path == own_part.resolve() and dev.capacity == 256 * MiB
    monkeypatch.chdir(own_part.parent)
    assert presets.load_spec("./mypart.toml").path == own_part.resolve()
    assert dev.published["rand_write_4k_iops"] == 940 and "pidramble" in dev.published["sources"]["seq_read_mb_s"]
    assert dev.part["model"].startswith("Samsung EVO Plus")


@pytest.mark.emulator
@pytest.mark.parametrize("edit,words", [
    (("page_size = 16384 ", "page_size = 16000 "), "`nand.page_size`"),
    (("host_mb_s = 50 ", "host_mb_s = \"fast\" "), "`ftl.host_mb_s`"),
    (("[published.sources]\nseq_read_mb_s", "[published.sources]\nseq_rd"), "`published.sources.seq_rd`"),
    (("rand_write_4k_iops = 940", "rand_write_4k_iops = -1"), "`published.rand_write_4k_iops`"),
])
def test_a_bad_field_in_ones_own_preset_is_one_line_naming_file_and_field(own_part, edit, words, capsys):
    own_part.write_text(own_part.read_text().replace(*edit, 1))
    assert main(["devices", "show", str(own_part)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and str(own_part) in err and "Traceback" not in err


@pytest.mark.emulator
def test_the_slc_buffer_is_shown_and_its_keys_checked(tmp_path, capsys):
    _emulator()
    dev = presets.load_spec("emmc-8g@512M")
    slc = dev.slc_buffer
    assert slc is not None and slc.bytes > 0 and slc.program_us > 0 and slc.idle_ms >= 0
    assert presets.load("lexar-c10-16g").slc_buffer is None and presets.load("samsung-evo-plus-32g").slc_buffer is None
    assert main(["devices", "show", "emmc-8g"]) == 0
    out = capsys.readouterr().out
    assert f"slc buffer {format_size(slc.bytes)} programmed in SLC mode ({slc.program_us:g} µs a page)" in out
    assert slc.bypass > 0 and f"a sequential stream past its first {format_size(slc.bypass)}" in out
    own = tmp_path / "mine.toml"
    text = (presets.presets_dir() / "emmc-8g.toml").read_text()
    for edit, words in (((r"slc_program_us = ", "#slc_program_us = "), "`ftl.slc_cache`: needs `nand.timing.slc_program_us`"),
                        (("slc_idle_ms = ", "slc_idle_ms = -"), "`ftl.slc_idle_ms`"),
                        (('slc_cache = "', 'slc_cache = "lots'), "`ftl.slc_cache`"),
                        (('slc_bypass = "256K"', 'slc_bypass = "6000"'), "`ftl.slc_bypass`: 6000 is not a whole number"),
                        (('type = "page"', 'type = "hybrid"'), "`ftl.slc_cache`: applies to the page FTL only")):
        assert edit[0] in text
        own.write_text(text.replace(*edit, 1))
        assert main(["devices", "show", str(own)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err and "Traceback" not in err, err


def test_renamed_and_unknown_presets_say_what_to_use(capsys):
    for argv, words in ((["devices", "show", "usb-stick"], "stick-1au-inorder"),
                        (["devices", "show", "sd-class10@1G"], "lexar-c10-16g"),
                        (["devices", "show", "./nowhere.toml"], "preset file ./nowhere.toml does not exist"),
                        (["probe", "emmc-9g"], "unknown device preset 'emmc-9g'"),
                        (["probe", "ideal", "--max-open", "1"], "--max-open must be at least 2"),
                        (["probe", "ideal", "--clock", "wall"], "--clock 'wall' must be real or virtual"),
                        (["probe", "ideal", "--write-preset", "x.txt"], "a preset file ends in .toml"),
                        (["bench", "presets", "--runs", "0"], "--runs must be at least 1"),
                        (["bench", "presets", "--clock", "wall"], "--clock 'wall' must be real or virtual")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, (argv, err)


@pytest.mark.emulator
def test_devices_show_prints_the_part_its_sources_and_published_rates(capsys):
    _emulator()
    assert main(["devices", "show", "sandisk-ultra-fit-32g"]) == 0
    out = capsys.readouterr().out
    assert "SanDisk Ultra Fit 32 GB" in out and "USB 2.0" in out
    assert "261 IOPS" in out and "pidramble.com" in out and "erase unit 4M" in out
    assert main(["devices", "show", "nand-2g-4k"]) == 0
    out = capsys.readouterr().out
    assert "K9GAG08U0M" in out and '"access_delay": "60"' in out


def test_raw_nand_timing_becomes_nandsim_delays(tmp_path, capsys):
    dev = presets.load_spec("nand-2g-4k@128M")
    t = dev.nand_timing
    assert t == NandTiming(read_us=60, program_us=800, erase_us=1500, cycle_ns=25)
    p = t.nandsim_params()
    # nandsim's erase delay is whole milliseconds: 1.5 ms waits 2
    assert p == {"do_delays": "1", "access_delay": "60", "programm_delay": "800", "erase_delay": "2",
                 "input_cycle": "25", "output_cycle": "25"}
    assert t.page_read_us(4096) == 60 + 25 * 4096 // 1000
    assert presets.load("nand-slc-256m").nand_timing is None  # no datasheet figures: no delays
    bad = tmp_path / "nand.toml"
    bad.write_text((presets.presets_dir() / "nand-2g-4k.toml").read_text().replace("cycle_ns = 25", "cycle_ns = -2"))
    with pytest.raises(FlashbedError, match=r"nand.toml: field \[timing\].cycle_ns"):
        presets.load_spec(str(bad))
    bad.write_text((presets.presets_dir() / "nand-2g-4k.toml").read_text().replace("read_us = 60", "tr_us = 60"))
    with pytest.raises(FlashbedError, match=r"\[timing\].tr_us: unknown field"):
        presets.load_spec(str(bad))


def test_the_lab_gets_the_delays_only_when_the_device_is_paced(tmp_path):
    from flashbed.devices.session import open_session
    dev = presets.load_spec("nand-2g-4k@128M")
    real = open_session(dev, tmp_path / "a").nandsim()
    none = open_session(dev, tmp_path / "b", pace="none").nandsim()
    assert "nandsim.do_delays=1" in real.cmdline() and "nandsim.programm_delay=800" in real.cmdline()
    assert not any("delay" in a for a in none.cmdline())


def _probe_result(open_collapse: int | None):
    from flashbed.probe import flashbench as fb
    from flashbed.probe.lab import ProbeResult
    runs = {1: [fb.RateRow(256 << 10, (10e6,))], 2: [fb.RateRow(256 << 10, (9e6,))]}
    if open_collapse:
        runs[open_collapse] = [fb.RateRow(256 << 10, (1e6,))]
    # medians: 1 MiB in 26.2144 ms = 40 MB/s, in 52.4288 ms = 20 MB/s; 600 µs a
    # random read of which the lab's own is 100 µs
    rates = {"seq-write": {"bandwidth": 19.0, "lat_p50": 52428.8}, "seq-read": {"bandwidth": 38.0, "lat_p50": 26214.4},
             "randread-au": {"iops": 2100.0, "lat_p50": 580.0}, "randread-spread": {"iops": 1600.0, "lat_p50": 600.0},
             "randwrite-au": {"iops": 900.0, "lat_p50": 1110.0},
             "randwrite-spread": {"iops": 800.0 if not open_collapse else 3.0, "lat_p50": 1250.0}}
    return ProbeResult(device="x@256M", capacity=256 * MiB, when="2026-01-01T00:00:00+00:00", kernel="6.12",
                       tools={"flashbench": "62-1", "fio": "3.33"},
                       geometry=fb.Geometry(4 * MiB, 16384, 300e-6, "diff 300 µs"),
                       open_aus=fb.analyse_open_aus(runs), erase_unit_used=4 * MiB, rates=rates,
                       fat=[fb.RateRow(256 << 10, (9e6, 9e6))], lab_us={"read": 100.0, "write": 150.0})


@pytest.mark.emulator
@pytest.mark.parametrize("collapse", [None, 3])
def test_a_fitted_preset_loads_and_says_where_each_value_came_from(collapse, tmp_path):
    _emulator()
    from flashbed.probe import fit, render
    result = _probe_result(collapse)
    dev = presets.load_spec("samsung-evo-plus-32g@256M")
    text = fit.preset_toml(result, dev, "fitted")
    path = tmp_path / "fitted.toml"
    path.write_text(text)
    twin = presets.load_spec(str(path))
    assert twin.erase_block == 4 * MiB and twin.page_size == 16384 and twin.capacity == 256 * MiB
    assert twin.info["ftl"] == ("hybrid" if collapse else "page")
    if collapse:
        assert twin.info["open_aus"] == 2
    assert "probed" in text and "2026-01-01" in text and "not observable" in text
    # what the probe measured is marked so (no range); what it cannot see is assumed within a range
    f = twin.footing
    assert {m.param.path for m in f.measured} >= {"nand.page_size", "nand.pages_per_block", "ftl.host_mb_s"}
    assert ("ftl.open_aus" in {m.param.path for m in f.measured}) == bool(collapse)
    assert {a.param.path for a in f.assumptions} >= {"nand.planes", "ftl.cache", "nand.timing.bus_mb_s",
                                                     "nand.protect_paired_pages"}
    assert twin.info["protect_paired_pages"] is False  # said, not the emulator's silent default
    assert {x.key for x in f.fitted} >= {"nand.timing.program_us[1]", "ftl.read_overhead_us"}
    # the lab's own time is left out: 600 - 100 - tR 60 - 16 KiB at 100 MB/s - 4 KiB at 40 MB/s
    assert "read_overhead_us = 174 " in text
    # a log-block card's spread writes are merges: mean (3 IOPS) far past the
    # median, so the mean tells the rate; otherwise the median, the lab's out
    write = 3.0 if collapse else 1e6 / (1250 - 150)
    assert result.device_figures() == pytest.approx({"seq_read_mb_s": 40.0, "seq_write_mb_s": 20.0,
                                                     "rand_read_4k_iops": 2000.0, "rand_write_4k_iops": write})
    shown = render.text(result)
    assert "erase unit (AU)" in shown and "4 MiB" in shown and "16 KiB" in shown


def test_a_boards_probe_names_the_boards_kernel_and_fits_a_heavy_tailed_in_au_write_by_its_mean():
    """The emulated board's SD card: random 4 KiB writes in one AU at a median of 0.38 ms and a mean
    of 8.2 ms (122.6 IOPS, as the probe printed them). The fitted preset cited '2639 IOPS in one AU'
    (the median's), and the probe's first line said 'lab kernel' of the board's own kernel."""
    import dataclasses
    from pathlib import Path

    from flashbed.devices.presets import Device
    from flashbed.probe import fit, render
    result = _probe_result(None)
    rates = {**result.rates, "randwrite-au": {"iops": 122.575, "lat_p50": 378.88}}
    board = dataclasses.replace(result, rates=rates, lab_us={}, kernel="6.1.0-50-arm64", kernel_of="board")
    dev = Device(name="card", path=Path("/dev/mmcblk0"), kind="block", capacity=256 * MiB, page_size=512,
                 erase_block=0, preset_capacity=256 * MiB, info={})
    text = fit.preset_toml(board, dev, "card")
    assert "random 4 KiB write 123 IOPS in one AU" in text and "2639" not in text
    assert "in board kernel 6.1.0-50-arm64 on" in text and "lab kernel" not in text
    assert "lab's own time" not in text  # no lab between fio and a board's device: nothing was taken out
    assert "board kernel 6.1.0-50-arm64" in render.text(board).splitlines()[0]
    assert "lab kernel 6.12" in render.text(result).splitlines()[0]


def test_in_virtual_time_the_probe_takes_a_jobs_mean_as_the_devices_rate():
    """An SLC buffer's random writes: most at the bus's pace (the median), some waiting for a
    fold. In real time the median guards against the host's load; in virtual time no load
    lengthens a request, and the mean (2.7 medians here, under HEAVY_TAIL) is the device's rate."""
    import dataclasses
    result = _probe_result(None)
    rates = {**result.rates, "randwrite-spread": {"iops": 2223.0, "lat_p50": 164.0}}
    real = dataclasses.replace(result, rates=rates, lab_us={})
    virtual = dataclasses.replace(real, clock="virtual")
    assert real.device_figures()["rand_write_4k_iops"] == pytest.approx(1e6 / 164.0)
    assert virtual.device_figures()["rand_write_4k_iops"] == pytest.approx(2223.0)


def test_bench_suggests_the_firmware_time_that_closes_the_latency_gap():
    from flashbed.bench.presets import Row, suggest
    dev = presets.load_spec("nand-2g-4k")  # any preset file without firmware times
    rows = [Row("x", "rand_read_4k_iops", "", "IOPS", 1000.0, [1000.0], 2000.0, ""),
            Row("x", "rand_write_4k_iops", "", "IOPS", 500.0, [500.0], 250.0, "")]
    # reads 1000 µs measured vs 500 published: no firmware time can go below 0;
    # writes 2000 µs vs 4000: 2000 µs more
    assert suggest(dev, rows) == {"read_overhead_us": 0.0, "write_overhead_us": 2000.0}


def test_bench_marks_a_real_time_figure_lab_bound_where_the_labs_time_per_request_is_past_the_goal():
    from flashbed.bench.presets import Row, _lab_bound
    ceiling = {"rand_read_4k_iops": 5000.0, "seq_read_mb_s": 800.0}  # the lab's own: 200 µs a request
    row = lambda key, unit, measured, published: Row("x", key, "", unit, measured, [measured], published, "")
    # published 2500 IO/s (400 µs): the lab's 200 µs is 50 % of it, however far below the ceiling
    slow = row("rand_read_4k_iops", "IOPS", 1700.0, 2500.0)
    assert "lab's own 200 µs a request on the published 400 µs" in _lab_bound(slow, ceiling)
    # published 500 IO/s (2000 µs): 10 %, the device's figure
    assert _lab_bound(row("rand_read_4k_iops", "IOPS", 450.0, 500.0), ceiling) == ""
    # sequential: only near the ceiling
    assert _lab_bound(row("seq_read_mb_s", "MB/s", 50.0, 44.0), ceiling) == ""
    assert "the lab itself reaches 800.0" in _lab_bound(row("seq_read_mb_s", "MB/s", 700.0, 44.0), ceiling)
    assert _lab_bound(slow, None) == ""


@pytest.mark.emulator
def test_a_run_plans_cells_on_ones_own_preset_file(own_part, monkeypatch):
    from flashbed.plan import PlanRequest, make_plan
    monkeypatch.chdir(own_part.parent)
    spec = presets.absolute_spec("./mypart.toml@256M")
    assert spec == f"{own_part.resolve()}@256M" and presets.absolute_spec("emmc-8g@1G") == "emmc-8g@1G"
    plan = make_plan(PlanRequest(profile="quick", fs=("ext4",), devices=(spec,), studies=("mkfs",)))
    assert list(plan.devices) == ["mypart@256M"]
    assert {c.key.device for c in plan.cells} == {"mypart@256M"}


def test_bench_in_virtual_time_runs_no_ceiling_and_says_its_clock(monkeypatch, tmp_path):
    import io
    import types

    from flashbed.bench import presets as bench
    from flashbed.clock import Clock
    (tmp_path / "x.toml").write_text("[ftl]\nwrite_overhead_us = 10\n")
    dev = types.SimpleNamespace(label="x@1G", emulated=True, part={"model": "X"}, path=tmp_path / "x.toml",
                                published={"rand_read_4k_iops": 200.0, "rand_write_4k_iops": 40.0})
    seen = []

    def fake_measure(device, span, runtime, work, clock=Clock.REAL):
        # a fake of the lab job, beside the real one in tests/integration
        seen.append((device.label, clock))
        return {"seq_read_mb_s": 10.0, "seq_write_mb_s": 5.0, "rand_read_4k_iops": 100.0, "rand_write_4k_iops": 50.0}

    monkeypatch.setattr(bench, "measure", fake_measure)
    monkeypatch.setattr(bench, "ensure_kernel", lambda time_travel=False: type("K", (), {"release": "tt" if time_travel else "rt"})())
    monkeypatch.setattr(bench.presets, "load_spec", lambda spec: dev)
    # the model alone (flashbed-emu jobs), printed beside the lab's figures in virtual time
    monkeypatch.setattr(bench, "model_rates", lambda device, runtime: {
        "seq_read_mb_s": 10.0, "seq_write_mb_s": 5.0, "rand_read_4k_iops": 101.0, "rand_write_4k_iops": 50.0})
    out = io.StringIO()
    bench.run(["x@1G"], runs=2, stream=out, clock=Clock.VIRTUAL)
    # no ceiling on `ideal` (a device taking no time never lets a timed job end in virtual time)
    assert seen == [(dev.label, Clock.VIRTUAL)] * 2
    text = out.getvalue()
    assert "kernel tt, virtual time" in text and "lab ceiling" not in text and "lab-bound" not in text
    assert "the model alone (flashbed-emu jobs, no lab): " in text and "random read 4 KiB QD1 101.0 (x1.010" in text
    seen.clear()
    bench.run(["x@1G"], runs=1, stream=(out := io.StringIO()))
    assert seen == [(dev.label, Clock.REAL)] * 2 and "lab ceiling" in out.getvalue() and "real time" in out.getvalue()
    # firmware times are fitted in virtual time: only a virtual run suggests them
    assert "suggested firmware times" in text and "suggested firmware times" not in out.getvalue()
