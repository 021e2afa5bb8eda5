"""What a timed workload claims the device did for it, for the report to set against the
device's own counters in the same statistics phase.

A direct (O_DIRECT) or synchronous write is acknowledged only once the device has it: the
bytes must reach the device during the job, and each synchronous write or commit needs a
flush (the emulated parts have a volatile write cache). A study records one claim per timed
figure that makes such a promise, named as the figure's case and its statistics phase; the
report (report/devcheck.py) checks it against that phase.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

EXTRA_KEY = "claims"  # where a study's claims live in its Outcome.extra


@dataclass(frozen=True)
class Claim:
    case: str  # the measurement case, and the statistics phase that covers only its job
    direct: bool  # O_DIRECT writes: each acknowledged once the device had it
    synced: int  # writes or commits acknowledged as durable (each needs a flush); 0: none promised
    write_bytes: int  # bytes the workload wrote directly or synchronously (0: not claimed)
    writes: int  # write calls behind write_bytes
    what: str = ""  # the job, in the workload's own words (fio options, the SQL)
    # 4 KiB random writes at queue depth 1: the figure (IOPS) compares with the part's random write rate
    random_4k: bool = False
    block_bytes: int = 0  # each write's size (0: not one size)
    # the writes' completion-latency percentiles (percentile -> µs): a write acknowledged sooner than
    # its bytes can cross the device's host interface was not the device's
    latency_us: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Any) -> "Claim | None":
        """A claim from a cell's extra; None when it is not one (an older or damaged cell)."""
        if not isinstance(d, dict):
            return None
        try:
            return cls(case=str(d["case"]), direct=bool(d["direct"]), synced=int(d["synced"]),
                       write_bytes=int(d["write_bytes"]), writes=int(d["writes"]), what=str(d.get("what", "")),
                       random_4k=bool(d.get("random_4k", False)), block_bytes=int(d.get("block_bytes", 0)),
                       latency_us={str(k): float(v) for k, v in (d.get("latency_us") or {}).items()})
        except (KeyError, TypeError, ValueError):
            return None


def claims_extra(claims: list[Claim]) -> dict[str, Any]:
    return {EXTRA_KEY: [c.to_json() for c in claims]} if claims else {}


def claims_of(extra: dict[str, Any] | None) -> list[Claim]:
    raw = (extra or {}).get(EXTRA_KEY)
    return [c for c in (Claim.from_json(x) for x in raw) if c is not None] if isinstance(raw, list) else []
