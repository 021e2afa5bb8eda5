"""Progress lines for long work: done/total, current item, elapsed, ETA."""

from __future__ import annotations

import sys
import time


def format_duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(round(seconds)), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


class Progress:
    """Counts finished items and prints one line per event on stderr."""

    def __init__(self, total: int, what: str = "cells", stream=None):
        self.total = total
        self.done = 0
        self.what = what
        self.started = time.monotonic()
        self.stream = stream or sys.stderr

    def eta(self) -> float | None:
        if self.done == 0:
            return None
        elapsed = time.monotonic() - self.started
        return elapsed / self.done * (self.total - self.done)

    def line(self, current: str = "") -> str:
        elapsed = time.monotonic() - self.started
        eta = self.eta()
        eta_s = "?" if eta is None else format_duration(eta)
        cur = f" | {current}" if current else ""
        return f"[{self.done}/{self.total} {self.what}] elapsed {format_duration(elapsed)} ETA {eta_s}{cur}"

    def start(self, current: str) -> None:
        print(self.line(f"running {current}"), file=self.stream, flush=True)

    def finish(self, current: str, headline: str) -> None:
        self.done += 1
        print(self.line(f"{current}: {headline}"), file=self.stream, flush=True)
