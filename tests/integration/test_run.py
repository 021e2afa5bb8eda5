"""`flashbed run` end to end on the real lab: resume after SIGKILL, Dask."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flashbed.plan import PlanRequest, make_plan
from flashbed.store import RunStore

pytestmark = [pytest.mark.lab, pytest.mark.spread]

DEVICE = os.environ.get("FLASHBED_TEST_DEVICE", "plain-file@512M")
ARGS = ["--fs", "ext4,f2fs,vfat", "--device", DEVICE, "--study", "mkfs,boot,smallfiles", "--no-report"]


def flashbed(*args, **kw):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))  # this tree's, not the installed
    return subprocess.Popen([sys.executable, "-m", "flashbed.cli", "run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


def expected_ids():
    plan = make_plan(PlanRequest(fs=("ext4", "f2fs", "vfat"), devices=(DEVICE,),
                                 studies=("mkfs", "boot", "smallfiles")))
    return {c.key.id for c in plan.cells}


def cell_files(out: Path):
    return {p.name: p.stat().st_mtime_ns for p in (out / "cells").glob("*.json")} if (out / "cells").exists() else {}


def test_sigkill_midway_then_the_same_command_finishes_only_the_rest(kernel, tmp_path):
    out = tmp_path / "run"
    proc = flashbed(*ARGS, "--out", str(out), "--jobs", "1")
    deadline = time.monotonic() + 600
    while len(cell_files(out)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = cell_files(out)
    assert 2 <= len(before) < len(expected_ids())
    time.sleep(1)  # labs die with their parent; none may write after this
    assert cell_files(out) == before

    proc = flashbed(*ARGS, "--out", str(out))
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-3000:]
    assert f"{len(before)} already finished, {len(expected_ids()) - len(before)} to run" in stderr
    after = cell_files(out)
    assert {n: after[n] for n in before} == before  # finished cells were not redone
    ids = {json.loads((out / "cells" / n).read_text())["id"] for n in after}
    assert ids == expected_ids()
    assert all(r.ok for r in RunStore(out).results())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cells_run_on_a_real_dask_cluster(kernel, tmp_path):
    port = free_port()
    addr = f"tcp://127.0.0.1:{port}"
    bindir = Path(sys.executable).parent
    sched = subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                              "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = subprocess.Popen([str(bindir / "dask"), "worker", addr, "--nworkers", "1", "--nthreads", "2",
                               "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              cwd=tmp_path)
    try:
        # as a user would: the scheduler answers before the run is started (flashbed checks it first)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        out = tmp_path / "run"
        proc = flashbed("--fs", "ext4,f2fs", "--device", DEVICE, "--study", "mkfs", "--no-report",
                        "--executor", "dask", "--scheduler", addr, "--out", str(out))
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-3000:]
        results = list(RunStore(out).results())
        assert {r.key.fs for r in results} == {"ext4", "f2fs"} and all(r.ok for r in results)
    finally:
        for p in (worker, sched):
            p.terminate()
            p.wait(timeout=30)


def test_unreachable_scheduler_is_one_clear_line(tmp_path):
    proc = flashbed("--fs", "ext4", "--device", DEVICE, "--study", "mkfs", "--executor", "dask",
                    "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--out", str(tmp_path / "r"))
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert stderr.strip().splitlines()[-1].startswith("flashbed: error: cannot reach the Dask scheduler")
