"""The host's side of a cell's crash states: the write log's host calls (log-start, log-mark),
the listing and its plan (crash-states), serving a state (crash-switch, crash-next), its fsck
on the host (crash-check) and the user's check in a sandbox (user-check), and, after the cell's
boots, the helpers' end (settle).

The cell's host (cell.CellHost) owns the boot: it hands these calls to its CrashHost, tells it
each boot's run directory and lends it the lab's watchdog (a lab that asks for no other state
in time is killed)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from ..errors import FlashbedError
from ..lab.boundary import BootResult, DeviceSession, WriteLog, session_has
from ..lab.guest.crashstates import to_check
from ..lab.guest.guestlib import read_log
from ..lab.guest.protocol import UNDAMAGED
from ..studies.base import CRASHLOG
from . import check, usercheck
from .claims import Claims
from .plan import VerifierInput, plan_checks, verifier_keys
from .share import Helpers, Share, end_record
from .verdicts import VerdictStore

OnPart = Callable[..., None]  # (done, in all[, what, note=, weights=]): the cell's progress


class CrashHost:
    """One cell's (or one helper lab's) crash states on the host, over the device session's
    write log."""

    def __init__(self, dev: DeviceSession, on_part: OnPart | None = None, helpers: Helpers | None = None,
                 watchdog: Callable[[float], None] | None = None, verdicts: VerdictStore | None = None,
                 cell: str = ""):
        self.dev = dev
        self.verdicts = verdicts  # the run's kept verdicts of the user's check on the host (verdicts.py)
        self.cell = cell  # the cell's name, as a verdict kept for other cells says whose it was
        self.on_part = on_part
        self.run_dir = Path(".")  # the current boot's run directory (the cell's host sets it per boot)
        self.watchdog = watchdog  # arms the lab's kill in that many seconds (a timer again at each state)
        self._states = [0, 0]  # crash states served, listed (the cell's progress while it checks them)
        self.helpers = helpers  # where other labs may help check this cell's crash states
        self.share: Share | None = None  # the crash states' claims and helpers (crash_states)
        self.claims: Claims | None = None  # whence crash_next takes states (a helper's host is given one)
        self.current_state: dict | None = None  # the crash state last handed to the guest
        self.taking: list[float] = []  # wall-clock times of the first and the last crash_next (the lab's checking)
        self._checked_file = "checked.jsonl"

    # -- the write log and its crash states (kept in the boot's run directory; the study keeps it or not) --
    def _log(self) -> WriteLog:
        if not session_has(self.dev, WriteLog):
            raise FlashbedError("this device has no write log: crash states need an emulated device (e.g. emmc-8g)")
        return self.dev  # type: ignore[return-value]

    def log_start(self, args: dict) -> Any:
        self._log().log_start(self.run_dir / CRASHLOG)
        return {}

    def log_mark(self, args: dict) -> Any:
        return {"pos": self._log().log_mark(str(args["label"]))}

    def crash_states(self, args: dict) -> Any:
        listing = self._log().crash_states(subsets=int(args["subsets"]), tears=int(args["tears"]),
                                           seed=int(args["seed"]), marks=bool(args.get("marks")),
                                           images=bool(args.get("images")))
        log = self.run_dir / CRASHLOG
        listing["log_bytes"] = sum(f.stat().st_size for f in log.iterdir()) if log.is_dir() else 0
        todo = len(listing["states"])
        weights: list[int] | None = None
        if args.get("verifier"):  # the study says what its verifier reads: plan the checks (plan.py)
            records = read_log(str(self.run_dir / Path(str(args["log"])).name))
            plan = plan_checks(listing["states"], records, VerifierInput(args["verifier"]),
                               dedup=bool(args.get("dedup", True)), max_states=int(args.get("max_states") or 0),
                               seed=int(args["seed"]))
            listing["plan"] = plan.to_json()
            todo = plan.checked
            # a state's check reads what was acknowledged before it: the ETA weighs states by that
            weights = verifier_keys(to_check(listing["states"]), records, VerifierInput(args["verifier"]))
        (self.run_dir / Path(str(args["out"])).name).write_text(json.dumps(listing))
        self._states = [0, todo]
        if self.on_part is not None and todo:  # said with the expected time once the first states are checked
            plan = listing.get("plan") or {}
            self.on_part(0, todo, "crash states",
                         note=f"{len(listing['states'])} crash states found"
                         + (f", {plan['distinct']} distinct" if plan else "") + f", {todo} to check",
                         **({"weights": weights} if weights is not None and len(weights) == todo else {}))
        # the states go to the guest one claim at a time (crash_next); labs with cores to spare may help
        self.share = Share(self.run_dir, to_check(listing["states"]), self.helpers,
                           float(args.get("watchdog") or 600.0))
        self.claims = self.share.claims
        self._checked_file = Path(str(args.get("checked") or "checked.jsonl")).name
        return {k: v for k, v in listing.items() if k != "states"} | {"states": len(listing["states"])}

    def crash_switch(self, args: dict) -> Any:
        reply = self._log().crash_switch(str(args["state"]))
        # a failed state's twin is no state of the listing; a state served `again` was counted
        counted = not (str(args["state"]).endswith(UNDAMAGED) or args.get("again"))
        self._states[0] += counted
        self._served(self._states[0], args, progress=counted)
        return reply

    def crash_next(self, args: dict) -> Any:
        """The next state no lab has taken, served (or {"done": true}); a state the device
        cannot serve is the guest's to record as such."""
        if self.claims is None:
            raise FlashbedError("no crash states were listed in this cell: nothing to take")
        self.taking[1:] = [time.monotonic()]
        if len(self.taking) == 1:
            self.taking.insert(0, self.taking[0])
        st = self.current_state = self.claims.take()
        if st is None:
            return {"done": True}
        try:
            reply = self._log().crash_switch(str(st["id"]))
        except FlashbedError as e:
            return {"state": st, "error": str(e)}
        finally:
            self._served(self.claims.cursor, args)
        return {**reply, "state": st}  # the switch's answer, and which state it is

    def crash_check(self, args: dict) -> Any:
        """The filesystem's checker on the crash state now served, run here (check.py)."""
        return check.run_checker(str(args["cmd"]), self._log().state_path(), float(args["timeout"]),
                                 now=args.get("now"))

    def user_check(self, args: dict) -> Any:
        """The user's check on a copy of the recovered directory, run here in a sandbox (usercheck.py)."""
        state = str((self.current_state or {}).get("id", ""))
        return usercheck.answer(args, self.run_dir, self.verdicts, self.cell, state)

    def _served(self, done: int, args: dict, progress: bool = True) -> None:
        """A state is being checked: the cell's progress (not for a twin), and the watchdog on the lab."""
        if progress and self.on_part is not None and self._states[1]:
            self.on_part(min(done, self._states[1]), self._states[1], "crash states")
        if args.get("watchdog") and self.watchdog is not None:
            # a lab stuck on this state (its kernel, not one command) is killed if it
            # asks for no other state in time: the study counts a hang
            self.watchdog(float(args["watchdog"]))

    def settle(self, last: BootResult | None) -> None:
        """After the cell's boots: helpers of its crash states finish (share.Share.settle)."""
        if self.share is None or last is None:
            return
        self.share.settle(end_record(last, self, self.share.claims, self.run_dir / self._checked_file))
