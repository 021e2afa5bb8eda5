"""Virtual time end to end (issue 17): fio in the time-travel lab kernel on the
emulator in virtual time gives the device model's own timing, and the same
figures twice while every host CPU is loaded."""

import pytest

from flashbed.bench import clock as clock_bench
from flashbed.lab.clock import Clock

pytestmark = [pytest.mark.lab, pytest.mark.emulator]

MiB = 1 << 20


def test_virtual_figures_match_the_model_and_repeat_exactly_under_load(tmp_path):
    runs = []
    with clock_bench.cpu_hog(2):
        for i in range(2):
            runs.append(clock_bench.measure("emmc-8g@128M", Clock.VIRTUAL, tmp_path / f"v{i}", runtime=0.5,
                                            seq_bytes=32 * MiB))
    a, b = runs
    for job, fig in a.figures.items():
        assert fig > 0, f"{job}: no figure"
        # identical up to fio's own rounding of its figures
        assert abs(fig - b.figures[job]) <= 1e-3 * fig, f"{job}: {fig} then {b.figures[job]} under load"
        assert abs(fig / a.model[job] - 1) <= 0.02, f"{job}: {fig} in virtual time, the model says {a.model[job]}"
