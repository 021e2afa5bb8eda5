"""The probe closes the loop on every emulated block preset: Debian's
flashbench, run in the lab, finds the preset's erase unit (AU) and open-AU
count exactly, and the probe's four rates (sequential 1 MiB read and write,
random 4 KiB QD1 read and write over the device) come within 10 % of what the
preset's model itself does for the same fio jobs (the emulator's own timing
of them, no lab in it), read from median request latencies (a loaded host
lengthens the tail, not the median) with the lab's own time per request,
measured on a reference device, taken out of the random ones.

Each preset is probed at 512 MiB (room for flashbench -O to try one AU more
than lexar-c10-16g keeps open): several minutes per preset on a quiet core.
"""

from __future__ import annotations

import pytest

from flashbed.devices import presets
from flashbed.probe import lab
from flashbed.probe.rates import figures_from

pytestmark = [pytest.mark.lab, pytest.mark.emulator]

RATE_TOLERANCE = 0.10
SIZE = "512M"


def _block_presets() -> list[str]:
    # ideal takes no time at all: flashbench has nothing to see on it
    return [n for n in presets.available() if n != "ideal" and presets.load(n).emulated]


@pytest.mark.parametrize("name", _block_presets())
def test_the_probe_recovers_the_presets_erase_unit_open_aus_and_rates(name, tmp_path, kernel):
    dev = presets.load_spec(f"{name}@{SIZE}")
    probed = lab.probe(dev, tmp_path, runtime=5, kernel=kernel)
    assert probed.geometry.erase_unit == dev.erase_block, probed.geometry.note
    if dev.info["ftl"] == "hybrid":
        assert probed.open_aus.count == dev.info["open_aus"], probed.open_aus.note
        assert probed.open_aus.collapsed_at == dev.info["open_aus"] + 1, probed.open_aus.note
    else:
        assert probed.open_aus.collapsed_at is None and probed.open_aus.count == probed.open_aus.tried, \
            probed.open_aus.note
    want, got = figures_from(probed.model), probed.device_figures()
    off = {k: got[k] / want[k] - 1 for k in want}
    assert all(abs(v) <= RATE_TOLERANCE for v in off.values()), \
        {k: f"model {want[k]:.1f}, probed {got[k]:.1f} ({v:+.0%})" for k, v in off.items()}
