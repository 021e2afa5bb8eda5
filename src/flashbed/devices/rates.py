"""The four rates a device twin is judged by, as fio jobs on the raw device.

Sequential 1 MiB read and write and random 4 KiB read and write, all direct
I/O at queue depth 1 (the published microSD and stick tables come from
single-threaded tools: dd, hdparm, iozone -I). Random jobs run inside one
allocation unit and spread over a span (the whole device for a probe; the
published measurement's file size for `bench presets`).
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1 << 20

# a twin matches its part when each of its rates is within this share of the published one
# (`flashbed bench presets`); a variant of it must too (devices/refit.py)
MATCH = 0.15
DEFAULT_SPAN = 100 * MiB  # iozone -s 100M in the Raspberry Pi tables

# the four figures: (key, label, unit)
FIGURES = (("seq_read_mb_s", "sequential read 1 MiB", "MB/s"),
           ("seq_write_mb_s", "sequential write 1 MiB", "MB/s"),
           ("rand_read_4k_iops", "random read 4 KiB QD1", "IOPS"),
           ("rand_write_4k_iops", "random write 4 KiB QD1", "IOPS"))


@dataclass(frozen=True)
class RatePlan:
    """Where and how long each job runs."""

    capacity: int
    erase_unit: int
    span: int  # random jobs "spread": this many bytes from `spread_offset`
    seq_bytes: int  # sequential jobs move at most this much
    runtime: float = 10.0  # seconds per job (time-limited, so slow devices end too)
    spread_offset: int = 0
    # virtual time: the random jobs run this many requests instead of `runtime` seconds
    # (a slow part's few requests a second cost guest time, not wall-clock time), within
    # MAX_GUEST_SECONDS of guest time; 0: time-limited
    ios: int = 0

    @property
    def au_offset(self) -> int:
        # one AU away from the start (cards treat their first AUs specially) and
        # away from the spread span's start
        return max(self.erase_unit, (self.capacity // 2) // self.erase_unit * self.erase_unit)


def fill_job(plan: RatePlan) -> dict:
    """Writes the whole device once, in order: every later read hits written
    flash (reads of never-written space cost a card nothing), and it is the
    sequential write figure."""
    return {"rw": "write", "bs": "1M", "size": plan.capacity}


def seq_read_job(plan: RatePlan) -> dict:
    return {"rw": "read", "bs": "1M", "size": min(plan.seq_bytes, plan.capacity), "runtime": plan.runtime,
            "time_based": 1}


# virtual time: the most guest time a request-counted random job may take
MAX_GUEST_SECONDS = 3600


def random_job(plan: RatePlan, rw: str, where: str) -> dict:
    """`rw` randread|randwrite, `where` au|spread."""
    if where == "au":
        offset, size = plan.au_offset, plan.erase_unit
    else:
        offset, size = plan.spread_offset, plan.span
    job = {"rw": rw, "bs": "4k", "offset": offset, "size": size, "randseed": 1, "norandommap": 1}
    if plan.ios:
        # io_size: fio otherwise ends a job at `size` bytes (an AU smaller than the requests: it wraps)
        return job | {"number_ios": plan.ios, "io_size": plan.ios * 4096, "runtime": MAX_GUEST_SECONDS}
    return job | {"runtime": plan.runtime, "time_based": 1}


def figures_from(fio_figs: dict[str, dict[str, float]], spread: str = "spread") -> dict[str, float]:
    """The four figures from fio's per-job figures (see fio.job_figures)."""
    return {"seq_read_mb_s": fio_figs["seq-read"]["bandwidth"],
            "seq_write_mb_s": fio_figs["seq-write"]["bandwidth"],
            "rand_read_4k_iops": fio_figs[f"randread-{spread}"]["iops"],
            "rand_write_4k_iops": fio_figs[f"randwrite-{spread}"]["iops"]}


def published_jobs(plan: RatePlan) -> dict[str, dict]:
    """The four figures' fio jobs as `flashbed bench presets` runs them on a fresh device (in this
    order, one after another), and as devices/refit.py runs them on the model alone."""
    return {"seq-write": {**fill_job(plan), "size": plan.seq_bytes}, "seq-read": seq_read_job(plan),
            "randread-spread": random_job(plan, "randread", "spread"),
            "randwrite-spread": random_job(plan, "randwrite", "spread")}


def published_plan(capacity: int, erase_unit: int, span: int, runtime: float = 10.0) -> RatePlan:
    """Where `published_jobs` run on a device of `capacity`: random I/O over the published span
    (the whole device if smaller), sequential jobs over at most 256 MiB."""
    return RatePlan(capacity=capacity, erase_unit=erase_unit, span=min(span or DEFAULT_SPAN, capacity),
                    seq_bytes=min(capacity, 256 * MiB), runtime=runtime)
