"""Run a flashbed command where only one directory is writable (issue 28's sandboxed fuzz).

`run(argv, writable, ...)` forks; the child enters a private mount namespace (unshare(2):
as root a mount namespace alone, else a user namespace too), makes every mount read-only
(mount_setattr with AT_RECURSIVE: /, /tmp, /dev, /dev/shm, /proc, /sys and the rest) and
bind-mounts `writable` back read-write, then runs `flashbed.cli.main(argv)` there (flashbed
already imported: a case costs a fork, not an interpreter). A write anywhere else fails with
EROFS, which the command would have to say: the fuzz refuses any "Read-only file system" it
sees. Device nodes are the exception the kernel makes (a read-only mount does not stop a
write to a block device): the canary loop device beside the sandbox is hashed after every case.
"""

from __future__ import annotations

import ctypes
import os
import signal
import struct
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_BIND, MS_REMOUNT, MS_REC, MS_PRIVATE = 0x1000, 0x20, 0x4000, 1 << 18
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (the generic syscall table)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


@dataclass(frozen=True)
class Outcome:
    code: int  # the command's exit code; -N killed by signal N; 124 over the time limit
    out: str
    err: str
    seconds: float


def _ok(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def available() -> str:
    """'' when a sandbox can be made here, else why not."""
    pid = os.fork()
    if pid == 0:
        try:
            _enter(Path("/"), probe=True)
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return "" if os.waitstatus_to_exitcode(status) == 0 else "no mount namespace with read-only mounts here"


def _enter(writable: Path, probe: bool = False) -> None:
    if os.geteuid() == 0:
        _ok(_libc.unshare(CLONE_NEWNS), "unshare")
    else:
        uid, gid = os.getuid(), os.getgid()
        _ok(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare")
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    # private first: nothing done here may reach the host's mounts
    _ok(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    attr = ctypes.create_string_buffer(struct.pack("QQQQ", MOUNT_ATTR_RDONLY, 0, 0, 0))
    _ok(_libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, attr, 32), "mount_setattr")
    if probe:
        return
    w = str(writable).encode()
    _ok(_libc.mount(w, w, None, MS_BIND | MS_REC, None), "bind the writable directory")
    _ok(_libc.mount(None, w, None, MS_REMOUNT | MS_BIND, None), "make it writable")


def run(argv: list[str], writable: Path, outputs: Path, env: dict[str, str] | None = None,
        limit: float = 60.0) -> Outcome:
    """`flashbed argv` in `writable` (its working directory and TMPDIR), the rest read-only;
    its stdout and stderr kept in `outputs` (outside the sandbox's reach: opened here)."""
    outputs.mkdir(parents=True, exist_ok=True)
    fo = os.open(outputs / "stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fe = os.open(outputs / "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    started = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 70
        try:
            os.setsid()
            os.dup2(fo, 1)
            os.dup2(fe, 2)
            # the test runner's capture may stand in for them: the command writes to the files
            sys.stdout = open(1, "w", buffering=1, closefd=False)
            sys.stderr = open(2, "w", buffering=1, closefd=False)
            _enter(writable)
            os.chdir(writable)
            os.environ.update(env or {})
            os.environ["TMPDIR"] = str(writable)
            import tempfile
            tempfile.tempdir = None
            from flashbed.cli import main
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
        except BaseException:
            traceback.print_exc()
            code = 71
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code if isinstance(code, int) else 70)
    os.close(fo)
    os.close(fe)
    deadline = started + limit
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            code = 124
            break
        time.sleep(0.002)
    read = lambda name: (outputs / name).read_text(errors="replace")  # noqa: E731
    return Outcome(code, read("stdout"), read("stderr"), time.monotonic() - started)
