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
- the run directory visible (read-only) at its own path: the staged check and $FLASHBED_ACKED;
- no network: the new network namespace has a loopback device only;
- the check itself one user namespace further down, so the mounts above are locked: its root can
  neither make them writable nor unmount them to see what they cover;
- a pids limit (`pids_limit`): a pids cgroup where one can be made, else RLIMIT_NPROC, which the
  kernel counts per user namespace (it does not hold the host's root: then only the time limit
  and the PID namespace bound a fork bomb, and `Ran.pids` says so);
- the lab's time limit; at it the sandbox's process group is killed, and with the first process
  of the PID namespace every process in it: one that left the group (setsid) too.

A write outside the scratch fails with EROFS (the check's own words say so); a check over its
limit is a timeout; a fork bomb stays within its pids limit and dies with the namespace.

Run as a program (`python3 -S -I sandbox.py SPEC`) it is the sandbox's inside: standard library only.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import struct
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

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


@dataclass(frozen=True)
class Spec:
    """What the inside needs (it travels as JSON on its command line)."""

    cmd: str  # run as `sh -c cmd`, as the lab runs the check
    workdir: str  # the copy's path, as the lab's directory: the check's working directory and $FLASHBED_MNT
    env: dict[str, str]
    pack: str = ""  # the packed tree (trees.pack) unpacked at `workdir`; '' for an empty directory
    read_only: bool = False  # the lab's directory was mounted read-only
    visible: list[str] = field(default_factory=list)  # host directories kept visible (read-only) at their paths
    cgroup: str = ""  # a pids cgroup the inside joins first ('' for none)
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


def run(cmd: str, workdir: str, env: dict[str, str], timeout: float, *, pack: str = "", read_only: bool = False,
        visible: tuple[str, ...] = (), pids: int = PIDS, scratch: str = SCRATCH) -> Ran:
    """`sh -c cmd` in the sandbox, on the tree packed in `pack` at `workdir`, killed at `timeout` s."""
    cgroup = _new_cgroup(pids)
    spec = Spec(cmd=cmd, workdir=workdir, env=env, pack=pack, read_only=read_only, visible=list(visible),
                cgroup=cgroup, nproc=0 if cgroup else pids, scratch=scratch, uid=os.getuid(), gid=os.getgid())
    how = pids_limit(cgroup, pids)
    rfd, wfd = os.pipe()
    started = time.monotonic()
    try:
        proc = subprocess.Popen([sys.executable or "python3", "-S", "-I", __file__, json.dumps(asdict(spec))],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, pass_fds=(wfd,), env={"FLASHBED_SANDBOX_FD": str(wfd)})
    except BaseException:
        os.close(rfd)
        os.close(wfd)
        _end_cgroup(cgroup)
        raise
    os.close(wfd)
    status = "ok"
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        status = "timeout"
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # with the PID namespace's first process, all of it
        except ProcessLookupError:
            pass
        try:
            out, err = proc.communicate(timeout=KILL_WAIT)
        except subprocess.TimeoutExpired:
            status, out, err = "hang", b"", b""
    finally:
        peak = _end_cgroup(cgroup)
    seconds = time.monotonic() - started
    with os.fdopen(rfd, "rb") as f:
        said = [json.loads(line) for line in f.read().splitlines() if line.strip()]
    end = said[-1] if said else {}
    if "refused" in end:
        return Ran("failed", None, out, err, seconds, how, refused=end["refused"], peak=peak)
    if status != "ok":
        return Ran(status, None, out, err, seconds, how, peak=peak)
    if "exit" not in end and "signal" not in end:  # the inside died before it could say
        why = (err.decode("utf-8", "replace").strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return Ran("failed", None, out, err, seconds, how, refused=f"the sandbox ended early: {why}"[:300],
                   peak=peak)
    rc = end["exit"] if "exit" in end else 128 + end["signal"]  # as the shell says a signal killed it
    return Ran("ok" if rc == 0 else "failed", rc, out, err, seconds, how, peak=peak)


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


def _setup(spec: Spec) -> None:
    """In the new namespaces, as the PID namespace's first process: the mounts the check sees."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lab", "guest"))
    import trees  # the packed tree's format (it is the guest's)

    _read_only_everywhere()
    # what the tmpfs mounts below cover, opened first: the device nodes and the visible directories
    devices = {n: os.open(f"/dev/{n}", os.O_PATH) for n in DEVICES if os.path.exists(f"/dev/{n}")}
    visible = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in spec.visible}
    pack = os.open(spec.pack, os.O_RDONLY) if spec.pack else -1
    # writable until the check's process has mapped its user namespace (it then makes it read-only)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=1m")
    for name, fd in devices.items():
        os.close(os.open(f"/dev/{name}", os.O_CREAT | os.O_WRONLY, 0o666))
        _mount(f"/proc/self/fd/{fd}", f"/dev/{name}", None, MS_BIND)
        os.close(fd)
    for name, to in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                     ("stderr", "/proc/self/fd/2")):
        os.symlink(to, f"/dev/{name}")
    os.mkdir("/dev/shm")
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={spec.scratch}")
    _mount(None, "/dev", None, MS_REMOUNT | MS_NOSUID | MS_NOEXEC | MS_RDONLY, "mode=755,size=1m")
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


def main(argv: list[str]) -> int:
    spec = Spec(**json.loads(argv[1]))
    fd = int(os.environ.pop("FLASHBED_SANDBOX_FD"))
    os.set_inheritable(fd, False)
    try:
        if spec.cgroup:  # first, while this process still holds the caller's rights: its children inherit it
            Path(spec.cgroup, "cgroup.procs").write_text(str(os.getpid()))
        _ok(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS),
            "unshare")
        _map_root(spec.uid, spec.gid)
        if spec.nproc:  # counted per user namespace: the check's processes only
            import resource
            resource.setrlimit(resource.RLIMIT_NPROC, (spec.nproc, spec.nproc))
    except OSError as e:
        _say(fd, {"refused": f"no sandbox here: {e}"[:300]})
        return SETUP_FAILED
    init = os.fork()  # the PID namespace's first process
    if init == 0:
        _init(spec, fd)
    _, status = os.waitpid(init, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
