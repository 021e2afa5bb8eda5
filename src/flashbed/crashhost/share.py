"""Several labs check one cell's crash states: cores that would otherwise idle (the last cells
of a run, or fewer cells than cores) take a share of a long crash-state cell.

The cell's own lab records the workload, lists the states and starts checking them, one at a
time, each taken with a claim (Call.CRASH_NEXT). When the host plans the checks
(CrashHost.crash_states, host.py), it also offers helpers to the executor (executors.spawner): a
helper runs only where a core is free of cells (locally: no cell waits for a slot; on Dask:
at a lower priority than cells). A helper boots a lab of its own on an emulator that serves
the same states from the cell's kept write log (devices.session.LogSession, `flashbed-emu
serve --crash-log`), takes claims the same way and writes its verdicts beside the cell's
(helpers/<k>/checked.jsonl); a claim gives each state to exactly one lab (claims.py). A
helper's task is cell.help_check, beside cell_task: both are executor tasks. The states are the same whichever lab serves them (the log alone rebuilds each),
and so is the check: the result equals one lab checking them all (tests/integration).

When the cell's lab has no state left to take, its host closes the claims (a helper that
starts later does nothing), cancels helpers not started and waits for the started ones to
finish their last state; `share.json` then says, per lab, how its boot ended and the state
it was on if it died there (the study counts that state as a hang or a crash, as it does
for the cell's own lab). A lab that stops on a hung state stops the others from taking more.
"""

from __future__ import annotations

import functools
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..lab.boundary import LabFactory
from ..lab.guest.guestlib import WALL_FILE
from ..status import BootStatus
from .claims import CLAIMS, Claims

if TYPE_CHECKING:  # only a type here: the cell's spec travels with the helper's job
    from ..studies.base import CellSpec

HELPERS, SHARE_FILE = "helpers", "share.json"
DONE, STARTED = "done.json", "started"
# a helper costs a lab boot and an emulator loading the log: not worth it for fewer states than this
MIN_STATES_PER_LAB = 24
SETTLE_POLL = 0.2  # s between looks at the helpers' progress while waiting for them


@dataclass(frozen=True)
class Helpers:
    """What a cell needs to offer helpers: where they run (an executor's spawner), the labs
    and the cell they check, where their emulators keep their blank devices, and the task a
    helper runs (cell.help_check, given by the cell: the wing does not import the cell)."""

    spawner: Any
    labs: LabFactory
    spec: CellSpec
    scratch: Path
    task: Callable[..., dict[str, Any]]
    verdicts: Path | None = None  # the run's store of the user's check's verdicts (verdicts.py)

    def job(self, run_dir: Path, k: int) -> Callable[[], dict[str, Any]]:
        """Helper k's task (a partial of a module-level function: it pickles for Dask)."""
        return functools.partial(self.task, HelperJob(self.spec, run_dir, k, self.scratch / f"h{k}", self.verdicts),
                                 labs=self.labs)


def records(run_dir: Path, checked_file: str) -> list[dict]:
    """Every lab's StateFacts lines of a cell: its own lab's, then each helper's."""
    out = _read_lines(run_dir / checked_file)
    for d in sorted((run_dir / HELPERS).glob("*"), key=lambda p: int(p.name) if p.name.isdigit() else 0):
        out += _read_lines(d / checked_file)
    return out


def read_end_records(run_dir: Path) -> list[dict] | None:
    """Reads back how each lab that checked the cell's states ended (share.json: each lab's
    end_record), or None for a cell whose labs did not share (a recording made before)."""
    try:
        return json.loads((run_dir / SHARE_FILE).read_text())["labs"]
    except (OSError, ValueError, KeyError):
        return None


@dataclass(frozen=True)
class HelperJob:
    """One helper of one cell: which cell, where its files are, its number."""

    spec: CellSpec
    run_dir: Path  # the cell's run directory: its write log, listing, claims
    index: int
    scratch: Path  # where its emulator keeps its (blank) device
    verdicts: Path | None = None  # the run's store of the user's check's verdicts

    @property
    def name(self) -> str:
        return f"helper-{self.index}"

    @property
    def dir(self) -> Path:
        return self.run_dir / HELPERS / str(self.index)


def stage_inputs(names: tuple[str, ...], src: Path, dst: Path) -> None:
    """What another lab's check reads (Study.check_inputs), from the cell's run directory into
    its own, as they are: a user's check stays executable."""
    for name in names:
        if (src / name).is_dir():
            shutil.copytree(src / name, dst / name, dirs_exist_ok=True)
        elif (src / name).is_file():
            shutil.copy2(src / name, dst / name)


def end_record(res: Any, host: Any, claims: Claims, checked_file: Path) -> dict[str, Any]:
    """Makes the record of how a lab's boot ended (`host`: its CrashHost), for done.json and
    share.json: its status, the state it died on (if it did), how many it checked. A lab that stopped on a hung state stops the others taking more."""
    done = {r.get("id") for r in _read_lines(checked_file)}
    died = res.status in (BootStatus.KILLED, BootStatus.HANG, BootStatus.CRASH)
    current = host.current_state
    stopped = _stopped(res)
    if stopped or (died and current is not None):
        claims.stop()
    taking = getattr(host, "taking", [])
    return {"boot": str(res.status), "in_flight": current["id"] if died and current and current["id"] not in done
            else None, "state": current if died else None, "console": str(res.console_log),
            "why": wall_limit_why(res, checked_file.parent) if died else "",
            "checked": len(done), "stopped": stopped,
            # the host's wall clock from its first state to its last request: the lab's checking (in virtual
            # time the guest's own clock says the device's time, not what checking cost)
            "wall": round(taking[-1] - taking[0], 3) if len(taking) >= 2 else None}


def wall_limit_why(res: Any, run_dir: Path) -> str:
    """A boot killed for a program over its wall-clock limit: the boot's error, which names it (lab/uml.py
    notes the limit in the boot's run directory); '' for any other end."""
    return res.error if (run_dir / WALL_FILE).is_file() else ""


def _stopped(res: Any) -> str:
    step = res.step("check")
    try:
        return json.loads(step.stdout.strip().splitlines()[-1]).get("stopped", "") if step is not None else ""
    except (ValueError, IndexError):
        return ""


def _read_lines(path: Path) -> list[dict]:
    out = []
    try:
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    except OSError:
        pass
    return out


class Share:
    """The cell's side: its claims, the helpers it offered, and the wait for them at its end."""

    def __init__(self, run_dir: Path, states: list[dict], helpers: Helpers | None, watchdog: float):
        self.run_dir = run_dir
        shutil.rmtree(run_dir / CLAIMS, ignore_errors=True)  # a cell run again starts afresh
        shutil.rmtree(run_dir / HELPERS, ignore_errors=True)
        (run_dir / SHARE_FILE).unlink(missing_ok=True)
        self.claims = Claims(run_dir / CLAIMS, states, "main")
        self.handles: list[Any] = []
        self.watchdog = watchdog
        if helpers is not None and helpers.spawner is not None:
            n = min(helpers.spawner.capacity(), len(states) // MIN_STATES_PER_LAB)
            self.handles = [helpers.spawner.spawn(helpers.job(run_dir, k), f"{helpers.spec.key.id}#{k}")
                            for k in range(1, n + 1)]

    def settle(self, own: dict[str, Any]) -> None:
        """No helper starts from now; wait for those that did; share.json says how each lab ended."""
        self.claims.close()
        for k, h in enumerate(self.handles, 1):
            if not (self.run_dir / HELPERS / str(k) / STARTED).exists():
                h.cancel()  # one that starts now finds the claims closed; a running one is waited for
        labs = [{"lab": "main", **own}]
        started = sorted(p.parent for p in (self.run_dir / HELPERS).glob(f"*/{STARTED}"))
        for d in started:
            labs.append(self._wait(d))
        (self.run_dir / SHARE_FILE).write_text(json.dumps({"labs": labs}))
        shutil.rmtree(self.run_dir / CLAIMS, ignore_errors=True)

    def _wait(self, d: Path) -> dict[str, Any]:
        """A started helper's end, or, if it shows no sign of life for longer than a state may
        take (its worker died), what is known: its claimed state stays unchecked."""
        last, seen = time.monotonic(), -1.0
        while not (d / DONE).exists():
            mark = max((p.stat().st_mtime for p in d.iterdir() if p.is_file()), default=0.0)
            if mark != seen:
                last, seen = time.monotonic(), mark
            elif time.monotonic() - last > self.watchdog:
                return {"lab": f"helper-{d.name}", "boot": "lost", "in_flight": None,
                        "error": f"no word from it for {self.watchdog:.0f} s"}
            time.sleep(SETTLE_POLL)
        try:
            return json.loads((d / DONE).read_text())
        except ValueError:
            return {"lab": f"helper-{d.name}", "boot": "lost", "error": "its done.json is unreadable"}
