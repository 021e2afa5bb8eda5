"""Process control of ``flashbed-emu``, the flash device emulator.

The emulator serves one emulated flash device as the file ``<mount>/device``
through FUSE and answers JSON-lines commands on a Unix socket. This module
starts it, waits for its ``READY`` line, talks to its control socket and
stops it (cleanly, or by cutting power). It also drives the emulator's write
log and crash states: record a phase, list the states a power cut could leave,
serve one in place of the device, write one as an image (online, or offline
from the kept log files). Standard library only.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from .. import cpus
from ..errors import FlashbedError

__all__ = ["CrashKind", "CrashListing", "CrashState", "EmulatorError", "EmulatorSpec", "Emulator", "crash_states",
           "describe", "find_binary", "rebuild_image"]

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_BINARY = REPO_ROOT / "emulator" / "target" / "release" / "flashbed-emu"
ERROR_PREFIX = "flashbed-emu: error: "
REQUEST_TIMEOUT = 120.0  # s for a control request's answer
LISTING_TIMEOUT = 1800.0  # s for a crash-state listing's (it reads the whole write log)


class EmulatorError(FlashbedError):
    """The emulator could not be found, started or commanded."""


def _stop_with_parent() -> None:
    # if flashbed dies (even by SIGKILL) the emulator gets SIGTERM: a clean stop
    # that unmounts its FUSE file instead of leaving a dead mount behind
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def find_binary() -> Path:
    """The flashbed-emu executable: ``$FLASHBED_EMU`` or the repo's build."""
    env = os.environ.get("FLASHBED_EMU")
    if env:
        path = Path(env)
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise EmulatorError(f"FLASHBED_EMU={env} is not an executable file")
    if DEFAULT_BINARY.is_file() and os.access(DEFAULT_BINARY, os.X_OK):
        return DEFAULT_BINARY
    raise EmulatorError("flashbed-emu is not built: run `make setup`")


CAP_SYS_ADMIN = 21  # linux/capability.h


def _capabilities(field: str, status: Path = Path("/proc/self/status")) -> int:
    """A capability set of this process (CapEff, CapBnd) as a bit mask."""
    for line in status.read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1], 16)
    return 0


def fuse_problem(dev: Path = Path("/dev/fuse"), euid: int | None = None,
                 status: Path = Path("/proc/self/status")) -> str:
    """Why this process cannot mount the emulator's FUSE file ('' if it can): no /dev/fuse
    (a container run without --device /dev/fuse), or no right to mount one: root without
    CAP_SYS_ADMIN, or an ordinary user without fusermount3 or with SYS_ADMIN out of the
    bounding set (fusermount3 is setuid root, and the container's bounding set caps it)."""
    fix_dev = "in a container, run it with --device /dev/fuse; on a host, load the module (sudo modprobe fuse)"
    if not dev.exists():
        return f"no {dev}: the emulated flash devices are served through FUSE: {fix_dev}"
    try:
        os.close(os.open(dev, os.O_RDWR))
    except PermissionError as e:
        return (f"cannot open {dev} ({e.strerror}): the emulated flash devices are served through FUSE, and an "
                f"ordinary user opens it: give users read and write on it, mode 0666 as Debian's udev rules do "
                f"(sudo chmod 666 {dev})")
    except OSError as e:
        return f"cannot open {dev} ({e.strerror}): the emulated flash devices are served through FUSE: {fix_dev}"
    euid = os.geteuid() if euid is None else euid
    cap = "a container needs --cap-add SYS_ADMIN to mount FUSE"
    if euid == 0:
        if not _capabilities("CapEff", status) >> CAP_SYS_ADMIN & 1:
            return f"no right to mount FUSE: root without CAP_SYS_ADMIN: {cap}"
        return ""
    if not shutil.which("fusermount3"):
        return "fusermount3 is missing: an ordinary user mounts FUSE through it: sudo apt-get install fuse3"
    if not _capabilities("CapBnd", status) >> CAP_SYS_ADMIN & 1:
        return f"no right to mount FUSE: CAP_SYS_ADMIN is out of this process's bounding set, so fusermount3 cannot " \
               f"mount: {cap}"
    return ""


def check_fuse() -> None:
    """One line, before anything runs, when the emulator could not mount its FUSE file."""
    problem = fuse_problem()
    if problem:
        raise EmulatorError(problem)


def _error_line(stderr: str, fallback: str) -> str:
    """The emulator's own one-line error, without its prefix."""
    for line in stderr.splitlines():
        if line.startswith(ERROR_PREFIX):
            return line[len(ERROR_PREFIX):]
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else fallback


def set_args(sets: tuple[tuple[str, str], ...]) -> list[str]:
    """A preset variant's fields (path, TOML value) as flashbed-emu's --set options."""
    return [a for path, value in sets for a in ("--set", f"{path}={value}")]


def describe(preset: Path | str, capacity: int | None = None, sets: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """Geometry and declared rates of a block preset (at ``capacity`` bytes; a variant: `sets`)."""
    cmd = [str(find_binary()), "describe", "--preset", str(preset), *set_args(sets)]
    if capacity is not None:
        cmd += ["--capacity", str(int(capacity))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise EmulatorError(_error_line(proc.stderr, f"describe failed (exit {proc.returncode})"))
    return json.loads(proc.stdout)


class CrashKind(str, Enum):
    """How a crash state came about (see the emulator's crashlog module)."""

    FLUSH = "flush"  # power lost right after an acknowledged flush
    CUT = "cut"  # the model's own cut before the next flush: the volatile writes lost
    SUBSET = "subset"  # the same cut, a chosen subset of the volatile writes persisted
    TEAR = "tear"  # power lost during a NAND program, damaging its paired pages


@dataclass(frozen=True)
class CrashState:
    """One crash state of a write log. ``id`` alone rebuilds it later
    (``POS``, ``POS+mHEX``, ``POS+kN``, ``POS+rSEED`` or ``POS+tN``)."""

    id: str
    pos: int  # the log record the cut follows (or, for a tear, that issued the program)
    kind: CrashKind
    acked: int  # records 0..acked-1 had been acknowledged at the cut
    last_flush: int | None  # the last acknowledged flush before the cut
    volatile: int  # unit versions not yet durable at the cut ...
    kept: int  # ... and how many of them this state persisted
    damaged: int  # units whose durable copy a torn program damaged
    t_ns: int  # cut time, device clock
    # the state's device image class when asked (images=True): equal exactly when two
    # states of the listing hold the same image, damaged units included
    image: int | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "CrashState":
        return cls(id=d["id"], pos=d["pos"], kind=CrashKind(d["kind"]), acked=d["acked"], last_flush=d["last_flush"],
                   volatile=d["volatile"], kept=d["kept"], damaged=d["damaged"], t_ns=d["t_ns"], image=d.get("image"))


@dataclass(frozen=True)
class CrashListing:
    """The crash states of a stopped write log, in log order."""

    records: int
    flushes: int
    marks: tuple[tuple[int, str], ...]  # (record, label)
    after: int | None  # only cuts after this record are listed
    states: tuple[CrashState, ...]
    flush_pos: tuple[int, ...] = ()  # the acknowledged flushes' records
    images: int | None = None  # distinct device images among the states (asked with images=True)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "CrashListing":
        return cls(records=d["records"], flushes=d["flushes"], marks=tuple((m["pos"], m["label"]) for m in d["marks"]),
                   after=d["after"], states=tuple(CrashState.from_json(s) for s in d["states"]),
                   flush_pos=tuple(d.get("flush_pos", ())), images=d.get("images"))


def _run_json(cmd: list[str], what: str) -> dict[str, Any]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise EmulatorError(_error_line(proc.stderr, f"{what} failed (exit {proc.returncode})"))
    return json.loads(proc.stdout)


def _bounds(after: str | int | None, seed: int, subsets: int, tears: int, marks: bool,
            images: bool = False) -> dict[str, Any]:
    return {"after": after, "seed": int(seed), "subsets": int(subsets), "tears": int(tears),
            **({"marks": True} if marks else {}), **({"images": True} if images else {})}


def crash_states(log_dir: Path | str, *, after: str | int | None = None, seed: int = 1, subsets: int = 4,
                 tears: int = 2, marks: bool = False, images: bool = False) -> CrashListing:
    """The crash states of a kept log directory, without a running device."""
    cmd = [str(find_binary()), "crash-states", "--log", str(log_dir)]
    for k, v in _bounds(after, seed, subsets, tears, marks, images).items():
        if v is not None:
            cmd += [f"--{k}", "true" if v is True else str(v)]
    return CrashListing.from_json(_run_json(cmd, "crash-states"))


def rebuild_image(log_dir: Path | str, state: str, image: Path | str) -> dict[str, Any]:
    """Writes crash state ``state``'s device image from a kept log directory
    (no running device). Units the state damaged are zeroes in the image; the
    reply lists them (``damaged_ranges``: [offset, length] in bytes)."""
    cmd = [str(find_binary()), "crash-image", "--log", str(log_dir), "--state", str(state), "--image", str(image)]
    return _run_json(cmd, "crash-image")


@dataclass(frozen=True)
class EmulatorSpec:
    """How to run one emulated device."""

    preset: Path
    state_dir: Path
    mount_dir: Path
    control: Path
    capacity: int | None = None
    pace: str = "real"
    seed: int = 1
    sets: tuple[tuple[str, str], ...] = ()  # a preset variant's fields (flashbed-emu --set)
    crash_log: Path | None = None  # a kept write log whose states it serves (crash-switch), the device blank


class Emulator:
    """One running flashbed-emu process (a context manager)."""

    def __init__(self, spec: EmulatorSpec, *, binary: Path | None = None, ready_timeout: float = 60.0):
        self.spec = spec
        self.binary = binary
        self.ready_timeout = ready_timeout
        self.info: dict[str, Any] = {}
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: list[str] = []
        self._stderr_thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> "Emulator":
        if self.running:
            raise EmulatorError("emulator already running")
        binary = self.binary or find_binary()
        spec = self.spec
        Path(spec.mount_dir).mkdir(parents=True, exist_ok=True)
        Path(spec.state_dir).parent.mkdir(parents=True, exist_ok=True)
        Path(spec.control).parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(binary), "serve",
            "--preset", str(spec.preset),
            "--state", str(spec.state_dir),
            "--mount", str(spec.mount_dir),
            "--control", str(spec.control),
            "--pace", spec.pace,
            "--seed", str(int(spec.seed)),
            *set_args(spec.sets),
        ]
        if spec.capacity is not None:
            cmd += ["--capacity", str(int(spec.capacity))]
        if spec.crash_log is not None:
            cmd += ["--crash-log", str(spec.crash_log)]
        self._stderr = []
        cpu = cpus.current()  # beside the lab that uses it
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: (_stop_with_parent(), cpus.pin_child(cpu)),
        )
        # Collect stderr continuously so a chatty emulator never blocks on it.
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()
        line = self._read_ready_line()
        if not line.startswith("READY "):
            self._proc.kill()
            self._proc.wait()
            self._join_stderr()
            raise EmulatorError(_error_line("".join(self._stderr), f"flashbed-emu did not start: {line.strip() or 'no output'}"))
        self.info = json.loads(line[len("READY "):])
        return self

    def _drain_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            self._stderr.append(line)

    def _join_stderr(self) -> None:
        if self._stderr_thread is not None:
            self._stderr_thread.join(timeout=5)

    def _read_ready_line(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self._proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + self.ready_timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timed out waiting for READY"
                if sel.select(timeout=min(left, 0.5)):
                    return self._proc.stdout.readline()
                if self._proc.poll() is not None:
                    return self._proc.stdout.readline()
        finally:
            sel.close()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def device_path(self) -> Path:
        return Path(self.info["device"]) if self.info else Path(self.spec.mount_dir) / "device"

    @property
    def state_path(self) -> Path:
        """The served crash state, read-only through the host's page cache (the emulator's `state` file)."""
        return Path(self.info["state"]) if self.info and "state" in self.info else Path(self.spec.mount_dir) / "state"

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def _wait_gone(self, timeout: float) -> int:
        """Waits for the process to exit and its mount to disappear."""
        assert self._proc is not None
        try:
            rc = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            rc = self._proc.wait()
        deadline = time.monotonic() + timeout
        while os.path.ismount(self.spec.mount_dir) and time.monotonic() < deadline:
            time.sleep(0.02)
        self._join_stderr()
        return rc

    def stop(self, timeout: float = 60.0) -> None:
        """Clean stop: everything written is persisted, then unmounted."""
        if not self.running:
            return
        try:
            self._request({"cmd": "shutdown"})
        except EmulatorError:
            assert self._proc is not None
            self._proc.send_signal(signal.SIGTERM)
        rc = self._wait_gone(timeout)
        if rc != 0:
            raise EmulatorError(_error_line(self.stderr, f"flashbed-emu exited with {rc}"))

    def cut_power(self, timeout: float = 60.0) -> dict[str, Any]:
        """Cuts power; returns once the process has exited and unmounted.

        The state directory then holds what a power cut leaves; a new
        ``Emulator`` on the same spec continues from it.
        """
        reply = self._request({"cmd": "cut-power"})
        self._wait_gone(timeout)
        return reply

    def cut_at(self, in_ns: int) -> dict[str, Any]:
        """Virtual time: arms a power cut ``in_ns`` guest ns after the latest instant the
        device knows the guest reached; it lands when the guest gets there and holds the
        lab at it (then ``cut_power`` saves what it left and stops the process)."""
        return self._request({"cmd": "cut-at", "in_ns": int(in_ns)})

    def cut_disarm(self) -> None:
        """Takes back an armed cut that has not landed."""
        self._request({"cmd": "cut-disarm"})

    def cut_state(self) -> dict[str, Any]:
        """``armed_ns`` (None: no cut armed) and ``fired`` (None: not landed yet)."""
        return self._request({"cmd": "cut-state"})

    def __enter__(self) -> "Emulator":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- control socket ----------------------------------------------------

    def _request(self, req: dict[str, Any], timeout: float = REQUEST_TIMEOUT) -> dict[str, Any]:
        if not self.running:
            raise EmulatorError("emulator is not running")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                s.connect(str(self.spec.control))
                s.sendall((json.dumps(req) + "\n").encode())
                buf = b""
                while not buf.endswith(b"\n"):
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    buf += chunk
        except OSError as e:
            raise EmulatorError(f"control socket {self.spec.control}: {e}") from e
        if not buf:
            raise EmulatorError("control socket closed without a reply")
        reply = json.loads(buf)
        if not reply.get("ok"):
            raise EmulatorError(reply.get("error", "command failed"))
        return reply

    def stats(self) -> dict[str, Any]:
        return self._request({"cmd": "stats"})

    def reset_stats(self) -> None:
        self._request({"cmd": "reset-stats"})

    def inject(self, kind: str, *, block: int, page: int | None = None, bits: int | None = None) -> None:
        """``inject("bad-block", block=N)`` or ``inject("bit-errors", block=N, page=P, bits=K)``."""
        req: dict[str, Any] = {"cmd": "inject", "kind": kind, "block": block}
        if page is not None:
            req["page"] = page
        if bits is not None:
            req["bits"] = bits
        self._request(req)

    # -- write log and crash states -----------------------------------------

    def log_start(self, log_dir: Path | str | None = None) -> Path:
        """Starts the write log (the device must be blank: start it before
        mkfs). Returns the log directory (default ``<state>/crashlog``)."""
        req: dict[str, Any] = {"cmd": "log-start"}
        if log_dir is not None:
            req["dir"] = str(log_dir)
        return Path(self._request(req)["dir"])

    def log_mark(self, label: str) -> int:
        """Puts a labelled record into the log (e.g. where the workload
        begins: only cuts after the first mark are listed by default).
        Returns its record number."""
        return int(self._request({"cmd": "log-mark", "label": label})["pos"])

    def log_stop(self) -> dict[str, Any]:
        """Ends the write log; its states can then be listed and served."""
        return self._request({"cmd": "log-stop"})

    def crash_states(self, *, after: str | int | None = None, seed: int = 1, subsets: int = 4,
                     tears: int = 2, marks: bool = False, images: bool = False) -> CrashListing:
        """Every acknowledged flush after ``after`` (a mark's label or a
        record; default the first mark), and per interval between flushes
        the plain cut, up to ``subsets`` subsets of its volatile writes and up
        to ``tears`` torn programs, sampled with ``seed``; with ``marks``, also
        the plain cut right after each mark that holds something new; with
        ``images``, each state's device image class (equal exactly when two
        states hold the same image)."""
        # a listing with image classes reads the whole write log: minutes for thousands of states on a
        # loaded host (ext4's 3 494 of a 400-record log passed 120 s at load 10), not a stuck emulator
        return CrashListing.from_json(self._request({"cmd": "crash-states",
                                                     **_bounds(after, seed, subsets, tears, marks, images)},
                                                    timeout=LISTING_TIMEOUT))

    def crash_switch(self, state: str) -> dict[str, Any]:
        """Serves crash state ``state`` through the device file (``"live"``:
        the live device again). Writes while a state is served go to a
        scratch overlay dropped at the next switch; the guest must drop its
        buffers (``blockdev --flushbufs``) after a switch."""
        return self._request({"cmd": "crash-switch", "state": str(state)})

    def crash_image(self, state: str, path: Path | str) -> dict[str, Any]:
        """Writes crash state ``state``'s device image to ``path``."""
        return self._request({"cmd": "crash-image", "state": str(state), "path": str(path)})
