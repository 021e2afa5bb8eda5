"""A preset's ranges are held to the emulator's own limits when the preset loads (one place holds
them: the emulator's parser), and a rate's range starts above 0 (the emulator's 0 is no limit)."""

from __future__ import annotations

import pytest

from flashbed.devices import presets
from flashbed.errors import FlashbedError

TEXT = presets.preset_path("emmc-8g").read_text()


def _with(tmp_path, name: str, field: str, rng: str) -> str:
    """emmc-8g with `field`'s assumed range set to `rng` (added, or in place of its own)."""
    head = f'[assumptions."{field}"]'
    if head in TEXT:
        i = TEXT.index(head)
        j = TEXT.index("range", i)
        text = TEXT[:j] + f"range = {rng}" + TEXT[TEXT.index("\n", j):]
    else:
        text = TEXT + f'\n{head}\nrange = {rng}\nsource = "a test"\n'
    p = tmp_path / f"{name}.toml"
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("field,rng,said", [
    ("nand.timing.bus_mb_s", "[0, 400]", "a rate starts above 0 (the emulator reads 0 as infinitely fast)"),
    ("nand.timing.erase_us", "[-5, 5000]", "range end -5 µs: the emulator refuses nand.timing.erase_us = -5.0 "
                                           "(-5 is out of range"),
    ("nand.timing.erase_us", "[3000, 1e300]", "the emulator refuses nand.timing.erase_us = 1e+300 (1e+300 is out "
                                              "of range"),
    ("ftl.cache", '["256K", "8G"]', 'range end 8G: the emulator refuses ftl.cache = "8G" (must be at most 1G)'),
])
def test_a_range_the_emulator_refuses_is_one_line_naming_the_field(tmp_path, field, rng, said):
    path = _with(tmp_path, "mine", field, rng)
    with pytest.raises(FlashbedError) as e:
        presets.load(path)
    assert said in str(e.value) and f'[assumptions."{field}"]' in str(e.value) and "\n" not in str(e.value)


def test_a_fitted_range_is_held_to_the_same_limits(tmp_path):
    text = TEXT.replace('"ftl.write_overhead_us" = { figure = "rand_write_4k_iops", range = [0, 5000]',
                        '"ftl.write_overhead_us" = { figure = "rand_write_4k_iops", range = [-10, 5000]')
    assert text != TEXT
    p = tmp_path / "fit.toml"
    p.write_text(text)
    with pytest.raises(FlashbedError, match=r'\[fitted\] "ftl.write_overhead_us" range end -10: the emulator '
                                            r'refuses ftl.write_overhead_us = -10.0'):
        presets.load(str(p))


def test_the_shipped_presets_ranges_are_inside_the_emulator_s_limits():
    for name in presets.available():
        presets.load(name)  # no refusal
