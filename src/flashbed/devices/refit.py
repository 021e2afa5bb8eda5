"""A preset variant's fitted values solved again, so that the variant still gives its part's
published rates; a variant that cannot is no plausible twin of the part.

A preset's firmware times (and where the class leaves a range, a program time) are fitted to
the part's published rates in virtual time (`flashbed bench presets --clock virtual`). Another
value of one of its assumptions moves those rates (a smaller SLC buffer slows the random
writes), so each variant's fitted values are solved again: each fitted value is moved until
the model gives the figure it is fitted to where the nominal twin gives it, within its own
range (the datasheet class's). The figures come from the device model alone, in model time:
`flashbed-emu jobs` runs `flashbed bench presets`' fio jobs on a fresh device of the model in
the emulator's process, which is what a virtual-time lab measures of them (the lab's CPU costs
no guest time there): `flashbed bench presets --clock virtual` prints both side by side. A
round costs some 20 ms, so a variant is fitted in a fraction of a second, without the lab.

A variant is kept when every published rate comes within MATCH (15 %) of the published
figure, the test the nominal preset passes (`flashbed bench presets`); else it is dropped,
and the report says which figure it missed, by how much, and at what fitted value.
"""

from __future__ import annotations

import functools
import json
import subprocess
import tomllib
from dataclasses import dataclass, field

from ..sizes import parse_size
from .assumptions import Fitted, Kind, lookup
from .emulator import EmulatorError, _error_line, find_binary, set_args
from .presets import Device
from .rates import FIGURES, MATCH, published_jobs, published_plan

ROUNDS = 12  # fit rounds at most (each a model run); the rules below converge in 2-4
CLOSE = 0.002  # a fitted figure this close to its target is fitted
UBD_MAX_REQUEST = 512 << 10  # the lab's block layer passes a device at most this much per request (patch 0003)
# model-job figure for each published rate: (job, its figure)
_JOB = {"seq_read_mb_s": ("seq-read", "bandwidth"), "seq_write_mb_s": ("seq-write", "bandwidth"),
        "rand_read_4k_iops": ("randread-spread", "iops"), "rand_write_4k_iops": ("randwrite-spread", "iops")}


@dataclass(frozen=True)
class Refit:
    """A variant's fields and what its model gives."""

    sets: tuple[tuple[str, str], ...]  # its assumptions' values and its refitted values, for the emulator
    fitted: dict[str, float]  # fitted key (ftl.write_overhead_us, nand.timing.program_us[1]) -> value
    figures: dict[str, float]  # the four rates of its model
    why: str = ""  # why it is no plausible twin ("": it is one)
    target: dict[str, float] = field(default_factory=dict)  # the nominal twin's figures the fit aimed at

    @property
    def ok(self) -> bool:
        return not self.why


def model_jobs(jobs: dict[str, dict]) -> list[dict]:
    """fio job options (rates.py) as `flashbed-emu jobs` takes them."""
    out = []
    for name, j in jobs.items():
        m = {"name": name, "rw": j["rw"], "bs": parse_size(str(j["bs"])), "offset": int(j.get("offset", 0)),
             "size": int(j["size"]), "seed": int(j.get("randseed", 1))}
        if j.get("number_ios"):
            m["number_ios"] = int(j["number_ios"])
        elif j.get("time_based"):
            m["runtime"] = float(j["runtime"])
        out.append(m)
    return out


def rates(device: Device, sets: tuple[tuple[str, str], ...] = (), runtime: float = 10.0) -> dict[str, float]:
    """The four rates of the device's model with `sets` on top of its preset, measured as `flashbed
    bench presets` measures them (the published span), in model time, in-process."""
    return dict(_rates(device.path, device.capacity, device.erase_block,
                       int((device.published or {}).get("span_bytes") or 0), sets, runtime))


@functools.lru_cache(maxsize=256)
def _rates(path, capacity: int, erase_unit: int, span: int, sets: tuple[tuple[str, str], ...],
           runtime: float) -> tuple[tuple[str, float], ...]:
    jobs = model_jobs(published_jobs(published_plan(capacity, erase_unit, span, runtime)))
    cmd = [str(find_binary()), "jobs", "--preset", str(path), "--capacity", str(capacity), *set_args(sets),
           "--jobs", json.dumps(jobs), "--max-request", str(UBD_MAX_REQUEST)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise EmulatorError(_error_line(proc.stderr, f"flashbed-emu jobs failed (exit {proc.returncode})"))
    out = json.loads(proc.stdout)
    return tuple((key, float(out[job][fig])) for key, (job, fig) in _JOB.items())


def _fitted_sets(device: Device, values: dict[str, float]) -> list[tuple[str, str]]:
    """The fitted values as preset fields (program times as their whole array)."""
    out: list[tuple[str, str]] = []
    program = list(_program_of(device))
    for f in device.footing.fitted:
        v = values[f.key]
        if f.param.kind is Kind.PROGRAM:
            program[f.index] = v
        else:
            out.append((f.param.path, repr(float(v))))
    if any(f.param.kind is Kind.PROGRAM for f in device.footing.fitted):
        out.append(("nand.timing.program_us", "[" + ", ".join(repr(float(x)) for x in program) + "]"))
    return out


def _program_of(device: Device) -> tuple[float, ...]:
    """The preset's own program times (µs per page type)."""
    raw = lookup(tomllib.loads(device.path.read_text()), "nand.timing.program_us")
    return tuple(float(x) for x in (raw if isinstance(raw, list) else [raw]))


def own_fitted(device: Device) -> dict[str, float]:
    """The preset's own fitted values."""
    data = tomllib.loads(device.path.read_text())
    out = {}
    for f in device.footing.fitted:
        raw = lookup(data, f.param.path)
        out[f.key] = float(raw[f.index] if f.index is not None else raw)
    return out


def _step(f: Fitted, value: float, got: float, want: float, program: tuple[float, ...]) -> float:
    """The fitted value that should bring `got` to `want`. A firmware time per command moves by
    the latency gap at queue depth 1 (`flashbed bench presets`' rule); a program time by the
    share of the rate missing, as a rate over the array is pages over program time."""
    if f.param.kind is Kind.PROGRAM:
        total = sum(program) - program[f.index] + value
        return value + total * (got / want - 1)
    unit = next(u for k, _l, u in FIGURES if k == f.figure)
    if unit == "IOPS":
        return value + 1e6 / want - 1e6 / got
    return value * got / want  # a time behind a MB/s figure


def refit(device: Device, assumed: tuple[tuple[str, str], ...]) -> Refit:
    """The variant of `device` (a nominal preset) with the fields `assumed` set: its fitted values
    solved again to the nominal twin's figures, and whether it still matches the published rates."""
    footing = device.footing
    target_all = rates(device)
    published = {k: float(v) for k in target_all if (v := (device.published or {}).get(k))}
    values = own_fitted(device)
    program = _program_of(device)
    targets = {f.key: target_all[f.figure] for f in footing.fitted}

    def sets_now() -> tuple[tuple[str, str], ...]:
        return tuple(assumed) + tuple(_fitted_sets(device, values))

    try:
        figs = rates(device, sets_now())
    except EmulatorError as e:
        return Refit(tuple(assumed), values, {}, f"the model refuses it ({e})", target_all)
    for _ in range(ROUNDS):
        if all(abs(figs[f.figure] / targets[f.key] - 1) <= CLOSE for f in footing.fitted):
            break
        moved = False
        for f in footing.fitted:
            new = min(f.high, max(f.low, _step(f, values[f.key], figs[f.figure], targets[f.key], program)))
            if f.param.kind is Kind.PROGRAM:
                program = program[:f.index] + (new,) + program[f.index + 1:]
            moved |= abs(new - values[f.key]) > 1e-9 * max(1.0, abs(new))
            values[f.key] = new
        if not moved:
            break  # every fitted value at a bound of its range
        figs = rates(device, sets_now())
    values = {k: float(f"{v:.4g}") for k, v in values.items()}
    figs = rates(device, sets_now())
    why = ""
    for key, label, unit in FIGURES:
        if key in published and abs(figs[key] / published[key] - 1) > MATCH:
            at = [f"{f.key} at {values[f.key]:g}" + (" (its bound)" if values[f.key] in (f.low, f.high) else "")
                  for f in footing.fitted if f.figure == key]
            why = (f"its {label} would be {figs[key]:.4g} {unit} against the published {published[key]:g} "
                   f"(x{figs[key] / published[key]:.2f}, outside {MATCH:.0%})" + (f" with {at[0]}" if at else ""))
            break
    return Refit(sets_now(), values, figs, why, target_all)
