"""The guest programs as a lab mounts them: a copy of lab/guest whose bytecode the guest's own
interpreter compiled, under the names the guest sees (where labview mounts them), the same for every
boot.

The guest imports its modules from the tools mount, read-only. Its Python reads their bytecode from
`__pycache__` there when a valid one is there, else compiles them in memory. Mounting the checkout's
lab/guest gave it the host's `__pycache__`, which a host process writes when it first imports a guest
module: a boot before that compiled (page faults and system calls the CPU profile charges in virtual
time) and a boot after it did not, so in a fresh clone a power cut landed 8 us later in guest time in
the first run of a cell than in the next (tests/integration/test_virtual_time.py, under make test).
The host's bytecode also names the checkout's path, whose length the guest must never see
(labview.py). So a lab mounts this copy: the files of lab/guest, their bytecode compiled once by the
guest's interpreter with the guest's names, hash-based and unchecked (the copy never changes: its
directory is named by the hash of its contents and the interpreter), kept in flashbed's cache.
Each process that mounts a copy marks it used (its time); making a new copy removes those no process
has used for UNUSED_DAYS, so a change to lab/guest does not leave one more copy for good.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ..errors import FlashbedError
from ..paths import cache_dir
from .boundary import GUEST_DIR

GUEST_PYTHON = "/usr/bin/python3"  # the interpreter init.sh runs the agent with
UNUSED_DAYS = 30  # a copy no process has mounted for this long is removed when a new one is made


def _key(files: list[Path], at: str) -> str:
    """The copy's name: the guest interpreter's version and bytecode magic, where the guest mounts it,
    and each file's name, mode and bytes."""
    try:
        ver = subprocess.run([GUEST_PYTHON, "-S", "-I", "-c", "import sys, importlib.util; "
                              "print(sys.version, importlib.util.MAGIC_NUMBER.hex())"],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise FlashbedError(f"the lab's guest runs {GUEST_PYTHON}, which did not start ({e}): "
                            f"install python3") from None
    h = hashlib.sha256(ver + at.encode() + b"\0")
    for p in files:
        h.update(f"{p.name}\0{p.stat().st_mode & 0o777:o}\0{p.stat().st_size}\0".encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


@functools.cache
def tools_dir(at: str) -> Path:
    """The directory a lab mounts at `at` in the guest (made on first use, once per process)."""
    files = sorted(p for p in GUEST_DIR.iterdir() if p.is_file())
    out = cache_dir() / "guest" / _key(files, at)
    if out.is_dir():
        _used(out)
        return out
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    except OSError as e:
        raise FlashbedError(f"the lab's guest programs cannot be prepared in {out.parent} ({e.strerror}): set "
                            f"FLASHBED_CACHE to a directory you can write") from None
    try:
        for p in files:
            shutil.copy2(p, tmp / p.name)
        r = subprocess.run([GUEST_PYTHON, "-S", "-I", "-m", "compileall", "-q", "-l", "-d", at,
                            "--invalidation-mode", "unchecked-hash", str(tmp)], capture_output=True, text=True)
        if r.returncode != 0:
            last = (r.stdout + r.stderr).strip().splitlines()[-1:] or [f"exit {r.returncode}"]
            raise FlashbedError(f"compiling the lab's guest programs with {GUEST_PYTHON} failed: {last[0]}")
        tmp.chmod(0o755)
        try:
            os.rename(tmp, out)  # whole or not at all; another process may have made it meanwhile
        except OSError:
            if not out.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _prune(out)
    return out


def _used(copy: Path) -> None:
    try:
        os.utime(copy)
    except OSError:  # a cache someone else owns, read-only to us: its copies stay
        pass


def _prune(keep: Path) -> None:
    """Remove the copies beside `keep` unused for UNUSED_DAYS (another checkout's, an older version's)."""
    before = time.time() - UNUSED_DAYS * 86400
    for old in keep.parent.iterdir():
        try:
            if old != keep and not old.name.startswith(".") and old.is_dir() and old.stat().st_mtime < before:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
