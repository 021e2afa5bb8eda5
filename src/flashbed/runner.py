"""Run one cell: bring up its device, boot the lab once or more with the
study's steps, answer the guest's host calls, and turn it all into a result."""

from __future__ import annotations

import json
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from .devices.session import DeviceSession
from .errors import FlashbedError
from .lab.kernel import KernelInfo
from .lab.uml import BootResult, BootSpec, boot
from .results import CellResult
from .studies import STUDIES
from .studies.base import CellSpec


def run_cell(spec: CellSpec, kernel: KernelInfo, logs: Path, scratch: Path,
             provenance: dict[str, Any] | None = None,
             on_boot: Callable[[int, int], None] | None = None) -> CellResult:
    """Never raises: an infrastructure failure becomes status 'error'."""
    started = time.monotonic()
    pace = spec.pace
    study = STUDIES[spec.key.study]
    logs.mkdir(parents=True, exist_ok=True)
    phases: dict[str, dict[str, Any]] = {}
    prov = dict(provenance or {})
    prov.update({"device": spec.device.label, "preset": spec.device.name, "capacity_bytes": spec.device.capacity,
                 "kernel": kernel.provenance(), "variant": spec.variant.spec, "params": spec.params, "seed": spec.seed,
                 "pace": pace})
    try:
        with DeviceSession(spec.device, scratch, seed=spec.seed, pace=pace) as dev:
            kill = threading.Event()

            def host(call: str, args: dict) -> Any:
                if call == "reset-stats":
                    return dev.reset_stats()
                if call == "stats":
                    snap = dev.stats()
                    if snap is not None:
                        phases[args.get("phase", "workload")] = snap
                    return snap
                if call == "cut-power":
                    cut()
                    return None
                if call == "cut-power-in":
                    # a power cut at a chosen moment of the workload that follows
                    timer = threading.Timer(float(args["seconds"]), cut)
                    timer.daemon = True
                    timers.append(timer)
                    timer.start()
                    return None
                raise FlashbedError(f"unknown host call '{call}'")

            def cut() -> None:
                # when the host cut the power, for the study to set against the
                # guest's acknowledgements (cut.json in the boot's directory)
                wall = time.time()
                reply = dev.cut_power()
                kill.set()
                try:
                    (where[0] / "cut.json").write_text(json.dumps({"host_wall": wall, "emulator": reply}))
                except OSError:
                    pass

            where: list[Path] = [logs]
            boots: list[BootResult] = []
            timers: list[threading.Timer] = []
            steps_per_boot = study.boots(spec, logs)
            for i, steps in enumerate(steps_per_boot):
                kill.clear()
                dev.restart_if_cut()
                study.before_boot(spec, i, logs)
                bspec = BootSpec(run_dir=logs / f"boot{i}" if len(steps_per_boot) > 1 else logs,
                                 steps=tuple(steps), disks=dev.disks(),
                                 nandsim=study.nandsim(spec, dev.nandsim()),
                                 mem_mb=dev.mem_mb(), timeout=_budget(steps))
                if bspec.run_dir != logs:
                    _share(logs, bspec.run_dir)
                where[0] = bspec.run_dir
                res = boot(bspec, kernel, host=host, kill=kill)
                for t in timers:
                    t.cancel()
                    t.join()
                timers.clear()
                boots.append(res)
                if on_boot is not None:
                    on_boot(i + 1, len(steps_per_boot))
                if res.status not in ("done", "killed") and not study.continue_after_failure:
                    break
        outcome = study.parse(spec, boots, logs)
        status = outcome.status
        # an iteration study counts a hung or crashed boot among its results
        judged = [] if study.continue_after_failure else boots
        hang = next((b for b in judged if b.status == "hang"), None)
        crash = next((b for b in judged if b.status == "crash"), None)
        if hang:
            status = "hang"
        elif crash:
            status = "crash"
        error = outcome.error or (hang.error if hang else crash.error if crash else "")
        return CellResult(key=spec.key, status=status, measurements=outcome.measurements,
                          headline=outcome.headline if status == "ok" else f"{status}: {error}"[:200],
                          error=error, seconds=round(time.monotonic() - started, 3), device_stats=phases,
                          provenance=prov, extra=outcome.extra,
                          logs={f"console{i}": str(Path(b.console_log)) for i, b in enumerate(boots)})
    except FlashbedError as e:
        return _error(spec, str(e), started, prov)
    except Exception as e:  # a bug must not lose the run: record it and go on
        (logs / "error.txt").write_text(traceback.format_exc())
        return _error(spec, f"{type(e).__name__}: {e} (traceback in {logs / 'error.txt'})", started, prov)


def _error(spec: CellSpec, msg: str, started: float, prov: dict) -> CellResult:
    return CellResult(key=spec.key, status="error", error=msg[:1000], headline=f"error: {msg}"[:200],
                      seconds=round(time.monotonic() - started, 3), provenance=prov)


def _budget(steps) -> float:
    # the lab's overall limit: every step's own limit, plus boot and slack
    return sum(s.timeout for s in steps) + 120


def _share(logs: Path, run_dir: Path) -> None:
    """Boots after the first see the files the study put in the cell's log dir."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for f in logs.iterdir():
        if f.is_file() and f.suffix in (".fio", ".txt") and not (run_dir / f.name).exists():
            (run_dir / f.name).write_bytes(f.read_bytes())
