"""What the guest programs (agent.py and the failure studies' powercut.py,
corruption.py, badblocks.py) share: the clock, atomic JSON files and JSON-lines
logs on the shared run directory, commands with a time limit, the seeded file
content the workloads write and the checks read back, and what the kernel says
about a mount. The host reads the logs with the same code.

Standard library only, like them: the guest sees the host's files, not
flashbed's environment. They run as `python3 -S -I`, which leaves their own
directory off sys.path, so each puts it back before importing this.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time

if __package__:  # on the host, as flashbed.lab.guest.guestlib
    from .protocol import Call, DirectMount, HostAnswer, HostCall, StepStatus
else:  # in the guest, from this directory
    from protocol import Call, DirectMount, HostAnswer, HostCall, StepStatus

BLOCK = 4096
# what a device writes atomically: a crash can leave any mix of the sectors of a
# write still under way (a 4 KiB request may span two of the device's mapping
# units, and a filesystem's blocks may be 1 KiB)
SECTOR = 512
CHUNK = 64 * 1024
LIST_LIMIT = 20  # problems listed per kind in a verdict


def now() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


_VIRTUAL: list[bool] = []


def virtual_time() -> bool:
    """Whether the lab runs in virtual time (flashbed.clock=virtual on the kernel's
    command line): guest time then moves with the device and stands still while
    the guest waits on the host, so a guest-side time limit on such a wait expires
    at once in wall-clock terms; the host's wall-clock limit bounds the lab."""
    if not _VIRTUAL:
        try:
            with open("/proc/cmdline") as f:
                _VIRTUAL.append("flashbed.clock=virtual" in f.read().split())
        except OSError:
            _VIRTUAL.append(False)
    return _VIRTUAL[0]


# the guest CPU's cost in virtual time (lab patch 0008): counts, and the guest time charged
CPU_FILE = "/proc/flashbed_cpu"


def cpu_counts() -> dict[str, int] | None:
    """The kernel's CPU charge counters (charged_ns: guest time charged to the CPU profile
    so far); None on a kernel without them."""
    try:
        with open(CPU_FILE) as f:
            return {k: int(v) for k, v in (line.split() for line in f if line.strip())}
    except (OSError, ValueError):
        return None


def _charging(on: bool) -> None:
    try:
        with open(CPU_FILE, "w") as f:
            f.write("1" if on else "0")
    except OSError:
        pass


def limit(timeout: float) -> float | None:
    """A guest-side time limit: none in virtual time (see virtual_time)."""
    return None if virtual_time() else timeout


def write_json_atomic(path: str, data: dict, indent: int | None = None) -> None:
    """Written to a temporary name, synced, renamed: a reader never sees half a file."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=indent)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)  # a full disk must not leave half a file beside the results
        except OSError:
            pass
        raise


_SFR = None


def push(fd: int) -> None:
    """Hand what was written to `fd` on the shared run directory (hostfs) over to
    the host now: sync_file_range writes the pages back to the host file without
    the host's own fsync (a disk flush the host does not need: only the lab dies
    in a power cut); fsync where that call is missing, or where the run directory is
    on storage a power cut takes down too (a board's: $FLASHBED_FSYNC_LOGS)."""
    global _SFR
    if os.environ.get("FLASHBED_FSYNC_LOGS") == "1":
        os.fsync(fd)
        return
    if _SFR is None:
        try:
            _SFR = ctypes.CDLL(None, use_errno=True).sync_file_range
            _SFR.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)
        except (OSError, AttributeError):
            _SFR = False
    # SYNC_FILE_RANGE_WAIT_BEFORE | WRITE | WAIT_AFTER
    if not _SFR or _SFR(fd, 0, 0, 7) != 0:
        os.fsync(fd)


def post_call(run_dir: str, name: str, call: HostCall) -> str:
    """Ask the host to do something: a request file in the shared run directory's
    host-calls/ (the host answers in <name>.resp). Returns the answer's path."""
    calls = os.path.join(run_dir, "host-calls")
    os.makedirs(calls, exist_ok=True)
    req = os.path.join(calls, f"{name}.req")
    tmp = req + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, json.dumps(call.to_json()).encode())
        push(fd)  # the host must read it whole once the name appears
    finally:
        os.close(fd)
    os.replace(tmp, req)
    return os.path.join(calls, f"{name}.resp")


# waiting for the host's answer: polls start short and back off to the longest
# interval, so a quick answer is seen within a fraction of a millisecond and a
# slow one costs a stat every few milliseconds (the guest cannot be woken: the
# answer is a file on hostfs)
POLL_FIRST = 0.0001
POLL_LONGEST = 0.005


def wait_file(path: str, deadline: float) -> bool:
    """True once `path` exists; False at `deadline` (monotonic)."""
    if virtual_time():
        # a sleep would move guest time by however long the host takes in wall time,
        # and the device's idle time with it (runs would differ): spin on a call that
        # neither sleeps nor fails (a failing syscall costs guest time in time travel)
        # the spin's syscalls are not charged to the CPU profile either: how many
        # there are is the host's wall time, not the guest's work
        folder, name = os.path.split(path)
        _charging(False)
        try:
            while name not in os.listdir(folder):
                pass
        finally:
            _charging(True)
        return True
    delay = POLL_FIRST
    while not os.path.exists(path):
        if now() > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, POLL_LONGEST)
    return True


def call_host(run_dir: str, name: str, call: HostCall, timeout: float, keep: bool = True) -> HostAnswer | None:
    """Ask the host and wait for its answer (None: no answer within `timeout` s).
    keep=False removes the request and answer files afterwards (a program making
    thousands of calls keeps the directory small)."""
    deadline = now() + timeout if limit(timeout) is not None else float("inf")
    resp = post_call(run_dir, name, call)
    if not wait_file(resp, deadline):
        return None
    with open(resp) as f:
        answer = HostAnswer.from_json(json.load(f))
    if not keep:
        for p in (resp, resp[:-len(".resp")] + ".req"):
            try:
                os.unlink(p)
            except OSError:
                pass
    return answer


WALL_FILE = "wall-limit.json"  # the lab's note of the limit it killed the lab for (uml.py)


@contextlib.contextmanager
def wall_limit(run: str, key: str, what: str, seconds: float):
    """`what` (a step, the user's check) bounded by `seconds` of the host's wall-clock time in
    virtual time, where the guest's clock stands still while a program only computes (a busy
    loop: no guest-side limit ever fires); over it, the lab is killed and says why. In real time
    the guest's own limit (run_shell) holds, and this asks nothing of the host."""
    if not virtual_time() or not seconds or seconds == float("inf"):
        yield
        return
    _WALL_CALLS.append(None)
    seq = len(_WALL_CALLS)
    name = f"{key}-{seq:06d}"  # each request's name once: the host answers a name once
    # posted, never waited for: a guest spinning for the host's answer between two steps lets its
    # kernel's writeback run for as long as the host takes, and a figure spanning the steps moved by
    # a microsecond from run to run (virtual time must give the same figures on every rerun); `seq`
    # keeps an arm the host reads after its own lift from arming it again
    post_call(run, f"{name}a", HostCall(Call.WALL_LIMIT, {"key": key, "what": what, "seconds": float(seconds),
                                                          "seq": seq}))
    try:
        yield
    finally:
        post_call(run, f"{name}b", HostCall(Call.WALL_LIMIT, {"key": key, "what": what, "seconds": 0, "seq": seq}))


_WALL_CALLS: list[None] = []


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


# characters that make a command the shell's to read (operators, expansions, quoting, globs,
# comments, assignments); a command without any is a program and its arguments
_SHELL_SYNTAX = set("|&;<>()$`\\\"' \t\n*?[]#~=%{}!")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
# names the shell runs itself, where a program of the same name may differ or be missing
_SHELL_WORDS = {"!", ".", ":", "[", "alias", "bg", "break", "case", "cd", "command", "continue", "do", "done",
                "elif", "else", "esac", "eval", "exec", "exit", "export", "fc", "fg", "fi", "for", "getopts",
                "hash", "if", "jobs", "local", "read", "readonly", "return", "set", "shift", "test", "then",
                "times", "trap", "type", "ulimit", "umask", "unalias", "unset", "until", "wait", "while"}


def plain_argv(cmd: str, env: dict[str, str] | None = None) -> tuple[str, list[str]] | None:
    """`cmd` as a program and its arguments where the shell would do nothing but split it on
    spaces, put in the values of set variables (`${FLASHBED_DEV}`: values without spaces or
    glob characters) and find the program on PATH: (the program's path, argv as the shell
    passes it), else None (the shell runs it). Running
    such a command without `sh -c` saves the lab a fork and an exec of the shell: about 3 ms a
    command in the lab kernel, once per crash state for the fsck."""
    env = os.environ if env is None else env
    words = []
    for w in cmd.split():
        for name in _VAR.findall(w):
            value = env.get(name[0] or name[1])
            if not value or any(c in _SHELL_SYNTAX for c in value):
                return None
        w = _VAR.sub(lambda m: env[m.group(1) or m.group(2)], w)
        if any(c in _SHELL_SYNTAX for c in w):
            return None
        words.append(w)
    if not words or words[0] in _SHELL_WORDS:
        return None
    prog = shutil.which(words[0], path=env.get("PATH"))
    return (prog, words) if prog else None


# whether run_shell starts plain commands without the shell: the crash-state loop's choice, where
# thousands of fscks are verdicts, not timings; elsewhere a step's time (in virtual time, its
# CPU profile's charge for the shell too) stays what every earlier run measured
_PLAIN = [False]


@contextlib.contextmanager
def plain_commands():
    """Within: run_shell runs a plain command (plain_argv) without `sh -c`."""
    _PLAIN.append(True)
    try:
        yield
    finally:
        _PLAIN.pop()


def run_shell(cmd: str, timeout: float, cwd: str | None = None, env: dict[str, str] | None = None,
              plain: bool | None = None) -> tuple[StepStatus, int | None, bytes, bytes, float]:
    """`sh -c cmd` in its own session, killed with its group at `timeout` (with `plain`, or
    within plain_commands when it is None, a plain command without the shell: the same
    program, arguments and exit status).

    Returns (status, rc, stdout, stderr, seconds); status is ok / failed /
    timeout, or hang when even SIGKILL does not end it within 5 s (a task stuck
    in the kernel, D state: then the lab itself hangs here).
    """
    started = now()
    use_plain = _PLAIN[-1] if plain is None else plain
    prog, argv = (use_plain and plain_argv(cmd, env)) or ("/bin/sh", ["/bin/sh", "-c", cmd])
    proc = subprocess.Popen(argv, executable=prog, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    status = StepStatus.OK
    try:
        out, err = proc.communicate(timeout=limit(timeout))
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
    rc = proc.returncode
    if rc is not None and rc < 0 and prog != "/bin/sh":
        rc = 128 - rc  # killed by a signal: the status the shell would have given
    if status.ok and rc != 0:
        status = StepStatus.FAILED
    return status, rc, out, err, now() - started


# --- files and commands the failure studies share -----------------------------------

def content(seed: int, name: str, ver: int, size: int) -> bytes:
    """The bytes version `ver` of `name` adds (deterministic: the verifier regenerates them)."""
    return random.Random(f"{seed}/{name}/{ver}").randbytes(size)


def partial_ok(actual: bytes, new: bytes, start: int = 0) -> bool:
    """actual[start:] is new[start:] in part: not longer, each sector the new
    bytes or zeros (never written)."""
    if len(actual) > len(new) or len(actual) < start:
        return False
    for off in range(start - start % SECTOR, len(actual), SECTOR):
        lo = max(off, start)
        a = actual[lo:off + SECTOR]
        if a != new[lo:lo + len(a)] and a.count(0) != len(a):
            return False
    return True


class ContentCache:
    """content() kept for a verifier that checks the same versions again and again
    (every crash state of a workload), up to `limit` bytes, least recently used out."""

    def __init__(self, limit: int = 64 << 20):
        self.limit, self.size = limit, 0
        self.data: dict[tuple, bytes] = {}  # insertion order = use order

    def __call__(self, seed: int, name: str, ver: int, size: int) -> bytes:
        key = (seed, name, ver, size)
        b = self.data.pop(key, None)
        if b is None:
            b = content(seed, name, ver, size)
            self.size += len(b)
            while self.size > self.limit and self.data:
                self.size -= len(self.data.pop(next(iter(self.data))))
        self.data[key] = b
        return b


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(path: str, data: bytes, flags: int, do_fsync: bool) -> None:
    fd = os.open(path, flags, 0o644)
    try:
        for off in range(0, len(data), CHUNK):
            os.write(fd, data[off:off + CHUNK])
        if do_fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path: str) -> tuple[bytes | None, str]:
    try:
        with open(path, "rb") as f:
            return f.read(), ""
    except FileNotFoundError:
        return None, ""
    except OSError as e:
        return None, errno.errorcode.get(e.errno, str(e.errno))


def run(cmd: str, timeout: float) -> dict:
    """A shell command with a limit; a command that cannot be killed is a hang."""
    status, rc, out, err, seconds = run_shell(cmd, timeout)
    return {"cmd": cmd, "status": status, "rc": rc, "seconds": round(seconds, 6),
            "out": (out + err).decode("utf-8", "replace")[-4000:]}


# `mount -o` words that are mount(2) flags (util-linux's table, the ones a catalogue
# entry or variant can give); the words that clear a flag are the defaults here
MS_FLAGS = {"ro": 1, "nosuid": 2, "nodev": 4, "noexec": 8, "sync": 16, "mand": 64, "dirsync": 128,
            "noatime": 1024, "nodiratime": 2048, "relatime": 1 << 21, "strictatime": 1 << 24, "lazytime": 1 << 25}
MS_DEFAULTS = ("rw", "suid", "dev", "exec", "async", "nomand", "atime", "diratime", "norelatime", "defaults")
_LIBC = None


def _syscall(what: str, call, timeout: float) -> dict:
    """A system call that may never return (a filesystem stuck in the kernel), in a
    thread: after `timeout` s it is a timeout, and the thread is left behind (the
    caller must stop using the filesystem). A record as run() gives."""
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    done: list[int] = []

    def go() -> None:
        rc = call(_LIBC)
        done.append(0 if rc == 0 else ctypes.get_errno())

    started = now()
    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(limit(timeout))
    seconds = round(now() - started, 6)
    if not done:
        return {"cmd": what, "status": StepStatus.TIMEOUT, "rc": None, "seconds": seconds, "out": "did not return"}
    err = done[0]
    return {"cmd": what, "status": StepStatus.OK if err == 0 else StepStatus.FAILED, "rc": err, "seconds": seconds,
            "out": f"{errno.errorcode.get(err, err)}: {os.strerror(err)}" if err else ""}


def mount_args(options: list[str]) -> tuple[int, str]:
    """`mount -o` words as mount(2) takes them: (flags, the filesystem's own options)."""
    flags, data = 0, []
    for o in options:
        if o in MS_FLAGS:
            flags |= MS_FLAGS[o]
        elif o not in MS_DEFAULTS:
            data.append(o)
    return flags, ",".join(data)


def mount_direct(m: DirectMount, mnt: str, timeout: float) -> dict:
    """mount(2) as `mount -t FSTYPE -o OPTIONS DEVICE MNT` would call it, without
    starting a program (rc: the errno)."""
    flags, data = mount_args(m.options)
    opts = data.encode() or None
    device = os.path.expandvars(m.device)  # the lab's device ($FLASHBED_DEV)
    what = f"mount(2) -t {m.fstype} -o {','.join(m.options) or 'defaults'} {device} {mnt}"
    return _syscall(what, lambda libc: libc.mount(device.encode(), mnt.encode(), m.fstype.encode(),
                                                  ctypes.c_ulong(flags), opts), timeout)


def umount_direct(mnt: str, timeout: float) -> dict:
    return _syscall(f"umount(2) {mnt}", lambda libc: libc.umount2(mnt.encode(), 0), timeout)


def mount_options(mnt: str) -> list[str] | None:
    """The options /mnt is mounted with now (the last mount on it), None if not mounted."""
    opts = None
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 3 and parts[1] == mnt:
                    opts = parts[3].split(",")
    except OSError:
        pass
    return opts


def probe_write(mnt: str) -> str:
    """'ok', or the errno name a small synced write gets (EROFS: read-only)."""
    path = os.path.join(mnt, ".pcprobe")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"probe")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.unlink(path)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))

