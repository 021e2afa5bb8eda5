"""flashbench's output, parsed, and what it says about a device.

What the tests measure (flashbench.c, Debian's flashbench 62):

- `-a` (try_read_alignments): for each power-of-two alignment A from the
  largest that fits seven times in the device down to 2 x blocksize, reads one
  block just before a multiple of A ("pre"), one straddling it ("on") and one
  just after it ("post"), at seven multiples of the largest alignment, keeping
  each position's best of `--count` tries. "diff" = on - (pre + post) / 2. A
  card costs extra when a read crosses a boundary of its erase block
  (allocation unit, AU) or of its (multi-plane) page: diff is high at the AU
  and every larger alignment and drops below it.
- `-O` (try_open_au): for block sizes from the erase size down to the block
  size, writes each AU in order, one block at a time, round-robin over
  `--open-au-nr` AUs 12 erase sizes apart; one line per block size with the
  average throughput. While the card keeps that many AUs open, small blocks
  stay fast; one AU more and every block closes (merges) an AU: throughput
  collapses, the more so the smaller the block.
- `-f` (try_find_fat): the same writes in each of the first `--fat-nr` AUs
  alone, one column per AU; an AU a card treats specially (FAT area) stands
  out.

Debian's flashbench 62 prints its report on file descriptor 0 unless `-o
FILE` is given (fixed upstream later), and cuts every figure to 7 characters
("1.861G/", "-65883n"): the parser accepts both.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

TIME_UNITS = {"ns": 1e-9, "n": 1e-9, "µs": 1e-6, "us": 1e-6, "µ": 1e-6, "ms": 1e-3, "m": 1e-3, "s": 1.0}
RATE_UNITS = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}  # flashbench's rates are decimal
SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}

_TIME = re.compile(r"(-?[\d.]+(?:e[-+]?\d+)?)(ns|n|µs|us|µ|ms|m|s)?$")
_RATE = re.compile(r"(-?[\d.]+(?:e[-+]?\d+)?)([KMG]?)(?:B)?(?:/s?)?$")
_SIZE = re.compile(r"([\d.]+)(B|KiB|MiB|GiB)$")
_ALIGN = re.compile(r"^align\s+(\d+)\s+pre\s+(\S+)\s+on\s+(\S+)\s+post\s+(\S+)\s+diff\s+(\S+)")
_RATE_LINE = re.compile(r"^([\d.]+(?:B|KiB|MiB|GiB))\s+(.*\S)\s*$")


class ParseError(ValueError):
    """flashbench printed something this parser does not understand."""


def parse_time(text: str) -> float:
    """'735µs', '1.08ms', '-65883n' (cut to 7 characters) -> seconds."""
    m = _TIME.match(text.strip())
    if not m:
        raise ParseError(f"not a flashbench time: {text!r}")
    return float(m.group(1)) * TIME_UNITS[m.group(2) or "s"]


def parse_rate(text: str) -> float:
    """'8.79M/s', '912K/s', '1.861G/' (cut), '884B/s' -> bytes per second."""
    t = text.strip()
    if t.endswith("B/s") and t[:-3].replace(".", "").isdigit():
        return float(t[:-3])
    m = _RATE.match(t)
    if not m:
        raise ParseError(f"not a flashbench rate: {text!r}")
    return float(m.group(1)) * RATE_UNITS[m.group(2)]


def parse_size(text: str) -> int:
    """'4MiB', '512KiB' -> bytes."""
    m = _SIZE.match(text.strip())
    if not m:
        raise ParseError(f"not a flashbench size: {text!r}")
    return round(float(m.group(1)) * SIZE_UNITS[m.group(2)])


@dataclass(frozen=True)
class AlignRow:
    align: int
    pre: float  # seconds
    on: float
    post: float
    diff: float


@dataclass(frozen=True)
class RateRow:
    size: int  # block size, bytes
    rates: tuple[float, ...]  # bytes/s: one (-O) or one per AU (-f)


def parse_align(text: str) -> list[AlignRow]:
    """The rows of `flashbench -a`, largest alignment first."""
    rows = []
    for line in text.splitlines():
        m = _ALIGN.match(line.strip())
        if m:
            rows.append(AlignRow(int(m.group(1)), *(parse_time(m.group(i)) for i in range(2, 6))))
    if not rows:
        raise ParseError("no 'align ... pre ... on ... post ... diff ...' line in the flashbench -a output")
    return sorted(rows, key=lambda r: -r.align)


def parse_rates(text: str) -> list[RateRow]:
    """The rows of `flashbench -O` or `-f`, largest block size first."""
    rows = []
    for line in text.splitlines():
        m = _RATE_LINE.match(line.strip())
        if m:
            rows.append(RateRow(parse_size(m.group(1)), tuple(parse_rate(x) for x in m.group(2).split())))
    if not rows:
        raise ParseError("no '<size> <rate>...' line in the flashbench output")
    return sorted(rows, key=lambda r: -r.size)


# --- what the figures say -------------------------------------------------------------

# A diff must stand this far above timing noise to count as a step (seconds):
# the lab's own jitter on one read is some tens of µs; published steps are
# 100-350 µs.
MIN_STEP = 40e-6
PAGE_STEP = 20e-6
# three levels (erase unit, page, none) are taken when they leave less than
# this share of the squared error of the best two-level fit
THREE_LEVELS = 0.5


@dataclass(frozen=True)
class Geometry:
    """What the alignment test shows."""

    erase_unit: int | None  # bytes; None: no step seen
    page: int | None  # smallest alignment with a (smaller) step below the AU
    plateau: float  # typical diff at and above the AU, seconds
    note: str


def _pow2(rows: list[AlignRow]) -> list[AlignRow]:
    # newer flashbench also tries 3 x 2^n: only boundaries that are powers of two
    # can be erase blocks, and a 3 x 2^n one is also a 2^n + 1 boundary
    return [r for r in rows if r.align & (r.align - 1) == 0]


# A lower level must fall below this share of the upper one to be a step
# (published steps drop to 55 % or less: 317 -> 171 µs in the flashbench
# README; 219 -> 44 µs on the Patriot stick; a card that stays within 80 %
# shows no erase unit).
LEVEL = 0.75


def _sse(xs: list[float]) -> tuple[float, float]:
    m = statistics.fmean(xs)
    return m, sum((x - m) ** 2 for x in xs)


def _step(upper: float, lower: float, min_step: float) -> bool:
    return upper - lower >= min_step and lower <= LEVEL * upper


def _two_levels(rows: list[AlignRow], min_step: float = MIN_STEP) -> tuple[float, int, float, float] | None:
    """The best split of the rows (largest alignment first) into an upper and
    a lower level, by least squares, among splits that are a step (the lower
    level `min_step` below the upper and under LEVEL of it): (squared error, rows
    in the upper level, its mean, the lower mean). Fitting the levels lets one
    noisy row stay in its level, where a walk down to the first low row stops."""
    best = None
    d = [r.diff for r in rows]
    for k in range(1, len(d)):
        (mh, eh), (ml, el) = _sse(d[:k]), _sse(d[k:])
        if _step(mh, ml, min_step) and (best is None or eh + el < best[0]):
            best = (eh + el, k, mh, ml)
    return best


def _three_levels(rows: list[AlignRow]) -> tuple[float, int, int, float, float, float] | None:
    """Likewise with three levels: the erase unit's step (MIN_STEP), then the
    page's (PAGE_STEP: a second page read costs less than a translation)."""
    best = None
    d = [r.diff for r in rows]
    for i in range(1, len(d) - 1):
        mu, eu = _sse(d[:i])
        for j in range(i + 1, len(d)):
            (mm, em), (ml, el) = _sse(d[i:j]), _sse(d[j:])
            if _step(mu, mm, MIN_STEP) and _step(mm, ml, PAGE_STEP) and (best is None or eu + em + el < best[0]):
                best = (eu + em + el, i, j, mu, mm, ml)
    return best


def analyse_align(rows: list[AlignRow]) -> Geometry:
    """Erase unit = the smallest alignment of the upper level of the diffs (the
    largest alignments' level); page = the same within the lower level."""
    rows = _pow2(rows)
    if len(rows) < 3:
        return Geometry(None, None, 0.0, "too few alignments to see a pattern")
    top = statistics.median(r.diff for r in rows[:3])
    if top < MIN_STEP:
        return Geometry(None, None, top, f"no pattern: diff at the largest alignments is {top * 1e6:.0f} µs")
    split = _two_levels(rows)
    three = _three_levels(rows)
    if split is None and three is None:
        return Geometry(None, None, top, f"diff stays near {top * 1e6:.0f} µs down to {rows[-1].align} bytes: "
                        "no erase-unit boundary within the alignments tried")
    if three is not None and (split is None or (three[1] < split[1] and three[0] < THREE_LEVELS * split[0])):
        # a small erase-unit step above a larger page step, which one step
        # alone would take for the erase unit
        _, i, j, upper, middle, lower = three
        return Geometry(rows[i - 1].align, rows[j - 1].align, upper,
                        f"diff {upper * 1e6:.0f} µs at {rows[i - 1].align} bytes and above, {middle * 1e6:.0f} µs "
                        f"down to {rows[j - 1].align}, {lower * 1e6:.0f} µs below")
    _, k, upper, lower = split
    eu, below = rows[k - 1].align, rows[k:]
    page = None
    if lower >= PAGE_STEP:
        # a smaller step below the erase unit: the (multi-plane) page
        sub = _two_levels(below, PAGE_STEP)
        page = below[sub[1] - 1].align if sub else None
    return Geometry(eu, page, upper, f"diff {upper * 1e6:.0f} µs at {eu} bytes and above, "
                    f"{lower * 1e6:.0f} µs below")


@dataclass(frozen=True)
class OpenAus:
    """What the open-AU tests show."""

    count: int | None  # the most AUs written round-robin without collapse; None: not measured
    collapsed_at: int | None  # the first count that collapsed (None: none up to `tried`)
    tried: int
    ratios: dict[int, float]  # nr -> small-block throughput / that with one AU
    note: str


# Small-block throughput below this share of the one-AU figure is a collapse
# (published collapses are 5-20x; within the open AUs it stays within 2x).
COLLAPSE = 0.35


def small_block_rate(rows: list[RateRow]) -> float:
    return rows[-1].rates[0]


def analyse_open_aus(results: dict[int, list[RateRow]]) -> OpenAus:
    """`results`: --open-au-nr -> its rows, tried from 1 upwards."""
    if 1 not in results:
        return OpenAus(None, None, 0, {}, "the one-AU baseline is missing")
    base = small_block_rate(results[1])
    ratios = {nr: small_block_rate(rows) / base for nr, rows in sorted(results.items())}
    count, collapsed = 0, None
    for nr, ratio in ratios.items():
        if ratio < COLLAPSE:
            collapsed = nr
            break
        count = nr
    tried = max(results)
    if collapsed is None:
        note = f"no collapse up to {tried} AUs written round-robin (page-mapped, or more than {tried} open)"
    else:
        note = f"{count} open: small writes over {collapsed} AUs fall to {ratios[collapsed]:.0%} of one AU's"
    return OpenAus(count if count else None, collapsed, tried, ratios, note)


def collapsed(rows: list[RateRow], base: list[RateRow]) -> bool:
    """Whether one -O run collapsed against the one-AU run."""
    return small_block_rate(rows) / small_block_rate(base) < COLLAPSE
