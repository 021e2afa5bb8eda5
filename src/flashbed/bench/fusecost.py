"""What the user-space path costs YAFFS2: the same workloads on the guest's tmpfs
(in the kernel, no flash) and through flashbed-yaffs2 on a file NAND in that
tmpfs (FUSE round trips and YAFFS2's own work, still no flash), in one lab boot.

The difference bounds what a YAFFS2 figure of `appio` or `overwrite` carries
that the in-kernel YAFFS2 of the published studies did not: the NAND's time is
the same on both paths, the FUSE crossing is not. `mount` is hardly touched:
yaffs_mount is timed inside the daemon.

    python3 -m flashbed.bench.fusecost [--out DIR] [--kernel NAME]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from .. import options
from ..errors import FlashbedError
from ..lab.boundary import BootSpec, Step
from ..lab.kernel import ensure_kernel
from ..lab.labs import UmlLab
from ..studies.base import TOOL
from ..yaffs2 import guest
from ..yaffs2.build import ensure_daemon

PLAIN = "/tmp/plain"
YAFFS = "/tmp/yaffs"
NAND_FILE = "/tmp/nand.img"
GEOMETRY = "4096:78:64:256"  # 64 MiB, nandsim's 4 KiB-page Hamming layout
REPEATS = 3
WORKLOADS = {
    "overwrite 1MB fsync": "overwrite {d}/ow.dat --mb 1 --fsync",
    "overwrite 1MB nofsync": "overwrite {d}/ow.dat --mb 1",
    "appio 1M fsync": "appio {d}/appio.dat --size 1048576 --fsync --seed 1",
    "appio 1M nofsync": "appio {d}/appio.dat --size 1048576 --seed 1",
}
APPIO_OPS = ("write", "rewrite", "read", "random-write")


def throughputs(name: str, stdout: str) -> dict[str, float]:
    """KB/s of each operation a workload's JSON line reports."""
    last = json.loads(stdout.strip().splitlines()[-1])
    if name.startswith("overwrite"):
        return {name: last["MBps"] * 1000}
    suffix = name.split(" ", 1)[1]
    return {f"{op} {suffix}": last["kBps"][op] for op in APPIO_OPS}


def steps() -> list[Step]:
    daemon = ensure_daemon()
    out = [Step("dirs", f"mkdir -p {PLAIN} {YAFFS} && rm -f {NAND_FILE}", timeout=30),
           Step("mount-yaffs2", f"mkdir -p {guest.PID_DIR} && {daemon} --file {NAND_FILE} --geometry {GEOMETRY} "
                                f"--pidfile {guest.pidfile(YAFFS)} {YAFFS}", timeout=60)]
    for r in range(REPEATS):
        for name, cmd in WORKLOADS.items():
            for where, d in (("tmpfs", PLAIN), ("yaffs2-fuse", YAFFS)):
                out.append(Step(f"{where}|{name}|{r}", f"{TOOL} {cmd.format(d=d)}", timeout=1200))
    out.append(Step("umount-yaffs2", guest.umount_cmd(YAFFS), timeout=120))
    return out


def measure(out: Path, kernel_name: str | None = None, force: bool = False) -> dict:
    from .. import writeguard
    out = writeguard.make_dir(writeguard.check(out, "--out", writeguard.Output.DIR, mark="fusecost.json",
                                               force=force))
    kernel = ensure_kernel(kernel_name)
    res = UmlLab(kernel).boot(BootSpec(run_dir=out, steps=tuple(steps()), timeout=3600))
    failed = next((s for s in res.steps if not s.status.ok), None)
    if failed is not None or not res.ok:
        raise FlashbedError(f"the FUSE-cost boot failed at {failed.name if failed else res.error} "
                            f"(console: {res.console_log})")
    runs: dict[str, dict[str, list[float]]] = {}
    for s in res.steps:
        if s.name.count("|") != 2:
            continue
        where, name, _ = s.name.split("|")
        for row, kbps in throughputs(name, s.stdout).items():
            runs.setdefault(row, {}).setdefault(where, []).append(kbps)
    table = {row: {where: statistics.median(v) for where, v in by.items()} for row, by in runs.items()}
    summary = {"kernel": kernel.label, "repeats": REPEATS, "median_kBps": table}
    writeguard.write_into(out, "fusecost.json", json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    from ..options import Parser
    ap = Parser(prog="python3 -m flashbed.bench.fusecost")
    ap.add_argument("--out", type=options.path, default=Path("fusecost"), help="a new or empty directory, or one this "
                    "command wrote before (default: fusecost)")
    ap.add_argument("--kernel", default=None)
    ap.add_argument("--force", action="store_true", help="let --out be a directory of yours that holds files "
                    "(fusecost.json and the lab's logs there are replaced)")
    try:
        a = ap.parse_args(argv)
        s = measure(a.out, a.kernel, a.force)
    except FlashbedError as e:
        print(f"flashbed: error: {e}", file=sys.stderr)
        return 2
    print(f"{'workload (KB/s)':28} {'tmpfs':>10} {'yaffs2-fuse':>12} {'slower':>7}")
    for name, row in s["median_kBps"].items():
        print(f"{name:28} {row['tmpfs']:>10.0f} {row['yaffs2-fuse']:>12.0f} "
              f"{row['tmpfs'] / row['yaffs2-fuse']:>6.1f}x")
    print(f"medians of {s['repeats']} runs, lab kernel {s['kernel']}; the gap is FUSE plus YAFFS2's own work, "
          f"with no flash on either side")
    return 0


if __name__ == "__main__":
    sys.exit(main())
