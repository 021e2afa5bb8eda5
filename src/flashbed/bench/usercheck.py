"""What the user's check costs on the host, per run, and how much of it is the sandbox's.

  flashbed bench usercheck [--check FILE] [--records 400] [--runs 20]

The tree is a write-ahead log as examples/wal400.sh leaves it (--records records of 512 bytes),
packed as the lab packs a recovered directory (trees.pack), and `records=N` acknowledged. Each
run times, interleaved, on this host's wall clock and in CPU time (this process's children):

- the check alone: `sh -c CHECK` in a directory holding the log, no sandbox (the floor);
- a trivial check (`true`) in the sandbox: what the sandbox itself costs per check;
- the check in the sandbox, as `flashbed run` runs it.

Medians are printed. The default check is examples/walcheck.sh (a `dd` for each acknowledged
record), shipped in the package as bench/walcheck.sh (in a checkout, a link to the example) so
an installed flashbed has it: one text, not a copy that drifts from the example's.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable

from ..crashhost import sandbox
from ..errors import FlashbedError
from ..lab.guest import trees
from ..lab.labview import RUN

WORKDIR = "/mnt/cs"  # the lab's directory of the workload (studies/appcheck.py)
RECORD = 512


def default_check() -> str:
    """examples/walcheck.sh's text, as the package ships it (pyproject's package data)."""
    return resources.files(__package__).joinpath("walcheck.sh").read_text()


@dataclass(frozen=True)
class Timed:
    wall: float
    cpu: float


def _children_cpu() -> float:
    r = os.times()
    return r.children_user + r.children_system + sandbox.cpu_seconds()


def _timed(fn: Callable[[], None]) -> Timed:
    c, t = _children_cpu(), time.monotonic()
    fn()
    return Timed(time.monotonic() - t, _children_cpu() - c)


def lay_out(root: Path, records: int) -> tuple[Path, Path, Path]:
    """The log's directory, its pack and the acknowledged labels, under `root`."""
    tree = root / "tree"
    tree.mkdir()
    (tree / "wal.log").write_bytes(b"".join(b"%-511s\n" % f"record {i}".encode() for i in range(1, records + 1)))
    pack = root / "tree.pack"
    trees.pack(str(tree), str(pack))
    acked = root / "acked.txt"
    acked.write_text(f"records={records}\n")
    return tree, pack, acked


def bench(check: str | None, records: int, runs: int, out=sys.stdout) -> dict[str, Timed]:
    why = sandbox.available()
    if why:
        raise FlashbedError(f"no check sandbox on this host ({why}): the check would run in the lab")
    cmd = Path(check).read_text() if check else default_check()
    with tempfile.TemporaryDirectory(prefix="flashbed-bench-uc-") as tmp:
        root = Path(tmp)
        tree, pack, acked = lay_out(root, records)
        # the run directory as the lab names it, holding a copy of the labels (crashhost/usercheck.py)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/tmp", "FLASHBED_RUN": RUN,
               "FLASHBED_MNT": WORKDIR, "FLASHBED_ACKED": f"{RUN}/{acked.name}"}

        def bare() -> None:
            subprocess.run(["/bin/sh", "-c", cmd], cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**env, "FLASHBED_RUN": str(root), "FLASHBED_MNT": str(tree),
                                "FLASHBED_ACKED": str(acked)}, check=False)

        def boxed(what: str) -> Callable[[], None]:
            def go() -> None:
                ran = sandbox.run(what, WORKDIR, env, 600.0, pack=str(pack), view={acked.name: str(acked)},
                                  view_at=RUN)
                if ran.refused or ran.status != "ok":
                    raise FlashbedError(f"the sandbox's run ended {ran.status}: "
                                        f"{ran.refused or (ran.out + ran.err).decode(errors='replace')[-200:]}")
            return go

        parts = {"the check alone (no sandbox)": bare, "the sandbox with `true`": boxed("true"),
                 "the check in the sandbox": boxed(cmd)}
        times: dict[str, list[Timed]] = {k: [] for k in parts}
        print(f"the user's check on the host: {Path(check).name if check else 'walcheck.sh (a dd per record)'}, "
              f"{records} records acknowledged, {runs} runs each, interleaved (medians)", file=out, flush=True)
        for _ in range(runs):
            for k, fn in parts.items():
                times[k].append(_timed(fn))
    med = {k: Timed(statistics.median(t.wall for t in v), statistics.median(t.cpu for t in v))
           for k, v in times.items()}
    for k, m in med.items():
        print(f"  {k:30} {m.wall * 1e3:8.1f} ms wall, {m.cpu * 1e3:8.1f} ms CPU", file=out, flush=True)
    return med
