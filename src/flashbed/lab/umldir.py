"""The lab's UML directory (`uml_dir=`): where UML keeps a boot's pid file and management socket.

Without it UML makes `~/.uml/<umid>/` and removes it only when the kernel halts cleanly: a lab
killed (Ctrl-C, SIGTERM, SIGKILL of flashbed, which takes its labs with it) leaves one behind,
hundreds after a day of tests. Each boot gets a directory of its own in the temporary directory
(short: the socket's path must fit a Unix socket address, which a run's log directory may not),
marked as flashbed's with the pid and start time of the process that made it; the boot removes it
on every exit path it lives through, and the next boot of any flashbed removes those whose maker
is gone. Only a directory of flashbed's name, holding flashbed's mark, owned by this user, whose
maker is no longer running, is ever removed: never another program's `~/.uml` entries.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

from .. import owner

PREFIX = "flashbed-uml-"
MARK = owner.MARK
_swept = threading.Event()  # once per process: what earlier flashbeds left


def base() -> Path:
    """The system's temporary directory, not the command's own (scratch.py): a killed flashbed's
    root is swept whole, and its UML directory must be found by name beside it all the same."""
    from ..scratch import system_tmp
    return system_tmp()


def make() -> Path:
    """A new boot's UML directory, marked (after a sweep of earlier ones, once per process)."""
    if not _swept.is_set():
        _swept.set()
        sweep()
    d = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base()))
    owner.mark(d)
    return d


def remove(d: Path) -> None:
    shutil.rmtree(d, ignore_errors=True)


def leftover(d: Path) -> bool:
    """Whether `d` is a UML directory a flashbed made whose maker is gone (safe to remove)."""
    return owner.left_behind(d, PREFIX)


def sweep(where: Path | None = None) -> list[Path]:
    """Removes the UML directories earlier flashbeds left (their makers gone); returns them."""
    out = []
    for d in (where or base()).glob(PREFIX + "*"):
        if leftover(d):
            remove(d)
            out.append(d)
    return out
