"""Boot the lab kernel: host's / as a read-only hostfs root, a shared run
directory, block devices through ubd, raw NAND through nandsim.

The guest agent does the work and writes `result.json`; this side enforces the
overall timeout, kills a hung lab and keeps its console log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from .. import cpus, writeguard
from ..errors import FlashbedError
from ..status import BootStatus
from ..stopping import Stopping, on_stop, stopping
from . import labview, umldir
from .boundary import BootResult, BootSpec, GuestLayout, HostHandler, StepResult
from .dirwatch import DirWatch
from .guest.guestlib import WALL_FILE
from .guest.protocol import Call, HostAnswer, HostCall, steps_file
from .kernel import BootMode, KernelInfo, check_cpus, lab_kernel

HALT_GRACE = 30.0  # seconds from the agent's last word to the lab's exit
# the guest sees the first disk as ubda, and the guest programs at a fixed path (labview.py)
LAYOUT = GuestLayout(device="/dev/ubda", tools=labview.TOOLS)


# every lab running in this process, so Ctrl-C can stop them all (stopping.kill_all)
_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.Lock()


def _kill_live() -> None:
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for p in procs:
        _kill(p)


on_stop(_kill_live)


def _die_with_parent() -> None:
    # the lab must not outlive flashbed (e.g. after SIGKILL): it would keep
    # writing into the log directory of a cell the next run redoes
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _no_nandsim() -> list[str]:
    # nandsim is built in and would create a default chip at every boot; a tiny
    # one keeps block-only boots fast
    return ["nandsim.id_bytes=0xec,0x73"]  # 16 MiB, 16 KiB blocks, 512 B pages


def _kernel_args(kernel: KernelInfo | None, cpus: int) -> list[str]:
    if kernel is None:
        return []
    check_cpus(kernel.name, kernel.max_cpus, kernel.boot_mode, cpus)
    args = ["seccomp=on"] if kernel.boot_mode == BootMode.SECCOMP.value else []
    if kernel.time_travel:
        # virtual time: guest CPU work costs no guest time; the guest agent reads
        # flashbed.clock (its waits on the host are the host's to bound)
        args += ["time-travel=inf-cpu", "flashbed.clock=virtual"]
    return args + ([f"ncpus={cpus}"] if cpus > 1 else [])


def kernel_cmdline(spec: BootSpec, kernel: KernelInfo | None = None) -> list[str]:
    """The lab's command line, to run in the boot's lab directory (its UML directory, holding
    labview's links: nothing on it depends on where anything is on this machine); `kernel` adds
    its boot mode and vCPU count, and in virtual time the guest CPU's cost per event (lab patch
    0008; none given: nothing is charged). UML keeps its pid file and socket there (umldir.py),
    never in ~/.uml."""
    cpu = [spec.cpu.cmdline()] if spec.cpu is not None and kernel is not None and kernel.time_travel else []
    lab = labview.view(spec.run_dir, spec.disks)
    args = [
        "uml_dir=.",
        f"mem={spec.mem_mb}M",
        *_kernel_args(kernel, spec.cpus), *cpu,
        "root=/dev/root", "rootfstype=hostfs", "rootflags=/", "ro",
        "con=null", "con0=null,fd:1", "ssl=null",
        "init=/bin/sh",
        f"flashbed.run={labview.HERE}/{labview.RUN_LINK}",
        f"flashbed.tools={labview.HERE}/{labview.TOOLS_LINK}",
    ]
    for i, (d, path) in enumerate(zip(spec.disks, lab.disks)):
        flags = ("c" if d.shared else "") + ("" if d.discard else "t") + ("od" if d.direct else "") \
            + ("v" if d.model_clock else "")
        args.append(f"ubd{i}{flags}={path}")
    args += spec.nandsim.cmdline() if spec.nandsim else _no_nandsim()
    # everything after "--" is the init's argv
    args += ["--", labview.INIT]
    return args


def memory_dir(mem_mb: int, shm: str = "/dev/shm") -> str:
    """Where UML maps the lab's memory from (its TMPDIR): /dev/shm, a tmpfs, keeps it off the
    disk; a container's (podman's, docker's) is mounted noexec, which UML refuses ("/dev/shm must
    be not mounted noexec"), and holds 64 MiB, which a lab's memory outgrows (SIGBUS): then the
    temporary directory. One line if that will not do either."""
    for d in (shm, tempfile.gettempdir()):
        try:
            st = os.statvfs(d)
        except OSError:
            continue
        room = d != shm or st.f_bavail * st.f_frsize >= mem_mb << 20
        if room and not st.f_flag & os.ST_NOEXEC and os.access(d, os.W_OK | os.X_OK):
            return d
    raise FlashbedError(f"no directory for the lab's {mem_mb} MiB of memory: {shm} and {tempfile.gettempdir()} are "
                        f"each noexec, not writable or (/dev/shm) too small: set TMPDIR to a writable directory "
                        f"mounted exec")


def boot(spec: BootSpec, kernel: KernelInfo | None = None, host: HostHandler | None = None,
         kill: threading.Event | None = None) -> BootResult:
    """Run the steps in one lab boot; never raises for what happens in the guest.

    `host(call, args)` answers the guest's host steps; its return value goes
    back to the guest as JSON. Setting `kill` kills the lab at once (a power
    cut): the result's status is then "killed". The lab runs on leased host
    CPUs, one per vCPU (see flashbed.cpus), starting with the one of the calling
    thread's device if it has one.
    """
    if stopping():
        raise Stopping("flashbed is stopping: no new lab")
    kernel = kernel or lab_kernel(cpus=spec.cpus)
    check_cpus(kernel.name, kernel.max_cpus, kernel.boot_mode, spec.cpus)
    if any(d.model_clock for d in spec.disks) and not kernel.time_travel:
        raise FlashbedError("a device in virtual time needs the time-travel flavour of the lab kernel "
                            "(lab_kernel(..., time_travel=True))")
    with cpus.lease_set(spec.cpus) as held:
        return _boot(spec, kernel, host, kill, held)


def _boot(spec: BootSpec, kernel: KernelInfo, host: HostHandler | None,
          kill: threading.Event | None, cpu: tuple[int, ...] | None) -> BootResult:
    run_dir = spec.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    for d in spec.disks:
        if not d.path.exists():
            raise FlashbedError(f"block device file {d.path} does not exist")
    # the boot's own files are made through the directory opened with no symlink on the way (a
    # run's attempt, a smoke test's filesystem: made so by their callers): a directory swapped for a
    # link since is refused, and a link put in place of one of these names is replaced, not followed
    fd = writeguard.open_dir(Path(os.path.realpath(run_dir)), None, str(run_dir))
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink("result.json", dir_fd=fd)
        try:
            calls = os.stat("host-calls", dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(calls.st_mode):
                shutil.rmtree("host-calls", ignore_errors=True, dir_fd=fd)
            else:
                os.unlink("host-calls", dir_fd=fd)
        except FileNotFoundError:
            pass
        os.mkdir("host-calls", 0o777, dir_fd=fd)  # here, so the host-call server can watch it from the start
        writeguard.write_at(fd, "steps.json", json.dumps(steps_file(spec.steps, LAYOUT.env()), indent=1).encode())
        console = os.fdopen(writeguard.create_at(fd, "console.log"), "w")
    finally:
        os.close(fd)
    env = dict(os.environ, TMPDIR=memory_dir(spec.mem_mb))
    lab_dir = umldir.make()
    try:
        lab = labview.view(spec.run_dir, spec.disks)
        lab.make(lab_dir)
        with console:
            return _run_lab(spec, kernel, host, kill, cpu, env, [kernel.path, *kernel_cmdline(spec, kernel)],
                            console, lab_dir, lab.describe())
    finally:
        umldir.remove(lab_dir)  # on every exit path this process lives through; the next run sweeps the rest


def _run_lab(spec: BootSpec, kernel: KernelInfo, host: HostHandler | None, kill: threading.Event | None,
             cpu: tuple[int, ...] | None, env: dict[str, str], cmd: list[str], console: IO[str], lab_dir: Path,
             links: str) -> BootResult:
    run_dir = spec.run_dir
    console_path = run_dir / "console.log"
    started = time.monotonic()
    ready_at: list[float] = []
    done_at: list[float] = []
    console.write(f"$ cd {lab_dir}  # {links}\n$ " + " ".join(cmd) + "\n")
    console.flush()
    proc = subprocess.Popen(cmd, cwd=lab_dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True,
                            preexec_fn=lambda: (_die_with_parent(), cpus.pin_child(cpu)))
    with _LIVE_LOCK:
        _LIVE.add(proc)

    def pump() -> None:
        assert proc.stdout is not None
        writing = True
        for raw in proc.stdout:  # read to the end whatever happens: a lab whose output is not read stops
            line = raw.decode("utf-8", "replace")
            if not ready_at and line.startswith("FLASHBED-AGENT READY"):
                ready_at.append(time.monotonic())
            elif line.startswith("FLASHBED-AGENT DONE"):
                done_at.append(time.monotonic())
            if writing:
                try:
                    console.write(line)
                    console.flush()
                except OSError:  # a full disk: the cell says so (cell.run_cell), the lab goes on
                    writing = False

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    stop_calls = threading.Event()
    limits = WallLimits(run_dir)
    pause = Pause.of(proc) if kernel.time_travel else None
    caller = threading.Thread(target=_serve_host_calls, args=(run_dir / "host-calls", host, stop_calls, limits,
                                                              pause), daemon=True)
    caller.start()
    timed_out = killed = False
    deadline = started + spec.timeout
    try:
        while proc.poll() is None:
            if kill is not None and kill.is_set():
                killed = True
                _kill(proc)
            elif limits.hit is not None:  # a program over its wall-clock limit (virtual time)
                timed_out = True
                _kill(proc)
            elif time.monotonic() > deadline or (done_at and time.monotonic() > done_at[0] + HALT_GRACE):
                # past the deadline, or the agent finished but the kernel cannot
                # halt (a task stuck in the kernel holds it up)
                timed_out = not done_at
                _kill(proc)
            else:
                time.sleep(0.02)
    except BaseException:
        _kill(proc)
        raise
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)
        stop_calls.set()
        caller.join(timeout=5)
        reader.join(timeout=5)
        limits.close()
        if pause is not None:
            pause.close()
    total = time.monotonic() - started
    res = _collect(spec, kernel, proc.returncode, timed_out, killed, total,
                   ready_at[0] - started if ready_at else None, console_path)
    return dataclasses.replace(res, error=limits.reason()) if limits.hit is not None and not killed else res


class WallLimits:
    """The wall-clock limits the guest asked for (Call.WALL_LIMIT: in virtual time a program
    that only computes stops the guest's clock, so its own limits never fire), by key. The
    first to run out kills the lab; what it was is written to the run directory (WALL_FILE)
    and becomes the boot's error."""

    GRACE = 1.0  # s past a limit: the guest's call round trip

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.hit: dict | None = None
        self._timers: dict[str, threading.Timer] = {}
        self._lifted: dict[str, int] = {}  # per key, the latest limit lifted
        self._lock = threading.Lock()

    def handle(self, args: dict) -> None:
        key, what, seconds = str(args.get("key", "")), str(args.get("what", "a program")), float(args["seconds"])
        seq = int(args.get("seq", 0))
        with self._lock:
            # the guest posts without waiting: an arm read after the lift of the same limit stays lifted
            if seconds > 0 and seq and seq <= self._lifted.get(key, 0):
                return
            if seconds <= 0 and seq:
                self._lifted[key] = max(seq, self._lifted.get(key, 0))
            old = self._timers.pop(key, None)
            if old is not None:
                old.cancel()
            if seconds > 0:
                t = threading.Timer(seconds + self.GRACE, self._expire, (what, seconds))
                t.daemon = True
                self._timers[key] = t
                t.start()

    def _expire(self, what: str, seconds: float) -> None:
        with self._lock:
            if self.hit is not None:
                return
            self.hit = {"what": what, "seconds": seconds, "host_wall": time.time()}
        with contextlib.suppress(OSError):
            (self.run_dir / WALL_FILE).write_text(json.dumps(self.hit))

    def reason(self) -> str:
        h = self.hit or {}
        return (f"{h.get('what')} ran past its limit of {h.get('seconds', 0):g} s of wall-clock time (the lab was "
                f"killed: in virtual time the guest's clock stands still while a program only computes)")

    def close(self) -> None:
        with self._lock:
            for t in self._timers.values():
                t.cancel()
            self._timers.clear()


# The calls of the crash-state loop, whose answers the guest waits for: in virtual time it spins
# on the run directory meanwhile (guestlib.wait_file: a sleep would move its clock by the host's
# wall time), a whole core spent on nothing while the host lists the states, serves one, runs an
# fsck or the user's check; so the lab's kernel is stopped until the answer is in place. Its clock does not
# move while it is stopped, as it does not while it spins (time-travel=inf-cpu: guest time moves
# only with the guest's own timers), so every figure and verdict is the same.
PAUSED_CALLS = frozenset({Call.CRASH_STATES, Call.CRASH_NEXT, Call.CRASH_SWITCH, Call.CRASH_CHECK, Call.USER_CHECK})


class Pause:
    """Stops and resumes the lab's kernel process (SIGSTOP, SIGCONT through a pidfd: never another
    process that took its number after it ended). Its guest processes wait for it at their next
    system call; only the kernel's process is stopped (a guest process stopped under ptrace would be
    a signal its kernel does not expect)."""

    def __init__(self, fd: int):
        self.fd = fd
        self._lock = threading.Lock()

    @classmethod
    def of(cls, proc: subprocess.Popen) -> "Pause | None":
        try:
            return cls(os.pidfd_open(proc.pid))
        except (OSError, AttributeError):  # no pidfd here: the lab spins as before
            return None

    def _signal(self, sig: int) -> None:
        with self._lock:
            if self.fd >= 0:
                with contextlib.suppress(ProcessLookupError, OSError):
                    signal.pidfd_send_signal(self.fd, sig)

    @contextlib.contextmanager
    def held(self):
        self._signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self._signal(signal.SIGCONT)

    def close(self) -> None:
        with self._lock:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1


def _serve_host_calls(calls: Path, handler: HostHandler | None, stop: threading.Event,
                      limits: WallLimits | None = None, pause: Pause | None = None) -> None:
    answered: set[str] = set()
    watch = DirWatch.open(calls)  # None: poll every 5 ms
    names: list[str] | None = None  # the names that arrived; None: look at the whole directory
    while not stop.is_set():
        if names is None:
            reqs = sorted(calls.glob("*.req")) if calls.is_dir() else []
        else:
            reqs = sorted(calls / n for n in names if n.endswith(".req"))
        for req in reqs:
            if req.name in answered:
                continue
            answered.add(req.name)
            try:
                call = HostCall.from_json(json.loads(req.read_text()))
            except Exception as e:  # the guest gets the error; the cell decides
                _answer(req, HostAnswer(ok=False, error=f"{type(e).__name__}: {e}"))
                continue
            if call.call == Call.WALL_LIMIT and limits is not None:  # the lab's own, whatever the handler
                limits.handle(call.args)
                req.unlink(missing_ok=True)  # the guest waits for no answer (guestlib.wall_limit)
                continue
            with pause.held() if pause is not None and call.call in PAUSED_CALLS else contextlib.nullcontext():
                try:
                    if handler is None:
                        raise FlashbedError(f"no host handler for '{call.call}'")
                    answer = HostAnswer(ok=True, data=handler(call.call, call.args))
                except Exception as e:  # the guest gets the error; the cell decides
                    answer = HostAnswer(ok=False, error=f"{type(e).__name__}: {e}")
                _answer(req, answer)  # in place before the lab goes on
        if watch is None:
            stop.wait(0.005)
        else:
            names = watch.wait(0.05)
    if watch is not None:
        watch.close()


def _answer(req: Path, answer: HostAnswer) -> None:
    tmp = req.with_suffix(".resp.tmp")
    tmp.write_text(json.dumps(answer.to_json()))
    os.replace(tmp, req.with_suffix(".resp"))


def _kill(proc: subprocess.Popen) -> None:
    # UML runs as many host processes (one per guest process); they share a group
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _collect(spec: BootSpec, kernel: KernelInfo, rc: int | None, timed_out: bool, killed: bool, total: float,
             boot_s: float | None, console_path: Path) -> BootResult:
    console = console_path.read_text(errors="replace")
    data: dict = {}
    result_path = spec.run_dir / "result.json"
    if result_path.exists():
        try:
            data = json.loads(result_path.read_text())
        except json.JSONDecodeError:
            data = {}
    steps = [StepResult(**{k: s[k] for k in StepResult.__dataclass_fields__ if k in s}) for s in data.get("steps", [])]
    status = BootStatus.derive(data.get("status", ""), timed_out=timed_out, killed=killed)
    error = data.get("error", "")
    if status is BootStatus.KILLED:
        error = "lab killed on request (power cut)"
    elif timed_out:
        # a guest step that never returned is the usual cause; say which
        done = {s.name for s in steps}
        pending = next((s.name for s in spec.steps if s.name not in done), "")
        error = f"lab did not finish within {spec.timeout:.0f}s" + (f" (step '{pending}')" if pending else "")
    elif status is BootStatus.CRASH:
        error = _crash_reason(console)
    return BootResult(status=status, steps=steps, boot_seconds=boot_s, total_seconds=total,
                      console_log=str(console_path), exit_code=rc,
                      kernel_release=data.get("uname", kernel.release), error=error)


def _crash_reason(console: str) -> str:
    for marker in ("Kernel panic", "FLASHBED-INIT FAILED", "ptrace set fp regs failed",
                   "Kernel tried to access user memory", "BUG:", "Oops"):
        for line in console.splitlines():
            if marker in line:
                return line.strip()[:300]
    lines = [l for l in console.splitlines() if l.strip()]
    return "lab kernel exited before the agent finished; last console line: " + (lines[-1][:200] if lines else "(none)")
