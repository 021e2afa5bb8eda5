"""Progress lines for long work: done/total, current item, elapsed, ETA.

The ETA weighs items by their expected work, not by their count: a crash-state cell of 4 000
states is not one cell's worth of a mkfs cell. An item that reports its progress in its own
unit (`part`: crash states, boots, passes) is projected from its own rate in that unit; an
item not started (or not yet reporting) is expected to take what the finished items of its
kind took (its study; failing that, what a running one of its kind is projected to take);
the remaining work is shared by the run's slots (labs at once), and no sooner than the
longest running item's own end. Without any measure yet, the ETA is "?".

Units need not cost alike: a crash state's check reads what was acknowledged before it, so
late states cost more than early ones and a constant rate promises too early an end. An
item that gives each unit a weight (its cost driver: for crash states, the acknowledgements
before the state) is projected with time = a * units + b * weight, fitted (least squares,
both terms non-negative) to its own progress so far.
"""

from __future__ import annotations

import functools
import itertools
import statistics
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

RATE_AFTER = 8  # units done (or RATE_SECONDS) before an item's own rate is trusted
RATE_SECONDS = 15.0


def format_duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(round(seconds)), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


@dataclass
class _Units:
    """A running item's progress in its own unit, from its first report on."""

    what: str
    total: int
    done: int
    first_done: int
    first_at: float
    note: str = ""  # said once its rate is known (e.g. how many crash states were found)
    said: bool = False
    weights: tuple[float, ...] = ()  # per unit, in order: what its cost grows with (may be empty)
    seen: list[tuple[int, float]] = field(default_factory=list)  # (units done, when), one per report

    def rate(self, now: float) -> float | None:
        """Units per second since the first report, once enough of them passed."""
        n, dt = self.done - self.first_done, now - self.first_at
        if n <= 0 or dt <= 0 or (n < RATE_AFTER and dt < RATE_SECONDS):
            return None
        return n / dt

    def left(self, now: float) -> float | None:
        r = self.rate(now)
        if r is None:
            return None
        fit = self._fit() if len(self.weights) == self.total else None
        if fit is not None:
            a, b = fit
            done = min(self.done, self.total)
            return a * (self.total - done) + b * (self._cum[self.total] - self._cum[done])
        return max(0, self.total - self.done) / r

    @functools.cached_property
    def _cum(self) -> list[float]:
        """The weights' running sums (_cum[n]: the first n units'); the weights never change."""
        return list(itertools.accumulate(self.weights, initial=0.0))

    def _fit(self) -> tuple[float, float] | None:
        """(a, b) of seconds = a * units + b * weight over the reports since the first, both
        >= 0 (a negative one: the other alone); None without two distinct reports."""
        cum = self._cum
        pts = [(n - self.first_done, cum[n] - cum[self.first_done], t - self.first_at)
               for n, t in self.seen if n > self.first_done]
        if len({p[0] for p in pts}) < 2:
            return None
        sxx = sum(x * x for x, _, _ in pts)
        syy = sum(y * y for _, y, _ in pts)
        sxy = sum(x * y for x, y, _ in pts)
        sxt = sum(x * t for x, _, t in pts)
        syt = sum(y * t for _, y, t in pts)
        det = sxx * syy - sxy * sxy
        if det > 1e-9 * max(1.0, sxx * syy):
            a, b = (syy * sxt - sxy * syt) / det, (sxx * syt - sxy * sxt) / det
            if a >= 0 and b >= 0:
                return a, b
        # one term alone: units (a constant cost) or weight, whichever fits better
        a_only = sxt / sxx if sxx else 0.0
        b_only = syt / syy if syy else 0.0
        err_a = sum((t - a_only * x) ** 2 for x, _, t in pts)
        err_b = sum((t - b_only * y) ** 2 for _, y, t in pts) if syy else float("inf")
        return (max(0.0, a_only), 0.0) if err_a <= err_b else (0.0, max(0.0, b_only))


class Progress:
    """Counts finished items and prints one line per event on stderr."""

    def __init__(self, total: int, what: str = "cells", stream=None, every: float = 30.0,
                 kinds: dict[str, str] | None = None, slots: int = 1):
        self.total = total
        self.done = 0
        self.what = what
        self.started = time.monotonic()
        self.stream = stream or sys.stderr
        self.every = every  # seconds between progress lines from inside one item
        self.kinds = dict(kinds or {})  # item -> its kind (a cell's study): items of a kind take alike
        self.slots = max(1, slots)  # items at once (the executor says)
        self._part: dict[str, float] = {}  # running item -> fraction done
        self._said: dict[str, float] = {}
        self._began: dict[str, float] = {}  # running item -> when it started
        self._units: dict[str, _Units] = {}  # running item -> its progress in its own unit
        self._finished: set[str] = set()
        self._took: dict[str, list[float]] = defaultdict(list)  # kind -> seconds its finished items took
        self._lock = threading.Lock()

    def _kind(self, name: str) -> str:
        return self.kinds.get(name, "")

    def _expected(self, name: str, now: float) -> float | None:
        """What an item of this one's kind takes: the finished ones' median, else the projected
        total of a running one of its kind."""
        took = self._took.get(self._kind(name))
        if took:
            return statistics.median(took)
        for other, began in self._began.items():
            u = self._units.get(other)
            if other != name and self._kind(other) == self._kind(name) and u is not None:
                left = u.left(now)
                if left is not None:
                    return now - began + left
        return None

    def _left(self, name: str, now: float) -> float | None:
        """A running item's remaining seconds: its own rate, else its kind's expectation."""
        u = self._units.get(name)
        if u is not None and (left := u.left(now)) is not None:
            return left
        expected = self._expected(name, now)
        elapsed = now - self._began[name]
        if expected is not None and expected > elapsed:
            return expected - elapsed
        frac = self._part.get(name, 0.0)
        return elapsed / frac * (1 - frac) if frac > 0 else None

    def eta(self) -> float | None:
        now = time.monotonic()
        running = [self._left(n, now) for n in self._began]
        waiting = [self._expected(n, now) for n in self.kinds if n not in self._began and n not in self._finished]
        if self.kinds and None not in running and None not in waiting:
            work = sum(running) + sum(waiting)  # type: ignore[arg-type]
            return max(max(running, default=0.0), work / self.slots)  # type: ignore[type-var]
        # unknown kinds of work: finished items plus the finished part of running ones, alike
        done = self.done + sum(self._part.values())
        if done <= 0:
            return None
        elapsed = now - self.started
        return elapsed / done * (self.total - done)

    def line(self, current: str = "") -> str:
        elapsed = time.monotonic() - self.started
        eta = self.eta()
        eta_s = "?" if eta is None else format_duration(eta)
        cur = f" | {current}" if current else ""
        return f"[{self.done}/{self.total} {self.what}] elapsed {format_duration(elapsed)} ETA {eta_s}{cur}"

    def start(self, current: str) -> None:
        with self._lock:
            self._began[current] = time.monotonic()
        print(self.line(f"running {current}"), file=self.stream, flush=True)

    def finish(self, current: str, headline: str) -> None:
        with self._lock:
            began = self._began.pop(current, None)
            if began is not None:
                self._took[self._kind(current)].append(time.monotonic() - began)
            self._finished.add(current)
            self._part.pop(current, None)
            self._said.pop(current, None)
            self._units.pop(current, None)
            self.done += 1
            print(self.line(f"{current}: {headline}"), file=self.stream, flush=True)

    def part(self, current: str, done: int, total: int, what: str = "boots", note: str = "",
             weights: tuple[float, ...] | list[float] | None = None) -> None:
        """Item `current` is `done` of `total` `what` through; a line at most every `every` s.
        A `note` (what the item found, e.g. its crash states) is said once, with the item's
        expected time as soon as its own rate is known. `weights` (given once, one per unit):
        what each unit's cost grows with, for a truer ETA than a constant rate."""
        with self._lock:
            now = time.monotonic()
            self._said.setdefault(current, now)  # the start line was just printed
            self._part[current] = min(1.0, done / total) if total else 0.0
            u = self._units.get(current)
            if u is None or u.what != what or u.total != total:
                u = self._units[current] = _Units(what, total, done, done, now, note or (u.note if u else ""),
                                                  weights=tuple(weights) if weights else (u.weights if u else ()))
            u.done = done
            if not u.seen or u.seen[-1][0] != done:
                u.seen.append((done, now))
            if note:
                u.note = note
            if u.note and not u.said and (left := u.left(now)) is not None:
                u.said = True
                per = (now - u.first_at) / max(1, u.done - u.first_done)
                print(self.line(f"{current}: {u.note}; {per:.2f} s each so far: expected "
                                f"{format_duration(left)} more for it"), file=self.stream, flush=True)
            elif now - self._said[current] >= self.every and done < total:
                self._said[current] = now
                left = u.left(now)
                print(self.line(f"{current}: {done}/{total} {what}"
                                + (f" (its own ETA {format_duration(left)})" if left is not None else "")),
                      file=self.stream, flush=True)
