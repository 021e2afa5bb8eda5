"""Stopping flashbed (Ctrl-C, SIGTERM): no new lab starts, and every running one is killed.

A lab implementation registers how it stops its running labs (`on_stop`); the executors
call `kill_all()` on an interrupt; a cell that would boot its next lab asks `stopping()`
first, and a device session that would hold a device does too.
"""

from __future__ import annotations

import threading
from typing import Callable

from .errors import FlashbedError

# set by kill_all(): no new lab starts in this process (a cell of many boots
# would otherwise boot its next lab right after its current one was killed)
_STOPPING = threading.Event()
# what each lab implementation stops on kill_all() (UML: its live kernels)
_STOPPERS: list[Callable[[], None]] = []


class Stopping(FlashbedError):
    """flashbed is stopping (Ctrl-C): no more labs."""


def stopping() -> bool:
    """Whether kill_all() was called: no new lab will start."""
    return _STOPPING.is_set()


def on_stop(stopper: Callable[[], None]) -> None:
    """Have kill_all() call `stopper` (a lab implementation's way to stop its running labs)."""
    _STOPPERS.append(stopper)


def kill_all() -> None:
    _STOPPING.set()
    for stop in list(_STOPPERS):
        stop()
