"""What each metric means to a reader: label, direction (higher/lower is better), display unit.

Everything here is presentation: the stored values are never changed, only shown
(bytes are shown as MiB, for instance). Unknown metrics get a neutral direction and
their stored unit, so a new study renders without changes here. What the report
knows of a study (title, order, figures) is the study's own: see catalog.py.
"""

from __future__ import annotations

import math
import re

from . import catalog

HIGHER, LOWER, NEUTRAL = "higher", "lower", "neutral"

_METRICS: dict[str, tuple[str, str]] = {
    # metric: (label, direction)
    "bandwidth": ("bandwidth", HIGHER),
    "iops": ("IOPS", HIGHER),
    "throughput": ("throughput", HIGHER),
    "lat_p50": ("latency p50", LOWER),
    "lat_p99": ("latency p99", LOWER),
    "bus_busy": ("bus busy", NEUTRAL),
    "seconds": ("time", LOWER),
    "mount": ("mount", LOWER),
    "attach": ("UBI attach", LOWER),
    # YAFFS2 in user space: yaffs_mount with its checkpoint ignored, and the whole mount
    # command (daemon start, yaffs_mount, FUSE mount)
    "mount_scan": ("mount, checkpoint ignored", LOWER),
    "startup": ("mount incl. FUSE start-up", LOWER),
    "read": ("read", LOWER),
    "used": ("space used", LOWER),
    "mkfs": ("mkfs time", LOWER),
    "flash": ("image write (dd)", LOWER),
    "kthreads": ("kernel threads", LOWER),
    "fsck_real": ("fsck (real)", LOWER),
    "fsck_cpu": ("fsck (CPU)", LOWER),
    "cpu_per_io": ("CPU per I/O time", LOWER),
    "workload_cpu": ("workload CPU", LOWER),
    "kthread_cpu": ("kernel-thread CPU", LOWER),
    "iterations": ("iterations", NEUTRAL),
    "recovery": ("recovery (median)", LOWER),
    "survived": ("survived", HIGHER),
    "runtime": ("fio run time", NEUTRAL),
    "tps": ("transactions/s", HIGHER),
    "write_amplification": ("write amplification", LOWER),
}

# figures set by how fast something ran: the device or, when it sat idle, the lab (lab-bound)
TIMED_METRICS = frozenset({"bandwidth", "iops", "throughput", "lat_p50", "lat_p99", "seconds", "mount", "read", "tps"})

# emulator statistics (device_stats) and derived ones
_DEVICE_STATS: dict[str, tuple[str, str, str]] = {
    # key: (label, direction, unit)
    "write_amplification": ("write amplification", LOWER, "×"),
    "erase_spread": ("erase-count spread (max − min)", LOWER, "erases"),
    "erase_count_min": ("erase count min", NEUTRAL, "erases"),
    "erase_count_max": ("erase count max", LOWER, "erases"),
    "erase_count_mean": ("erase count mean", LOWER, "erases"),
    "host_write_bytes": ("host writes", NEUTRAL, "bytes"),
    "host_read_bytes": ("host reads", NEUTRAL, "bytes"),
    "nand_read_pages": ("NAND pages read", NEUTRAL, "pages"),
    "nand_program_pages": ("NAND pages programmed", LOWER, "pages"),
    "nand_erases": ("NAND block erases", LOWER, "erases"),
    "busy_seconds": ("device busy", LOWER, "s"),
    "wall_seconds": ("wall time", NEUTRAL, "s"),
    "gc_count": ("GC runs", LOWER, "count"),
    "latency_p50_us": ("device latency p50", LOWER, "µs"),
    "latency_p99_us": ("device latency p99", LOWER, "µs"),
    "host_writes": ("host write requests", NEUTRAL, "count"),
    "host_flushes": ("host flushes", NEUTRAL, "count"),
    "write_pattern_sequential_write_bytes": ("sequential host writes", NEUTRAL, "bytes"),
}
DEVICE_STAT_ORDER = list(_DEVICE_STATS)

_METRIC_ORDER = list(_METRICS)


def metric_label(metric: str) -> str:
    if metric in _METRICS:
        return _METRICS[metric][0]
    for prefix in ("class:", "outcome:"):
        if metric.startswith(prefix):
            return metric[len(prefix):]
    return metric.replace("_", " ")


def direction(metric: str) -> str:
    if metric in _METRICS:
        return _METRICS[metric][1]
    if metric in _DEVICE_STATS:
        return _DEVICE_STATS[metric][1]
    return NEUTRAL


def device_stat_label(key: str) -> str:
    return _DEVICE_STATS.get(key, (key.replace("_", " "), NEUTRAL, ""))[0]


def device_stat_unit(key: str) -> str:
    return _DEVICE_STATS.get(key, ("", NEUTRAL, ""))[2]


def device_stat_direction(key: str) -> str:
    return _DEVICE_STATS.get(key, ("", NEUTRAL, ""))[1]


def metric_sort_key(metric: str) -> tuple:
    if metric in _METRICS:
        return (0, _METRIC_ORDER.index(metric), metric)
    if metric.startswith(("class:", "outcome:")):
        return (1, 0, metric)
    return (2, 0, metric)


def study_sort_key(study: str) -> tuple:
    return catalog.sort_key(study)


def study_title(study: str) -> str:
    return catalog.title(study)


def natural_key(s: str) -> tuple:
    """'128MB fill25' < '1024MB fill0'; digits compare as numbers."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", s) if t != "")


# words any study's case labels may use, after the study's own (Study.case_order)
_COMMON_TOKENS = ["4k", "4M", "1M", "direct", "buffered", "nofsync", "fsync", "clean", "unclean", "sync", "async"]


def case_sort_key(study: str, case: str) -> tuple:
    """Cases in the order a reader expects (read before write, 4k before 4M, ...)."""
    order = list(catalog.case_words(study)) + _COMMON_TOKENS
    key = []
    for tok in case.split():
        if tok in order:
            key.append((0, order.index(tok), ()))
        else:
            key.append((1, 0, natural_key(tok)))
    return tuple(key)


# ---- units -----------------------------------------------------------------

def display_unit(unit: str) -> str:
    """The unit values are shown in (bytes are shown in MiB)."""
    return "MiB" if unit in ("bytes", "B") else unit


def to_display(value: float, unit: str) -> float:
    return value / 1048576.0 if unit in ("bytes", "B") else value


def fmt(value: float | None, unit: str = "") -> str:
    """A value in its display unit, 3 significant digits, without the unit."""
    if value is None:
        return "—"
    v = to_display(value, unit)
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return str(v)
    if unit == "count" or unit in ("erases", "pages") or (float(v).is_integer() and abs(v) >= 100):
        return f"{v:,.0f}"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.01:
        return f"{v:.3f}"
    return f"{v:.2g}"


def fmt_unit(value: float | None, unit: str) -> str:
    """A value with its display unit: '12.3 MB/s', '4.0×', '96 %'."""
    if value is None:
        return "—"
    du = display_unit(unit)
    if du == "×":
        return f"{fmt(value, unit)}×"
    if du in ("", "count"):
        return fmt(value, unit)
    return f"{fmt(value, unit)} {du}"


def ratio_text(r: float) -> str:
    if r >= 10:
        return f"{r:.0f}×"
    if r >= 1.995 or r < 0.995:
        return f"{r:.2g}×" if r < 1 else f"{r:.1f}×"
    return f"{r:.2f}×"


def slug(*parts: str) -> str:
    s = "-".join(parts).lower()
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    return s or "x"
