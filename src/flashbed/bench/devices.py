"""Benchmarks that print figures (`make bench`): lab boot time, the FUSE path's
added latency, and each preset's measured rates against what it declares.

All measured with the real lab kernel and fio inside it; medians of several
runs, side-by-side comparisons made in one run.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

from ..devices import presets
from ..devices.session import open_session
from ..errors import FlashbedError
from ..lab.kernel import KernelInfo, ensure_kernel
from ..lab.uml import BootSpec, Step, boot
from ..studies import fio

MiB = 1 << 20


def _fio_in_lab(kernel: KernelInfo, device: presets.Device, jobs: dict[str, dict], work: Path,
                pace: str = "real", global_opts: dict | None = None) -> dict[str, dict]:
    """Run fio jobs one after another on the raw device; return fio figures per job."""
    opts = {"ioengine": "libaio", "filename": "/dev/ubda", "iodepth": 1, "direct": 1, **(global_opts or {})}
    steps = []
    for name, job in jobs.items():
        fio.job_file(work / f"{name}.fio", {name: job}, opts)
        steps.append(Step(name, f"fio --output-format=json --output={name}.json {name}.fio", timeout=900))
    with open_session(device, work / "scratch", pace=pace) as dev:
        res = boot(BootSpec(run_dir=work, steps=tuple(steps), disks=dev.disks(), timeout=3600), kernel)
    if not res.ok:
        raise FlashbedError(f"benchmark lab on {device.label} failed: {res.status} {res.error} ({res.console_log})")
    out = {}
    for name in jobs:
        data = fio.load(work / f"{name}.json")
        if not data:
            raise FlashbedError(f"benchmark: fio gave no result for {name} on {device.label}")
        out[name] = fio.job_figures(data["jobs"][0])
    return out


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


def preset_rates(names: list[str], capacity: str = "512M", stream=sys.stdout) -> None:
    """Sequential and random 4 KiB write rates measured with fio vs the preset's declaration."""
    kernel = ensure_kernel()
    with tempfile.TemporaryDirectory(prefix="flashbed-bench-") as tmp:
        for name in names:
            dev = presets.load_spec(f"{name}@{capacity}")
            declared = dev.info.get("declared", {})
            # hybrid FTLs declare random writes "at best": inside the AUs they keep
            # open; spread over more AUs they collapse (measured too, for contrast)
            open_aus = int(dev.info.get("open_aus") or 0)
            best_span = dev.erase_block * open_aus if dev.info.get("ftl") == "hybrid" and open_aus else 128 * MiB
            jobs = {
                "seqwrite": {"rw": "write", "bs": "1M", "size": 128 * MiB, "runtime": 20},
                "randwrite": {"rw": "randwrite", "bs": "4k", "size": best_span, "runtime": 15, "time_based": 1,
                              "randseed": 1},
            }
            if best_span != 128 * MiB:
                jobs["randwrite-spread"] = {"rw": "randwrite", "bs": "4k", "size": 128 * MiB, "runtime": 15,
                                            "time_based": 1, "randseed": 1, "offset": best_span}
            w = Path(tmp) / name
            w.mkdir()
            figs = _fio_in_lab(kernel, dev, jobs, w)
            seq, iops = figs["seqwrite"]["bandwidth"], figs["randwrite"]["iops"]
            d_seq, d_iops = declared.get("seq_write_mb_s"), declared.get("rand_write_4k_iops")
            spread = figs.get("randwrite-spread", {}).get("iops")
            print(f"{name}: sequential write {seq:.1f} MB/s (declared {_num(d_seq)}, {_ratio(seq, d_seq)}), "
                  f"random 4 KiB write {iops:.0f} IOPS over {best_span // MiB} MiB (declared {_num(d_iops)}, "
                  f"{_ratio(iops, d_iops)})" + (f"; spread over 128 MiB: {spread:.1f} IOPS" if spread else ""),
                  file=stream)
            print("  " + json.dumps({"preset": name, "seq_write_mbps": round(seq, 2), "rand_write_4k_iops":
                                     round(iops, 1), "rand_span_bytes": best_span, "rand_write_4k_iops_spread":
                                     spread, "declared": declared}), file=stream)


def _num(v) -> str:
    return "?" if v is None else f"{v:g}"


def _ratio(measured: float, declared) -> str:
    if not declared:
        return "no declaration"
    return f"{(measured / declared - 1) * 100:+.1f} %"
