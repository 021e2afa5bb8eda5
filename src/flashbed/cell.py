"""Run one cell: bring up its device, boot its lab once or more with the
study's steps, answer the guest's host calls, and turn it all into a result.

`cell_task` is the unit of work an executor runs (locally or on a Dask worker):
one cell of a run directory, its result returned to the caller, which alone
writes the run's cell files; `run_alone` runs one cell in a run directory of
its own (scripts and tests)."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator

from . import executors, variants
from .clock import Clock, emulator_pace
from .crashhost.claims import CLAIMS, Claims, planned
from .crashhost.host import CrashHost
from .crashhost.share import DONE, STARTED, HelperJob, Helpers, end_record, stage_inputs
from .crashhost.verdicts import VERDICTS, VerdictStore
from .devices.session import LogSession
from .errors import FlashbedError, no_traceback
from .lab import cpuprofile
from .lab.boundary import (
    BootResult,
    BootSpec,
    DeviceSession,
    DeviceStats,
    Lab,
    LabFactory,
    Pacing,
    PowerSwitch,
    TimedCut,
    session_has,
)
from .lab.guest.protocol import Call
from .results import CellResult, printable
from .status import CellStatus
from .store import RunStore
from .studies import STUDIES
from .studies.base import CRASHLOG, CellSpec, boot_dir
from .studies.params import as_json

OnPart = Callable[..., None]  # (boots done, boots in all[, what: "boots" or another unit of the cell's work])


def cell_task(spec: CellSpec, on_part: OnPart | None, *, labs: LabFactory, root: Path,
              provenance: dict[str, Any]) -> CellResult:
    """One cell of the run directory `root`, in the lab `labs` gives it, in a directory of
    this attempt's own: a killed attempt's files (a crash-state log the guest appends to)
    never mix into the next one's. Where the executor has cores to spare, other labs may
    help check its crash states (help_check, crashhost/share.py)."""
    logs = RunStore(root).new_attempt(spec.key)
    scratch = root / "scratch" / f"{logs.parent.name}.{logs.name}"
    helpers = Helpers(executors.spawner(), labs, spec, root / "scratch" / f"{logs.parent.name}.{logs.name}-helpers",
                      help_check, root / VERDICTS)
    result = run_cell(spec, labs(spec), logs, scratch, provenance, on_boot=on_part, helpers=helpers,
                      verdicts=root / VERDICTS)
    return dataclasses.replace(result, attempt_dir=str(logs.relative_to(root)))


def run_alone(spec: CellSpec, lab: Lab, root: Path, verdicts: Path | None = None) -> tuple[RunStore, CellResult]:
    """One cell in a run directory of its own, `root`, laid out as `flashbed run` lays one out
    (a manifest naming the run, the cell's logs in `logs/<cell>`, its result in `cells/`), so
    what reads a run (a crash state's replay, the report) reads it: for the scripts and tests
    that run a single cell without a plan. The result is written whatever its status: the
    caller judges it. `verdicts`: the store of the user's check's verdicts (crashhost/verdicts.py) when
    not the run directory's own (cells run alone that share one, as a run's cells do)."""
    store = RunStore(root)
    store.create()
    store.write_manifest({"schema": 1, "run_id": root.name})
    result = run_cell(spec, lab, store.logs_dir(spec.key), root / "scratch", verdicts=verdicts or root / VERDICTS)
    store.write(result)
    return store, result


def help_check(job: HelperJob, *, labs: LabFactory) -> dict[str, Any]:
    """A helper's work (an executor's task, offered by a crash-state cell: crashhost/share.py):
    a lab of its own checks the states it claims, its verdicts in its own directory; `done.json`
    says how it ended. Never raises."""
    d = job.dir
    d.mkdir(parents=True, exist_ok=True)
    (d / STARTED).touch()  # before looking at `closed`: the cell's host waits for every started helper
    out: dict[str, Any] = {"lab": job.name, "boot": None, "in_flight": None, "checked": 0}
    try:
        spec = job.spec
        study = STUDIES[spec.key.study]
        claims = Claims(job.run_dir / CLAIMS, planned(job.run_dir, study.states_file), job.name)
        if not claims.left():
            out["boot"] = "not needed"
            return out
        virtual = spec.clock is Clock.VIRTUAL
        if virtual:  # the cell's recovery commands are those of its seeded variant
            spec = dataclasses.replace(spec, variant=variants.seeded(spec.variant, spec.seed))
        stage_inputs(study.check_inputs, job.run_dir, d)
        (check,) = [s for s in study.boots(spec, job.run_dir)[0] if s.name == "check"]
        lab = labs(job.spec)
        with LogSession(spec.device, job.scratch, job.run_dir / CRASHLOG, seed=spec.seed, pace=spec.pace,
                        clock=spec.clock) as dev:
            host = CellHost(dev, virtual=virtual, verdicts=job.verdicts, cell=spec.key.id)
            host.crash.claims = claims
            with host.boot(d) as kill:
                res = lab.boot(BootSpec(run_dir=d, steps=(check,), disks=dev.disks(), mem_mb=dev.mem_mb(),
                                        timeout=check.timeout + 120, cpus=spec.cpus,
                                        cpu=cpuprofile.cell_costs(spec.clock, spec.cpu_profile)),
                               host=host, kill=kill)
        out.update(end_record(res, host.crash, claims, d / study.checked_file))
    except Exception as e:  # a helper's failure leaves its claimed state unchecked: the cell says so
        out["error"] = f"{type(e).__name__}: {e}"[:400]
    finally:
        (d / DONE).write_text(json.dumps(out))
    return out


def run_cell(spec: CellSpec, lab: Lab, logs: Path, scratch: Path,
             provenance: dict[str, Any] | None = None, on_boot: OnPart | None = None,
             helpers: Helpers | None = None, verdicts: Path | None = None) -> CellResult:
    """Never raises: an infrastructure failure becomes status 'error'. `verdicts`: the run's store of the
    user's check's verdicts on the host, shared by its cells (crashhost/verdicts.py)."""
    started = time.monotonic()
    # a filesystem made in virtual time is laid out alike on every run (variants.seeded), so
    # its figures repeat
    virtual = spec.clock is Clock.VIRTUAL
    if virtual:
        spec = dataclasses.replace(spec, variant=variants.seeded(spec.variant, spec.seed))
    study = STUDIES[spec.key.study]
    prov = _provenance(spec, lab, provenance)
    try:
        logs.mkdir(parents=True, exist_ok=True)
        if any(logs.iterdir()):  # a guest's logs appended to an earlier attempt's would be read as this one's
            return _error(spec, f"{logs} is not empty: each attempt at a cell needs a directory of its own",
                          started, prov)
        # the lab opens the device as its boots see it (a replay opens none)
        with lab.open_session(spec.device, scratch, seed=spec.seed, pace=spec.pace, clock=spec.clock) as dev:
            host = CellHost(dev, on_boot, virtual=virtual, helpers=helpers, verdicts=verdicts, cell=spec.key.id)
            steps_per_boot = study.boots(spec, logs)
            boots: list[BootResult] = []
            for i, steps in enumerate(steps_per_boot):
                # a boot may run the device at another pace than the cell (preconditioning unpaced)
                if session_has(dev, Pacing):
                    dev.set_pace(study.boot_pace(spec, i) or spec.pace)
                study.before_boot(spec, i, logs)
                run_dir = boot_dir(logs, i) if len(steps_per_boot) > 1 else logs
                if run_dir != logs:
                    _share(logs, run_dir)
                with host.boot(run_dir) as kill:  # the device is back after a cut: then its disks
                    bspec = BootSpec(run_dir=run_dir, steps=tuple(steps), disks=dev.disks(),
                                     nandsim=study.nandsim(spec, dev.nandsim()), mem_mb=dev.mem_mb(),
                                     timeout=_budget(steps), cpus=spec.cpus,
                                     cpu=cpuprofile.cell_costs(spec.clock, spec.cpu_profile))
                    boots.append(lab.boot(bspec, host=host, kill=kill))
                if on_boot is not None:
                    on_boot(i + 1, len(steps_per_boot))
                if not boots[-1].status.as_planned and not study.continue_after_failure:
                    break
            host.crash.settle(boots[-1] if boots else None)  # labs that helped check its crash states end
        if _disk_full(logs) and not all(b.ok for b in boots):  # the guest's writes failed, not the filesystem
            return _error(spec, f"the disk holding {logs} is full", started, prov, disk_full=True)
        outcome = study.parse(spec, boots, logs)
        # an iteration study counts a hung or crashed boot among its results
        status, boot_error = CellStatus.derive(outcome.status, [] if study.continue_after_failure else boots)
        error = printable(no_traceback(outcome.error or boot_error))  # the traceback stays in the logs
        # what a guest or the user's programs printed may be in them: never a terminal escape
        return CellResult(key=spec.key, status=status, measurements=outcome.measurements,
                          headline=printable(no_traceback(outcome.headline) if status.ok else f"{status}: {error}")[:200],
                          error=error, seconds=round(time.monotonic() - started, 3),
                          device_stats=host.phases,
                          provenance=prov, extra=outcome.extra,
                          logs={f"console{i}": str(Path(b.console_log)) for i, b in enumerate(boots)})
    except FlashbedError as e:
        return _error(spec, str(e), started, prov)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT) or _disk_full(logs):  # not a bug: say it once, plainly
            return _error(spec, f"the disk holding {logs} is full", started, prov, disk_full=True)
        return _unexpected(spec, logs, e, started, prov)
    except Exception as e:  # a bug must not lose the run: record it and go on
        return _unexpected(spec, logs, e, started, prov)


def _unexpected(spec: CellSpec, logs: Path, e: Exception, started: float, prov: dict) -> CellResult:
    with contextlib.suppress(OSError):
        (logs / "error.txt").write_text(traceback.format_exc())
    return _error(spec, f"{type(e).__name__}: {e} (traceback in {logs / 'error.txt'})", started, prov)


def _provenance(spec: CellSpec, lab: Lab, base: dict[str, Any] | None) -> dict[str, Any]:
    prov = dict(base or {})
    real = spec.device.backend in ("real", "board")  # a device of its own, not a preset
    prov.update({"device": spec.device.label, "preset": None if real else spec.device.name,
                 "capacity_bytes": spec.device.capacity, "kernel": lab.release,
                 # the kernel's label (the manifest's `kernels` has its build) and the guest's vCPUs
                 "lab_kernel": spec.kernel, "cpus": spec.cpus, "variant": spec.variant.spec,
                 "params": as_json(spec.params), "seed": spec.seed,
                 "pace": emulator_pace(spec.clock, spec.pace), "clock": spec.clock})
    if spec.flavour and spec.clock is Clock.REAL:  # the time-travel build with time travel off (CellSpec.flavour)
        prov["lab_kernel_build"] = f"{spec.flavour}, time travel off"
    if spec.clock is Clock.VIRTUAL and spec.cpu_profile:  # which guest CPU cost produced its timed figures
        prov["cpu_profile"] = cpuprofile.get(spec.cpu_profile).describe()
    if real:  # what the device is, from sysfs (model, serial, sizes, transport; a board's uname and model)
        prov["real_device"] = spec.device.info["identity"]
    return prov


class CellHost:
    """The host's side of one cell's guest calls (lab.boundary.HostHandler): one handler per
    Call, over the cell's device session and what it can do (its capabilities): statistics,
    power and timed cuts here, the write log and its crash states in `crash`
    (crashhost/host.py)."""

    def __init__(self, dev: DeviceSession, on_part: OnPart | None = None, virtual: bool = False,
                 helpers: Helpers | None = None, verdicts: Path | None = None, cell: str = ""):
        self.dev = dev
        self.virtual = virtual  # virtual time: a phase lasts the device's own time, not the host's
        self.on_part = on_part
        self.phases: dict[str, dict[str, Any]] = {}  # each workload phase's device statistics
        self.kill = threading.Event()  # set: the lab is killed at once (a power cut, a stuck crash state)
        self.run_dir = Path(".")  # the current boot's run directory
        self._since: dict[str, float] = {}  # phase -> when its statistics were reset
        # phase -> the guest's clock and CPU charge at its reset (virtual time with a CPU profile)
        self._guest: dict[str, dict] = {}
        self._timers: list[threading.Timer] = []
        self._watch: tuple[threading.Thread, threading.Event] | None = None  # an armed cut's watcher
        self._landed: dict | None = None  # what an armed cut did (virtual time), until the lab is gone
        self.crash = CrashHost(dev, on_part, helpers, watchdog=self._watchdog,  # the write log, crash states
                               verdicts=VerdictStore(verdicts) if verdicts is not None else None, cell=cell)
        self._handlers: dict[str, Callable[[dict], Any]] = {
            Call.RESET_STATS: self.reset_stats, Call.STATS: self.stats,
            Call.CUT_POWER: self.cut_power, Call.CUT_POWER_IN: self.cut_power_in,
            Call.LOG_START: self.crash.log_start, Call.LOG_MARK: self.crash.log_mark,
            Call.CRASH_STATES: self.crash.crash_states, Call.CRASH_SWITCH: self.crash.crash_switch,
            Call.CRASH_NEXT: self.crash.crash_next, Call.CRASH_CHECK: self.crash.crash_check,
            Call.USER_CHECK: self.crash.user_check}

    def __call__(self, call: str, args: dict) -> Any:
        handler = self._handlers.get(call)
        if handler is None:
            raise FlashbedError(f"unknown host call '{call}'")
        return handler(args)

    @contextlib.contextmanager
    def boot(self, run_dir: Path) -> Iterator[threading.Event]:
        """Around one boot: the device back after a cut before it, no timer left after it."""
        self.kill.clear()
        self.run_dir = self.crash.run_dir = run_dir
        if session_has(self.dev, PowerSwitch):
            self.dev.restart_if_cut()
        try:
            yield self.kill
        finally:
            for t in self._timers:
                t.cancel()
                t.join()
            self._timers.clear()
            self._end_armed_cut()

    # -- device statistics (none: the device has none) --
    def reset_stats(self, args: dict) -> Any:
        if not session_has(self.dev, DeviceStats):
            return None
        reply = self.dev.reset_stats()
        phase = args.get("phase", "workload")
        self._since[phase] = self._now()
        if isinstance(args.get("guest"), dict):
            self._guest[phase] = args["guest"]
        return reply

    def stats(self, args: dict) -> Any:
        if not session_has(self.dev, DeviceStats):
            return None
        phase = args.get("phase", "workload")
        wall = self._now() - self._since.pop(phase) if phase in self._since else None
        snap = self.dev.stats()
        if snap is not None:
            if wall is not None:
                # the phase's wall time beside the device's busy time: how much of it the
                # device worked (the report marks figures the lab, not the device, limited)
                snap["wall_seconds"] = round(wall, 6)
            snap.update(cpuprofile.guest_cpu(self._guest.pop(phase, None), args.get("guest")))
            self.phases[phase] = snap
        return snap

    def _now(self) -> float:
        # a phase's time: the host's wall clock, or in virtual time the device's own
        # (the guest's; wall-clock time there is only the lab's cost of computing it)
        if self.virtual:
            return ((self.dev.stats() or {}).get("device_ns") or 0) / 1e9
        return time.monotonic()

    # -- power --
    def cut_power(self, args: dict | None = None) -> None:
        """The lab is killed; a device with a power switch first drops what it had not made
        durable. When, for the study to set against the guest's acknowledgements (cut.json)."""
        wall = time.time()
        reply = self.dev.cut_power() if session_has(self.dev, PowerSwitch) else None
        self.kill.set()
        try:
            (self.run_dir / "cut.json").write_text(json.dumps({"host_wall": wall, "emulator": reply}))
        except OSError:
            pass
        return None

    def cut_power_in(self, args: dict) -> Any:
        """A power cut at a chosen moment of the workload that follows: `seconds` of wall
        time from now, or in virtual time of guest time from the device's present, where
        the device itself cuts and holds the lab (the same instant on every run; the
        answer names it)."""
        seconds = float(args["seconds"])
        if self.virtual and session_has(self.dev, TimedCut):
            armed = self.dev.arm_cut(seconds)
            stop = threading.Event()
            watcher = threading.Thread(target=self._watch_cut, args=(stop,), daemon=True)
            self._watch = (watcher, stop)
            watcher.start()
            return {"guest_ns": armed.get("guest_ns")}
        self._after(seconds, self.cut_power)
        return None

    def _watch_cut(self, stop: threading.Event) -> None:
        # the lab is held at the cut once it lands: kill it; the emulator stops (and
        # keeps what the cut left) only after the lab is gone (boot()), or the lab,
        # let go, would run on past the cut
        while not stop.wait(0.01):
            try:
                landed = self.dev.cut_landed()  # type: ignore[attr-defined]
            except FlashbedError:
                return
            if landed is not None:
                self._landed = {"host_wall": time.time(), **landed}
                self.kill.set()
                return

    def _end_armed_cut(self) -> None:
        if self._watch is None:
            return
        watcher, stop = self._watch
        self._watch = None
        stop.set()
        watcher.join()
        landed, self._landed = self._landed, None
        if landed is None:
            landed = self.dev.cut_landed()  # type: ignore[attr-defined]
        if landed is None:
            self.dev.disarm_cut()  # type: ignore[attr-defined]  # the boot ended first
            return
        reply = self.dev.cut_power() if session_has(self.dev, PowerSwitch) else None
        try:
            (self.run_dir / "cut.json").write_text(json.dumps({"host_wall": landed.get("host_wall"), "clock": Clock.VIRTUAL,
                                                               "guest_ns": landed.get("guest_ns"), "emulator": reply}))
        except OSError:
            pass

    def _after(self, seconds: float, then: Callable[[], Any]) -> None:
        timer = threading.Timer(seconds, then)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def _watchdog(self, seconds: float) -> None:
        """The lab is killed unless it asks again within `seconds` (a crash state it is stuck on)."""
        for t in self._timers:
            t.cancel()
        self._after(seconds, self.kill.set)


def _error(spec: CellSpec, msg: str, started: float, prov: dict, disk_full: bool = False) -> CellResult:
    return CellResult(key=spec.key, status=CellStatus.ERROR, error=msg[:1000], headline=f"error: {msg}"[:200],
                      seconds=round(time.monotonic() - started, 3), provenance=prov,
                      extra={"disk_full": True} if disk_full else {})


DISK_FULL_BELOW = 1 << 20  # bytes free: the run directory's disk is full (the guest's last write failed)


def _disk_full(path: Path) -> bool:
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < DISK_FULL_BELOW


def disk_full(result: CellResult) -> bool:
    """Whether the cell stopped because the run directory's disk is full: the run stops there."""
    return bool(result.extra.get("disk_full")) and not result.ok


def _budget(steps) -> float:
    # the lab's overall limit: every step's own limit, plus boot and slack
    return sum(s.timeout for s in steps) + 120


def _share(logs: Path, run_dir: Path) -> None:
    """Boots after the first see the files the study put in the cell's log dir."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for f in logs.iterdir():
        if f.is_file() and f.suffix in (".fio", ".txt") and not (run_dir / f.name).exists():
            (run_dir / f.name).write_bytes(f.read_bytes())
