#!/usr/bin/env python3
"""The README's measured figures, written by the measurement that produced them.

    .venv/bin/python scripts/readme_figures.py test [demo]

runs each named measurement from this checkout as a whole process (`make test`: the Rust and
Python suites as CI runs them; `make demo`: the quick profile), times it on the wall clock and
reads its counts from its own closing lines, then rewrites that measurement's line between the
README's `<!-- measured -->` markers: the time, the counts, the host's CPUs, the date and the
commit it measured. Nothing is written when a measurement fails (one line says which, exit 2);
lines of measurements not run now stay as they were.
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
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    return Figure(what, seconds, counts("".join(seen)) if what == "test" else "",
                  len(os.sched_getaffinity(0)), datetime.date.today().isoformat(), commit)


def main(argv: list[str]) -> int:
    whats = argv or ["test"]
    bad = [w for w in whats if w not in COMMANDS]
    if bad:
        print(f"readme_figures: unknown measurement {bad[0]}: give test, demo or both", file=sys.stderr)
        return 2
    try:
        rewrite(README.read_text(), [])  # the markers are there before an hour is spent measuring
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
