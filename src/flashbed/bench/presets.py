"""`flashbed bench presets`: each preset's four rates measured in the lab the
way its published figures were measured, against those figures.

The published microSD, stick and eMMC figures of the calibrated presets come
from single-threaded tools at queue depth 1 (hdparm -t, dd, iozone -I with
4 KiB records in a 100 MB file): here fio runs the same shapes on the raw
device (1 MiB sequential read and write; 4 KiB random read and write spread
over the preset's published span, default 100 MiB). What differs from the
source (the raw device instead of a file in ext4; fio instead of iozone) is
printed with the method.

`--clock virtual` runs the same jobs on the time-travel lab kernel: each request
then completes when the device model says and the lab's own CPU time costs no
guest time, so a figure is the model's whatever the host's load (one run is
enough: runs repeat to the request). A firmware time fitted that way includes the
source host's own time per request (its kernel and tool), which a virtual lab does
not charge; in real time the lab's own time per request is added to it.

Each real-time run first measures the lab's own ceiling (the same jobs on
`ideal`, a device that takes no time) and marks figures close to it as
lab-bound; in virtual time the lab costs no time, so there is no ceiling (and a
device that takes no time would never let a timed job end).

Calibration is in virtual time (the device's own time, without the lab's):
run `--clock virtual` after the device model or the shape of the lab's requests
changes, read the ratios, and take the suggested firmware times
(read_overhead_us / write_overhead_us): at queue depth 1 a request's latency
is its firmware time plus everything else, so the suggestion moves each
firmware time by the latency gap to the published figure. It assumes the
rest stays put; run again to check (one round converges for the presets). A
real-time run suggests nothing: there the lab's own time per request adds to
every QD1 request, and a random figure where that time alone is more than 15 %
of the published request's is marked lab-bound.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..clock import Clock
from ..devices import presets
from ..devices.rates import DEFAULT_SPAN, FIGURES, MATCH, figures_from, published_jobs, published_plan
from ..devices.refit import rates as model_rates
from ..devices.session import open_session
from ..errors import FlashbedError
from ..lab.kernel import ensure_kernel
from ..lab.labs import UmlLab
from ..probe.lab import run_fio

MiB = 1 << 20
GOAL = MATCH  # every figure within 15 % of the published one
LAB_BOUND = 0.8  # a figure this close to the lab's own ceiling says more about the lab


@dataclass
class Row:
    preset: str
    key: str
    label: str
    unit: str
    measured: float
    runs: list[float]
    published: float
    source: str

    @property
    def ratio(self) -> float | None:
        return self.measured / self.published if self.published else None


def measure(device: presets.Device, span: int, runtime: float, work: Path,
            clock: Clock = Clock.REAL) -> dict[str, float]:
    """The four figures, in one lab boot on a fresh device, in `clock`."""
    jobs = published_jobs(published_plan(device.capacity, device.erase_block, span, runtime))
    with open_session(device, work / "scratch", clock=clock) as session:
        figs = run_fio(session, UmlLab(ensure_kernel(time_travel=clock.time_travel)), work, jobs)
    return figures_from(figs)


def suggest(device: presets.Device, rows: list[Row]) -> dict[str, float]:
    """Firmware times that close the random-figure gaps (see the module doc)."""
    data = tomllib.loads(device.path.read_text()).get("ftl", {})
    out = {}
    for key, field in (("rand_read_4k_iops", "read_overhead_us"), ("rand_write_4k_iops", "write_overhead_us")):
        row = next(r for r in rows if r.key == key)
        if row.published and row.measured:
            gap_us = 1e6 / row.published - 1e6 / row.measured
            out[field] = max(0.0, float(data.get(field, 0.0)) + gap_us)
    return out


def calibrated() -> list[str]:
    """Emulated presets that publish at least one rate, by name."""
    out = []
    for name in presets.available():
        try:
            dev = presets.load(name)
        except FlashbedError:
            continue
        if dev.emulated and any(dev.published.get(key) for key, _, _ in FIGURES):
            out.append(name)
    return out


def run(specs: list[str], capacity: str = "512M", runs: int = 3, runtime: float = 10.0,
        stream=sys.stdout, clock: Clock = Clock.REAL) -> list[Row]:
    devices = []
    for spec in specs:
        dev = presets.load_spec(spec if "@" in spec else f"{spec}@{capacity}")
        if not dev.emulated:
            raise FlashbedError(f"{dev.label} is not an emulated block preset: bench presets measures those")
        devices.append(dev)
    kernel = ensure_kernel(time_travel=clock.time_travel)
    all_rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="flashbed-bench-") as tmp:
        ceiling: dict[str, float] | None = None
        if clock is Clock.REAL:
            # the lab's own ceiling: the same jobs on a device that takes no time
            ideal = presets.load_spec(f"ideal@{capacity}")
            ceiling = measure(ideal, DEFAULT_SPAN, runtime, Path(tmp) / "ceiling", clock)
            print("lab ceiling (ideal, zero-latency device, same jobs): "
                  + ", ".join(f"{label} {ceiling[key]:.1f} {unit}" for key, label, unit in FIGURES), file=stream,
                  flush=True)
        for dev in devices:
            pub = dev.published
            span = int(pub.get("span_bytes") or DEFAULT_SPAN)
            samples: dict[str, list[float]] = {key: [] for key, _, _ in FIGURES}
            for i in range(runs):
                figs = measure(dev, span, runtime, Path(tmp) / f"{dev.label}-{i}", clock)
                for key in samples:
                    samples[key].append(figs[key])
                print(f"  {dev.label} run {i + 1}/{runs}: " + ", ".join(f"{k} {v:.1f}" for k, v in figs.items()),
                      file=sys.stderr, flush=True)
            rows = [Row(dev.label, key, label, unit, statistics.median(samples[key]), samples[key],
                        float(pub.get(key) or 0.0), (pub.get("sources") or {}).get(key, ""))
                    for key, label, unit in FIGURES]
            _print(dev, span, rows, runs, kernel.release, ceiling, stream, clock, runtime)
            all_rows += rows
    return all_rows


def _lab_bound(r: Row, ceiling: dict[str, float] | None) -> str:
    """Why the lab, not the device, sets a real-time figure ("" if it does not).

    Near the lab's own ceiling; or, at QD1, where the lab's own time per request
    (the ceiling's) alone is more than GOAL of the published request's time: the
    firmware times are fitted in virtual time, so real time adds that much.
    """
    if ceiling is None or not ceiling.get(r.key):
        return ""
    if r.measured > LAB_BOUND * ceiling[r.key]:
        return f" (lab-bound: the lab itself reaches {ceiling[r.key]:.1f})"
    if r.unit == "IOPS" and r.published:
        lab_us, pub_us = 1e6 / ceiling[r.key], 1e6 / r.published
        if lab_us > GOAL * pub_us:
            return f" (lab-bound: the lab's own {lab_us:.0f} µs a request on the published {pub_us:.0f} µs)"
    return ""


def _print(dev: presets.Device, span: int, rows: list[Row], runs: int, kernel: str, ceiling: dict[str, float] | None,
           stream, clock: Clock = Clock.REAL, runtime: float = 10.0) -> None:
    part = dev.part.get("model", "no named part")
    method = dev.published.get("method") or "no published method"
    print(f"{dev.label} — {part}", file=stream)
    print(f"  published: {method}", file=stream)
    print(f"  measured: fio direct QD1 on the raw device in the lab (kernel {kernel}, {clock.value} time), random I/O over "
          f"{span // MiB} MiB, median of {runs}", file=stream)
    for r in rows:
        pub = f"{r.published:9.1f}" if r.published else f"{'-':>9}"
        if r.ratio is None:
            verdict = "no published figure"
        else:
            verdict = f"x{r.ratio:.2f} " + ("within 15 %" if abs(r.ratio - 1) <= GOAL else "OUTSIDE 15 %")
        verdict += _lab_bound(r, ceiling)
        print(f"  {r.label:24} {r.measured:9.1f} {r.unit:4} published {pub}  {verdict}"
              + (f"  [{r.source}]" if r.source else ""), file=stream)
    if clock is Clock.VIRTUAL:
        # what the robust pass refits its variants with (devices/refit.py): the same jobs on the
        # model alone, in model time, which a virtual-time lab should reproduce
        alone = model_rates(dev, runtime=runtime)
        print("  the model alone (flashbed-emu jobs, no lab): " + ", ".join(
            f"{r.label} {alone[r.key]:.1f} (x{alone[r.key] / r.measured:.3f} of the lab's)" for r in rows
            if r.measured), file=stream)
    # the firmware times are fitted in virtual time (the device's own time):
    # a real-time suggestion would fold the lab's time of the day into them
    hint = suggest(dev, rows) if clock is Clock.VIRTUAL else {}
    if hint:
        print("  suggested firmware times (closes the random-figure gaps at QD1): "
              + ", ".join(f"{k} = {v:.0f}" for k, v in hint.items()), file=stream)
    stream.flush()
