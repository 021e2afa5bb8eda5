"""Setup's long builds, each run by scripts/setup.sh as a job beside the others:

    python -m flashbed.setupjobs kernel [tests]   # the lab kernel(s)
    python -m flashbed.setupjobs boards           # the emulated boards' images (--tests only)

A job starts with Ctrl-C ignored (a shell's background command), so setup stops it with SIGTERM,
on which the build stops as on Ctrl-C (make and its compilers with it) and the job exits 143 without
a word; a build that fails says why in one line, `setup: WHAT: why`, exit 1.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass

from .boards import qemu
from .errors import FlashbedError
from .lab import kernel


def _kernels(args: list[str]) -> None:
    # the default kernel's time-travel build: every cell of make demo runs on it (virtual time, and
    # the cpu study with time travel off); the SMP build is made on first use, or here after it for
    # the tests (`tests`), whose suite boots it
    kernel.ensure_kernel(time_travel=True)
    if args == ["tests"]:
        kernel.ensure_kernel()


def _boards(args: list[str]) -> None:
    # the images tests/integration/test_qemu_board.py boots, built once into flashbed's cache under
    # QEMU (the Debian board's first boot configures every package under TCG: tens of minutes), so
    # that the suite never builds one while it runs
    for name in ("busybox", "debian"):
        qemu.build(qemu.RECIPES[name], say=lambda *_: None)


@dataclass(frozen=True)
class Job:
    what: str  # as its failure names it
    build: Callable[[list[str]], None]


JOBS = {"kernel": Job("lab kernel", _kernels), "boards": Job("emulated boards", _boards)}


def _stop(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in JOBS:
        sys.exit(f"setup: no job {' '.join(argv)!r}: give one of {', '.join(JOBS)}")
    job = JOBS[argv[0]]
    signal.signal(signal.SIGTERM, _stop)
    try:
        job.build(argv[1:])
    except KeyboardInterrupt:
        return 143
    except (FlashbedError, OSError) as e:
        sys.exit(f"setup: {job.what}: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
