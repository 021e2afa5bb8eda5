"""Where flashbed keeps things outside the repository."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator


def cache_dir() -> Path:
    """Per-user cache (built kernels): $FLASHBED_CACHE, else $XDG_CACHE_HOME/flashbed."""
    env = os.environ.get("FLASHBED_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flashbed"


def repo_root() -> Path:
    """The source tree this package runs from (an editable install)."""
    return Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def build_lock(out: Path, what: str) -> Iterator[None]:
    """Held while `what` is built into the cache directory `out` (one builder per key; a second
    waits, then finds it built). One line when the cache cannot be written: a build that is
    already there is read without this (a cache this user cannot write serves too)."""
    from .errors import FlashbedError
    try:
        out.mkdir(parents=True, exist_ok=True)
        lockf = open(out / ".lock", "w")
    except OSError as e:
        raise FlashbedError(f"{what} is not built, and its cache {out} cannot be written ({e.strerror}): set "
                            f"FLASHBED_CACHE to a directory you can write") from None
    with lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        yield
