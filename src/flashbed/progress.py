"""Progress lines for long work: done/total, current item, elapsed, ETA."""

from __future__ import annotations

import sys
import threading
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

    def __init__(self, total: int, what: str = "cells", stream=None, every: float = 30.0):
        self.total = total
        self.done = 0
        self.what = what
        self.started = time.monotonic()
        self.stream = stream or sys.stderr
        self.every = every  # seconds between progress lines from inside one item
        self._part: dict[str, float] = {}  # running item -> fraction done
        self._said: dict[str, float] = {}
        self._lock = threading.Lock()

    def eta(self) -> float | None:
        # finished items plus the finished part of running ones (a long
        # power-cut cell reports its boots)
        done = self.done + sum(self._part.values())
        if done <= 0:
            return None
        elapsed = time.monotonic() - self.started
        return elapsed / done * (self.total - done)

    def line(self, current: str = "") -> str:
        elapsed = time.monotonic() - self.started
        eta = self.eta()
        eta_s = "?" if eta is None else format_duration(eta)
        cur = f" | {current}" if current else ""
        return f"[{self.done}/{self.total} {self.what}] elapsed {format_duration(elapsed)} ETA {eta_s}{cur}"

    def start(self, current: str) -> None:
        print(self.line(f"running {current}"), file=self.stream, flush=True)

    def finish(self, current: str, headline: str) -> None:
        with self._lock:
            self._part.pop(current, None)
            self._said.pop(current, None)
            self.done += 1
            print(self.line(f"{current}: {headline}"), file=self.stream, flush=True)

    def part(self, current: str, done: int, total: int, what: str = "boots") -> None:
        """Item `current` is `done` of `total` through; a line at most every `every` s."""
        with self._lock:
            now = time.monotonic()
            self._said.setdefault(current, now)  # the start line was just printed
            self._part[current] = min(1.0, done / total) if total else 0.0
            if now - self._said[current] >= self.every and done < total:
                self._said[current] = now
                print(self.line(f"{current}: {done}/{total} {what}"), file=self.stream, flush=True)
