"""What the guest programs (agent.py, pcwork.py) share: the clock, atomic JSON
files and JSON-lines logs on the shared run directory, and a shell command with
a time limit. The host reads the logs with the same code.

Standard library only, like them: the guest sees the host's files, not
flashbed's environment. They run as `python3 -S -I`, which leaves their own
directory off sys.path, so each puts it back before importing this.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

if __package__:  # on the host, as flashbed.lab.guest.guestlib
    from .protocol import StepStatus
else:  # in the guest, from this directory
    from protocol import StepStatus


def now() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def write_json_atomic(path: str, data: dict, indent: int | None = None) -> None:
    """Written to a temporary name, synced, renamed: a reader never sees half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=indent)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_log(path: str) -> list[dict]:
    """The records of a JSON-lines log, up to a torn last line (the lab died
    while writing it); [] when there is no log."""
    recs = []
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            recs.append(json.loads(line))
        except ValueError:
            break
    return recs


def run_shell(cmd: str, timeout: float, cwd: str | None = None,
              env: dict[str, str] | None = None) -> tuple[StepStatus, int | None, bytes, bytes, float]:
    """`sh -c cmd` in its own session, killed with its group at `timeout`.

    Returns (status, rc, stdout, stderr, seconds); status is ok / failed /
    timeout, or hang when even SIGKILL does not end it within 5 s (a task stuck
    in the kernel, D state: then the lab itself hangs here).
    """
    started = now()
    proc = subprocess.Popen(["/bin/sh", "-c", cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    status = StepStatus.OK
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        status = StepStatus.TIMEOUT
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            status, out, err = StepStatus.HANG, b"", b""
    if status.ok and proc.returncode != 0:
        status = StepStatus.FAILED
    return status, proc.returncode, out, err, now() - started
