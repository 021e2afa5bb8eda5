"""Virtual time end to end (issue 17): fio in the time-travel lab kernel on the
emulator in virtual time gives the device model's own timing, and the same
figures twice while every host CPU is loaded."""

import pytest

from flashbed.bench import clock as clock_bench
from flashbed.clock import Clock

pytestmark = [pytest.mark.lab, pytest.mark.emulator, pytest.mark.spread]

MiB = 1 << 20


def test_virtual_figures_match_the_model_and_repeat_exactly_under_load(tmp_path):
    # the first run quiet, the second while every host CPU is busy (as in the module's other tests:
    # busy loops on the CPUs the suite's other work leaves free, clock_bench.every_cpu_busy): the
    # same figures both times is what load cannot change. Both runs used to be loaded, which proved
    # no more and kept two busy loops on the suite's two CPUs for twice as long
    def measure(i: int):
        return clock_bench.measure("emmc-8g@128M", Clock.VIRTUAL, tmp_path / f"v{i}", runtime=0.5, seq_bytes=32 * MiB)
    a = measure(0)
    with clock_bench.every_cpu_busy():
        b = measure(1)
    for job, fig in a.figures.items():
        assert fig > 0, f"{job}: no figure"
        # identical up to fio's own rounding of its figures
        assert abs(fig - b.figures[job]) <= 1e-3 * fig, f"{job}: {fig} then {b.figures[job]} under load"
        assert abs(fig / a.model[job] - 1) <= 0.02, f"{job}: {fig} in virtual time, the model says {a.model[job]}"


def _powercut_cell(iterations: int):
    import dataclasses

    from flashbed import profiles, variants
    from flashbed.devices import presets
    from flashbed.results import CellKey
    from flashbed.studies import STUDIES
    from flashbed.studies.base import CellSpec

    dev = presets.load_spec("emmc-8g@128M")
    st = STUDIES["powercut"]
    params = st.params(**{**profiles.overrides("quick", "powercut"), "iterations": iterations, "cut_min": 0.3,
                          "cut_max": 1.0, "modes": ("async",)})
    (case, p), = st.cases(params, dev)
    return CellSpec(key=CellKey(dev.label, "ext4", "powercut", case), device=dev, variant=variants.parse("ext4", dev),
                    params=dataclasses.replace(p), seed=3, clock="virtual")


def _replayed(out):
    """What a run of the cell saw and left: every iteration's record, where each cut
    landed, the workload's log (its wall-clock stamps aside) and the recovery's facts
    (the filesystem's random UUID aside)."""
    import json
    import re

    from flashbed.cell import run_cell
    from flashbed.lab.kernel import ensure_kernel
    from flashbed.lab.labs import UmlLab

    spec = _powercut_cell(2)
    res = run_cell(spec, UmlLab(ensure_kernel(time_travel=True)), out / "logs", out / "scratch")
    assert res.status == "ok", res.error
    logs = out / "logs"
    cuts = [json.loads((logs / f"boot{k}" / "cut.json").read_text())["emulator"] for k in range(2)]
    files = {}
    for k in range(3):
        for name in ("pclog.jsonl", "pc-recover.json"):
            p = logs / f"boot{k}" / name
            if p.exists():
                text = re.sub(r'"t":[0-9.]+', '"t":_', p.read_text())
                files[f"boot{k}/{name}"] = re.sub(r"filesystem [0-9a-f-]{36}", "filesystem _", text)
    return res.extra["iterations"], [(c["cut_at_ns"], c["guest_ns"], c["cache_bytes_lost"]) for c in cuts], files


def test_a_virtual_time_power_cut_replays_exactly(tmp_path):
    """Each cut lands at its seeded guest instant, so running the cell again (under
    load) gives the same iterations: the same outcome, the same log of what the
    workload did up to the cut, the same recovery, to the nanosecond of its timing."""
    first = _replayed(tmp_path / "a")
    with clock_bench.every_cpu_busy():
        second = _replayed(tmp_path / "b")
    records, cuts, files = first
    assert all(r["class"] != "error" for r in records), records
    assert all(g > 0 for _, g, _ in cuts)
    assert cuts == second[1], "the cuts landed at different instants"
    assert records == second[0], "the iterations differ between two runs"
    assert files.keys() == second[2].keys() and len(files) >= 4
    for name, text in files.items():
        assert text == second[2][name], f"{name} differs between two runs"
    # each record says how to run it again: the same cell up to that iteration
    assert records[1]["repeat"].endswith("--set powercut.iterations=2 --set powercut.cut_min=0.3 "
                                         "--set powercut.cut_max=1.0")


def _quick_cell_figures(study, fs, out):
    from flashbed import profiles, variants
    from flashbed.cell import run_cell
    from flashbed.devices import presets
    from flashbed.lab.kernel import ensure_kernel
    from flashbed.lab.labs import UmlLab
    from flashbed.results import CellKey
    from flashbed.studies import STUDIES
    from flashbed.studies.base import CellSpec

    dev = presets.load_spec(profiles.get("quick")["device"])
    st = STUDIES[study]
    (case, params), *_ = st.cases(st.params(**profiles.overrides("quick", study)), dev)
    spec = CellSpec(key=CellKey(dev.label, fs, study, case), device=dev, variant=variants.parse(fs, dev),
                    params=params, seed=1, clock="virtual")
    res = run_cell(spec, UmlLab(ensure_kernel(time_travel=True)), out / "logs", out / "scratch")
    assert res.status == "ok", res.error
    return {(m.case, m.metric): m.value for m in res.measurements if m.value is not None}, res.device_stats


@pytest.mark.parametrize("study", ["smallfiles"])
def test_a_quick_profile_cell_gives_the_same_timed_figures_twice_under_load(study, tmp_path):
    """The quick profile's cell on its device, run twice, the second time while every host
    CPU is busy: every timed figure the same, to the microsecond the guest times
    it in (the same requests at the same guest instants: nothing in the guest runs at a
    random instant, variants.seeded), and the device's busy time in guest time."""
    quiet, stats = _quick_cell_figures(study, "ext4", tmp_path / "quiet")
    with clock_bench.every_cpu_busy():
        loaded, _ = _quick_cell_figures(study, "ext4", tmp_path / "loaded")
    assert quiet and quiet.keys() == loaded.keys()
    for key, v in quiet.items():
        assert loaded[key] == v, f"{key}: {v} quiet, {loaded[key]} under load"
    # a phase's duration is guest time: the device was busy for part of it, never more
    for phase, s in stats.items():
        assert 0 < s["busy_seconds"] <= s["wall_seconds"] * 1.001, (phase, s)


def test_flashbed_run_defaults_to_virtual_time_where_a_cell_can_have_it(tmp_path):
    """`flashbed run` without --clock (auto): the emulated device's cells in virtual time (the
    time-travel kernel, the emulator's --pace virtual), the cpu study's in real time, said in one
    line; the cell ids carry no clock, the manifest records the request's auto."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))  # this tree's flashbed
    r = subprocess.run([sys.executable, "-m", "flashbed.cli", "run", "--fs", "ext4", "--device", "emmc-8g@128M",
                        "--study", "mkfs,cpu", "--set", "cpu.size=8M", "--no-report", "--out", str(out)],
                       capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    notes = [line for line in r.stderr.splitlines() if "run in real time" in line or "in real time" in line]
    assert notes == ["flashbed: study cpu measures the lab's real CPU time, apart from the timed figures: its cells "
                     "run in real time"]
    cells = {(d := json.loads(p.read_text()))["id"]: d for p in (out / "cells").glob("*.json")}
    assert {i: (c["provenance"]["clock"], c["provenance"]["pace"]) for i, c in cells.items()} == {
        "emmc-8g@128M/ext4/mkfs/r0": ("virtual", "virtual"), "emmc-8g@128M/ext4/cpu/r0": ("real", "real")}
    assert json.loads((out / "manifest.json").read_text())["request"]["clocks"] == ["auto"]
