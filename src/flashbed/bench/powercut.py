"""Power-cut cycle throughput: how many cut/recover/verify cycles one core runs per hour.

  flashbed bench powercut [--device emmc-8g@64M] [--fs ext4,f2fs] [--cycles 10]
                          [--pace none] [--mode async] [--seed 1]

Each filesystem runs one powercut cell (one lab kernel at a time, so one core)
of --cycles iterations: workload boot, seeded power cut, recovery boot with
mount, verification and fsck. Prints, per filesystem, the cycles per hour of
wall time (one lab: per core) and per hour of CPU time (this process's
children: the lab and the emulator), and the outcome classes, so a slow
cycle and a broken one are told apart.
"""

from __future__ import annotations

import sys

from .. import profiles
from ..devices import presets
from ..errors import FlashbedError
from ..lab.kernel import KernelInfo, ensure_kernel
from ..results import CellKey
from ..studies import STUDIES
from ..studies.base import CellSpec
from .cells import checked_variants, timed_cell


def bench(device: str, fs: list[str], cycles: int, pace: str, mode: str, seed: int, out=sys.stdout,
          kernel: KernelInfo | None = None) -> list[dict]:
    kernel = kernel or ensure_kernel()
    dev = presets.load_spec(device)
    study = STUDIES["powercut"]
    params = study.params(**{**profiles.overrides("quick", "powercut"), "iterations": cycles, "mode": mode})
    rows = []
    parsed = checked_variants(fs, dev)
    print(f"power-cut cycles on {dev.label} (pace {pace}, {mode} mount, {cycles} cycles per filesystem, "
          f"cut delays {params.cut_min}-{params.cut_max} s)", file=out, flush=True)
    for name, v in zip(fs, parsed, strict=True):
        spec = CellSpec(key=CellKey(dev.label, v.spec, "powercut", mode), device=dev, variant=v, params=params,
                        seed=seed, pace=pace)
        res, wall, cpu = timed_cell(spec, kernel, "flashbed-bench-pc-")
        if res.status.retryable:
            raise FlashbedError(f"{name}: {res.error}")
        recs = res.extra.get("iterations", [])
        classes: dict[str, int] = {}
        for r in recs:
            classes[r["class"]] = classes.get(r["class"], 0) + 1
        cut = sum(r["cut_at"] for r in recs)
        row = {"fs": name, "cycles": len(recs), "seconds": wall, "cpu_seconds": cpu,
               "per_hour": 3600 * len(recs) / wall, "per_cpu_hour": 3600 * len(recs) / cpu if cpu else None,
               "mean_cut": cut / len(recs) if recs else None, "recovery": res.value(mode, "recovery"),
               "classes": classes}
        rows.append(row)
        print(f"  {name:10} {row['cycles']:4d} cycles in {wall:7.1f} s: {row['per_hour']:6.0f} cycles/hour/core "
              f"({row['per_cpu_hour'] or 0:6.0f} per CPU-hour; mean cut delay {row['mean_cut'] or 0:.2f} s, "
              f"median recovery {row['recovery'] or 0:.3f} s)  classes: "
              + ", ".join(f"{n} {c}" for c, n in sorted(classes.items())), file=out, flush=True)
    return rows
