"""Benchmarks that print figures (`make bench`): the FUSE path's added latency
(each preset's rates against its published ones: bench/presets.py).

All measured with the real lab kernel and fio inside it; medians of several
runs, side-by-side comparisons made in one run.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

from ..devices import presets
from ..devices.session import open_session
from ..lab.kernel import KernelInfo, ensure_kernel
from ..lab.labs import UmlLab
from ..probe.lab import run_fio

MiB = 1 << 20


def _fio_in_lab(kernel: KernelInfo, device: presets.Device, jobs: dict[str, dict], work: Path,
                pace: str = "real") -> dict[str, dict]:
    """Run fio jobs one after another on the raw device; return fio figures per job."""
    with open_session(device, work / "scratch", pace=pace) as dev:
        return run_fio(dev, UmlLab(kernel), work, jobs)


def fuse_latency(runs: int = 5, stream=sys.stdout) -> None:
    """Added latency per 4 KiB read: the emulator (ideal, no pacing) vs a plain file."""
    kernel = ensure_kernel()
    job = {"rw": "randread", "bs": "4k", "runtime": 4, "time_based": 1, "size": 64 * MiB, "randseed": 1}
    med = {"plain-file@256M": [], "ideal@256M": []}
    with tempfile.TemporaryDirectory(prefix="flashbed-bench-") as tmp:
        for i in range(runs):
            for spec in med:  # interleaved, so drift hits both alike
                dev = presets.load_spec(spec)
                w = Path(tmp) / f"{spec}-{i}"
                w.mkdir()
                # lay the data down first so reads hit written pages on both
                figs = _fio_in_lab(kernel, dev, {"fill": {"rw": "write", "bs": "1M", "size": 64 * MiB},
                                                 "read": job}, w, pace="none")
                med[spec].append(figs["read"]["lat_p50"])
                print(f"  run {i + 1}/{runs} {spec}: median 4k read latency {figs['read']['lat_p50']:.1f} µs",
                      file=sys.stderr)
    plain, emu = statistics.median(med["plain-file@256M"]), statistics.median(med["ideal@256M"])
    print(f"FUSE path: median 4 KiB random read latency {emu:.1f} µs on the emulator (ideal, pace none) vs "
          f"{plain:.1f} µs on a plain file: added {emu - plain:.1f} µs (median of {runs} runs each)", file=stream)
