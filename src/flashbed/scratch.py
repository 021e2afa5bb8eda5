"""One temporary directory per flashbed process, so that nothing of it is left in /tmp.

Every temporary file and directory flashbed makes (tempfile's, its tools' through TMPDIR: an
overlay, a probe's preset, a replayed image, an emulator's socket or FUSE mount of `lab exec`)
goes under `flashbed-tmp-XXXXXX/` in the system's temporary directory, marked with the pid and
start time of its process (owner.py). The process removes it when the command ends, however it
ends short of SIGKILL; the next flashbed removes those whose process is gone, a FUSE mount left in
one unmounted first (its emulator died with flashbed). Directories that must outlive a killed
process's own sweep keep their own names and sweeps in the system's temporary directory: the lab's
UML directory (lab/umldir.py) and a board's SSH control directory (lab/ssh.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from . import owner

PREFIX = "flashbed-tmp-"
_outer: str | None = None  # while a root is in use: the temporary directory it was made in


def system_tmp() -> Path:
    """The system's temporary directory (TMPDIR's, as the command found it: where the roots, UML
    and SSH directories live), also while a root stands in for it."""
    return Path(_outer or tempfile.gettempdir())


def _mounts_under(root: Path) -> list[str]:
    """Mount points inside `root` (/proc/self/mounts), deepest first."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    top = str(root).rstrip("/") + "/"
    points = [p.replace("\\040", " ") for line in lines if len(f := line.split()) > 1 and (p := f[1])]
    return sorted((p for p in points if p.startswith(top)), key=len, reverse=True)


def _remove(root: Path) -> None:
    for point in _mounts_under(root):  # a FUSE file whose emulator is gone: lazily, as the session does
        for tool in ("fusermount3", "fusermount", "umount"):
            if shutil.which(tool):
                args = [tool, "-u", "-z", point] if tool.startswith("fuser") else [tool, "-l", point]
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    if subprocess.run(args, capture_output=True, timeout=30).returncode == 0:
                        break
    shutil.rmtree(root, ignore_errors=True)


def sweep(where: Path | None = None) -> list[Path]:
    """Removes the roots of flashbed processes that are gone; returns them."""
    out = []
    for d in (where or system_tmp()).glob(PREFIX + "*"):
        if owner.left_behind(d, PREFIX):
            _remove(d)
            out.append(d)
    return out


@contextlib.contextmanager
def root() -> Iterator[Path | None]:
    """This command's temporary root: tempfile's directory and its tools' TMPDIR while it runs
    (None where the system's temporary directory takes nothing: a read-only one; the command
    then writes there no more than before)."""
    global _outer
    base = system_tmp()
    try:
        sweep(base)
        d = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))
    except OSError:
        yield None
        return
    try:
        owner.mark(d)
    except OSError:
        shutil.rmtree(d, ignore_errors=True)
        yield None
        return
    old_dir, old_env, old_outer = tempfile.tempdir, os.environ.get("TMPDIR"), _outer
    tempfile.tempdir, os.environ["TMPDIR"], _outer = str(d), str(d), str(base)
    try:
        yield d
    finally:
        tempfile.tempdir, _outer = old_dir, old_outer
        if old_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_env
        _remove(d)
