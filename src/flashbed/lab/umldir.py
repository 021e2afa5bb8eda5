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

import os
import shutil
import tempfile
import threading
from pathlib import Path

PREFIX = "flashbed-uml-"
MARK = "flashbed-owner"  # "flashbed PID START": the process that made it (START: its start time in ticks)
_swept = threading.Event()  # once per process: what earlier flashbeds left


def _start_time(pid: int) -> str | None:
    """A process's start time since boot (ticks: /proc/PID/stat field 22), None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _mark() -> str:
    return f"flashbed {os.getpid()} {_start_time(os.getpid())}\n"


def base() -> Path:
    return Path(tempfile.gettempdir())


def make() -> Path:
    """A new boot's UML directory, marked (after a sweep of earlier ones, once per process)."""
    if not _swept.is_set():
        _swept.set()
        sweep()
    d = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base()))
    (d / MARK).write_text(_mark())
    return d


def remove(d: Path) -> None:
    shutil.rmtree(d, ignore_errors=True)


def leftover(d: Path) -> bool:
    """Whether `d` is a UML directory a flashbed made whose maker is gone (safe to remove)."""
    try:
        st = d.lstat()
        words = (d / MARK).read_text().split()
    except OSError:
        return False
    if not d.name.startswith(PREFIX) or not d.is_dir() or d.is_symlink() or st.st_uid != os.geteuid():
        return False
    if len(words) != 3 or words[0] != "flashbed" or not words[1].isdigit():
        return False
    return _start_time(int(words[1])) != words[2]  # gone, or its pid taken by another process since


def sweep(where: Path | None = None) -> list[Path]:
    """Removes the UML directories earlier flashbeds left (their makers gone); returns them."""
    out = []
    for d in (where or base()).glob(PREFIX + "*"):
        if leftover(d):
            remove(d)
            out.append(d)
    return out
