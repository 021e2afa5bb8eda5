"""A crash-state cell's states checked by several labs, in the real lab on the emulated eMMC:
every state's verdict and fsck result equals the exhaustive run's (one lab, each state checked,
no sharing of verdicts, its fsck in the lab), with the states deduplicated, split between the
cell's lab and a helper (the local pool with a core to spare, and a Dask cluster of two
workers on loopback), and their fsck run by the host on the served state (crashhost/check.py)."""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from flashbed import variants
from flashbed.cell import cell_task, run_alone
from flashbed.clock import Clock
from flashbed.crashhost.share import HELPERS, SHARE_FILE, records
from flashbed.devices import presets
from flashbed.executors import DaskExecutor, LocalExecutor
from flashbed.lab.guest.protocol import StateFacts
from flashbed.lab.labs import UmlLab, UmlLabs
from flashbed.progress import Progress
from flashbed.results import CellKey
from flashbed.store import RunStore
from flashbed.studies import STUDIES
from flashbed.studies.base import CellSpec
from flashbed.studies.crashstates import CHECKED_FILE, STATES_FILE

pytestmark = [pytest.mark.lab, pytest.mark.emulator]

STUDY = STUDIES["crashstates"]
SRC = Path(__file__).resolve().parents[2] / "src"


def spec(**params):
    dev = presets.load_spec("emmc-8g@64M")
    # an fsync the workload only claims: acknowledged data lost in some states (verdicts differ state
    # to state), and ext4's flushes give states that share one image
    p = STUDY.params(**{"workload": "powercut", "ops": 40, "subsets": 16, "sabotage": True, **params})
    # in virtual time: the workload is recorded once per run, and its write log (so its states)
    # must be the same in both; in real time a loaded host moved ext4's journal commits and the
    # runs listed different states (state 317 clean in one, recovered in the other, 12 fewer)
    return CellSpec(key=CellKey(dev.label, "ext4", "crashstates", "powercut"), device=dev,
                    variant=variants.parse("ext4", dev), params=p, seed=5, pace="none", clock=Clock.VIRTUAL)


def verdicts(logs: Path) -> dict[str, tuple[str, str]]:
    """Every listed state's class and fsck result, whichever lab checked it or whose verdict it shares."""
    listing = json.loads((logs / STATES_FILE).read_text())
    own = {r["id"]: tuple(STUDY._record(StateFacts.from_json(r), "ext4")[k] for k in ("class", "fsck"))
           for r in records(logs, CHECKED_FILE)}
    return {s["id"]: own[s.get("same", s["id"])] for s in listing["states"]}


def on_host(logs: Path) -> list[bool]:
    """For each checked state, whether its fsck ran on the host (crashhost/check.py)."""
    return [bool((((r.get("facts") or {}).get("fsck") or {}).get("check") or {}).get("on_host"))
            for r in records(logs, CHECKED_FILE) if r.get("facts")]


def store_for(root: Path) -> RunStore:
    store = RunStore(root)
    store.create()
    store.write_manifest({"schema": 1, "run_id": root.name})
    return store


@pytest.fixture(scope="module")
def exhaustive(tt_kernel, tmp_path_factory):
    """One lab, every state checked itself, its fsck in the lab: the reference (the shared runs
    check on the host, crashhost/check.py)."""
    cell = spec(dedup=False, fsck_on_host=False)
    store, res = run_alone(cell, UmlLab(tt_kernel), tmp_path_factory.mktemp("one"))
    assert res.status == "ok", res.error
    logs = store.logs_dir(cell.key)
    assert not (logs / HELPERS).exists()
    return verdicts(logs), res, logs


def shared_run(executor, kernel, root: Path):
    store = store_for(root)
    cell = spec()
    task = functools.partial(cell_task, labs=UmlLabs(kernel), root=root, provenance={})
    results = {}
    executor.run(task, [cell], lambda c: c.key.id, lambda c, r: results.setdefault("r", r) and "",
                 Progress(1, stream=open(os.devnull, "w")))
    res = results["r"]
    assert res.status == "ok", res.error
    return root / res.attempt_dir, res  # each attempt at a cell has a log directory of its own


def check_same(exhaustive, logs: Path, res):
    want, one, one_logs = exhaustive
    got = verdicts(logs)
    assert got == want, {k: (want[k], got.get(k)) for k in want if got.get(k) != want[k]}
    c = {m.metric: m.value for m in res.measurements}
    assert c["states"] == len(want) and c["distinct"] < c["states"], "some states share a verdict"
    assert all(on_host(logs)) and not any(on_host(one_logs)), \
        "the shared runs' fsck ran on the host, the reference's in the lab"
    assert c["failures"] > 0, "the comparison covers failed states too"
    labs = json.loads((logs / SHARE_FILE).read_text())["labs"]
    helped = [x for x in labs if x["lab"] != "main"]
    assert helped and all(x["boot"] == "done" for x in labs), labs
    assert sum(x.get("checked", 0) for x in labs) == c["checked"] == c["distinct"]
    assert all(x.get("checked", 0) > 0 for x in labs), "each lab checked some of the states"


def test_a_helper_on_the_spare_core_gives_every_state_the_verdict_of_one_lab(tt_kernel, exhaustive, tmp_path):
    logs, res = shared_run(LocalExecutor(2), tt_kernel, tmp_path / "run")
    check_same(exhaustive, logs, res)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dask_workers_share_a_cells_states_with_the_same_verdicts(tt_kernel, exhaustive, tmp_path):
    port = free_port()
    addr = f"tcp://127.0.0.1:{port}"
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PYTHONPATH=str(SRC))  # the workers run this tree's code
    sched = subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                              "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    worker = subprocess.Popen([str(bindir / "dask"), "worker", addr, "--nworkers", "2", "--nthreads", "1",
                               "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              cwd=tmp_path, env=env)
    try:
        from distributed import Client
        with Client(addr, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)  # a spare core from the start
            c.run(lambda: __import__("flashbed.cell"))  # each worker ready to take a helper at once
        logs, res = shared_run(DaskExecutor(addr), tt_kernel, tmp_path / "run")
        check_same(exhaustive, logs, res)
    finally:
        for p in (worker, sched):
            p.terminate()
            p.wait(timeout=30)
