"""Run one cell: bring up its device, boot its lab once or more with the
study's steps, answer the guest's host calls, and turn it all into a result.

`cell_task` is the unit of work an executor runs (locally or on a Dask worker):
one cell of a run directory, its result returned to the caller, which alone
writes the run's cell files."""

from __future__ import annotations

import json
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from .devices.session import open_session
from .errors import FlashbedError
from .lab.guest.protocol import Call
from .lab.target import BootResult, BootSpec, Lab, LabFactory
from .results import CellResult
from .status import CellStatus
from .store import RunStore
from .studies import STUDIES
from .studies.base import CRASHLOG, CellSpec
from .studies.params import as_json

OnPart = Callable[..., None]  # (boots done, boots in all[, what: "boots" or another unit of the cell's work])
CRASH_CALLS = (Call.LOG_START, Call.LOG_MARK, Call.CRASH_STATES, Call.CRASH_SWITCH)


def cell_task(spec: CellSpec, on_part: OnPart | None, *, labs: LabFactory, root: Path,
              provenance: dict[str, Any]) -> CellResult:
    """One cell of the run directory `root`, in the lab `labs` gives it."""
    logs = RunStore(root).logs_dir(spec.key)
    return run_cell(spec, labs(spec), logs, root / "scratch" / logs.name, provenance, on_boot=on_part)


def run_cell(spec: CellSpec, lab: Lab, logs: Path, scratch: Path,
             provenance: dict[str, Any] | None = None, on_boot: OnPart | None = None) -> CellResult:
    """Never raises: an infrastructure failure becomes status 'error'."""
    started = time.monotonic()
    # virtual time replaces the emulator's pacing (lab/clock.py)
    pace = "virtual" if spec.clock == "virtual" else spec.pace
    study = STUDIES[spec.key.study]
    logs.mkdir(parents=True, exist_ok=True)
    phases: dict[str, dict[str, Any]] = {}
    prov = dict(provenance or {})
    real = spec.device.backend == "real"
    prov.update({"device": spec.device.label, "preset": None if real else spec.device.name,
                 "capacity_bytes": spec.device.capacity, "kernel": lab.release,
                 # the kernel's label (the manifest's `kernels` has its build) and the guest's vCPUs
                 "lab_kernel": spec.kernel, "cpus": spec.cpus, "variant": spec.variant.spec,
                 "params": as_json(spec.params), "seed": spec.seed, "pace": pace, "clock": spec.clock})
    if real:  # what the device is, from sysfs (model, serial, sizes, transport)
        prov["real_device"] = spec.device.info["identity"]
    try:
        # a lab may bring its own device session (a replay needs none)
        with getattr(lab, "open_session", open_session)(spec.device, scratch, seed=spec.seed, pace=pace) as dev:
            kill = threading.Event()
            since: dict[str, float] = {}  # phase -> when its statistics were reset

            def clock_now() -> float:
                # a phase's time: the host's wall clock, or in virtual time the device's own
                # (the guest's; wall-clock time there is only the lab's cost of computing it)
                if pace == "virtual":
                    return ((dev.stats() or {}).get("device_ns") or 0) / 1e9
                return time.monotonic()

            def host(call: str, args: dict) -> Any:
                if call == Call.RESET_STATS:
                    reply = dev.reset_stats()
                    since[args.get("phase", "workload")] = clock_now()
                    return reply
                if call == Call.STATS:
                    phase = args.get("phase", "workload")
                    wall = clock_now() - since.pop(phase) if phase in since else None
                    snap = dev.stats()
                    if snap is not None:
                        if wall is not None:
                            # the phase's wall time beside the device's busy time: how much of it the
                            # device worked (the report marks figures the lab, not the device, limited)
                            snap["wall_seconds"] = round(wall, 6)
                        phases[phase] = snap
                    return snap
                if call == Call.CUT_POWER:
                    cut()
                    return None
                if call == Call.CUT_POWER_IN:
                    # a power cut at a chosen moment of the workload that follows
                    timer = threading.Timer(float(args["seconds"]), cut)
                    timer.daemon = True
                    timers.append(timer)
                    timer.start()
                    return None
                if call in CRASH_CALLS:
                    return crash_call(call, args)
                raise FlashbedError(f"unknown host call '{call}'")

            switched = [0, 0]  # crash states served, listed (the cell's progress while it checks them)

            def crash_call(call: str, args: dict) -> Any:
                # the write log lives in the boot's run directory (the study keeps it or not)
                if call == Call.LOG_START:
                    dev.log_start(where[0] / CRASHLOG)
                    return {}
                if call == Call.LOG_MARK:
                    return {"pos": dev.log_mark(str(args["label"]))}
                if call == Call.CRASH_STATES:
                    listing = dev.crash_states(subsets=int(args["subsets"]), tears=int(args["tears"]),
                                               seed=int(args["seed"]), marks=bool(args.get("marks")))
                    log = where[0] / CRASHLOG
                    listing["log_bytes"] = sum(f.stat().st_size for f in log.iterdir()) if log.is_dir() else 0
                    (where[0] / Path(str(args["out"])).name).write_text(json.dumps(listing))
                    switched[:] = [0, len(listing["states"])]
                    return {k: v for k, v in listing.items() if k != "states"} | {"states": len(listing["states"])}
                reply = dev.crash_switch(str(args["state"]))
                switched[0] += 1
                if on_boot is not None and switched[1]:
                    on_boot(switched[0], switched[1], "crash states")
                if args.get("watchdog"):
                    # a lab stuck on this state (its kernel, not one command) is killed
                    # if it asks for no other state in time: the study counts a hang
                    for t in timers:
                        t.cancel()
                    timer = threading.Timer(float(args["watchdog"]), kill.set)
                    timer.daemon = True
                    timers.append(timer)
                    timer.start()
                return reply

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
                                 mem_mb=dev.mem_mb(), timeout=_budget(steps), cpus=spec.cpus)
                if bspec.run_dir != logs:
                    _share(logs, bspec.run_dir)
                where[0] = bspec.run_dir
                res = lab.boot(bspec, host=host, kill=kill)
                for t in timers:
                    t.cancel()
                    t.join()
                timers.clear()
                boots.append(res)
                if on_boot is not None:
                    on_boot(i + 1, len(steps_per_boot))
                if not res.status.as_planned and not study.continue_after_failure:
                    break
        outcome = study.parse(spec, boots, logs)
        # an iteration study counts a hung or crashed boot among its results
        status, boot_error = CellStatus.derive(outcome.status, [] if study.continue_after_failure else boots)
        error = outcome.error or boot_error
        return CellResult(key=spec.key, status=status, measurements=outcome.measurements,
                          headline=outcome.headline if status.ok else f"{status}: {error}"[:200],
                          error=error, seconds=round(time.monotonic() - started, 3), device_stats=phases,
                          provenance=prov, extra=outcome.extra,
                          logs={f"console{i}": str(Path(b.console_log)) for i, b in enumerate(boots)})
    except FlashbedError as e:
        return _error(spec, str(e), started, prov)
    except Exception as e:  # a bug must not lose the run: record it and go on
        (logs / "error.txt").write_text(traceback.format_exc())
        return _error(spec, f"{type(e).__name__}: {e} (traceback in {logs / 'error.txt'})", started, prov)


def _error(spec: CellSpec, msg: str, started: float, prov: dict) -> CellResult:
    return CellResult(key=spec.key, status=CellStatus.ERROR, error=msg[:1000], headline=f"error: {msg}"[:200],
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
