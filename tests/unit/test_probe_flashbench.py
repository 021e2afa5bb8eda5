"""flashbench's output parsed and read as a person reads it, on real outputs
(tests/data/flashbench: published runs on real cards and sticks, and runs of
Debian's flashbench 62 in the lab)."""

from pathlib import Path

import pytest

from flashbed.probe import flashbench as fb

DATA = Path(__file__).resolve().parents[1] / "data" / "flashbench"
MiB, KiB = 1 << 20, 1 << 10


def rows(name):
    return fb.parse_align((DATA / name).read_text())


def rates(name):
    return fb.parse_rates((DATA / name).read_text())


def test_figures_as_flashbench_prints_them():
    assert fb.parse_time("735µs") == pytest.approx(735e-6)
    assert fb.parse_time("1.08ms") == pytest.approx(1.08e-3)
    assert fb.parse_time("-65883n") == pytest.approx(-65883e-9)  # cut to 7 characters
    assert fb.parse_time("942ns") == pytest.approx(942e-9)
    assert fb.parse_rate("8.79M/s") == pytest.approx(8.79e6)
    assert fb.parse_rate("912K/s") == pytest.approx(912e3)
    assert fb.parse_rate("1.861G/") == pytest.approx(1.861e9)  # cut to 7 characters
    assert fb.parse_rate("884B/s") == 884
    assert fb.parse_size("512KiB") == 512 * KiB and fb.parse_size("4MiB") == 4 * MiB
    with pytest.raises(fb.ParseError):
        fb.parse_time("fast")
    with pytest.raises(fb.ParseError):
        fb.parse_align("flashbench: invalid arguments\n")


def test_alignment_rows_are_read_whatever_the_spacing():
    r = rows("align-readme-4mib.txt")
    assert [x.align for x in r][:2] == [128 * MiB, 64 * MiB] and len(r) == 17
    assert r[0].on == pytest.approx(1.08e-3) and r[0].diff == pytest.approx(324e-6)
    assert len(rows("align-patriot-xporter-16g-8mib.txt")) == 28  # tab-separated, 3 x 2^n too


def test_the_readme_card_has_a_4_mib_au_and_16_kib_pages():
    g = fb.analyse_align(rows("align-readme-4mib.txt"))
    assert (g.erase_unit, g.page) == (4 * MiB, 16 * KiB)
    assert g.plateau == pytest.approx(306e-6, rel=0.01)  # the mean of the 4 MiB..128 MiB level


def test_the_patriot_stick_has_an_8_mib_erase_block_and_no_clear_page():
    # the poster: "The erase block size is clearly 8 MB, page size is not clear from this"
    g = fb.analyse_align(rows("align-patriot-xporter-16g-8mib.txt"))
    assert g.erase_unit == 8 * MiB and g.page is None


def test_a_card_with_a_step_at_every_alignment_shows_no_au():
    # SanDisk Ultra 16 GB (2016): ~300 µs down to 512 KiB, where the capture ends
    g = fb.analyse_align(rows("align-sandisk-ultra-16g-2016.txt"))
    assert g.erase_unit is None and "no erase-unit boundary" in g.note


def test_no_pattern_is_no_pattern():
    # flashbed's sd-class10 before AU crossings cost anything: noise only
    g = fb.analyse_align(rows("align-emulated-sd-class10-no-step.txt"))
    assert g.erase_unit is None and g.page is None and "no pattern" in g.note


def test_the_emulated_card_looks_like_the_real_one():
    g = fb.analyse_align(rows("align-emulated-sd-class10-4mib.txt"))
    assert (g.erase_unit, g.page) == (4 * MiB, 16 * KiB)


def test_open_au_rows():
    r = rates("open-au-readme-nr3.txt")
    assert [x.size for x in r] == [4 * MiB, 2 * MiB, MiB, 512 * KiB, 256 * KiB]
    assert r[-1].rates == (pytest.approx(912e3),)
    cut = rates("open-au-debian62-truncated.txt")  # Debian's flashbench 62 cuts "1.861G/s" to 7 characters
    assert [x.rates[0] for x in cut] == [pytest.approx(884e6), pytest.approx(1.861e9), pytest.approx(1.388e9)]
    fat = rates("fat-debian62-truncated.txt")
    assert len(fat) == 3 and all(len(x.rates) == 6 for x in fat)


def test_open_aus_are_counted_up_to_the_collapse():
    # the README card: two AUs open keep small blocks fast, three collapse
    two, three = rates("open-au-readme-nr2.txt"), rates("open-au-readme-nr3.txt")
    o = fb.analyse_open_aus({1: two, 2: two, 3: three})
    assert (o.count, o.collapsed_at) == (2, 3)
    assert fb.collapsed(three, two) and not fb.collapsed(two, two)
    emu = {n: rates(f"open-au-emulated-sd-class10-nr{n}.txt") for n in (1, 2, 3)}
    assert fb.analyse_open_aus(emu).count == 2


def test_no_collapse_says_how_far_it_looked():
    two = rates("open-au-readme-nr2.txt")
    o = fb.analyse_open_aus({1: two, 2: two, 3: two, 4: two})
    assert o.collapsed_at is None and o.count == 4 and "no collapse up to 4" in o.note
    assert fb.analyse_open_aus({2: two}).count is None


def test_one_noisy_row_does_not_end_the_page_level():
    # a loaded lab: 128 KiB reads 44 µs amid ~140 µs page-crossing steps
    g = fb.analyse_align(rows("align-emulated-emmc-8g-noisy.txt"))
    assert (g.erase_unit, g.page) == (4 * MiB, 16 * KiB)


def test_one_noisy_row_does_not_end_the_erase_unit_level():
    # a loaded lab: the 32 MiB row reads 185 µs amid ~300 µs translations
    g = fb.analyse_align(rows("align-emulated-lexar-c10-16g-outlier.txt"))
    assert (g.erase_unit, g.page) == (4 * MiB, 4 * KiB)


def test_a_small_erase_unit_step_above_a_larger_page_step_is_still_the_erase_unit():
    # emmc-8g with no firmware time: crossing 4 MiB adds only a map-page read
    # (60 µs) to the page crossing's ~115 µs
    text = "".join(f"align {a}\tpre 300µs\ton 480µs\tpost 300µs\tdiff {d}µs\n" for a, d in
                   [(64 << 20, 178), (32 << 20, 171), (16 << 20, 176), (8 << 20, 169), (4 << 20, 174),
                    (2 << 20, 117), (1 << 20, 112), (512 << 10, 118), (256 << 10, 110), (128 << 10, 116),
                    (64 << 10, 113), (32 << 10, 119), (16 << 10, 114), (8 << 10, 2), (4 << 10, 3), (2 << 10, 1)])
    g = fb.analyse_align(fb.parse_align(text))
    assert (g.erase_unit, g.page) == (4 * MiB, 16 * KiB), g.note
