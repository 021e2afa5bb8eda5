"""Virtual-time figures do not depend on where anything is on this machine (issue 40): the same
cells run from two checkouts at paths of different length, each into a run directory of another
length, side by side, give the same figures, and every step of each boot starts and lasts to the
same guest microsecond, with the same guest CPU charge (lab/labview.py: the guest sees fixed paths
only; before, a longer run directory cost mkfs one more page fault and moved every later instant)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flashbed.devices.emulator import EmulatorError, find_binary
from flashbed.store import RunStore

pytestmark = [pytest.mark.lab, pytest.mark.emulator]

ROOT = Path(__file__).resolve().parents[2]
# a study of the guest programs (smallfiles' tree is fbtool's) and a plain one, small
ARGS = ["--device", "emmc-8g@64M", "--fs", "ext4", "--study", "bigfile,smallfiles", "--set", "bigfile.size=8M",
        "--set", "smallfiles.dirs=40", "--set", "smallfiles.files=300", "--jobs", "1", "--no-report"]


def _checkout(at: Path) -> Path:
    """What flashbed reads of its tree (its sources and presets), copied to `at`."""
    for part in ("src", "presets"):
        shutil.copytree(ROOT / part, at / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return at


def _start(checkout: Path, out: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(checkout / "src"), FLASHBED_EMU=str(find_binary()))
    return subprocess.Popen([sys.executable, "-m", "flashbed.cli", "run", *ARGS, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=checkout)


def _figures(out: Path) -> tuple[dict, dict]:
    """Every cell's figures, and every step of its boots: its guest start, guest time and CPU charge."""
    figures = {r.key.id: sorted((m.case, m.metric, m.value) for m in r.measurements) for r in RunStore(out).results()}
    steps = {}
    for result in sorted((out / "logs").glob("*/attempt-*/result.json")):
        cell = result.relative_to(out / "logs").parts[0]
        steps[cell] = [(s["name"], s["started"], s["seconds"], s.get("cpu_seconds"))
                       for s in json.loads(result.read_text())["steps"]]
    return figures, steps


def test_two_checkouts_at_paths_of_different_length_give_the_same_figures(tt_kernel, tmp_path):
    try:
        find_binary()
    except EmulatorError as e:
        pytest.skip(str(e))
    short = _checkout(tmp_path / "a")
    long = _checkout(tmp_path / ("a-checkout-at-a-much-longer-path-" + "x" * 40))
    runs = [(short, tmp_path / "r"), (long, long / "runs" / ("a-run-directory-named-at-length-" + "y" * 50))]
    procs = [_start(checkout, out) for checkout, out in runs]  # side by side: each on its own host CPU
    for proc in procs:
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
    (a_fig, a_steps), (b_fig, b_steps) = (_figures(out) for _, out in runs)
    # each ran its own checkout's guest programs: the lab mounts their copy compiled for the guest
    # (lab/guestcode.py), the same files
    for checkout, out in runs:
        console = next((out / "logs").glob("*smallfiles*/attempt-*/console.log")).read_text()
        mounted = Path(re.search(r"guest -> ([^,]+)", console.splitlines()[0]).group(1))
        mine = [p for p in (checkout / "src/flashbed/lab/guest").iterdir() if p.is_file()]
        assert len(mine) > 5 and all((mounted / p.name).read_bytes() == p.read_bytes() for p in mine), mounted
    assert len(a_fig) == 2 and all(a_fig.values()) and a_fig.keys() == b_fig.keys()
    for cell, figs in a_fig.items():
        assert figs == b_fig[cell], f"{cell}: {figs} from the short paths, {b_fig[cell]} from the long ones"
    assert a_steps.keys() == b_steps.keys() and all(len(s) > 5 for s in a_steps.values())
    for cell, steps in a_steps.items():
        for a, b in zip(steps, b_steps[cell], strict=True):
            assert a == b, f"{cell}: step {a[0]} (name, guest start, guest seconds, CPU charge): {a} then {b}"
