"""`flashbed run`: execute a plan into a run directory, resumably, in parallel.

Executors: a local pool (one lab kernel per core, the default) or a Dask
cluster (`--executor dask --scheduler ADDR`). Finished cells are skipped, so a
rerun of the same command after a crash or Ctrl-C completes only the rest.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import __version__
from .errors import FlashbedError
from .lab.kernel import KernelInfo, ensure_kernel
from .plan import Plan
from .progress import Progress
from .results import CellResult
from .runner import run_cell
from .store import RunStore
from .studies.base import CellSpec

TOOL_PACKAGES = ("e2fsprogs", "btrfs-progs", "xfsprogs", "f2fs-tools", "nilfs-tools", "dosfstools", "exfatprogs",
                 "mtd-utils", "fio", "util-linux", "linux-source-6.12")


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


def manifest_for(plan: Plan, kernel: KernelInfo, run_id: str) -> dict[str, Any]:
    return {
        "schema": 1,
        "run_id": run_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "flashbed_version": __version__,
        "profile": plan.request.profile,
        "request": asdict(plan.request),
        "repeats": plan.request.repeat,
        "kernel": kernel.provenance(),
        "tools": tool_versions(),
        "emulator": emulator_version() if any(d.emulated for d in plan.devices.values()) else None,
        "devices": {label: d.info for label, d in plan.devices.items()},
        "filesystems": sorted({c.variant.spec for c in plan.cells}),
        "host": {"system": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "cells": len(plan.cells),
    }


def execute(plan: Plan, store: RunStore, jobs: int | None = None, executor: str = "local",
            scheduler: str | None = None, stream=sys.stderr) -> list[CellResult]:
    """Run every unfinished cell of the plan; return all results of the run."""
    kernel = ensure_kernel()
    with store.running():
        return _execute(plan, store, kernel, jobs, executor, scheduler, stream)


def _execute(plan: Plan, store: RunStore, kernel: KernelInfo, jobs: int | None, executor: str,
             scheduler: str | None, stream) -> list[CellResult]:
    run_id = store.root.name
    if store.exists():
        old = store.manifest()
        # compare as stored: JSON has lists where the request has tuples; a field
        # added since the run was made counts as its default
        wanted = json.loads(json.dumps(asdict(plan.request)))
        stored = {**json.loads(json.dumps(asdict(type(plan.request)()))), **(old.get("request") or {})}
        if stored != wanted:
            raise FlashbedError(f"{store.root} holds a run of a different request: use --out DIR for a new run, "
                                f"or `flashbed run --resume {run_id}` to finish that one")
    else:
        store.write_manifest(manifest_for(plan, kernel, run_id))
    base_prov = {"flashbed_version": __version__, "run_id": run_id}
    todo = [c for c in plan.cells if not store.finished(c.key)]
    done = len(plan.cells) - len(todo)
    print(f"run {run_id}: {len(plan.cells)} cells, {done} already finished, {len(todo)} to run; "
          f"results in {store.root}", file=stream, flush=True)
    progress = Progress(len(todo), "cells", stream=stream)
    if todo:
        if executor == "local":
            _run_local(todo, kernel, store, base_prov, jobs or os.cpu_count() or 1, progress)
        elif executor == "dask":
            if not scheduler:
                raise FlashbedError("--executor dask needs --scheduler ADDR (e.g. tcp://127.0.0.1:8786)")
            from .dask_executor import run_dask
            run_dask(todo, kernel, store, base_prov, scheduler, progress)
        else:
            raise FlashbedError(f"unknown executor '{executor}': choose local or dask")
    return list(store.results())


def cell_task(spec: CellSpec, kernel: KernelInfo, root: Path, prov: dict,
              progress: Progress | None = None) -> CellResult:
    store = RunStore(root)
    on_boot = (lambda done, total: progress.part(spec.key.id, done, total)) if progress else None
    return run_cell(spec, kernel, store.logs_dir(spec.key), root / "scratch" / store.logs_dir(spec.key).name, prov,
                    on_boot=on_boot)


def _run_local(todo: list[CellSpec], kernel: KernelInfo, store: RunStore, prov: dict, jobs: int,
               progress: Progress) -> None:
    pending = list(todo)
    running: dict[Future, CellSpec] = {}
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        while pending or running:
            while pending and len(running) < jobs:
                spec = pending.pop(0)
                progress.start(spec.key.id)
                running[pool.submit(cell_task, spec, kernel, store.root, prov, progress)] = spec
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in finished:
                spec = running.pop(f)
                result = f.result()
                store.write(result)
                progress.finish(spec.key.id, result.headline if result.ok else f"{result.status.upper()} {result.headline}")
    except KeyboardInterrupt:
        from .lab.uml import kill_all
        kill_all()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)

