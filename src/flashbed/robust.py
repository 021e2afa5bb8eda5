"""`flashbed run --robust`: the recommendation tested against every assumption of the twin.

In virtual time a rerun moves nothing: what can still make an answer wrong is the twin itself,
the values its preset assumes (devices/assumptions.py). The robust pass runs each use case's
decisive studies on variants of the twin besides the nominal one:

- each assumption at either end of its range, the others at their nominal value (one at a
  time: which assumption moves the answer, and which way);
- DRAWS joint draws, every assumption at once, a Latin hypercube over their ranges seeded by
  the run's seed (what no single assumption does alone);

each variant's fitted values solved again so it still gives the part's published rates (a
variant that cannot is dropped and said so: devices/refit.py). A variant is a device of the
run (`emmc-8g@512M~slc_cache-low`): its own cell keys, run like any cell, in virtual time,
resumed and distributed as any (Dask included); the plan is the same for the same request,
so a rerun of the command finishes it. The report groups the variants under their nominal
part (report/footing.py).

Which assumptions are varied: those whose part of the model the decisive studies see (the
timing of the timed ones, what a power cut keeps for the crash states); one that reaches only
wear-out (endurance, error and failure rates: the quick profile's studies wear no part out) is
declared, not varied, and the report says so.

Which studies: each use case's decisive criteria and requirements (weights.toml), except those
whose outcomes depend on the filesystem alone (Study.device_free: what a filesystem can hold);
the other criteria of a use case keep the nominal twin's figures, and the report says so.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from enum import StrEnum

from .devices.assumptions import VARIED_REACH, Assumption, Kind, Value, round_value, toml_value
from .devices.presets import Device, load
from .devices.refit import Refit, refit
from .errors import FlashbedError

# Joint draws of a robust pass (see the README's "Robust pass" for how the count was chosen):
# with the ends of each assumption, what the pass costs; a region of the joint space a quarter
# wide is missed by all of them with probability 0.75^DRAWS (10 % at 8)
DRAWS = 8


# a bound on --robust DRAWS: a clean pass of 100 joint draws already rules out, at 95 % confidence, a
# failing share of the assumption space above 3 %; each draw adds its cells (and planning time)
MAX_DRAWS = 100


def draws() -> int:
    """The joint draws of `flashbed run --robust`."""
    return DRAWS


def draw_count(text: str) -> int:
    """--robust DRAWS: a whole number from 0 to MAX_DRAWS (the option's type: BadValue if not)."""
    from .options import BadValue
    t = text.strip()
    if not (t.isascii() and t.isdigit()) or int(t) > MAX_DRAWS:
        raise BadValue(f"'{text}': give a whole number of joint draws from 0 to {MAX_DRAWS} (or --robust alone "
                       f"for {DRAWS})")
    return int(t)


NOT_VARIED = "reaches wear-out only, and no decisive study wears the part out"


class VariantKind(StrEnum):
    LOW = "low"  # one assumption at the low end of its range
    HIGH = "high"  # ... at its high end
    DRAW = "draw"  # every assumption at a joint draw


@dataclass(frozen=True)
class Variant:
    """One variant of a nominal twin: what it changes, its refit, and why it was dropped ('' if not)."""

    name: str  # its label's suffix: slc_cache-low, draw-3
    kind: VariantKind
    values: dict[str, Value]  # assumption path -> its value here (the others are nominal)
    fit: Refit | None = None
    why: str = ""

    def describe(self, footing: dict[str, Assumption]) -> dict:
        """As the manifest records it (the report reads this)."""
        return {"name": self.name, "kind": self.kind.value,
                "values": {p: footing[p].text(v) for p, v in self.values.items()},
                "numbers": {p: (float(v) if not isinstance(v, bool) else v) for p, v in self.values.items()},
                "fitted": dict(self.fit.fitted) if self.fit else {},
                "figures": {k: round(v, 4) for k, v in self.fit.figures.items()} if self.fit else {},
                "dropped": self.why}


def varied(device: Device) -> tuple[list[Assumption], list[Assumption]]:
    """The device's assumptions the robust pass varies, and those it leaves at their value."""
    out, kept = [], []
    for a in device.footing.assumptions if device.footing else ():
        (out if a.param.reach & VARIED_REACH else kept).append(a)
    return out, kept


def _fields(device: Device, a: Assumption, v: Value) -> list[tuple[str, str]]:
    """An assumption's value as the variant's preset fields. Planes change at a fixed erase unit
    (the unit flashbench measures, filesystems align to): the blocks hold fewer pages."""
    out = [(a.param.path, toml_value(a.param, v))]
    if a.param.path == "nand.planes":
        unit = int(device.info["pages_per_block"]) * int(device.info["planes"])
        ppb = unit // int(v)
        if unit % int(v) or ppb < 2 or ppb & (ppb - 1):
            raise _Impossible(f"{int(v)} planes cannot make its {unit}-page erase unit of whole blocks")
        out.append(("nand.pages_per_block", str(ppb)))
    return out


class _Impossible(Exception):
    pass


def _draws(assumptions: list[Assumption], n: int, seed: int) -> list[dict[str, Value]]:
    """n joint draws, a Latin hypercube: each assumption's range cut in n strata, each stratum
    drawn once, the strata of different assumptions paired at random (seeded)."""
    rng = random.Random(f"flashbed-robust-{seed}")
    columns = {}
    for a in assumptions:
        strata = list(range(n))
        rng.shuffle(strata)
        columns[a.param.path] = [a.at((s + rng.random()) / n) for s in strata]
    return [{p: col[i] for p, col in columns.items()} for i in range(n)]


@dataclass(frozen=True)
class Limit:
    """An end of an assumption's range the published rates rule out: the value nearest it that
    they allow (None: none between it and the nominal), and why the end is no plausible twin."""

    end: Value
    kept: Value | None
    why: str


def _toward(a: Assumption, end: Value, steps: int = 8) -> list[Value]:
    """Values from next to the nominal out to `end`, in the assumption's own scale and rounding."""
    if a.param.kind is Kind.FLAG:
        return [end]
    lo, hi = float(a.nominal), float(end)
    if a.log and lo > 0:
        vals = [lo * (hi / lo) ** (i / steps) for i in range(1, steps + 1)]
    else:
        vals = [lo + (hi - lo) * i / steps for i in range(1, steps + 1)]
    out: list[Value] = []
    for v in [round_value(a.param, x) for x in vals] + [end]:
        if v != a.nominal and v not in out and (float(v) - lo) * (hi - lo) > 0:
            out.append(v)
    return out


def _fit(device: Device, values: dict[str, Value], by: dict[str, Assumption]) -> Refit | str:
    """The refit of a variant, or why it cannot be made."""
    try:
        assumed = tuple(f for p, v in values.items() for f in _fields(device, by[p], v))
    except _Impossible as e:
        return str(e)
    return refit(device, assumed)


def _end(device: Device, a: Assumption, end: Value, by: dict[str, Assumption]) -> tuple[Value, Refit | None, Limit | None]:
    """The variant at an end of a's range, or, when the published rates rule the end out, at
    the farthest value toward it they allow (found by bisection: the model is cheap)."""
    cands = _toward(a, end)
    fits: dict[int, Refit | str] = {}

    def ok(i: int) -> bool:
        if i not in fits:
            fits[i] = _fit(device, {a.param.path: cands[i]}, by)
        return isinstance(fits[i], Refit) and fits[i].ok

    last = len(cands) - 1
    if ok(last):
        return cands[last], fits[last], None
    why = fits[last] if isinstance(fits[last], str) else fits[last].why
    good, bad = -1, last
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if ok(mid) else (good, mid)
    if good < 0:
        return end, None, Limit(end, None, why)
    return cands[good], fits[good], Limit(end, cands[good], why)


def variants(device: Device, draws: int, seed: int) -> tuple[list[Variant], dict[str, dict[str, Limit]]]:
    """The variants of a nominal twin, each refitted (dropped ones carry why), and the ends of
    assumptions the published rates rule out. Each assumption's ends first (or the farthest value
    toward an end the published rates allow); then the joint draws over what they allow."""
    vary, _kept = varied(device)
    by = {a.param.path: a for a in vary}
    out: list[Variant] = []
    limits: dict[str, dict[str, Limit]] = {}
    box: list[Assumption] = []
    for a in vary:
        edges = {}
        for kind, end in ((VariantKind.LOW, a.low), (VariantKind.HIGH, a.high)):
            if end == a.nominal:
                edges[kind] = a.nominal
                continue
            value, fit, limit = _end(device, a, end, by)
            if limit:
                limits.setdefault(a.param.path, {})[kind.value] = limit
            edges[kind] = value if fit else a.nominal
            name = f"{a.param.name}-{kind.value}"
            out.append(Variant(name, kind, {a.param.path: value}, fit, "" if fit else limit.why))
        if edges[VariantKind.LOW] != edges[VariantKind.HIGH]:
            box.append(dataclasses.replace(a, low=edges[VariantKind.LOW], high=edges[VariantKind.HIGH]))
    seen = {tuple(sorted(v.values.items())): v.name for v in out}
    for i, values in enumerate(_draws(box, draws, seed) if box else [], 1):
        name = f"draw-{i}"
        changed = {p: v for p, v in values.items() if v != by[p].nominal}
        key = tuple(sorted(changed.items()))
        if not changed or key in seen:
            out.append(Variant(name, VariantKind.DRAW, values,
                               why=f"the same device as {seen.get(key, 'the nominal twin')}"))
            continue
        seen[key] = name
        fit = _fit(device, changed, by)
        out.append(Variant(name, VariantKind.DRAW, values, fit if isinstance(fit, Refit) else None,
                           fit if isinstance(fit, str) else fit.why))
    return out, limits


def expand(devices: dict[str, Device], draws: int, seed: int) -> dict[str, Device]:
    """The run's devices with each emulated twin's variants after it (`--robust`); each nominal
    device's info records its variants, kept and dropped, for the manifest and the report."""
    out: dict[str, Device] = {}
    for label, dev in devices.items():
        if not dev.emulated or dev.variant:
            out[label] = dev
            continue
        vs, limits = variants(dev, draws, seed)
        vary, kept = varied(dev)
        by = {a.param.path: a for a in dev.footing.assumptions} if dev.footing else {}
        info = {**dev.info, "robust": {
            "draws": draws, "seed": seed, "varied": [a.param.path for a in vary],
            "not_varied": {a.param.path: NOT_VARIED for a in kept},
            "ruled_out": {p: {k: {"end": by[p].text(lim.end),
                                  "kept": by[p].text(lim.kept) if lim.kept is not None else None,
                                  "why": lim.why} for k, lim in ends.items()} for p, ends in limits.items()},
            "variants": [v.describe(by) for v in vs]}}
        out[label] = dataclasses.replace(dev, info=info)
        for v in vs:
            if v.why:
                continue
            var = load(str(dev.path), dev.capacity, v.name, v.fit.sets)  # a path: a preset by name or one's own
            out[var.label] = dataclasses.replace(var, info={**var.info, "variant": {"of": label,
                                                                                   **v.describe(by)}})
    return out


def rerun_studies(studies: tuple[str, ...]) -> tuple[str, ...]:
    """The studies the robust pass runs on variants, of those a run has: each use case's decisive
    criteria and requirements, except studies of the filesystem alone (Study.device_free)."""
    from .report.weights import load_weights
    from .studies import STUDIES
    wanted: set[str] = set()
    for uc in load_weights().use_cases:
        wanted |= {c.study for c in uc.criteria if c.decisive} | {r.study for r in uc.requires}
    return tuple(s for s in studies if s in wanted and s in STUDIES and not STUDIES[s].device_free)


def check(devices: dict[str, Device], studies: tuple[str, ...]) -> None:
    """One line if --robust has nothing to vary or nothing to run."""
    twins = [d for d in devices.values() if d.emulated and not d.variant]
    if not twins:
        raise FlashbedError("--robust varies an emulated twin's assumptions: give a preset with --device "
                            "(e.g. emmc-8g@512M), or drop --robust")
    if not rerun_studies(studies):
        raise FlashbedError("--robust runs each use case's decisive studies on the twin's variants, and this "
                            "run has none of them: add e.g. --study bigfile,boot,crashstates, or drop --robust")
    if not any(varied(d)[0] for d in twins):
        names = ", ".join(d.label for d in twins)
        raise FlashbedError(f"--robust: {names} declares no assumption the decisive studies see "
                            f"([assumptions] in its preset): nothing to vary")


def notes(devices: dict[str, Device], rerun: tuple[str, ...]) -> list[str]:
    """What the robust pass will run, one line per twin, said before the run."""
    out = []
    for label, dev in devices.items():
        info = dev.info.get("robust")
        if not info:
            continue
        vs = info["variants"]
        kept = [v for v in vs if not v["dropped"]]
        ruled = "; ".join(f"{p} {k} end {e['end']} (" + (f"varied to {e['kept']}" if e["kept"] else "not varied")
                          + ")" for p, ends in info["ruled_out"].items() for k, e in ends.items())
        n, d = len(info["varied"]), info["draws"]
        out.append(f"robust pass: {len(kept)} variants of {label} ({n} assumption{'s' if n != 1 else ''} at the ends "
                   f"of {'their' if n != 1 else 'its'} range, {d} joint draw{'s' if d != 1 else ''}) run "
                   f"{', '.join(rerun)}; {len(vs) - len(kept)} dropped"
                   + (f"; the published rates rule out {ruled}" if ruled else ""))
    return out
