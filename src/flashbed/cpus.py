"""One host CPU per lab: a lab kernel, its guest processes and its emulator share it.

A user-mode Linux guest syscall or page fault is a ptrace stop: the guest process
stops and the UML kernel process wakes. When the two run on different host CPUs,
each such hand-over is a cross-CPU wake-up, which on a virtual machine's vCPUs
is expensive. Pinning a lab and its emulator to one CPU keeps every hand-over
local. `flashbed lab bench-boot --compare-pinning` measures the effect.

CPUs are leased host-wide with flock()ed files, so labs of separate flashbed
processes spread over the CPUs instead of piling onto one. A lease is inherited
by everything started in the same thread while it is held (emulator, labs).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from pathlib import Path
from typing import Iterator

from .locks import try_lock
from .paths import cache_dir

_current: contextvars.ContextVar[int | None] = contextvars.ContextVar("flashbed_cpu", default=None)
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
    """The CPU leased in this thread, if any."""
    return _current.get()


_MAX_SLOTS = 64  # labs per CPU before they stop being spread


def _lock_dir() -> Path:
    d = cache_dir() / "cpu-leases"
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextlib.contextmanager
def lease() -> Iterator[int | None]:
    """Hold one CPU for this thread's labs; re-entrant. Yields None when pinning is off.

    Each CPU has numbered slots; a lease takes the lowest free slot number on
    any CPU, so with more labs than CPUs they share the CPUs evenly instead of
    waiting.
    """
    held = _current.get()
    if held is not None or not enabled():
        yield held
        return
    cpus = sorted(os.sched_getaffinity(0))
    start = os.getpid() % len(cpus)
    order = cpus[start:] + cpus[:start]
    fd = None
    cpu = order[0]
    where = _lock_dir()
    for slot in range(_MAX_SLOTS):
        for c in order:
            fd = try_lock(where / f"cpu{c}.{slot}.lock")
            if fd is not None:
                cpu = c
                break
        if fd is not None:
            break
    token = _current.set(cpu)
    try:
        yield cpu
    finally:
        _current.reset(token)
        if fd is not None:
            os.close(fd)


def pin_child(cpu: int | None) -> None:
    """For a preexec_fn: bind the child (and all it starts) to `cpu`."""
    if cpu is not None:
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError:
            pass  # a CPU taken away by a cgroup change: run unpinned
