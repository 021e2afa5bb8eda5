"""The space a filesystem leaves for files on a device of a given size, as its own mkfs makes it:
checked at the edge, so a study's file that cannot fit is one line before the run, not ENOSPC in
the lab at a size the plan accepted.

f2fs is the one whose share varies most with the device: on small devices its mkfs sets aside a
third and more for over-provisioning and garbage collection (35 % on 64 MiB, where a 64 MiB device
leaves 16 MiB for files). Its mkfs runs here on a sparse file of the device's size, with the
variant's own options, and its checkpoint's user block count says what is left. Other filesystems
keep the study's own margin (Study.min_capacity).
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

DEV = "${FLASHBED_DEV}"  # the guest's device, in a variant's mkfs command
F2FS_BLOCK = 4096
_USER_BLOCKS = re.compile(r"user_block_count\s+\[0x\s*[0-9a-fA-F]+\s*:\s*(\d+)\]")


def usable(variant: Any, capacity: int) -> int | None:
    """Bytes `variant` leaves for files on `capacity` bytes; None when not known here (another
    filesystem, a tool missing, a mkfs that refuses the size: the lab says so itself)."""
    cmds = variant.make_cmds()
    if variant.base.fstype != "f2fs" or len(cmds) != 1 or DEV not in cmds[0]:
        return None
    return _f2fs(cmds[0], capacity)


def fits(variant: Any, capacity: int, size: int) -> int | None:
    """None if `size` bytes of files surely fit (below SURE_SHARE of the device: no mkfs run), else
    what `variant` leaves on `capacity` (None too when not known)."""
    if size <= capacity * SURE_SHARE:
        return None
    return usable(variant, capacity)


# f2fs leaves a quarter of its smallest device (64 MiB) for files, more on larger ones: a file
# under a fifth of the device fits without asking its mkfs
SURE_SHARE = 0.2


@functools.lru_cache(maxsize=64)
def _f2fs(cmd: str, capacity: int) -> int | None:
    if not (shutil.which("mkfs.f2fs") and shutil.which("dump.f2fs")):
        return None
    with tempfile.TemporaryDirectory(prefix="flashbed-space-") as tmp:
        img = Path(tmp) / "device"
        with open(img, "wb") as f:
            f.truncate(capacity)
        try:
            made = subprocess.run(shlex.split(cmd.replace(DEV, shlex.quote(str(img)))), capture_output=True,
                                  timeout=120)
            if made.returncode != 0:
                return None
            out = subprocess.run(["dump.f2fs", "-d", "1", str(img)], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return None
    m = _USER_BLOCKS.search(out.stdout)
    return int(m.group(1)) * F2FS_BLOCK if m else None
