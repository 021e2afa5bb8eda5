"""The probe closes the loop on every emulated block preset: Debian's
flashbench finds the preset's erase unit (AU) and open-AU count exactly, and a
preset fitted to the probe (`flashbed probe --write-preset`) probes back to
the same four rates within 10 % (the random ones without the lab's own
latency, which each probe measures on a device that takes no time).

Each preset is probed at 512 MiB in the lab: a few minutes per preset on a
quiet core, twice (the preset and its fitted twin).
"""

from __future__ import annotations

import pytest

from flashbed.devices import presets
from flashbed.probe import fit, lab

pytestmark = [pytest.mark.lab, pytest.mark.emulator]

RATE_TOLERANCE = 0.10
SIZE = "512M"  # room for flashbench -O to try one AU more than lexar-c10-16g keeps open


def _block_presets() -> list[str]:
    # ideal takes no time at all: flashbench has nothing to see on it
    return [n for n in presets.available() if n != "ideal" and presets.load(n).emulated]


@pytest.mark.parametrize("name", _block_presets())
def test_the_probe_recovers_the_preset_and_its_fitted_twin_reproduces_the_rates(name, tmp_path, kernel):
    dev = presets.load_spec(f"{name}@{SIZE}")
    first = lab.probe(dev, tmp_path / "preset", runtime=5, kernel=kernel)
    assert first.geometry.erase_unit == dev.erase_block, first.geometry.note
    if dev.info["ftl"] == "hybrid":
        assert first.open_aus.count == dev.info["open_aus"], first.open_aus.note
    else:
        assert first.open_aus.collapsed_at is None and first.open_aus.count == first.open_aus.tried, \
            first.open_aus.note

    twin_file = tmp_path / f"{name}-twin.toml"
    twin_file.write_text(fit.preset_toml(first, dev, twin_file.stem))
    twin = presets.load_spec(str(twin_file))
    again = lab.probe(twin, tmp_path / "twin", runtime=5, kernel=kernel)
    assert again.geometry.erase_unit == first.geometry.erase_unit
    assert again.open_aus.count == first.open_aus.count
    # random figures without the lab's own latency, which each probe measures
    # (a loaded host moves it between the two probes)
    want, got = first.device_figures(), again.device_figures()
    off = {k: got[k] / want[k] - 1 for k in want}
    assert all(abs(v) <= RATE_TOLERANCE for v in off.values()), \
        {k: f"{want[k]:.1f} -> {got[k]:.1f} ({v:+.0%})" for k, v in off.items()}
