"""Which flashbed made a temporary directory, so that only flashbed's own leftovers are removed.

A directory flashbed makes outside a run (the lab's UML directory, an SSH control directory)
holds a mark: the pid and start time of the process that made it. A later flashbed removes it
only when that process is gone (its pid no longer running, or running another program started
at another time), the directory is of flashbed's name, holds the mark and belongs to this user.
"""

from __future__ import annotations

import os
from pathlib import Path

MARK = "flashbed-owner"  # the file: "flashbed PID START"


def start_time(pid: int) -> str | None:
    """A process's start time since boot (ticks: /proc/PID/stat field 22), None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def mark(d: Path) -> None:
    """Marks `d` as this process's."""
    (d / MARK).write_text(f"flashbed {os.getpid()} {start_time(os.getpid())}\n")


def left_behind(d: Path, prefix: str) -> bool:
    """Whether `d` is a directory named `prefix`..., marked by a flashbed that is gone, of this user."""
    try:
        st = d.lstat()
        words = (d / MARK).read_text().split()
    except OSError:
        return False
    if not d.name.startswith(prefix) or d.is_symlink() or not d.is_dir() or st.st_uid != os.geteuid():
        return False
    if len(words) != 3 or words[0] != "flashbed" or not words[1].isdigit():
        return False
    return start_time(int(words[1])) != words[2]
