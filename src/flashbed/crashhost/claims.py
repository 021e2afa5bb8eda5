"""Which lab checks which of a cell's crash states: a claim per state, a file created with O_EXCL
in the cell's directory (claims/<index>), so on one machine or on a shared filesystem each state
is taken by exactly one lab (share.py says who the labs are)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..lab.guest.crashstates import to_check

CLAIMS = "claims"


class Claims:
    """Which lab checks which of a cell's planned states: `take` creates claims/<index> with
    O_EXCL, so each state goes to exactly one lab. Every lab walks the states in order, so all
    states before a lab's cursor have been taken (by someone)."""

    def __init__(self, root: Path, states: list[dict], owner: str):
        self.root = root
        self.states = states
        self.owner = owner
        self.cursor = 0
        root.mkdir(parents=True, exist_ok=True)

    def take(self) -> dict | None:
        """The next state no lab has taken, now this lab's; None when none is left (or a lab
        stopped on a hung state)."""
        if self.stopped():
            return None
        while self.cursor < len(self.states):
            i = self.cursor
            self.cursor += 1
            try:
                fd = os.open(self.root / f"{i:06d}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as f:
                f.write(self.owner)
            return self.states[i]
        return None

    def left(self) -> bool:
        """Some state is still to be taken (the last one is taken last)."""
        return bool(self.states) and not self.stopped() and not self.closed() and \
            not (self.root / f"{len(self.states) - 1:06d}").exists()

    def stop(self) -> None:
        (self.root / "stop").touch()

    def stopped(self) -> bool:
        return (self.root / "stop").exists()

    def close(self) -> None:
        (self.root / "closed").touch()

    def closed(self) -> bool:
        return (self.root / "closed").exists()


def planned(run_dir: Path, states_file: str) -> list[dict]:
    """The states a cell's labs check (the host's plan, plan.py), in listing order."""
    return to_check(json.loads((run_dir / states_file).read_text())["states"])
