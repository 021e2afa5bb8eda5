"""A board over SSH as a lab (`flashbed run --target ssh://USER@HOST[:PORT]`): the same
studies, on the board's own kernel, storage controller and device.

    Board       the connection (ssh.py) and what the board is: its identity, its device
                checked on the board with the same rules as a host device (realdev.py)
    BoardLab    a Lab: each boot's steps.json (with the board's GuestLayout), the run
                directory's files and the guest programs go over in a tar stream; the
                agent runs under the board's python3 (boardrun.py relays its host calls
                over the SSH session); the run directory's files come back
    BoardSession  the board's device: no disks for a lab to attach, no statistics, no
                write log; a power switch only with --power-cmd (power.py: PoweredBoardSession),
                else the powercut study is refused

A power cut (--power-cmd): the switch turns the board off at the seeded moment, so the
boot ends with the board; the boot that was cut turns it back on, waits for SSH to
answer (bounded) and only then fetches its run directory (the workload's log, fsync'ed
on the board's own storage) for the recovery that follows.

Each boot runs in a private mount namespace on the board (unshare), with its own
/tmp: its mounts end with it and are never seen by the board's other processes.
The guest programs and run directories live in one directory under /var/tmp on
the board, removed when the run ends.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import Clock, Pace
from ..devices import realdev
from ..devices.presets import Device
from ..errors import FlashbedError
from ..status import BootStatus
from ..stopping import Stopping, on_stop, stopping
from .boundary import GUEST_DIR, BootResult, BootSpec, GuestLayout, HostHandler, StepResult
from .guest.protocol import HostAnswer, HostCall, steps_file
from .power import BOOT_WAIT, OFF_HOLD, Action, PowerCommand
from .ssh import Ssh, SshAddress

BACKEND = "board"
_LIVE: set[threading.Event] = set()  # the kill switch of every boot running now (Ctrl-C: stopping.kill_all)


def _stop_all() -> None:
    for kill in list(_LIVE):
        kill.set()


on_stop(_stop_all)
BOARD_BASE = re.compile(r"/var/tmp/flashbed\.[A-Za-z0-9]{6}")  # mktemp's names for a run's working directory
KEEP_BYTES = 8 << 20  # run directory files larger than this stay on the board (fill trees, images)
SHARE_BYTES = 8 << 20  # the host's run directory files sent to each boot (fio job files, previous logs)


@dataclass(frozen=True)
class BoardFacts:
    """What the board said about itself and its device (boardcheck.py)."""

    board: dict[str, Any]
    device: dict[str, Any]


class Board:
    """One board: its connection, its working directory, its identity."""

    def __init__(self, address: SshAddress, power: PowerCommand | None = None, boot_wait: float = BOOT_WAIT):
        self.address = address
        self.ssh = Ssh(address)
        self.power = power  # --power-cmd: the board's power switch
        self.boot_wait = boot_wait
        self.base = ""  # the board's working directory
        self.identity: dict[str, Any] = {}
        self.cells = threading.Lock()  # held by a cell's session: its boots alone use the device
        self.off = False  # its power is cut (set before the switch runs: a boot ending meanwhile sees it)
        self._switch = threading.Lock()  # one power command at a time
        self.clock_offset = 0.0  # the board's wall clock minus this machine's (measure_clock)
        self.booting = False  # switched on again after a cut and not waited for (switch_on)

    def open(self, wait: float = 10.0) -> "Board":
        from .ssh import sweep
        left = sweep()  # an earlier flashbed killed with SIGKILL: its master connections ended here
        self.ssh.start(wait)
        try:
            r = self.ssh.run("command -v python3; command -v tar", check=False)
            found = r.stdout.decode(errors="replace").split()
            if not any(p.endswith("/python3") for p in found):
                raise FlashbedError(f"{self.address.url} has no python3: flashbed's guest programs run on the board's "
                                    f"Python 3 (Debian: apt install python3-minimal)")
            if not any(p.endswith("/tar") for p in found):
                raise FlashbedError(f"{self.address.url} has no tar: flashbed copies its guest programs with a tar "
                                    f"stream (install tar or busybox)")
            self._remove_left(left)
            self.measure_clock()
            self.base = self.ssh.run("mktemp -d /var/tmp/flashbed.XXXXXX").stdout.decode().strip()
            self.ssh.note(base=self.base)
            self.put_tools()
        except BaseException:
            self.close()
            raise
        return self

    def _remove_left(self, left: list[dict]) -> None:
        """This board's working directories that killed flashbeds left (as their control directories
        noted them): removed, each said in one line. Only a directory of flashbed's own pattern."""
        for note in left:
            base = str(note.get("base") or "")
            if note.get("url") != self.address.url or not BOARD_BASE.fullmatch(base):
                continue
            self.ssh.run(f"rm -rf {shlex.quote(base)}", check=False)
            print(f"flashbed: removed {base} on {self.address.url}, left by a flashbed that was killed (its SSH "
                  f"connection is ended too)", file=sys.stderr)

    def cut(self) -> dict[str, Any]:
        """Cut the board's power now (the powercut study's cut)."""
        assert self.power is not None
        if stopping():  # Ctrl-C came first: its boot is being stopped, and a cut now meant a reboot to wait for
            return {"power": "on", "not_cut": "flashbed is stopping (Ctrl-C)"}
        self.off = True
        with self._switch:
            seconds = self.power.run(Action.OFF)
        # the power is off by the time the switch's command returns, at the latest: no
        # acknowledgement may come later (powercut.ack_timing)
        # off_wall on the board's clock: the workload's acknowledgements are stamped with it
        return {"power": "off", "command": self.power.command(Action.OFF), "seconds": round(seconds, 3),
                "off_wall": time.time() + self.clock_offset, "board_clock_offset": round(self.clock_offset, 3)}

    def measure_clock(self) -> float:
        """The board's wall clock against this machine's, measured over the connection (the midpoint
        of the round trip): a board's clock is its own (an RTC, NTP or none, set again at each boot),
        and set against this machine's cut its acknowledgements would come before or after it by
        the difference. Measured at each connection, so after every power cut too."""
        t0 = time.time()
        r = self.ssh.run("date +%s.%N", check=False)
        t1 = time.time()
        self.clock_offset = board_clock_offset(r.stdout.decode(errors="replace") if r.returncode == 0 else "",
                                               t0, t1)
        return self.clock_offset

    def back_on(self) -> None:
        """After a cut: power on, and wait until SSH answers (--boot-wait, bounded); a board that
        does not answer is power-cycled once and waited for as long again, then one line."""
        if not self.off:
            return
        assert self.power is not None
        with self._switch:
            time.sleep(OFF_HOLD)
            self.power.run(Action.ON)
            try:
                self.ssh.reconnect(self.boot_wait)
            except FlashbedError:
                # said as it happens: the second wait is as long again, and a run seemed stuck without it
                print(f"flashbed: {self.address.url} did not answer SSH within {self.boot_wait:.0f}s of its power "
                      f"on (--boot-wait): power-cycling it ('{self.power.command(Action.CYCLE)}') and waiting "
                      f"{self.boot_wait:.0f}s more", file=sys.stderr)
                self.power.run(Action.CYCLE)
                try:
                    self.ssh.reconnect(self.boot_wait)
                except FlashbedError as e:
                    raise FlashbedError(f"{self.address.url} did not answer SSH within {self.boot_wait:.0f}s of "
                                        f"'{self.power.command(Action.ON)}', nor within {self.boot_wait:.0f}s of "
                                        f"'{self.power.command(Action.CYCLE)}' ({e}): a board that boots slower "
                                        f"needs a longer --boot-wait SECONDS; else check that it boots and starts "
                                        f"its sshd") from None
            self.off = False
            self.measure_clock()  # a board sets its clock again at each boot
            # a board that cleans /var/tmp at boot, or whose filesystem lost their blocks at the
            # cut: the guest programs again, checked by their bytes, not their names
            if not self.tools_intact():
                self.put_tools()

    def put_tools(self) -> None:
        """The guest programs into the board's tools directory, then made durable there (sync): a
        cut soon after the copy left them zero-length on the board's ext4 (delayed allocation),
        existing by name, and the recovery's boot ran an empty boardrun.py, which printed nothing
        and exited 0 (an emulated board's second run, cut within seconds of its copy)."""
        self.ssh.put(GUEST_DIR, _tool_names(), self.tools)
        self.ssh.run("sync", check=False)

    def tools_intact(self) -> bool:
        """Every guest program on the board has this flashbed's bytes (sha256sum: coreutils and
        busybox alike; a board without it gets them copied again)."""
        names = _tool_names()
        want = {n: hashlib.sha256((GUEST_DIR / n).read_bytes()).hexdigest() for n in names}
        r = self.ssh.run(f"cd {shlex.quote(self.tools)} && sha256sum -- {' '.join(shlex.quote(n) for n in names)}",
                         check=False)
        if r.returncode != 0:
            return False
        got = {}
        for line in r.stdout.decode(errors="replace").splitlines():
            digest, _, name = line.strip().partition("  ")
            got[name.lstrip("*")] = digest
        return got == want

    def switch_on(self) -> None:
        """Power on after a cut, without waiting for the board (flashbed is stopping): never left off."""
        if self.off and self.power is not None:
            try:
                with self._switch:
                    self.power.run(Action.ON)
            except FlashbedError:
                pass
            self.off = False
            self.booting = True

    def close(self) -> None:
        self.switch_on()  # never leave a board off
        if self.base and self.booting:  # it is rebooting: its working directory is left, said once
            print(f"flashbed: {self.base} is left on {self.address.url}, which was booting after its power cut "
                  f"when flashbed stopped: remove it there (rm -rf {self.base})", file=sys.stderr)
        elif self.base:
            try:
                self.ssh.run(f"rm -rf {shlex.quote(self.base)}", check=False)
            except FlashbedError:
                pass  # a board that stopped answering: its directory stays
        self.base = ""
        self.ssh.close()

    @property
    def tools(self) -> str:
        return f"{self.base}/tools"

    def check(self, node: str) -> dict[str, Any]:
        """boardcheck.py's facts about `node` on the board."""
        r = self.ssh.run(f"python3 -S -I {shlex.quote(self.tools)}/boardcheck.py {shlex.quote(node)} "
                         f"{realdev.BLANK_READ}")
        facts = json.loads(r.stdout)
        if facts.get("error"):
            raise FlashbedError(f"{self.address.url}: {facts['error']}")
        self.identity = facts["board"]
        return facts

    def load_device(self, node: str, destroy: tuple[str, ...]) -> Device:
        """The board's device `node`, checked on the board as a host device is (one line per refusal)."""
        if node.startswith("/dev/mtd"):
            raise FlashbedError(f"{node}: flashbed does not drive a board's raw NAND (UBIFS, JFFS2, YAFFS2 on "
                                f"/dev/mtdN) yet: give a block device (/dev/mmcblkNpM, /dev/sdX), or run raw NAND "
                                f"filesystems on a nand preset in the lab")
        facts = self.check(node)
        ident, why = _judge(facts, destroy, self.address.url)
        if why:
            raise FlashbedError(why)
        ident["node"] = node
        ident["board"] = self.identity
        name = f"{self.address.host}-{realdev.label(ident)}"
        what = self.identity.get("model") or self.identity.get("dmi") or self.identity.get("release")
        info = {"name": name, "kind": BACKEND, "node": node, "target": self.address.url,
                "capacity_bytes": ident["size_bytes"], "identity": ident, "power_switch": self.power is not None,
                "description": f"{node} on {self.address.url} ({what})"}
        if "judged_blank" in ident:
            info["judged_blank"] = f"{self.address.url}: {ident.pop('judged_blank')}"
        return Device(name=name, path=Path(node), kind="block", capacity=ident["size_bytes"],
                      page_size=max(realdev.SECTOR, ident.get("physical_block_size", 512)), erase_block=0,
                      preset_capacity=ident["size_bytes"], info=info)

    def flashbench(self) -> str:
        """How the board runs flashbench: its own, or this machine's copied into the guest
        programs' directory when both are the same architecture; one line when neither."""
        if self.ssh.run("command -v flashbench", check=False).stdout.strip():
            return "flashbench"
        arch = self.ssh.run("uname -m").stdout.decode().strip()
        here = shutil.which("flashbench")
        if here is None:
            raise FlashbedError(f"{self.address.url} has no flashbench, and this machine has none to copy over: "
                                f"install flashbench on the board (Debian: apt install flashbench)")
        if arch != os.uname().machine:
            raise FlashbedError(f"{self.address.url} has no flashbench, and this machine's is for {os.uname().machine}, "
                                f"the board is {arch}: install flashbench on the board (Debian: apt install flashbench)")
        real = Path(here).resolve()
        self.ssh.put(real.parent, [real.name], self.tools)
        return f"{self.tools}/{real.name}"

    def missing(self, tools: list[str]) -> list[str]:
        """Which of `tools` the board's shell does not find."""
        if not tools:
            return []
        r = self.ssh.run("for t in " + " ".join(shlex.quote(t) for t in tools) +
                         "; do command -v \"$t\" >/dev/null || echo \"$t\"; done", check=False)
        return r.stdout.decode(errors="replace").split()

    def versions(self, *packages: str) -> dict[str, str]:
        """The board's Debian package versions of `packages` ("unknown" where dpkg does not say)."""
        out = {}
        for pkg in packages:
            r = self.ssh.run(f"dpkg-query -W -f '${{Version}}' {shlex.quote(pkg)}", check=False)
            out[pkg] = r.stdout.decode().strip() if r.returncode == 0 and r.stdout.strip() else "unknown"
        return out

    def lacking(self, fstypes: set[str]) -> str | None:
        """One line naming what the board lacks for these filesystems (its kernel, its mkfs tools, fio)."""
        have = set(self.identity.get("filesystems", ())) | set(self.identity.get("fs_modules", ()))
        missing_fs = sorted(f for f in fstypes if f not in have)
        tools = [t for t in self.identity.get("missing_tools", ())
                 if t == "fio" or t.removeprefix("mkfs.") in fstypes]
        if missing_fs or tools:
            what = ([f"no {', '.join(missing_fs)} in its kernel (/proc/filesystems, its modules)"] if missing_fs
                    else []) + \
                   ([f"no {', '.join(tools)}"] if tools else [])
            return f"{self.address.url} lacks what the run needs: {'; '.join(what)}"
        return None


def board_clock_offset(said: str, sent: float, answered: float) -> float:
    """The board's clock minus this machine's from its `date +%s.%N` answer, sent and answered at
    these times of ours; 0 where the board did not say (busybox's date has no %N: whole seconds)."""
    try:
        theirs = float(said.strip().replace("%N", "0"))
    except ValueError:
        return 0.0
    return theirs - (sent + answered) / 2


def _judge(facts: dict[str, Any], destroy: tuple[str, ...], url: str) -> tuple[dict[str, Any], str | None]:
    """The board's sysfs and proc, rebuilt here, judged by realdev's rules."""
    node = facts["node"]
    with tempfile.TemporaryDirectory(prefix="flashbed-board-") as tmp:
        root = Path(tmp)
        for path, text in facts["sysfs"].items():
            p = root / path.lstrip("/")
            p.parent.mkdir(parents=True, exist_ok=True)
            if not p.exists():
                p.write_text(text)
        for path, target in sorted(facts["links"].items(), key=lambda kv: kv[0].count("/")):
            p = root / path.lstrip("/")
            p.parent.mkdir(parents=True, exist_ok=True)
            (root / target.lstrip("/")).mkdir(parents=True, exist_ok=True)
            if not p.exists() and not p.is_symlink():
                p.symlink_to(root / target.lstrip("/"))
        for name, text in facts["proc"].items():
            (root / "proc" / name).parent.mkdir(parents=True, exist_ok=True)
            (root / "proc" / name).write_text(text)
        host = realdev.Host(sysfs=root / "sys", proc=root / "proc", dev=root / "dev")
        devno = os.makedev(*facts["devno"])
        sd = realdev.sys_dir(devno, host)
        ident = realdev.identity(sd)
        f = realdev.gather(node, devno, sd, ident, host)
        why = realdev.refusal(f)
    why = why and why.replace("the host's", "the board's")
    if why is None and facts["exclusive"]:
        why = (f"{node} is in use on the board (mounted, swap, RAID or device-mapper): release it first"
               if facts["exclusive"] == "busy" else f"{node}: cannot open it on the board: {facts['exclusive']}")
    if why is None and node not in destroy:
        sigs = facts["signatures"]
        if sigs is None:
            why = (f"{url} has no wipefs to see what {node} holds: add --destroy-data-on {node} if its data may "
                   f"be destroyed")
        else:
            why = realdev.signature_refusal(node, sigs, len(f.parts) - 1)
        z = facts.get("zeroes") or {"error": "the board's check did not read it"}
        if why is None and "error" in z:
            why = f"{node}: cannot read it on the board to see whether it holds data: {z['error']}"
        elif why is None:
            zeroes = realdev.Zeroes(z["first_data"], z["read"], z["size"])
            why = realdev.data_refusal(node, zeroes)
            if why is None:
                ident["judged_blank"] = realdev.blank_note(node, zeroes)
    return ident, (f"{url}: {why}" if why else None)


class BoardSession:
    """The board's device for a cell: the device is the board's own, attached to nothing
    here; no capability (statistics, write log, power switch). A power cut the mount study
    asks for is the boot stopped at once (boardrun.py: filesystems shut down, processes killed)."""

    def __init__(self, device: Device, scratch: Path, seed: int = 1, pace: Pace = Pace.REAL,
                 clock: Clock = Clock.REAL, held: threading.Lock | None = None):
        self.device = device
        self._held = held

    def __enter__(self) -> "BoardSession":
        if self._held is not None:  # one cell at a time on the board's device
            self._held.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._held is not None:
            self._held.release()

    def disks(self) -> tuple:
        return ()

    def nandsim(self) -> None:
        return None

    def mem_mb(self) -> int:
        return 0


class PoweredBoardSession(BoardSession):
    """The board's device with its power switch (--power-cmd): the powercut study runs."""

    def __init__(self, device: Device, scratch: Path, seed: int = 1, pace: Pace = Pace.REAL,
                 clock: Clock = Clock.REAL, held: threading.Lock | None = None, board: "Board | None" = None):
        super().__init__(device, scratch, seed, pace, clock, held)
        self.board = board

    def cut_power(self) -> dict[str, Any] | None:
        if self.board is None:
            raise FlashbedError("this board session has no board to cut the power of")
        return self.board.cut()

    def restart_if_cut(self) -> None:
        if self.board is not None:
            self.board.back_on()


def session_for(device: Device) -> type[BoardSession]:
    """The session class of a board's device: with a power switch or without."""
    return PoweredBoardSession if device.info.get("power_switch") else BoardSession


class BoardLab:
    """One cell's boots on the board (boundary.Lab)."""

    def __init__(self, board: Board, device: str):
        self.board = board
        self.layout = GuestLayout(device=device, tools=board.tools, fsync_logs=board.power is not None)

    @property
    def release(self) -> str:
        return self.board.identity.get("release", "")

    def open_session(self, device: Device, scratch: Path, seed: int = 1, pace: Pace = Pace.REAL,
                     clock: Clock = Clock.REAL) -> BoardSession:
        """The board's device keeps its own time: the pace and clock asked for change nothing."""
        if session_for(device) is PoweredBoardSession:
            return PoweredBoardSession(device, scratch, seed, pace, clock, held=self.board.cells, board=self.board)
        return BoardSession(device, scratch, seed, pace, clock, held=self.board.cells)

    def boot(self, spec: BootSpec, host: HostHandler | None = None,
             kill: threading.Event | None = None) -> BootResult:
        if stopping():
            raise Stopping("flashbed is stopping: no new boot on the board")
        kill = kill or threading.Event()
        _LIVE.add(kill)
        try:
            return self._boot(spec, host, kill)
        except BaseException:
            # Ctrl-C in this thread (a probe boots on the main one, no executor to kill_all): the
            # agent on the board is told to stop, else its fio ran on and the board, busy, kept
            # flashbed's own clean-up (its working directory removed over SSH) waiting for minutes
            kill.set()
            raise
        finally:
            _LIVE.discard(kill)

    def _boot(self, spec: BootSpec, host: HostHandler | None, kill: threading.Event) -> BootResult:
        ssh, run_dir = self.board.ssh, spec.run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("result.json", "steps.json"):
            (run_dir / stale).unlink(missing_ok=True)
        (run_dir / "steps.json").write_text(json.dumps(steps_file(spec.steps, self.layout.env()), indent=1))
        remote = f"{self.board.base}/run"
        ssh.run(f"rm -rf {remote} && mkdir -p {remote}")
        ssh.put(run_dir, [f.name for f in sorted(run_dir.iterdir())
                          if f.is_file() and f.stat().st_size <= SHARE_BYTES and f.name != "console.log"], remote)
        # a private mount namespace and /tmp: the boot's mounts end with it
        inner = (f"mount -t tmpfs -o mode=1777 flashbed-tmp /tmp; cd {remote} && "
                 f"exec python3 -S -I {self.board.tools}/boardrun.py {remote}")
        cmd = (f"export FLASHBED_DEV={shlex.quote(self.layout.device)}; if command -v unshare >/dev/null; then "
               f"exec unshare -m --propagation private sh -c {shlex.quote(inner)}; else cd {remote} && "
               f"exec python3 -S -I {self.board.tools}/boardrun.py {remote}; fi")
        started = time.monotonic()
        proc = ssh.popen(cmd)
        console_path = run_dir / "console.log"
        ready: list[float] = []
        killed = timed_out = False
        with open(console_path, "w") as console:
            console.write(f"$ ssh {self.board.address.url} {cmd}\n")
            watcher = threading.Thread(target=_watch, args=(proc, kill, spec.timeout, started), daemon=True)
            watcher.start()
            assert proc.stdout is not None and proc.stdin is not None
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace")
                console.write(line)
                console.flush()
                if line.startswith("FLASHBED-AGENT READY") and not ready:
                    ready.append(time.monotonic() - started)
                elif line.startswith("FLASHBED-CALL "):
                    _, name, body = line.rstrip("\n").split(" ", 2)
                    threading.Thread(target=_answer, args=(proc, host, name, body, kill), daemon=True).start()
            proc.wait()
            # the power switch took the board (and this session) down: a cut, as the kill is
            killed = (kill is not None and kill.is_set()) or self.board.off
            timed_out = not killed and time.monotonic() - started > spec.timeout
        cut = self.board.off
        if cut and stopping():
            # Ctrl-C: the board is switched on again but not waited for (a reboot takes minutes on a slow
            # board); the cell is not finished, so its files on the board are not needed
            self.board.switch_on()
            raise Stopping("flashbed is stopping: the board was switched on again after its cut, not waited for")
        if cut:  # its files are on the board: it has to be up again first
            self.board.back_on()
        ssh.get(remote, run_dir, KEEP_BYTES)
        data: dict = {}
        try:
            data = json.loads((run_dir / "result.json").read_text())
        except (OSError, json.JSONDecodeError):
            pass
        steps = [StepResult(**{k: s[k] for k in StepResult.__dataclass_fields__ if k in s}) for s in data.get("steps", [])]
        status = BootStatus.derive(data.get("status", ""), timed_out=timed_out, killed=killed)
        error = data.get("error", "")
        if cut:
            error = "the board's power was cut (--power-cmd off), then turned on again"
        elif killed:
            error = "boot stopped on request (power cut: the board's filesystems shut down, its processes killed)"
        elif timed_out:
            error = f"the board's boot did not finish within {spec.timeout:.0f}s"
        elif status is BootStatus.CRASH:
            error = f"the agent on {self.board.address.url} ended without its result (ssh exit {proc.returncode})"
        return BootResult(status=status, steps=steps, boot_seconds=ready[0] if ready else None,
                          total_seconds=time.monotonic() - started, console_log=str(console_path),
                          exit_code=proc.returncode, kernel_release=data.get("uname", self.release), error=error)


def _tool_names() -> list[str]:
    return sorted(p.name for p in GUEST_DIR.glob("*.py"))


def _watch(proc, kill: threading.Event | None, timeout: float, started: float) -> None:
    """Stop the boot on a kill (a power cut) or past its time: boardrun shuts down and kills."""
    while proc.poll() is None:
        if (kill is not None and kill.is_set()) or time.monotonic() - started > timeout:
            with _WRITE:
                try:
                    proc.stdin.write(b"KILL\n")
                    proc.stdin.flush()
                except OSError:
                    pass
            try:
                proc.wait(30)
            except Exception:
                proc.kill()
            return
        time.sleep(0.02)


_WRITE = threading.Lock()


def _answer(proc, host: HostHandler | None, name: str, body: str, kill: threading.Event | None = None) -> None:
    try:
        call = HostCall.from_json(json.loads(body))
        if host is None:
            raise FlashbedError(f"no host handler for '{call.call}'")
        answer = HostAnswer(ok=True, data=host(call.call, call.args))
    except Exception as e:  # the guest gets the error; the cell decides
        answer = HostAnswer(ok=False, error=f"{type(e).__name__}: {e}")
    if kill is not None and kill.is_set():
        # the call stopped the boot (a power cut): no answer, as a lab that dies gives none;
        # answered, the workload ran on (and unmounted cleanly) before the KILL reached it
        return
    with _WRITE:
        try:
            proc.stdin.write(f"ANSWER {name} {json.dumps(answer.to_json())}\n".encode())
            proc.stdin.flush()
        except OSError:
            pass


class BoardLabs:
    """The lab factory of a board run: every cell on the one board (boundary.LabFactory)."""

    def __init__(self, board: Board):
        self.board = board

    def __call__(self, cell: Any) -> BoardLab:
        return BoardLab(self.board, str(cell.device.path))

    def describe(self) -> dict[str, Any]:
        ident = self.board.identity
        one = {"name": f"board {self.board.address.url}", "release": ident.get("release", ""),
               "uname": ident.get("uname", ""), "model": ident.get("model", ""), "target": self.board.address.url}
        return {"kernel": one, "kernels": {"board": one}}
