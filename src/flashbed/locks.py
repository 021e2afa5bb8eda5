"""Exclusive locks on files that die with their holder (flock): a killed
flashbed never leaves one behind."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def try_lock(path: Path) -> int | None:
    """The open, locked descriptor of `path` (created if missing), or None when
    another holder has it. Closing the descriptor releases the lock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
