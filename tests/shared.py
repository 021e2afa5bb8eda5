"""What the test suite's processes make once per test run and share read-only: the report tests'
generated runs, the probe's measure of the lab's own latency. pytest-xdist's workers each made
their own, seconds of CPU each. tests/conftest.py names the directory (SHARED_ENV, in the run's
base temporary directory, which pytest removes with its old ones); a process outside the suite
gets a directory of its own, removed at exit."""

from __future__ import annotations

import fcntl
import functools
import os
from pathlib import Path
from typing import Callable

SHARED_ENV = "FLASHBED_TEST_SHARED"


def made_once(name: str, make: Callable[[Path], None]) -> Path:
    """The shared `name`, made by `make(path)` by the first process to ask, under a lock; the
    others wait for it, then read it."""
    root = Path(os.environ.get(SHARED_ENV) or _own_dir())
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / f"{name}.done"
        if not done.exists():
            make(root / name)
            done.write_text("")
    return root / name


@functools.cache
def _own_dir() -> Path:
    import atexit
    import shutil
    import tempfile
    tmp = Path(tempfile.mkdtemp(prefix="flashbed-test-shared-"))
    atexit.register(shutil.rmtree, tmp, True)
    return tmp
