"""The user's check run on the host, in a sandbox, on a copy of a recovered workload directory.

In the lab kernel every program the check starts costs about 10 ms (about 0.5 ms here), and a
check that starts one per record (a `dd` each) costs far more than the recovery it judges. The
lab hands the recovered directory over (trees.pack) and the check runs here, where nothing it does
may reach the host:

- new user, mount, PID, network, IPC and UTS namespaces (unshare(2)): root inside maps to the
  caller's own user outside, so it holds no privilege over anything of the host's;
- every mount of the host read-only (mount_setattr, recursively), a fresh /proc of the new PID
  namespace (read-only) and a /dev of its own (null, zero, full, random, urandom, tty only: a
  read-only mount does not stop a write to a device node);
- its own scratch: a tmpfs on /tmp (TMPDIR, HOME), and the copy of the directory on a tmpfs at the
  path the lab gives it ($FLASHBED_MNT, the working directory), read-only when the lab's was;
- the run directory as the lab names it ($FLASHBED_RUN), read-only, holding only what the check reads
  there: the staged check and $FLASHBED_ACKED (copies: no host path of the cell shows, so every cell's
  check sees the same, and a verdict may be shared between cells: verdicts.py);
- no network: the new network namespace has a loopback device only;
- the check itself one user namespace further down, so the mounts above are locked: its root can
  neither make them writable nor unmount them to see what they cover;
- a pids limit (`pids_limit`): a pids cgroup where one can be made, else RLIMIT_NPROC, which the
  kernel counts per user namespace (it does not hold the host's root: then only the time limit
  and the PID namespace bound a fork bomb, and `Ran.pids` says so);
- the lab's time limit; at it the check's process group is killed, and with the first process
  of its PID namespace every process in it: one that left the group (setsid) too.

A write outside the scratch fails with EROFS (the check's own words say so); a check over its
limit is a timeout; a fork bomb stays within its pids limit and dies with the namespace.

What is made once and what per check: starting a Python interpreter for each check cost more than
a short check itself, so the inside is a long-lived program (`python3 -S -I sandbox.py --serve`,
standard library only; one per process and pids limit, `Sandbox`): it enters its user namespace
(and network, IPC, UTS ones), makes the host's mounts read-only and its /dev once (`_base`), joins
its pids cgroup, and then forks one process per check that asks for it on its stdin. That process
takes its own process group and fresh mount, PID, network, IPC and UTS namespaces; the first
process of the PID namespace mounts its /proc, its scratch and the copy afresh (`_setup`), so
nothing one check writes or leaves running reaches the next. The check's processes are born in the
cgroup (moving a process into one costs milliseconds). The inside ends with its stdin (the host's
process), or with the host's process if that dies first.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import dataclasses
import json
import os
import resource
import select
import selectors
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 1 << 18
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1
SYS_MOUNT_SETATTR = 442  # the generic syscall table's number, the same on every architecture
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
PIDS = 256  # processes (and threads) the check may have at once
SCRATCH = "256m"  # tmpfs size of /tmp and of the copy's place (each)
KILL_WAIT = 5.0  # s after SIGKILL before a check that did not end is a hang
SETUP_FAILED = 125  # the inside's exit when the sandbox could not be made (its reason on the status pipe)
START_WAIT = 60.0  # s the inside may take to start, or to fork a check (a loaded host)
OUT_CAP = 1 << 20  # bytes of each of a check's outputs kept (its tail): far more than a verdict reads


@dataclass(frozen=True)
class Spec:
    """What the inside needs (it travels as JSON on its command line)."""

    cmd: str  # run as `sh -c cmd`, as the lab runs the check
    workdir: str  # the copy's path, as the lab's directory: the check's working directory and $FLASHBED_MNT
    env: dict[str, str]
    pack: str = ""  # the packed tree (trees.pack) unpacked at `workdir`; '' for an empty directory
    read_only: bool = False  # the lab's directory was mounted read-only
    visible: list[str] = field(default_factory=list)  # host directories kept visible (read-only) at their paths
    # host files copied into a read-only directory of their own at `view_at` (name -> host path): the run
    # directory as the lab's path shows it, the same for every cell (verdicts.py)
    view: dict[str, str] = field(default_factory=dict)
    view_at: str = ""
    nproc: int = 0  # RLIMIT_NPROC inside the new user namespace (0: none)
    scratch: str = SCRATCH
    uid: int = 0  # the caller's user and group outside, mapped to root inside
    gid: int = 0


@dataclass(frozen=True)
class Ran:
    """One sandboxed run. `status`: ok / failed / timeout / hang as a lab command's; `refused`: the
    sandbox could not run this check on this tree (the reason; the check then runs in the lab)."""

    status: str
    rc: int | None
    out: bytes
    err: bytes
    seconds: float
    pids: str  # how the number of its processes was bounded
    refused: str = ""
    peak: int | None = None  # the most processes it had at once (a pids cgroup's count; None: not counted)


# --- the host's side -------------------------------------------------------------------------

_CGROUP_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup")
_SEQ = [0]


def _own_cgroup_v2() -> str:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return line[3:].strip()
    except OSError:
        pass
    return ""


def _new_cgroup(limit: int) -> str:
    """A pids cgroup of this run's own with pids.max = `limit` ('' where none can be made): cgroup v1's
    pids hierarchy, or a child of this process's cgroup v2 whose parent hands the pids controller down."""
    _SEQ[0] += 1
    name = f"flashbed-check-{os.getpid()}-{_SEQ[0]}"
    v2 = _own_cgroup_v2().lstrip("/")
    for base in (_CGROUP_ROOTS[0], os.path.join(_CGROUP_ROOTS[1], v2), os.path.join(_CGROUP_ROOTS[2], v2)):
        path = os.path.join(base, name)
        try:
            os.mkdir(path)
        except OSError:
            continue
        try:
            Path(path, "pids.max").write_text(str(limit))
            return path
        except OSError:
            os.rmdir(path)
    return ""


def _end_cgroup(path: str) -> int | None:
    """Every process left in the cgroup killed, then the cgroup removed; the most it held at once."""
    if not path:
        return None
    try:
        peak: int | None = int(Path(path, "pids.peak").read_text())
    except (OSError, ValueError):
        peak = None
    for _ in range(200):
        try:
            Path(path, "cgroup.kill").write_text("1")  # cgroup v2: the whole group at once
        except OSError:
            try:
                for pid in Path(path, "cgroup.procs").read_text().split():
                    os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        try:
            os.rmdir(path)
            return peak
        except OSError:
            time.sleep(0.01)  # the killed are not reaped yet
    return peak


def pids_limit(cgroup: str, limit: int) -> str:
    """How the check's processes are bounded (Ran.pids)."""
    if cgroup:
        return f"pids cgroup (pids.max={limit})"
    if os.getuid() != 0:
        return f"RLIMIT_NPROC={limit} in its user namespace"
    return "none but the time limit and the PID namespace (as root, with no pids cgroup to make)"


class Sandbox:
    """One long-lived sandbox: its user namespace, the host's mounts read-only and its /dev made once
    (the inside program started once: `python3 -S -I sandbox.py --serve`); each check then a process it
    forks with fresh mount, PID, network, IPC and UTS namespaces, its own scratch, its own pids cgroup,
    killed with its process group. One check at a time."""

    def __init__(self, pids: int) -> None:
        self.pids = pids  # its pids cgroup's limit: the sandbox's three processes and the check's
        self.cgroup = ""
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self._buf = b""

    def _start(self) -> str:
        """The inside started ('' ) or why it could not be."""
        self._buf = b""
        # a pids cgroup of its own, which the inside joins first and every check's process is born in
        # (one move into a cgroup costs milliseconds; being born in one, nothing)
        self.cgroup = _new_cgroup(self.pids)
        ids = {"uid": os.getuid(), "gid": os.getgid(), "cgroup": self.cgroup}
        self.proc = subprocess.Popen([sys.executable or "python3", "-S", "-I", __file__, "--serve", json.dumps(ids)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        said = self._read(START_WAIT)
        if said is None or "refused" in said or "ready" not in said:
            self.close()
            return (said or {}).get("refused") or "the sandbox did not start"
        return ""

    def _send(self, what: dict) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(what) + "\n").encode())
        self.proc.stdin.flush()

    def _read(self, timeout: float) -> dict | None:
        """The inside's next line (None: none within `timeout` s, or it ended)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                with contextlib.suppress(OSError):
                    f.close()  # type: ignore[union-attr]
            self.proc = None
        _end_cgroup(self.cgroup)
        self.cgroup = ""

    def run(self, spec: Spec, timeout: float) -> Ran:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.close()
                if why := self._start():
                    return Ran("failed", None, b"", b"", 0.0, pids_limit("", self.pids),
                               refused=f"no sandbox here: {why}"[:300])
            try:
                return self._run(spec, timeout)
            except (OSError, ValueError) as e:  # the inside is gone: the next check starts another
                self.close()
                return Ran("failed", None, b"", b"", 0.0, pids_limit("", self.pids),
                           refused=f"the sandbox ended early: {e}"[:300])

    def _run(self, spec: Spec, timeout: float) -> Ran:
        cgroup = self.cgroup
        spec = dataclasses.replace(spec, nproc=0 if cgroup else self.pids)
        how = pids_limit(cgroup, self.pids)
        started = time.monotonic()
        try:
            self._send({"spec": asdict(spec)})
            forked = self._read(START_WAIT)
            if forked is None or "pid" not in forked:
                raise OSError(0, "no answer from the sandbox")
            pid = int(forked["pid"])  # the check's process group
            status, end = "ok", self._read(timeout)
            if end is None and self.proc is not None and self.proc.poll() is None:
                status = "timeout"
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)  # with the PID namespace's first process, all of it
                end = self._read(KILL_WAIT)
                if end is None:  # the inside could not reap it: this sandbox is done with
                    self.close()
                    status = "hang"
        finally:
            peak = self._sweep()
        seconds = time.monotonic() - started
        if end is None and status == "ok":
            raise OSError(0, "the sandbox's inside ended")
        end = end or {}
        out, err = (base64.b64decode(end.get(k, "")) for k in ("out", "err"))
        if "refused" in end:
            return Ran("failed", None, out, err, seconds, how, refused=end["refused"], peak=peak)
        if status != "ok":
            return Ran(status, None, out, err, seconds, how, peak=peak)
        if "exit" not in end and "signal" not in end:  # its first process died before it could say
            why = (err.decode("utf-8", "replace").strip().splitlines() or [f"{end.get('early')}"])[-1]
            return Ran("failed", None, out, err, seconds, how, refused=f"the sandbox ended early: {why}"[:300],
                       peak=peak)
        rc = end["exit"] if "exit" in end else 128 + end["signal"]  # as the shell says a signal killed it
        return Ran("ok" if rc == 0 else "failed", rc, out, err, seconds, how, peak=peak)


    def _sweep(self) -> int | None:
        """After a check: any process of its left in the cgroup killed (its PID namespace's end took
        them all already); the most processes the cgroup held at once (its checks' and the sandbox's)."""
        if not self.cgroup:
            return None
        keep = str(self.proc.pid) if self.proc is not None else ""
        with contextlib.suppress(OSError, ValueError):
            for pid in Path(self.cgroup, "cgroup.procs").read_text().split():
                if pid != keep:
                    os.kill(int(pid), signal.SIGKILL)
        try:
            return int(Path(self.cgroup, "pids.peak").read_text())
        except (OSError, ValueError):
            return None


_SANDBOXES: list[Sandbox] = []
_SANDBOXES_LOCK = threading.Lock()


def _idle_sandbox(pids: int) -> Sandbox:
    """A sandbox with this pids limit no check is using (one more when all are busy: labs of one process
    check side by side)."""
    with _SANDBOXES_LOCK:
        for box in _SANDBOXES:
            if box.pids == pids and not box.lock.locked():
                return box
        _SANDBOXES.append(Sandbox(pids))
        return _SANDBOXES[-1]


def cpu_seconds() -> float:
    """CPU time of the sandboxes' insides so far, their checks' included (what os.times() does not count
    for this process: the insides live on, and they reap the checks)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    with _SANDBOXES_LOCK:
        for box in _SANDBOXES:
            if box.proc is not None:
                with contextlib.suppress(OSError, ValueError, IndexError):
                    stat = Path(f"/proc/{box.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
                    total += sum(int(v) for v in stat[11:15])  # utime, stime, cutime, cstime
    return total / tick


@atexit.register
def close_all() -> None:
    with _SANDBOXES_LOCK:
        for box in _SANDBOXES:
            box.close()
        _SANDBOXES.clear()


def run(cmd: str, workdir: str, env: dict[str, str], timeout: float, *, pack: str = "", read_only: bool = False,
        visible: tuple[str, ...] = (), view: dict[str, str] | None = None, view_at: str = "", pids: int = PIDS,
        scratch: str = SCRATCH) -> Ran:
    """`sh -c cmd` in the sandbox, on the tree packed in `pack` at `workdir`, killed at `timeout` s; the
    host files `view` (name -> path) in a read-only directory at `view_at`."""
    spec = Spec(cmd=cmd, workdir=workdir, env=env, pack=pack, read_only=read_only, visible=list(visible),
                view=dict(view or {}), view_at=view_at, scratch=scratch, uid=os.getuid(), gid=os.getgid())
    return _idle_sandbox(pids).run(spec, timeout)


def available() -> str:
    """'' where the sandbox can run a check here, else why not (the check then runs in the lab)."""
    ran = run("true", "/mnt/flashbed-probe", {"PATH": "/usr/bin:/bin"}, 60.0)
    return ran.refused or ("" if ran.status == "ok" else f"a probe in it ended {ran.status}")


# --- the inside (a program of its own: standard library only) ---------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _ok(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _ok(_libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _map_root(uid: int, gid: int) -> None:
    """This process's user outside (`uid`, `gid` in the parent user namespace) is root inside."""
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")


def _read_only_everywhere() -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here reaches the host's mounts
    attr = ctypes.create_string_buffer(struct.pack("QQQQ", MOUNT_ATTR_RDONLY, 0, 0, 0))
    _ok(_libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, attr, 32), "mount_setattr / read-only")


def _bind_ro(fd: int, target: str) -> None:
    """The file or directory open as O_PATH `fd` (taken before a mount covered it) bound at `target`,
    read-only."""
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)


trees: Any = None  # the packed tree's format: the guest's trees.py, which the inside imports (serve)


def _base() -> None:
    """Once, in the sandbox's own user and mount namespaces: the host's mounts read-only, and a /dev of
    its own (read-only: a read-only mount does not stop a write to a device node). Every check's mount
    namespace starts as a copy of this one."""
    _read_only_everywhere()
    devices = {n: os.open(f"/dev/{n}", os.O_PATH) for n in DEVICES if os.path.exists(f"/dev/{n}")}
    _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=1m")
    for name, fd in devices.items():
        os.close(os.open(f"/dev/{name}", os.O_CREAT | os.O_WRONLY, 0o666))
        _mount(f"/proc/self/fd/{fd}", f"/dev/{name}", None, MS_BIND)
        os.close(fd)
    for name, to in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                     ("stderr", "/proc/self/fd/2")):
        os.symlink(to, f"/dev/{name}")
    os.mkdir("/dev/shm")
    _mount(None, "/dev", None, MS_REMOUNT | MS_NOSUID | MS_NOEXEC | MS_RDONLY, "mode=755,size=1m")


def _setup(spec: Spec) -> None:
    """In the check's new namespaces, as its PID namespace's first process: the mounts it sees (on
    _base's), its scratch and the copy fresh."""
    # what the tmpfs mounts below cover, opened first: the visible directories and the pack
    visible = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in spec.visible}
    pack = os.open(spec.pack, os.O_RDONLY) if spec.pack else -1
    view = {name: os.open(path, os.O_RDONLY) for name, path in spec.view.items()}
    # writable until the check's process has mapped its user namespace (it then makes it read-only)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={spec.scratch}")
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={spec.scratch}")
    place = os.path.dirname(spec.workdir.rstrip("/")) or "/"
    try:
        if place in ("/", "/tmp"):
            raise OSError(0, "")
        os.makedirs(place, exist_ok=True)  # a place under the scratch is made there
    except OSError:
        raise trees.NotPortable(f"the lab's directory {spec.workdir} has no place of its own here") from None
    _mount("tmpfs", place, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=755,size={spec.scratch}")
    os.mkdir(spec.workdir, 0o755)
    if pack >= 0:
        trees.unpack(f"/proc/self/fd/{pack}", spec.workdir)
        os.close(pack)
    if spec.read_only:
        _mount(spec.workdir, spec.workdir, None, MS_BIND)
        _mount(None, spec.workdir, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for path, fd in visible.items():
        if not os.path.isdir(path):  # covered by a tmpfs above (a run directory under /tmp): made again
            os.makedirs(path, exist_ok=True)
        _bind_ro(fd, path)
        os.close(fd)
    if spec.view_at:
        _view(spec.view_at, view, spec.scratch)


def _view(at: str, files: dict[str, int], scratch: str) -> None:
    """The files open as `files` (name -> fd) copied, with their permission bits, into a read-only tmpfs at
    `at`; where `at` cannot be made on the host's read-only tree, a tmpfs on its parent holds it."""
    if not os.path.isdir(at):
        try:
            os.makedirs(at)
        except OSError:
            place = os.path.dirname(at.rstrip("/"))
            if place in ("", "/") or not os.path.isdir(place):
                raise trees.NotPortable(f"the lab's run directory {at} has no place of its own here") from None
            _mount("tmpfs", place, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
            os.makedirs(at)
    _mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=755,size={scratch}")
    for name, fd in files.items():
        mode = os.fstat(fd).st_mode & 0o7777
        out = os.open(os.path.join(at, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            while chunk := os.read(fd, 1 << 20):
                os.write(out, chunk)
        finally:
            os.close(out)
            os.close(fd)
        os.chmod(os.path.join(at, name), mode)
    _mount(None, at, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _check(spec: Spec, status_fd: int) -> None:
    """The check's own process: one user namespace further down (the mounts above are locked there),
    its own session, then `sh -c cmd`. Never returns."""
    try:
        os.close(status_fd)
        uid, gid = os.getuid(), os.getgid()
        _ok(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare (the check's own user namespace)")
        _map_root(uid, gid)
        # /proc read-only from here on (its sysctls and sysrq-trigger are the host's kernel's), and no
        # capability that could make it writable again
        _mount(None, "/proc", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        _keep_only_file_caps()
        os.setsid()
        os.chdir(spec.workdir)
        os.execve("/bin/sh", ["/bin/sh", "-c", spec.cmd], spec.env)
    except BaseException as e:  # noqa: BLE001 - said as a shell says a command it could not start
        os.write(2, f"flashbed sandbox: {e}\n".encode())
    os._exit(127)


# capabilities the check keeps (in its own user namespace): what root in the lab has over files and its
# own processes (a file of mode 000 reads; chmod, chown and kill of its own); none to mount or to load
CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID, CAP_KILL, CAP_SETGID, CAP_SETUID = range(8)
KEPT_CAPS = (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID, CAP_KILL, CAP_SETGID,
             CAP_SETUID)
PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 24, 28, 38, 47, 2
# root gains no capability by exec (NOROOT), nor keeps them by setuid rules; locked
SECURE_BITS = 0x1 | 0x2 | 0x4 | 0x8 | 0x20
CAPS_V3 = 0x20080522


def _keep_only_file_caps() -> None:
    """Every capability but KEPT_CAPS gone for good: out of the bounding set, root's exec rule
    off (securebits, locked), the kept ones carried across exec as ambient ones; no new privileges."""
    _libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
    _ok(_libc.prctl(PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0), "securebits")
    for cap in range(64):
        if cap not in KEPT_CAPS and _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # past the kernel's last capability
    kept = sum(1 << c for c in KEPT_CAPS)
    head = struct.pack("Ii", CAPS_V3, 0)
    data = struct.pack("IIIIII", kept, kept, kept, 0, 0, 0)  # effective, permitted, inheritable (low, high)
    _ok(_libc.capset(ctypes.create_string_buffer(head), ctypes.create_string_buffer(data)), "capset")
    for cap in KEPT_CAPS:
        _ok(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0), "ambient capability")
    _ok(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _say(fd: int, what: dict) -> None:
    os.write(fd, (json.dumps(what) + "\n").encode())


def _init(spec: Spec, fd: int) -> None:
    """The PID namespace's first process: the mounts, then the check, reaping whatever it leaves.
    Its end ends every process of the namespace. Never returns."""
    try:
        _setup(spec)
    except Exception as e:  # noqa: BLE001 - this check cannot run here: said, and the lab runs it
        _say(fd, {"refused": f"{e}"[:300]})
        os._exit(SETUP_FAILED)
    child = os.fork()
    if child == 0:
        _check(spec, fd)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(SETUP_FAILED)
        if pid == child:
            break
    _say(fd, {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {"exit": os.WEXITSTATUS(status)})
    os._exit(0)


def _one(spec: Spec, status_fd: int) -> None:
    """A check's process (its stdout and stderr the inside's pipes): its own process group, then fresh
    namespaces and their first process, whose end ends every process of the check. Never returns."""
    try:
        os.setsid()  # the group the host kills at the time limit
        if spec.nproc:  # counted per user namespace: the check's processes only
            resource.setrlimit(resource.RLIMIT_NPROC, (spec.nproc, spec.nproc))
        _ok(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    except OSError as e:
        _say(status_fd, {"refused": f"no sandbox here: {e}"[:300]})
        os._exit(SETUP_FAILED)
    init = os.fork()  # the PID namespace's first process
    if init == 0:
        _init(spec, status_fd)
    os.close(status_fd)
    _, status = os.waitpid(init, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _collect(fds: dict[str, int]) -> dict[str, bytes]:
    """Everything written to the pipes `fds` until each is closed (the tail of an output over OUT_CAP)."""
    got = {k: b"" for k in fds}
    with selectors.DefaultSelector() as sel:
        for k, fd in fds.items():
            sel.register(fd, selectors.EVENT_READ, k)
        while sel.get_map():
            for key, _ in sel.select():
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    os.close(key.fd)
                    continue
                got[key.data] = (got[key.data] + chunk)[-OUT_CAP:]
    return got


def _serve_one(spec: Spec) -> dict:
    """One check, asked for on the inside's stdin: forked, its process said ({"pid"}), its end said."""
    st_r, st_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in (null, st_r, out_r, err_r, out_w, err_w):
                os.close(fd)
        finally:
            _one(spec, st_w)
    for fd in (st_w, out_w, err_w):
        os.close(fd)
    _say(1, {"pid": child})
    got = _collect({"out": out_r, "err": err_r, "status": st_r})
    _, status = os.waitpid(child, 0)
    said = [json.loads(line) for line in got.pop("status").splitlines() if line.strip()]
    end = said[-1] if said else {"early": os.waitstatus_to_exitcode(status)}
    return {**end, **{k: base64.b64encode(v).decode() for k, v in got.items()}}


def serve(argv: list[str]) -> int:
    """The long-lived inside: its namespaces and _base once, then one check per line of its stdin
    ({"spec": Spec}), each answered on its stdout; it ends with its stdin."""
    global trees
    ids = json.loads(argv[2])
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lab", "guest"))
    import trees as packed  # the guest's own module, standard library only
    trees = packed
    PR_SET_PDEATHSIG = 1
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # never outlives the host's process
    try:
        if ids["cgroup"]:  # first, while this process still holds the caller's rights: its checks are born in it
            Path(ids["cgroup"], "cgroup.procs").write_text(str(os.getpid()))
        _ok(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        _map_root(ids["uid"], ids["gid"])
        _base()
    except OSError as e:
        _say(1, {"refused": f"{e}"[:300]})
        return SETUP_FAILED
    _say(1, {"ready": True})
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        spec = Spec(**json.loads(line)["spec"])
        _say(1, _serve_one(spec))
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv))
