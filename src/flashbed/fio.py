"""fio job files and the figures taken from fio's JSON output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# a block size as fio reads it and as case labels show it (4k, 64k, 4M, 512): checked where
# it is given, so a typo is refused before a lab boots rather than failing its job
BLOCK_SIZE = r"[1-9][0-9]*(?:[kKmM](?:i?B)?)?"
BLOCK_SIZE_FORM = "a block size fio takes (4k, 64k, 4M or bytes)"


def job_file(path: Path, jobs: dict[str, dict[str, Any]], global_opts: dict[str, Any]) -> None:
    lines = ["[global]"] + [f"{k}={v}" for k, v in global_opts.items()]
    for name, opts in jobs.items():
        lines += ["", f"[{name}]"] + [f"{k}={v}" for k, v in opts.items()]
    path.write_text("\n".join(lines) + "\n")


def load(path: Path) -> dict[str, Any] | None:
    """fio's JSON output; fio may print warnings before the JSON object."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json.loads(text[start:])
    except json.JSONDecodeError:
        return None


def job_figures(job: dict[str, Any]) -> dict[str, float]:
    """MB/s, IOPS, completion-latency percentiles (µs) and runtime of one fio job; what it wrote
    (write_bytes, writes) and the fsyncs it issued (fsyncs), for the device check."""
    write = job.get("write") or {}
    out: dict[str, float] = {"bandwidth": 0.0, "iops": 0.0, "runtime": 0.0,
                             "write_bytes": float(write.get("io_bytes") or 0),
                             "writes": float(write.get("total_ios") or 0),
                             "fsyncs": float((job.get("sync") or {}).get("total_ios") or 0)}
    p50 = p99 = 0.0
    for d in ("read", "write"):
        part = job.get(d) or {}
        if not part.get("io_bytes"):
            continue
        out["bandwidth"] += part["bw_bytes"] / 1e6
        out["iops"] += part["iops"]
        out["runtime"] = max(out["runtime"], part.get("runtime", 0) / 1000)
        pct = _percentiles(part)
        p50 = max(p50, pct.get("50.000000", 0) / 1000)
        p99 = max(p99, pct.get("99.000000", 0) / 1000)
    out["lat_p50"] = p50
    out["lat_p99"] = p99
    return out


def write_latency_percentiles(job: dict[str, Any]) -> dict[str, float]:
    """fio's completion-latency percentiles of a job's writes, percentile ("50.000000") -> µs."""
    pct = _percentiles(job.get("write") or {})
    return {str(k): v / 1000 for k, v in pct.items() if isinstance(v, (int, float))}


def _percentiles(part: dict[str, Any]) -> dict[str, Any]:
    """A direction's latency percentiles (ns): the total latency's (lat_percentiles=1) where the job
    has them, else the completion latency's. With libaio, a write the kernel does inside io_submit
    (a buffered fallback, an O_SYNC write, a copy-on-write direct write) is all submission latency:
    its completion latency is a few µs whatever the device did."""
    for key in ("lat_ns", "clat_ns"):
        pct = (part.get(key) or {}).get("percentile")
        if pct:
            return pct
    return {}



def size_bytes(bs: str) -> int:
    """fio's block size ('4k', '4M', '512') in bytes (fio's k and M are powers of two)."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = bs.strip().lower().removesuffix("b").removesuffix("i")
    return int(t[:-1]) * units[t[-1]] if t and t[-1] in units else int(t)
