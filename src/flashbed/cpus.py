"""One host CPU per lab: a lab kernel, its guest processes and its emulator share it.

A user-mode Linux guest syscall or page fault is a ptrace stop: the guest process
stops and the UML kernel process wakes. When the two run on different host CPUs,
each such hand-over is a cross-CPU wake-up, which on a virtual machine's vCPUs
is expensive. Pinning a lab and its emulator to one CPU keeps every hand-over
local. `flashbed lab bench-boot --compare-pinning` measures the effect. A lab
with N guest vCPUs (an SMP lab kernel) leases N CPUs.

CPUs are leased host-wide with flock()ed files, so labs of separate flashbed
processes spread over the CPUs instead of piling onto one. A lease is inherited
by everything started in the same thread while it is held (emulator, labs).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from pathlib import Path
from typing import Iterable, Iterator

from .errors import FlashbedError
from .locks import try_lock
from .paths import cache_dir

_current: contextvars.ContextVar[tuple[int, ...] | None] = contextvars.ContextVar("flashbed_cpu", default=None)
_off: contextvars.ContextVar[bool] = contextvars.ContextVar("flashbed_cpu_off", default=False)


def enabled() -> bool:
    # FLASHBED_PIN=0 leaves the scheduler alone
    return (os.environ.get("FLASHBED_PIN", "1") != "0" and hasattr(os, "sched_setaffinity")
            and not _off.get())


@contextlib.contextmanager
def unpinned() -> Iterator[None]:
    """Labs started in this thread meanwhile run wherever the scheduler puts them
    (the benchmark's comparison)."""
    token = _off.set(True)
    try:
        yield
    finally:
        _off.reset(token)


def current() -> int | None:
    """The (first) CPU leased in this thread, if any."""
    held = _current.get()
    return held[0] if held else None


def current_set() -> tuple[int, ...] | None:
    """Every CPU leased in this thread, if any."""
    return _current.get()


_MAX_SLOTS = 64  # labs per CPU before they stop being spread


def _lock_dir() -> Path:
    d = cache_dir() / "cpu-leases"
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextlib.contextmanager
def lease() -> Iterator[int | None]:
    """Hold one CPU for this thread's labs; re-entrant. Yields None when pinning is off."""
    with lease_set(1) as held:
        yield held[0] if held else None


def available() -> int:
    """Host CPUs flashbed may use (its affinity)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def check_count(n: int) -> None:
    """A lab with n vCPUs leases n host CPUs: refuse more than flashbed may use."""
    have = available()
    if n < 1 or n > have:
        raise FlashbedError(f"{n} guest vCPUs need {n} host CPUs; flashbed may use {have} here: "
                            f"ask for 1 to {have}")


@contextlib.contextmanager
def lease_set(n: int = 1) -> Iterator[tuple[int, ...] | None]:
    """Hold n distinct CPUs for this thread's labs; re-entrant (a holder of
    fewer leases the rest). Yields None when pinning is off.

    Each CPU has numbered slots; a lease takes the lowest free slot number on
    any CPU, so with more labs than CPUs they share the CPUs evenly instead of
    waiting.
    """
    check_count(n)
    held = _current.get()
    if (held is not None and len(held) >= n) or not enabled():
        yield held
        return
    have = list(held or ())
    cpus = sorted(os.sched_getaffinity(0))
    start = os.getpid() % len(cpus)
    order = cpus[start:] + cpus[:start]
    fds: list[int] = []
    where = _lock_dir()
    for slot in range(_MAX_SLOTS):
        for c in order:
            if len(have) == n:
                break
            if c in have:
                continue
            fd = try_lock(where / f"cpu{c}.{slot}.lock")
            if fd is not None:
                have.append(c)
                fds.append(fd)
        if len(have) == n:
            break
    for c in order:  # every slot taken: share the first CPUs unlocked
        if len(have) < n and c not in have:
            have.append(c)
    token = _current.set(tuple(have))
    try:
        yield tuple(have)
    finally:
        _current.reset(token)
        for fd in fds:
            os.close(fd)


def pin_child(cpu: int | Iterable[int] | None) -> None:
    """For a preexec_fn: bind the child (and all it starts) to `cpu` (one or several)."""
    if cpu is not None:
        try:
            os.sched_setaffinity(0, {cpu} if isinstance(cpu, int) else set(cpu))
        except OSError:
            pass  # a CPU taken away by a cgroup change: run unpinned
