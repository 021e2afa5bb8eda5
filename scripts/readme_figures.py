#!/usr/bin/env python3
"""The README's measured figures, written by the measurement that produced them.

    .venv/bin/python scripts/readme_figures.py test [demo]
    .venv/bin/python scripts/readme_figures.py [test|demo] --from-log FILE [--seconds S] [--commit C]

runs each named measurement from this checkout as a whole process (`make test`: the Rust and
Python suites as CI runs them; `make demo`: the quick profile), times it on the wall clock and
reads its counts from its own closing lines, then rewrites that measurement's line between the
README's `<!-- measured -->` markers: the time, the counts, the host's CPUs, the date and the
commit it measured. Nothing is written when a measurement fails (one line says which, exit 2);
lines of measurements not run now stay as they were.

With --from-log, nothing is run: the figure is a run that already happened (CI's `.ci/run` from a
fresh clone, its output saved to FILE). Its counts come from the log's closing lines as above, its
time from --seconds (S seconds, or m:ss / h:mm:ss as a timer prints it) or else from the log's own
whole-process timing line (`/usr/bin/time -v`'s "Elapsed (wall clock) time", or the shell's `time`'s
"real"); its day is the log's, its commit --commit's or this checkout's. A log that shows a failure
(a failed test, a failed Rust suite, make's error, a non-zero exit status) writes nothing.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN = "<!-- measured: written by scripts/readme_figures.py from its run; do not edit by hand -->"
END = "<!-- end of measured figures -->"
COMMANDS = {"test": ["make", "test"], "demo": ["make", "demo"]}


@dataclass(frozen=True)
class Figure:
    what: str  # "test", "demo"
    seconds: float
    counts: str  # "1 345 passed, 2 skipped (Python); 118 passed (Rust)", or ""
    cpus: int
    day: str
    commit: str

    def line(self) -> str:
        counts = f", {self.counts}" if self.counts else ""
        return (f"- `make {self.what}`: {duration(self.seconds)}{counts} ({self.cpus} CPUs, {self.day}, "
                f"commit {self.commit})")


def duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def grouped(n: int) -> str:
    """1345 as the README writes it: 1 345."""
    return f"{n:,}".replace(",", " ")


def counts(output: str) -> str:
    """The suites' own closing lines: pytest's `N passed, M skipped ... in`, cargo's `test result`."""
    parts = []
    py = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed)", line) and " in " in line
          and "test result" not in line]
    if py:
        found = dict((k, int(n)) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", py[-1]))
        parts.append(", ".join(f"{grouped(n)} {k}" for k, n in found.items()) + " (Python)")
    rust = [int(n) for n in re.findall(r"test result: ok\. (\d+) passed", output)]
    if rust:
        parts.append(f"{grouped(sum(rust))} passed (Rust)")
    return "; ".join(parts)


# a failure anywhere in make test's output: cargo's, make's, a whole-process timer's exit status
FAILED = (re.compile(r"^test result: FAILED.*", re.M), re.compile(r"^error: test failed.*", re.M),
          re.compile(r"^make(\[\d+\])?: \*\*\*.*", re.M), re.compile(r"^\s*Exit status: [1-9].*", re.M),
          re.compile(r"^Command exited with non-zero status.*", re.M))


def failure(output: str) -> str | None:
    """The line of `output` that shows a failure: pytest's closing line counting failures or errors
    (the last such closing line), or one of FAILED's; None when the run passed."""
    ends = re.findall(r"^.*\d+ (?:passed|failed|errors?|skipped)\b.* in [\d.]+s.*$", output, re.M)
    ends = [e for e in ends if "test result" not in e]
    if ends and re.search(r"\b\d+ (failed|errors?)\b", ends[-1]):
        return ends[-1].strip(" =")
    return next((m.group(0).strip() for f in FAILED for m in [f.search(output)] if m), None)


def clock_seconds(text: str) -> float:
    """'835', '835.2', '15:38.59', '1:02:03' or '15m38.590s' in seconds (ValueError otherwise)."""
    t = text.strip()
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?([\d.]+)s", t)
    if m:
        return int(m[1] or 0) * 3600 + int(m[2] or 0) * 60 + float(m[3])
    if re.fullmatch(r"\d+(:\d{1,2}){0,2}(\.\d+)?", t):
        seconds = 0.0
        for part in t.split(":"):
            seconds = seconds * 60 + float(part)
        return seconds
    raise ValueError(f"{text!r} is not a time: give seconds (835), m:ss (13:55) or h:mm:ss")


def logged_seconds(output: str) -> float | None:
    """The whole-process time a log ends with: `/usr/bin/time -v`'s elapsed line, or `time`'s real."""
    found = re.findall(r"Elapsed \(wall clock\) time \([^)]*\): ([\d:.]+)\s*$", output, re.M) or \
        re.findall(r"^real\s+(\S+)\s*$", output, re.M)
    return clock_seconds(found[-1]) if found else None


def from_log(what: str, log: Path, seconds: str | None, commit: str | None) -> Figure:
    """The figure of a run that already happened, from its saved output (ValueError: what is wrong)."""
    try:
        output = log.read_text(errors="replace")
    except OSError as e:
        raise ValueError(f"cannot read the log {log}: {e.strerror}") from None
    failed = failure(output)
    if failed:
        raise ValueError(f"the log {log} shows a failure ({failed[:80]}): the README is left as it was")
    found = counts(output)
    if what == "test" and "(Python)" not in found:
        raise ValueError(f"the log {log} has no pytest closing line ('N passed ... in S s'): is it make test's output?")
    took = clock_seconds(seconds) if seconds is not None else logged_seconds(output)
    if took is None:
        raise ValueError(f"the log {log} has no whole-process time: give --seconds S")
    day = datetime.date.fromtimestamp(log.stat().st_mtime).isoformat()
    return Figure(what, took, found if what == "test" else "", len(os.sched_getaffinity(0)), day,
                  commit or head_commit())


def head_commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip() or "unknown"


def rewrite(text: str, figures: list[Figure]) -> str:
    """`text` (the README) with each figure's line between the markers replaced or added."""
    if BEGIN not in text or END not in text or text.index(BEGIN) > text.index(END):
        raise ValueError(f"README.md has no block between '{BEGIN}' and '{END}': put the two markers back")
    head, rest = text.split(BEGIN, 1)
    block, tail = rest.split(END, 1)
    lines = [line for line in block.strip("\n").splitlines() if line.strip()]
    for f in figures:
        mine = f"- `make {f.what}`:"
        at = [i for i, line in enumerate(lines) if line.startswith(mine)]
        if at:
            lines[at[0]] = f.line()
        else:
            lines.append(f.line())
    return head + BEGIN + "\n" + "\n".join(lines) + "\n" + END + tail


def measure(what: str) -> Figure:
    started = time.monotonic()
    proc = subprocess.Popen(COMMANDS[what], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # shown as it runs, and kept for its counts
        sys.stdout.write(line)
        seen.append(line)
    rc = proc.wait()
    seconds = time.monotonic() - started
    if rc != 0:
        raise SystemExit(f"readme_figures: make {what} failed (exit {rc}): the README is left as it was")
    return Figure(what, seconds, counts("".join(seen)) if what == "test" else "",
                  len(os.sched_getaffinity(0)), datetime.date.today().isoformat(), head_commit())


OPTIONS = ("--from-log", "--seconds", "--commit")


def parse(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """The measurements named and the options given (ValueError: one line saying what is wrong)."""
    whats, opts = [], {}
    it = iter(argv)
    for a in it:
        name, eq, value = a.partition("=")
        if name in OPTIONS:
            value = value if eq else next(it, None)
            if not value:
                raise ValueError(f"{name} needs a value")
            opts[name] = value
        elif a.startswith("-"):
            raise ValueError(f"unknown option {a}: the options are {', '.join(OPTIONS)}")
        elif a not in COMMANDS:
            raise ValueError(f"unknown measurement {a}: give test, demo or both")
        else:
            whats.append(a)
    if "--from-log" not in opts and set(opts):
        raise ValueError(f"{sorted(opts)[0]} goes with --from-log FILE (a run that already happened)")
    if "--from-log" in opts and len(whats) > 1:
        raise ValueError("--from-log FILE is one run's log: name one measurement (test or demo)")
    if "--seconds" in opts:
        clock_seconds(opts["--seconds"])  # checked before anything is read
    return whats or ["test"], opts


def main(argv: list[str]) -> int:
    try:
        whats, opts = parse(argv)
        rewrite(README.read_text(), [])  # the markers are there before an hour is spent measuring
        if "--from-log" in opts:
            figures = [from_log(whats[0], Path(opts["--from-log"]), opts.get("--seconds"), opts.get("--commit"))]
        else:
            figures = [measure(w) for w in whats]
        README.write_text(rewrite(README.read_text(), figures))
    except ValueError as e:
        print(f"readme_figures: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    for f in figures:
        print(f"readme_figures: README.md: {f.line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
