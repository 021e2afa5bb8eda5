"""A filesystem checker run on the host on the crash state the emulator serves.

The crash-state loop checks thousands of states, each with the filesystem's checker after
the recovery (`fsck.f2fs -f --dry-run`, `e2fsck -f -n`). In the lab kernel, starting that
program and each of its system calls (fsck.f2fs makes about 2 000 for a 64 MiB device) cost
several times what they cost on the host, and for f2fs the check was most of a state's time.
The emulator serves the state a second way, as a read-only file through the host's page
cache (its `state` file, the state's own writes since the switch included), and the host
runs the same program on it: the lab's root is the host's, so the same binary and version,
on the same bytes (a unit the cut damaged reads as EIO either way). Only the check runs
here; a repair, which writes, runs in the lab as before.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..lab.guest.guestlib import run_shell

OUT_KEPT = 4000  # characters of the checker's output kept (as a guest command's)


def run_checker(cmd: str, state: Path, timeout: float, now: int | None = None) -> dict:
    """`cmd` (its device: ${FLASHBED_DEV}) on the state file, as the lab runs a command
    (guestlib.run_shell: killed with its group at `timeout`; a plain command without the shell),
    in / (a checker writes nothing of its own): a record as the guest's run() gives, its status
    as a string. `now`: the lab's present (s since the epoch), for e2fsck, which holds a
    superblock's times against it (E2FSCK_TIME): in virtual time the lab's clock is not the
    host's, and a mount time a day ahead of the host's would be an error here and none in the lab."""
    env = dict(os.environ, FLASHBED_DEV=str(state), **({"E2FSCK_TIME": str(int(now))} if now is not None else {}))
    status, rc, out, err, seconds = run_shell(cmd, timeout, cwd="/", env=env, plain=True)
    return {"cmd": cmd, "status": status.value, "rc": rc, "seconds": round(seconds, 6),
            "out": (out + err).decode("utf-8", "replace")[-OUT_KEPT:], "on_host": True}
