"""Interrupts of flashbed's commands, then a scan for what they left behind (issue 42: a lab
stopped by Ctrl-C, SIGTERM or SIGKILL left `~/.uml/<umid>/`, processes and temporary files).

Each interrupt starts one command as a user would (its own session, the temporary directory a
private one), sends it SIGINT (Ctrl-C: to its whole process group, as a terminal does), SIGTERM
or SIGKILL (to flashbed's process alone, as `kill` does) at a random moment, and waits for it
and everything it started to end. The scan then counts what is left:

  - entries of `~/.uml` that were not there before (UML's own directory, used without uml_dir=);
  - processes still alive in the command's session;
  - mounts under the private temporary directory or the command's own directory;
  - `flashbed-*` in the temporary directory: a killed flashbed cannot remove its own, so they
    are counted twice, right after each interrupt (the next command's to remove) and after one
    more command at the end (which must have removed them all);
  - files and directories the command made or changed outside its own output (a user's canary
    file beside it, a run's results it only reads).

`flashbed bench leftovers` prints the counts; each must be 0 (exit 1 otherwise). The unit
tests run a few interrupts of commands that boot no lab (tests/unit/test_fuzz_interrupts.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


@dataclass(frozen=True)
class Command:
    """A command to interrupt: its arguments (`{out}`: its own output, `{run}`: a finished run it
    reads), the seconds it takes about (the interrupts fall in 0..that), whether it boots the lab,
    and the names of its own outputs inside the run (a report written into the run itself)."""

    name: str
    argv: tuple[str, ...]
    seconds: float
    lab: bool = False
    in_run: tuple[str, ...] = ()


REPORT_FILES = ("report.html", "report.md", "summary.json", "report-figures", ".flashbed-report.json")
COMMANDS = {c.name: c for c in (
    Command("results", ("results", "{run}"), 1.5),
    Command("report", ("report", "{run}"), 2.5, in_run=REPORT_FILES),
    Command("report --out", ("report", "{run}", "--out", "{out}"), 2.5),
    Command("probe --out FILE", ("probe", "plain-file@64M", "--out", "{file}"), 1.5),
    Command("bench clock --keep", ("bench", "clock", "--keep", "{out}"), 1.5),
    Command("run refused at the edge", ("run", "--fs", "f2fs", "--study", "bigfile", "--device", "emmc-8g@64M",
                                         "--set", "bigfile.size=32M", "--out", "{out}", "--no-report"), 2.5),
    Command("lab smoke", ("lab", "smoke", "--fs", "ext4", "--out", "{out}"), 4.0, lab=True),
    Command("run", ("run", "--fs", "ext4", "--study", "mkfs", "--device", "plain-file@512M", "--out", "{out}",
                    "--no-report"), 7.0, lab=True),
)}
CHEAP = tuple(n for n, c in COMMANDS.items() if not c.lab)
LAB = tuple(n for n, c in COMMANDS.items() if c.lab)


@dataclass
class Found:
    """What the scans counted, by kind, with examples."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    examples: list[str] = field(default_factory=list)

    def add(self, kind: str, what: list[str]) -> None:
        self.counts[kind] += len(what)
        self.examples += [f"{kind}: {w}" for w in what[:3]]


KINDS = ("~/.uml entries", "processes", "mounts", "flashbed-* in tmp", "files outside the output")


def _tree(root: Path, skip: Callable[[Path], bool]) -> dict[str, str]:
    """Every entry under `root` but the skipped ones: a file by its hash, a link by its target."""
    out: dict[str, str] = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [n for n in dirs if not skip(Path(d) / n)]
        for n in dirs + files:
            p = Path(d) / n
            if skip(p):
                continue
            if p.is_symlink():
                out[str(p)] = "-> " + os.readlink(p)
            elif p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[str(p)] = "dir"
    return out


def _uml_entries(home: Path) -> set[str]:
    try:
        return set(os.listdir(home / ".uml"))
    except OSError:
        return set()


def _alive(sid: int, root: Path) -> list[str]:
    """Processes still alive of session `sid`, or naming a path under `root` on their command line
    (a lab kernel, an emulator: each in a session of its own), as 'pid name'; zombies are dead."""
    out, mark = [], os.fsencode(str(root))
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            stat = (p / "stat").read_text()
            cmdline = (p / "cmdline").read_bytes()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if rest[0] != "Z" and (int(rest[3]) == sid or mark in cmdline):
            out.append(f"{p.name} {name}")
    return out


def _mounts_under(*roots: Path) -> list[str]:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    points = [line.split()[4].replace("\\040", " ") for line in lines]
    return [p for p in points if any(p == str(r) or p.startswith(str(r) + "/") for r in roots)]


def _leftover_tmp(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.glob("flashbed-*"))


class Sandbox:
    """One scan's world: a user's directory (a canary file, a finished run, the outputs) and a
    private temporary directory."""

    def __init__(self, root: Path, flashbed: list[str], make_run: Callable[[Path], Path]):
        self.root, self.flashbed = root, flashbed
        self.cwd, self.tmp = root / "cwd", root / "tmp"
        self.cwd.mkdir(parents=True)
        self.tmp.mkdir()
        (self.cwd / "canary.txt").write_text("a user's file beside the outputs\n")
        self.run = make_run(self.cwd / "finished-run")
        self.home = root / "home"  # a command that boots no lab gets a home of its own (below)
        self.home.mkdir()
        self.uml_before = {h: _uml_entries(h) for h in (self.home, Path.home())}

    def env(self, cmd: Command) -> dict[str, str]:
        """The command's environment: the private temporary directory; and for a command that boots
        no lab, a home of its own, so that a `~/.uml` entry there is its and no other program's
        (a command that boots the lab keeps the user's home, where its built kernels are)."""
        env = dict(os.environ, TMPDIR=str(self.tmp), PYTHONUNBUFFERED="1")
        if not cmd.lab:
            env["HOME"] = str(self.home)
        return env

    def uml_new(self) -> list[str]:
        """`~/.uml` entries that were not there when the scan began, in either home."""
        return sorted(f"{h / '.uml' / e}" for h, was in self.uml_before.items() for e in _uml_entries(h) - was)

    def argv(self, cmd: Command, out: Path) -> list[str]:
        subs = {"{out}": str(out), "{file}": str(out), "{run}": str(self.run)}
        return [*self.flashbed, *(subs.get(a, a) for a in cmd.argv)]

    def interrupt(self, cmd: Command, sig: signal.Signals, delay: float, n: int, found: Found) -> str:
        """One interrupt of `cmd`, then the scan of what only the next command may remove."""
        out = self.cwd / f"out-{n}"
        if cmd.name == "probe --out FILE":
            out.write_text("a user's file named as --out\n")
        own = [out] + [self.run / name for name in cmd.in_run]
        before = _tree(self.cwd, lambda p: any(p == o or o in p.parents for o in own))
        proc = subprocess.Popen(self.argv(cmd, out), cwd=self.cwd, env=self.env(cmd), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(delay)
        ended = proc.poll() is not None
        if not ended:
            with contextlib.suppress(ProcessLookupError):
                if sig == signal.SIGINT:
                    os.killpg(proc.pid, sig)  # Ctrl-C: the terminal signals the whole foreground group
                else:
                    os.kill(proc.pid, sig)
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            found.add("processes", [f"flashbed itself, {sig.name} after {delay:.2f} s of {cmd.name}"])
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
        deadline = time.monotonic() + 15  # what it started ends with it (its labs die with their parent)
        while _alive(proc.pid, self.root) and time.monotonic() < deadline:
            time.sleep(0.1)
        alive = _alive(proc.pid, self.root)
        found.add("processes", [f"{p} (after {sig.name} of {cmd.name})" for p in alive])
        for p in alive:  # ended here, so the next interrupt starts clean (and counted above)
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(p.split()[0]), signal.SIGKILL)
        found.add("~/.uml entries", self.uml_new())
        found.add("mounts", _mounts_under(self.tmp, self.cwd))
        after = _tree(self.cwd, lambda p: any(p == o or o in p.parents for o in own))
        changed = sorted(str(Path(p).relative_to(self.cwd)) for p in set(before) | set(after)
                         if before.get(p) != after.get(p))
        found.add("files outside the output", [f"{c} ({sig.name} of {cmd.name})" for c in changed])
        return f"{cmd.name}: {'ended by itself' if ended else sig.name} at {delay:.2f} s, exit {rc}"


def scan(commands: tuple[str, ...], interrupts: int, seed: int, root: Path, flashbed: list[str],
         make_run: Callable[[Path], Path], say: Callable[[str], None] = lambda s: None) -> tuple[Found, Found]:
    """`interrupts` interrupts of `commands` in turn, each at a random moment. Returns what was found right after the interrupts
    (flashbed-* in tmp: the next command's to remove, so counted but allowed) and after one more
    command at the end, left to finish."""
    rnd = random.Random(seed)
    box = Sandbox(root, flashbed, make_run)
    during, final = Found(), Found()
    for n in range(interrupts):
        cmd = COMMANDS[commands[n % len(commands)]]
        # each command gets each signal in the first three rounds (shifted a signal per command, so
        # that a single round already sends all three), then a random one
        sig = SIGNALS[(n // len(commands) + n % len(commands)) % len(SIGNALS)] \
            if n < len(SIGNALS) * len(commands) else rnd.choice(SIGNALS)
        say(box.interrupt(cmd, sig, rnd.uniform(0.05, cmd.seconds), n, during))
        during.add("flashbed-* in tmp", _leftover_tmp(box.tmp))
    last = COMMANDS["lab smoke" if any(COMMANDS[c].lab for c in commands) else "results"]
    subprocess.run(box.argv(last, box.cwd / "out-last"), cwd=box.cwd, env=box.env(last), capture_output=True,
                   timeout=600)
    final.add("~/.uml entries", box.uml_new())
    final.add("mounts", _mounts_under(box.tmp, box.cwd))
    final.add("flashbed-* in tmp", _leftover_tmp(box.tmp))
    return during, final


def failed(during: Found, final: Found) -> int:
    """The leftovers that count: everything after the last command, and everything right after an
    interrupt but a killed flashbed's temporary directories (its next command removes those)."""
    return sum(final.counts.values()) + sum(v for k, v in during.counts.items() if k != "flashbed-* in tmp")


def flashbed_command() -> list[str]:
    """This installation's flashbed, as a user runs it."""
    beside = Path(sys.executable).with_name("flashbed")
    return [str(beside)] if beside.exists() else [shutil.which("flashbed") or "flashbed"]


def bench(interrupts: int, commands: str, seed: int) -> int:
    """`flashbed bench leftovers`: the scan, its counts printed; 1 if anything was left."""
    from ..errors import FlashbedError
    names = {"lab": LAB, "cheap": CHEAP}.get(commands) or tuple(c.strip() for c in commands.split(","))
    unknown = [c for c in names if c not in COMMANDS]
    if unknown:
        raise FlashbedError(f"--commands {unknown[0]}: not one of lab, cheap, {', '.join(COMMANDS)}")
    if interrupts < 1:
        raise FlashbedError("--interrupts must be at least 1")
    start = time.monotonic()
    flashbed = flashbed_command()

    def finished_run(where: Path) -> Path:  # a run the reading commands read: one tiny cell, when one needs it
        if any("{run}" in COMMANDS[c].argv for c in names):
            subprocess.run([*flashbed, "run", "--fs", "ext4", "--study", "mkfs", "--device", "plain-file@512M",
                            "--out", str(where), "--no-report"], capture_output=True, timeout=600, check=True)
        return where

    with tempfile.TemporaryDirectory(prefix="leftovers-") as tmp:
        during, final = scan(names, interrupts, seed, Path(tmp), flashbed, finished_run,
                             lambda s: print(s, file=sys.stderr))
    print(f"{interrupts} interrupts (SIGINT, SIGTERM, SIGKILL in turn, then at random) of {', '.join(names)}, "
          f"at random moments, in {time.monotonic() - start:.0f} s")
    print("right after each: " + ", ".join(f"{k} {v}" for k, v in during.counts.items())
          + " (a killed flashbed's own: its next command removes them)")
    print("after one more command: " + ", ".join(f"{k} {v}" for k, v in final.counts.items()
                                                 if k in ("~/.uml entries", "mounts", "flashbed-* in tmp")))
    for e in (final.examples + during.examples)[:10]:
        if not e.startswith("flashbed-* in tmp") or e in final.examples:
            print("  " + e)
    return 1 if failed(during, final) else 0
