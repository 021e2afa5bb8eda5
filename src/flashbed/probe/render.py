"""A probe's findings as text (the result stays data: see lab.ProbeResult)."""

from __future__ import annotations

from ..sizes import format_size
from .lab import ProbeResult


def _size(n: int | None) -> str:
    return "not seen" if n is None else format_size(n).replace("K", " KiB").replace("M", " MiB").replace("G", " GiB")


def _fat(result: ProbeResult) -> str:
    # the smallest block size is where a special area stands out
    row = result.fat[-1]
    lo, hi = min(row.rates), max(row.rates)
    spread = (hi / lo - 1) if lo > 0 else float("inf")
    if spread < 0.5:
        return f"no AU treated apart (first {len(row.rates)} AUs within {spread:.0%} at {_size(row.size)} writes)"
    best = row.rates.index(hi)
    return f"AU {best} writes {hi / lo:.1f}x faster than the slowest at {_size(row.size)} (a FAT-optimised area?)"


def text(result: ProbeResult) -> str:
    g, o, r = result.geometry, result.open_aus, result.rates
    au = _size(result.erase_unit_used)
    lines = [
        f"probe {result.device} ({_size(result.capacity)}), {result.when}, {result.kernel_words}, "
        f"flashbench {result.tools['flashbench']}, fio {result.tools['fio']}",
        f"  erase unit (AU)      {_size(g.erase_unit):>10}   flashbench -a: {g.note}",
        f"  page                 {_size(g.page):>10}",
        f"  open AUs             {o.count if o.count is not None else '?':>10}   flashbench -O: {o.note}"
        + ("" if o.collapsed_at is not None else f" [≥ {o.tried}]"),
        f"  FAT area                          flashbench -f: {_fat(result)}",
        f"  sequential read 1 MiB   {r['seq-read']['bandwidth']:8.2f} MB/s",
        f"  sequential write 1 MiB  {r['seq-write']['bandwidth']:8.2f} MB/s",
        f"  random read 4 KiB QD1   {r['randread-au']['iops']:8.1f} IOPS in one {au} AU, "
        f"{r['randread-spread']['iops']:.1f} IOPS over {_size(result.capacity)}",
        f"  random write 4 KiB QD1  {r['randwrite-au']['iops']:8.1f} IOPS in one {au} AU, "
        f"{r['randwrite-spread']['iops']:.1f} IOPS over {_size(result.capacity)}",
    ]
    if result.lab_us:
        lines.append(f"  (the lab's own latency, in the random figures: {result.lab_us['read']:.0f} µs a read, "
                     f"{result.lab_us['write']:.0f} µs a write)")
    if g.erase_unit is None:
        lines.append(f"  (no AU seen: open-AU and FAT tests used flashbench's default {au})")
    return "\n".join(lines)
