"""The device check: every timed figure whose workload promised the device had its writes
(O_DIRECT, O_SYNC, a database commit) set against what the device received in the same
statistics phase, the job alone.

A direct or synchronous write is acknowledged only once the device has it, so the bytes
claimed must reach the device during the job, and each synchronous write or commit needs a
flush (the emulated parts have a volatile write cache). A figure whose device received less
was served from the lab's page cache: "cached", and it scores nobody. A served figure above
the part's published random write rate is legitimate when the device saw the writes in
another pattern (a copy-on-write or log-structured filesystem writes them one after another):
the report shows the request sizes and the sequential share beside it.

The check is data (a DeviceCheck per figure, in RunData.checks); renderers show it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..devices.session import WRITE_SIZES
from ..status import DeviceVerdict
from ..studies.claims import Claim
from . import units

# The one threshold of the device check (received bytes, flushes per durable write, writes
# acknowledged no sooner than they could cross the host interface): a share of the claim below it
# (%) means writes were acknowledged before the device had them. Why 95: at queue depth 1 at most
# one write is in flight when a job stops (counted on one side of the statistics phase and not
# yet on the other), and a filesystem adds metadata, never less; the shortest checked jobs have
# about 100 writes or commits (1 %), so 5 % leaves that one request room several times over, and
# fio's latency percentiles step by 5 % below the 10th (1, 5, 10), so one coarse step of early
# acknowledgements is not yet a verdict. A page cache that absorbs writes misses tens of percent
# (nilfs2's fallback to buffered writes: 3 % received in issue 18's case), far below the line.
RECEIVED_BELOW = 95.0
# how far ahead of its modelled completion the emulator may acknowledge a request that continues a
# stream (flashbed-emu's STREAM_SLACK): a write acknowledged sooner than its bytes cross the host
# interface less this lead was not the device's
EMULATOR_LEAD_US = 500.0


@dataclass(frozen=True)
class Phase:
    """What the device received during one repeat of a job (its statistics phase)."""

    write_bytes: float
    writes: float | None
    flushes: float | None
    sequential_bytes: float | None
    write_sizes: dict[int, int]


@dataclass(frozen=True)
class DeviceCheck:
    """One figure's verdict over its repeats (the worst repeat decides)."""

    verdict: DeviceVerdict
    claim: Claim  # the worst repeat's
    received_pct: float | None  # device host write bytes over the bytes claimed (worst repeat)
    flushes: float | None  # device flushes during the job (worst repeat) ...
    synced: int  # ... against the synchronous writes or commits acknowledged
    write_bytes: float | None  # device host write bytes during the job (worst repeat)
    write_sizes: dict[int, int]  # the device's write requests per size bucket (worst repeat)
    sequential_pct: float | None  # share of the device's write bytes that continued the previous write
    figure: float | None = None  # the figure's rate (IO/s), when comparable with the part's random rate
    part_rate: float | None = None  # the part's published 4 KiB random write rate (IO/s)
    # share of the writes acknowledged no sooner than their bytes could cross the device's host
    # interface (at --pace real only; worst repeat), and that time (µs)
    timely_pct: float | None = None
    transfer_us: float | None = None
    host_mb_s: float | None = None

    @property
    def flush_pct(self) -> float | None:
        return 100.0 * self.flushes / self.synced if self.flushes is not None and self.synced else None

    def pattern_text(self) -> str:
        """'4 KiB requests, 97 % sequential'."""
        bits = []
        if self.write_sizes:
            total = sum(self.write_sizes.values())
            top = sorted(self.write_sizes.items(), key=lambda kv: -kv[1])[:2]
            bits.append(" and ".join(f"{_size(s)}{'' if n == total else f' ({100 * n / total:.0f} %)'}"
                                     for s, n in top) + " requests")
        if self.sequential_pct is not None:
            bits.append(f"{self.sequential_pct:.0f} % sequential")
        return ", ".join(bits) or "request pattern not recorded"

    def text(self) -> str:
        """The mark shown beside the figure."""
        if self.verdict is DeviceVerdict.CACHED:
            parts = []
            if self.received_pct is not None and self.claim.write_bytes and self.received_pct < RECEIVED_BELOW:
                parts.append(f"the device received {self.received_pct:.0f} % of these writes during the job")
            if self.timely_pct is not None and self.timely_pct < RECEIVED_BELOW:
                p50 = self.claim.latency_us.get("50.000000")
                parts.append(f"the device received at most {self.timely_pct:.0f} % of these writes by the time "
                             f"they were acknowledged" + (f" (p50 {units.fmt(p50)} µs" if p50 is not None else " (")
                             + f"; {_size(self.claim.block_bytes)} take {units.fmt(self.transfer_us)} µs over its "
                             f"{units.fmt(self.host_mb_s)} MB/s host interface, the emulator acknowledging up to "
                             f"{EMULATOR_LEAD_US:.0f} µs early)")
            fp = self.flush_pct
            if fp is not None and fp < RECEIVED_BELOW:
                parts.append(f"{self.flushes:.0f} flushes for {self.synced:,} synchronous writes or commits")
            return "cached: " + "; ".join(parts)
        if self.verdict is DeviceVerdict.SERVED_ABOVE_RATE:
            return (f"served above the part's random write rate ({self.part_rate:,.0f} IO/s): the device saw "
                    f"{self.pattern_text()}")
        if self.verdict is DeviceVerdict.SERVED:
            return f"served: {self.pattern_text()}"
        return "not checked (no device statistics for the job)"

    def counters_text(self) -> str:
        """The claim beside the device's counters, for the check's table and closing note."""
        c = self.claim
        bits = []
        if c.write_bytes:
            got = "—" if self.write_bytes is None else _mib(self.write_bytes)
            bits.append(f"{_mib(c.write_bytes)} written {'direct' if c.direct else 'synchronously'}, "
                        f"device received {got}" + (f" ({self.received_pct:.0f} %)" if self.received_pct is not None
                                                     else ""))
        if self.synced:
            bits.append(f"{self.synced:,} acknowledged durable, device flushes "
                        f"{'—' if self.flushes is None else f'{self.flushes:,.0f}'}")
        if self.timely_pct is not None:
            bits.append(f"{100 - self.timely_pct:.0f} % acknowledged more than {EMULATOR_LEAD_US:.0f} µs sooner "
                        f"than the {units.fmt(self.transfer_us)} µs their bytes take to reach the device")
        return "; ".join(bits)


@dataclass(frozen=True)
class Repeat:
    """One repeat of a figure: the workload's claim, the device's phase (None: no statistics), and
    whether the device ran paced (its timing real, so an acknowledgement's time means something)."""

    claim: Claim
    phase: Phase | None
    paced: bool


def timely_pct(claim: Claim, host_bytes_per_s: float | None) -> tuple[float | None, float | None]:
    """(share of the writes acknowledged no sooner than `block_bytes` cross the host interface, that
    time in µs); (None, None) when unknown. From fio's latency percentiles: the highest percentile
    acknowledged sooner bounds the share that was not the device's."""
    if not host_bytes_per_s or not claim.block_bytes or not claim.latency_us:
        return None, None
    transfer = 1e6 * claim.block_bytes / host_bytes_per_s
    if transfer <= EMULATOR_LEAD_US:  # within the emulator's lead: its time says nothing
        return None, None
    pcts = sorted((float(p), v) for p, v in claim.latency_us.items())
    early = max((p for p, v in pcts if v < transfer - EMULATOR_LEAD_US), default=0.0)
    return 100.0 - early, transfer


def check(repeats: list[Repeat], figure: float | None = None, part_rate: float | None = None,
          host_bytes_per_s: float | None = None) -> DeviceCheck:
    """The verdict of one figure from its repeats (the worst decides)."""
    seen = [r for r in repeats if r.phase is not None]
    if not seen:
        claim = repeats[0].claim
        return DeviceCheck(DeviceVerdict.UNCHECKED, claim, None, None, claim.synced, None, {}, None)

    def received(r: Repeat) -> float | None:
        return 100.0 * r.phase.write_bytes / r.claim.write_bytes if r.claim.write_bytes else None

    def flushed(r: Repeat) -> float | None:
        return 100.0 * r.phase.flushes / r.claim.synced if r.claim.synced and r.phase.flushes is not None else None

    def timely(r: Repeat) -> float | None:
        return timely_pct(r.claim, host_bytes_per_s)[0] if r.paced else None

    def shortfall(r: Repeat) -> float:
        return min([x for x in (received(r), flushed(r), timely(r)) if x is not None], default=math.inf)

    worst = min(seen, key=shortfall)
    claim, ph = worst.claim, worst.phase
    cached = shortfall(worst) < RECEIVED_BELOW
    seq = 100.0 * ph.sequential_bytes / ph.write_bytes if ph.sequential_bytes is not None and ph.write_bytes > 0 \
        else None
    above = (not cached and claim.random_4k and figure is not None and part_rate is not None and part_rate > 0
             and figure > part_rate)
    verdict = DeviceVerdict.CACHED if cached else \
        DeviceVerdict.SERVED_ABOVE_RATE if above else DeviceVerdict.SERVED
    transfer = timely_pct(claim, host_bytes_per_s)[1] if worst.paced else None
    return DeviceCheck(verdict, claim, received(worst), ph.flushes, claim.synced, ph.write_bytes,
                       dict(ph.write_sizes), seq, figure if claim.random_4k else None,
                       part_rate if claim.random_4k else None, timely(worst), transfer,
                       host_bytes_per_s / 1e6 if transfer is not None else None)


def phase_of(raw: object) -> Phase | None:
    """A cell's statistics phase as the check reads it; None when it has no write counters."""
    if not isinstance(raw, dict) or not isinstance(raw.get("host_write_bytes"), (int, float)):
        return None
    sizes = raw.get(WRITE_SIZES)
    return Phase(write_bytes=float(raw["host_write_bytes"]), writes=_num(raw.get("host_writes")),
                 flushes=_num(raw.get("host_flushes")),
                 sequential_bytes=_num(raw.get("write_pattern_sequential_write_bytes")),
                 write_sizes={int(k): int(v) for k, v in sizes.items() if str(k).isdigit() and isinstance(v, int)}
                 if isinstance(sizes, dict) else {})


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _size(b: int) -> str:
    for unit, f in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= f:
            return f"{b // f} {unit}"
    return f"{b} B"


def _mib(b: float) -> str:
    return units.fmt_unit(b, "bytes")
