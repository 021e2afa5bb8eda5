"""Crash-state checking throughput: states per hour per core, and where the time goes.

  flashbed bench crashstates [--device emmc-8g@128M] [--fs ext4,f2fs] [--workload powercut]
                             [--ops 60] [--pace none] [--seed 1]

Each filesystem runs one crashstates cell (one lab kernel and its emulator on one
leased CPU, so one core): the workload once with the write log on, then every
crash state checked in the same boot. Prints, per filesystem, the states checked,
states per hour of the check loop and of the whole cell (boot, mkfs and workload
included), per CPU-hour of this process's children (lab and emulator), and the
median time per state of each part: switch (the host call that serves the state),
drop (the block device's buffers), mount, verify, umount, fsck.
"""

from __future__ import annotations

import sys

from .. import profiles
from ..devices import presets
from ..errors import FlashbedError
from ..lab.kernel import ensure_kernel
from ..results import CellKey
from ..studies import STUDIES
from ..studies.base import CellSpec
from ..studies.crashstates import PARTS
from .cells import checked_variants, timed_cell


def bench(device: str, fs: list[str], workload: str, ops: int, pace: str, seed: int, out=sys.stdout) -> list[dict]:
    kernel = ensure_kernel()
    dev = presets.load_spec(device)
    if not dev.emulated:
        raise FlashbedError(f"{dev.label} is not an emulated device: crash states need the emulator's write log")
    study = STUDIES["crashstates"]
    params = study.params(**{**profiles.overrides("quick", "crashstates"), "ops": ops, "workload": workload})
    parsed = checked_variants(fs, dev)
    print(f"crash states on {dev.label} (pace {pace}, {workload} workload"
          + (f", {ops} operations" if workload == "powercut" else "") + ", one lab per filesystem)",
          file=out, flush=True)
    rows = []
    for name, v in zip(fs, parsed, strict=True):
        spec = CellSpec(key=CellKey(dev.label, v.spec, "crashstates", workload), device=dev, variant=v,
                        params=params, seed=seed, pace=pace)
        res, wall, cpu = timed_cell(spec, kernel, "flashbed-bench-cs-")
        n = res.value(workload, "iterations")
        if res.status.retryable or not n:
            raise FlashbedError(f"{name}: {res.error or res.headline}")
        split = {p: res.value(workload, f"{p}_ms") or 0.0 for p in PARTS}
        row = {"fs": name, "states": int(n), "per_hour": res.value(workload, "states_per_hour"),
               "per_hour_cell": 3600 * n / wall, "per_cpu_hour": 3600 * n / cpu if cpu else None,
               "failures": res.value(workload, "failures"), "split_ms": split}
        rows.append(row)
        print(f"  {name:10} {row['states']:5d} states: {row['per_hour']:7.0f} states/hour/core checking, "
              f"{row['per_hour_cell']:7.0f} for the whole cell ({wall:.1f} s), "
              f"{row['per_cpu_hour'] or 0:7.0f} per CPU-hour; failures {int(row['failures'] or 0)}", file=out)
        print("             median per state: " + ", ".join(f"{p} {split[p]:.1f} ms" for p in PARTS)
              + f" (sum {sum(split.values()):.1f} ms)", file=out, flush=True)
    return rows
