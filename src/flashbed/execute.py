"""`flashbed run`: execute a plan into a run directory, resumably, in parallel.

Cells run on an executor (executors.py: a local pool, one lab kernel per core,
or a Dask cluster), each in the lab its LabFactory gives it. Finished cells are
skipped, so a rerun of the same command after a crash or Ctrl-C completes only
the rest.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from typing import Any, Callable

from . import __version__
from . import filesystems as fscat
from .cell import cell_task, disk_full
from .devices.session import clear_scratch
from .errors import FlashbedError
from .executors import Executor
from .identity import stored_request
from .lab.boundary import LabFactory
from .plan import Plan, cpu_profiles
from .progress import Progress
from .results import CellResult
from .store import RunStore
from .studies.base import CellSpec

# the Debian packages whose versions a run records: every filesystem's tools, fio, sqlite3,
# mount and friends (the lab kernel's source package and version are in the
# manifest's kernel block: 7.3's is fetched, not installed)
TOOL_PACKAGES = tuple(dict.fromkeys([*(fs.package for fs in fscat.CATALOGUE.values()), "fio", "sqlite3",
                                     "util-linux"]))


def tool_versions() -> dict[str, str]:
    out = {}
    for pkg in TOOL_PACKAGES:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
        out[pkg] = r.stdout.strip() if r.returncode == 0 else "not installed"
    return out


def emulator_version() -> str:
    try:
        from .devices import emulator
        r = subprocess.run([str(emulator.find_binary()), "--version"], capture_output=True, text=True, timeout=10)
        return r.stdout.strip() or r.stderr.strip()
    except Exception as e:  # provenance only: say why it is unknown
        return f"unknown ({e})"


def manifest_for(plan: Plan, labs: LabFactory, run_id: str) -> dict[str, Any]:
    return {
        "schema": 1,
        "run_id": run_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "flashbed_version": __version__,
        "profile": plan.request.profile,
        "request": asdict(plan.request),
        "repeats": plan.request.repeat,
        **labs.describe(),  # "kernel" and "kernels"
        "cpus": plan.request.cpus,
        # the guest CPU cost profiles of its virtual-time cells (lab/cpuprofile.py), with their sources
        "cpu_profiles": cpu_profiles(plan),
        # cells the plan left out (a case's vCPUs on a kernel without SMP), for the report to say so
        "skipped": [asdict(s) for s in plan.skipped],
        "tools": tool_versions(),
        "emulator": emulator_version() if any(d.emulated for d in plan.devices.values()) else None,
        "devices": {label: d.info for label, d in plan.devices.items()},
        # each preset file's content as the run's cells use it: a resume refuses a preset edited since
        "presets": preset_hashes(plan),
        "filesystems": sorted({c.variant.spec for c in plan.cells}),
        # read-only filesystems, and the studies the plan left out for them (they write)
        "read_only": sorted({c.variant.spec for c in plan.cells if c.variant.read_only}),
        "not_applicable": [asdict(n) for n in plan.not_applicable],
        "host": {"system": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "cells": len(plan.cells),
    }


def preset_hashes(plan: Plan) -> dict[str, str]:
    """The content hash of each device's preset file, by device label (real devices and a board's
    have none: their path is a device node, on this machine or the board)."""
    return {label: "sha256:" + hashlib.sha256(d.path.read_bytes()).hexdigest()
            for label, d in plan.devices.items() if d.backend not in ("real", "board")}


def check_resume(plan: Plan, store: RunStore) -> None:
    """One line if the existing run at `store` cannot be finished with `plan`: another request,
    or a device preset changed since its cells ran (they would sit beside cells of another
    device model under one label)."""
    if not store.exists():
        return
    old = store.manifest()
    run_id = store.root.name
    # compare as stored: JSON has lists where the request has tuples
    wanted = json.loads(json.dumps(asdict(plan.request)))
    stored = stored_request(old.get("request") or {})
    if stored != wanted:
        raise FlashbedError(f"{store.root} holds a run of a different request: use --out DIR for a new "
                            f"run, or `flashbed run --resume {run_id}` to finish that one")
    planned = {store.cell_path(c.key) for c in plan.cells}  # a planned cell's unreadable file is run again
    for p in sorted(store.cells_dir.glob("*.json")) if store.cells_dir.is_dir() else ():
        if p not in planned:
            store.read_cell(p)  # one line now rather than after the run
    before = old.get("presets") or {}  # none recorded: a run from before presets were
    for label, digest in preset_hashes(plan).items():
        if label in before and before[label] != digest:
            raise FlashbedError(f"device {label}: its preset {plan.devices[label].path} has changed since run "
                                f"{run_id} was made, so its remaining cells would measure another device: restore "
                                f"the preset, or start a new run with --out DIR")


def execute(plan: Plan, store: RunStore, labs: LabFactory, executor: Executor,
            stream=None) -> list[CellResult]:
    """Run every unfinished cell of the plan; return all results of the run."""
    stream = stream or sys.stderr  # the one of the moment, not of the import (a test's capture is replaced)
    with store.running():
        run_id = store.root.name
        if store.exists():
            check_resume(plan, store)
        else:
            store.write_manifest(manifest_for(plan, labs, run_id))
        todo = [c for c in plan.cells if not store.finished(c.key)]
        done = len(plan.cells) - len(todo)
        print(f"run {run_id}: {len(plan.cells)} cells, {done} already finished, {len(todo)} to run; "
              f"results in {store.root}", file=stream, flush=True)
        # cells of a study take alike: the ETA weighs the cells left by what their study's took
        progress = Progress(len(todo), "cells", stream=stream, kinds={c.key.id: c.key.study for c in todo})

        def finished(spec: CellSpec, result: CellResult) -> str:
            store.write(result)
            store.prune_attempts(result)  # the attempts before it: killed, or an error this one replaces
            if disk_full(result):  # every cell after it would fail the same way: stop, resumable
                raise FlashbedError(f"{result.error}: free some space, then run the same command again (finished "
                                    f"cells are kept)")
            return result.headline if result.ok else f"{result.status.upper()} {result.headline}"

        if todo:
            task = functools.partial(cell_task, labs=labs, root=store.root,
                                     provenance={"flashbed_version": __version__, "run_id": run_id})
            try:
                executor.run(task, todo, lambda spec: spec.key.id, finished, progress)
            finally:
                # each cell's session removes its scratch; a second Ctrl-C cuts that short
                _uninterrupted(lambda: clear_scratch(store.root / "scratch"))
        return list(store.results())


def _uninterrupted(fn: Callable[[], None]) -> None:
    """Run a short clean-up that another Ctrl-C must not cut short (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        fn()
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    old_term = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a SIGTERM as well (cli: stopped as Ctrl-C)
    try:
        fn()
    finally:
        signal.signal(signal.SIGINT, old)
        signal.signal(signal.SIGTERM, old_term)
