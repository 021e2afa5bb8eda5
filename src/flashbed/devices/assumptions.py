"""What a preset's values rest on: the part's published figures, what a probe measured, what
is fitted to the published rates, and what is assumed within a cited range.

A block preset says so in three tables beside its model (the emulator reads none of them):

    [assumptions."ftl.slc_cache"]          # a value no source gives for this part
    range = ["4M", "128M"]                 # plausible values, the preset's own inside
    source = "..."                         # where that range comes from

    [fitted]                               # solved so the model gives a published rate
    "ftl.write_overhead_us" = { figure = "rand_write_4k_iops", range = [0, 20000], source = "..." }

    [measured]                             # the part's own figure (a probe, a flashbench review)
    "ftl.open_aus" = "flashbench -O in the review: 5 open AUs"

The robust pass (`flashbed run --robust`, robust.py) varies the assumptions across their
ranges and refits the fitted values of each variant to the published rates (refit.py).
Everything here is checked once, when the preset is loaded: one line per mistake.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from ..errors import FlashbedError
from ..sizes import format_size, parse_size
from .rates import FIGURES


class Kind(StrEnum):
    """How a parameter's values are written and varied."""

    SIZE = "size"  # bytes, written "4M"; varied on a log scale
    COUNT = "count"  # a whole number
    POW2 = "power of two"  # a whole power of two (planes)
    NUMBER = "number"
    FLAG = "flag"  # true or false
    PROGRAM = "program times"  # nand.timing.program_us: µs per page type; fitted one element at a time


class Reach(StrEnum):
    """What part of the device model a parameter acts on: which studies can see it."""

    TIMING = "timing"  # how long requests take: every timed figure
    POWER_LOSS = "power loss"  # what a power cut keeps: crash states, power cuts
    WEAR = "wear"  # wear-out and errors at end of life: lifetime, bad blocks


# what the decisive studies see of the device model: the timed ones its timing, the crash
# states what a power cut keeps (the robust pass varies the assumptions that reach these)
VARIED_REACH = frozenset({Reach.TIMING, Reach.POWER_LOSS})


@dataclass(frozen=True)
class Param:
    """One field of the device model a preset may assume, fit or measure."""

    path: str  # table.field, as in the preset: "ftl.slc_cache"
    kind: Kind
    unit: str
    reach: frozenset[Reach]
    label: str  # what it is, in words
    measure: str  # how to measure it on your own part (what settles a choice that depends on it)
    varies: bool = True  # False: geometry, measured or the class's, never given a range (variants keep it)

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[1]


T, P, W = Reach.TIMING, Reach.POWER_LOSS, Reach.WEAR
PROBE = "`flashbed probe /dev/sdX --destroy-data-on /dev/sdX` (flashbench and fio; it overwrites the part)"
_CATALOGUE = (
    Param("nand.page_size", Kind.POW2, "bytes", frozenset({T}), "page size", f"flashbench -a: {PROBE}", varies=False),
    Param("nand.pages_per_block", Kind.POW2, "pages", frozenset({T}), "pages per erase block (the erase unit)",
          f"flashbench -a (the erase unit): {PROBE}"),
    Param("nand.planes", Kind.POW2, "", frozenset({T}), "planes programmed in parallel",
          "the NAND's datasheet (planes per die, dies in the package); or the sequential write rate "
          "against the page program time"),
    Param("nand.endurance", Kind.COUNT, "P/E cycles", frozenset({W}), "rated program/erase cycles",
          "the NAND's datasheet, or the part's health report (eMMC EXT_CSD life time estimates)"),
    Param("nand.rber_fresh", Kind.NUMBER, "", frozenset({W}), "raw bit error rate when new",
          "the NAND vendor's characterisation"),
    Param("nand.rber_eol", Kind.NUMBER, "", frozenset({W}), "raw bit error rate at rated wear",
          "the NAND vendor's characterisation"),
    Param("nand.ecc_bits", Kind.COUNT, "bits", frozenset({W}), "ECC bits corrected per codeword",
          "the controller's datasheet"),
    Param("nand.factory_bad_ratio", Kind.NUMBER, "", frozenset({W}), "share of factory bad blocks",
          "the NAND's datasheet (valid blocks guaranteed)"),
    Param("nand.program_fail_eol", Kind.NUMBER, "", frozenset({W}), "program failure rate at rated wear",
          "an endurance test to failure"),
    Param("nand.erase_fail_eol", Kind.NUMBER, "", frozenset({W}), "erase failure rate at rated wear",
          "an endurance test to failure"),
    Param("nand.protect_paired_pages", Kind.FLAG, "", frozenset({P}),
          "paired-page protection (a cut upper-page program spares its lower page)",
          "power cuts during writes on the part itself (its datasheet's sudden-power-off claim, if any): "
          "`flashbed run --target ssh://… --study powercut --power-cmd …` on a board"),
    Param("nand.timing.read_us", Kind.NUMBER, "µs", frozenset({T}), "page read time (tR)",
          "the NAND's datasheet"),
    Param("nand.timing.program_us", Kind.PROGRAM, "µs", frozenset({T}), "page program time (tPROG)",
          "the NAND's datasheet; or the sequential write rate (`flashbed probe`)"),
    Param("nand.timing.erase_us", Kind.NUMBER, "µs", frozenset({T}), "block erase time (tBERS)",
          "the NAND's datasheet"),
    Param("nand.timing.bus_mb_s", Kind.NUMBER, "MB/s", frozenset({T}), "NAND bus rate", "the controller's datasheet"),
    Param("nand.timing.slc_program_us", Kind.NUMBER, "µs", frozenset({T}), "page program time in SLC mode",
          "the NAND's datasheet"),
    Param("ftl.over_provisioning", Kind.NUMBER, "", frozenset({T, W}), "spare area for garbage collection",
          "the raw NAND capacity against the capacity offered (the datasheet)"),
    Param("ftl.spare_ratio", Kind.NUMBER, "", frozenset({W}), "replacement blocks for grown bad blocks",
          "the controller's datasheet"),
    Param("ftl.cache", Kind.SIZE, "", frozenset({T, P}), "volatile write cache",
          "eMMC: EXT_CSD CACHE_SIZE (`mmc extcsd read`); cards: the write rate of bursts of growing size"),
    Param("ftl.journal_interval", Kind.COUNT, "updates", frozenset({T, P}),
          "mapping updates between the FTL's journal commits", "not observable from outside: a vendor's word"),
    Param("ftl.wear_level_threshold", Kind.COUNT, "erases", frozenset({W}), "erase-count spread before static levelling",
          "not observable from outside: a vendor's word"),
    Param("ftl.open_aus", Kind.COUNT, "AUs", frozenset({T}), "allocation units open for writing at once",
          f"flashbench -O: {PROBE}"),
    Param("ftl.host_mb_s", Kind.NUMBER, "MB/s", frozenset({T}), "host interface rate", "the sequential read rate: "
          + PROBE),
    Param("ftl.read_overhead_us", Kind.NUMBER, "µs", frozenset({T}), "firmware time per read command",
          f"the random 4 KiB read rate at queue depth 1: {PROBE}"),
    Param("ftl.write_overhead_us", Kind.NUMBER, "µs", frozenset({T}), "firmware time per write command",
          f"the random 4 KiB write rate at queue depth 1: {PROBE}"),
    Param("ftl.slc_cache", Kind.SIZE, "", frozenset({T, P}), "SLC-mode write buffer",
          "the SLC-cache cliff: 4 KiB random writes at queue depth 1 (fio, direct) over twice the range, and "
          "where their rate falls"),
    Param("ftl.slc_idle_ms", Kind.NUMBER, "ms", frozenset({T}), "idle time before the buffer is folded",
          "the write rate after idle pauses of growing length, once the SLC buffer is full"),
    Param("ftl.slc_bypass", Kind.SIZE, "", frozenset({T}), "sequential run that bypasses the SLC buffer",
          "the rate of 4 KiB random writes right after sequential writes of growing length"),
)
PARAMS: dict[str, Param] = {p.path: p for p in _CATALOGUE}
# the published rates a twin reproduces (the [published] table's figures)
PUBLISHED = {key for key, _label, _unit in FIGURES}
# varied in powers of two above this ratio of a range's ends, else linearly
LOG_ABOVE = 4.0
# a rate's unit: its range starts above 0 (the emulator models 0 as no limit)
RATE_UNITS = ("MB/s",)


class Basis(StrEnum):
    MEASURED = "measured"
    FITTED = "fitted"
    ASSUMED = "assumed"


Value = float | bool


@dataclass(frozen=True)
class Assumption:
    param: Param
    nominal: Value
    low: Value
    high: Value
    source: str

    @property
    def log(self) -> bool:
        """Varied on a log scale (sizes, and ranges over a factor of LOG_ABOVE)."""
        if self.param.kind is Kind.FLAG:
            return False
        lo, hi = float(self.low), float(self.high)
        return self.param.kind in (Kind.SIZE, Kind.POW2) or (lo > 0 and hi / lo >= LOG_ABOVE)

    def at(self, u: float) -> Value:
        """The value at position u in [0, 1] of the range (the nominal kind's rounding)."""
        if self.param.kind is Kind.FLAG:
            return bool(self.high) if u >= 0.5 else bool(self.low)
        lo, hi = float(self.low), float(self.high)
        v = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))) if self.log else lo + u * (hi - lo)
        return round_value(self.param, v)

    def text(self, v: Value) -> str:
        return value_text(self.param, v)


@dataclass(frozen=True)
class Fitted:
    param: Param
    index: int | None  # program_us: the page type fitted (its other elements stay)
    figure: str  # the published figure it is solved for
    low: float
    high: float
    source: str

    @property
    def key(self) -> str:
        return self.param.path + (f"[{self.index}]" if self.index is not None else "")


@dataclass(frozen=True)
class Measured:
    param: Param
    how: str


@dataclass(frozen=True)
class Footing:
    """A preset's values by what they rest on; the rest of its model is its datasheet class."""

    assumptions: tuple[Assumption, ...] = ()
    fitted: tuple[Fitted, ...] = ()
    measured: tuple[Measured, ...] = ()

    def describe(self) -> dict[str, Any]:
        """As a run's manifest records it (the report's view of a part's footing)."""
        return {
            "assumptions": [{"param": a.param.path, "label": a.param.label, "nominal": a.text(a.nominal),
                             "low": a.text(a.low), "high": a.text(a.high), "source": a.source,
                             "reach": sorted(a.param.reach), "measure": a.param.measure}
                            for a in self.assumptions],
            "fitted": [{"param": f.key, "label": f.param.label, "figure": f.figure,
                        "range": [f.low, f.high], "source": f.source} for f in self.fitted],
            "measured": [{"param": m.param.path, "label": m.param.label, "how": m.how} for m in self.measured],
        }


def round_value(param: Param, v: float) -> Value:
    """A drawn value as a part would have it: sizes to three significant bits (16M, 20M, 24M,
    28M), plane counts in powers of two, counts whole, other numbers to three digits."""
    if param.kind is Kind.FLAG:
        return bool(v)
    if param.kind is Kind.POW2:
        return float(2 ** round(math.log2(max(v, 1.0))))
    if param.kind is Kind.SIZE:
        step = 2 ** max(12, math.floor(math.log2(max(v, 4096.0))) - 2)  # whole 4 KiB units at least
        return float(round(v / step) * step)
    if param.kind is Kind.COUNT:
        return float(max(0, round(v)))
    return float(f"{v:.3g}")


def value_text(param: Param, v: Value) -> str:
    if param.kind is Kind.FLAG:
        return "true" if v else "false"
    if param.kind is Kind.SIZE:
        return format_size(int(v))
    if param.kind in (Kind.COUNT, Kind.POW2):
        return str(int(v))
    return f"{float(v):g}" + (f" {param.unit}" if param.unit else "")


def toml_value(param: Param, v: Value) -> str:
    """A value as a TOML literal, for a variant's fields (`flashbed-emu --set`)."""
    if param.kind is Kind.FLAG:
        return "true" if v else "false"
    if param.kind is Kind.SIZE:
        return f'"{format_size(int(v))}"'
    if param.kind in (Kind.COUNT, Kind.POW2):
        return str(int(v))
    return repr(float(v))


# ---- reading a preset ------------------------------------------------------------------------

def lookup(data: dict[str, Any], path: str) -> Any:
    """The preset's own value at `path` (None: the preset does not set it)."""
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _fail(path: Path, where: str, why: str) -> FlashbedError:
    return FlashbedError(f"{path}: {where}: {why}")


def _number(param: Param, raw: Any) -> Value | None:
    """A value of the param's kind from the preset's TOML (None: not of that kind)."""
    if param.kind is Kind.FLAG:
        return raw if isinstance(raw, bool) else None
    if isinstance(raw, bool):
        return None
    if param.kind is Kind.SIZE and isinstance(raw, str):
        try:
            return float(parse_size(raw))
        except FlashbedError:
            return None
    if isinstance(raw, (int, float)) and math.isfinite(raw):
        if param.kind in (Kind.COUNT, Kind.POW2) and raw != int(raw):
            return None
        if param.kind is Kind.POW2 and (raw < 1 or int(raw) & (int(raw) - 1)):
            return None
        return float(raw)
    return None


def _param(path: Path, where: str, name: str, data: dict[str, Any]) -> Param:
    if name.split(".")[0] == "published" or name in PUBLISHED:
        fig = name.split(".")[-1]
        src = (lookup(data, "published.sources") or {}).get(fig, "")
        raise _fail(path, where, f"{name} is a published figure of the part" + (f" ({src})" if src else "")
                    + ": the twin reproduces it, a range on it would make another part; put ranges on what no "
                      "source gives")
    base = name.split("[")[0]
    if base not in PARAMS:
        raise _fail(path, where, f"unknown parameter name '{name}': one of "
                                 f"{', '.join(PARAMS)}")
    return PARAMS[base]


def load_footing(path: Path, data: dict[str, Any]) -> Footing:
    """The [assumptions], [fitted] and [measured] tables of a block preset's TOML, checked."""
    measured = []
    for name, how in _table(path, data, "measured").items():
        where = f'[measured] "{name}"'
        p = _param(path, where, name, data)
        if not isinstance(how, str) or not how.strip():
            raise _fail(path, where, "say how it was measured (a string: the tool, the source, when)")
        if lookup(data, p.path) is None:
            raise _fail(path, where, f"the preset sets no {p.path}: give the measured value there")
        measured.append(Measured(p, how.strip()))
    fitted = []
    for name, spec in _table(path, data, "fitted").items():
        fitted.append(_fitted(path, name, spec, data))
    assumptions = []
    for name, spec in _table(path, data, "assumptions").items():
        assumptions.append(_assumption(path, name, spec, data))
    seen: dict[str, Basis] = {}
    for basis, params in ((Basis.MEASURED, [m.param for m in measured]), (Basis.FITTED, [f.param for f in fitted]),
                          (Basis.ASSUMED, [a.param for a in assumptions])):
        for p in params:
            if seen.get(p.path, basis) is not basis:
                raise _fail(path, p.path, f"it is {seen[p.path]} and {basis} at once: say which")
            seen[p.path] = basis
    return Footing(tuple(assumptions), tuple(fitted), tuple(measured))


def _table(path: Path, data: dict[str, Any], name: str) -> dict[str, Any]:
    t = data.get(name) or {}
    if not isinstance(t, dict):
        raise _fail(path, f"[{name}]", "must be a table")
    return t


def _assumption(path: Path, name: str, spec: Any, data: dict[str, Any]) -> Assumption:
    where = f'[assumptions."{name}"]'
    p = _param(path, where, name, data)
    if "[" in name:
        raise _fail(path, where, "an assumption is a whole field (program times are fitted, not assumed)")
    if not p.varies:
        raise _fail(path, where, f"{p.path} is the part's geometry, which its variants keep: give it as measured "
                                 f"([measured]) or as the class's value, without a range")
    if not isinstance(spec, dict):
        raise _fail(path, where, 'must be a table: range = [LOW, HIGH] and source = "..."')
    unknown = set(spec) - {"range", "source"}
    if unknown:
        raise _fail(path, where, f"unknown key {sorted(unknown)[0]} (keys: range, source)")
    raw = lookup(data, p.path)
    nominal = _number(p, raw) if raw is not None else None
    if nominal is None:
        raise _fail(path, where, f"the preset sets no {p.path} of its own: give the value it assumes there")
    rng = spec.get("range")
    if not (isinstance(rng, list) and len(rng) == 2):
        raise _fail(path, where, f"range must be [LOW, HIGH] ({_example(p)})")
    low, high = (_number(p, x) for x in rng)
    if low is None or high is None:
        raise _fail(path, where, f"range {rng} is not two values of the field's kind ({_example(p)})")
    if float(low) >= float(high):
        raise _fail(path, where, f"range {_show(p, rng)}: LOW must be below HIGH")
    if not float(low) <= float(nominal) <= float(high):
        raise _fail(path, where, f"range {_show(p, rng)} excludes the preset's own value "
                                 f"{value_text(p, nominal)}: widen it to hold it, or change the value")
    if p.kind is not Kind.FLAG and (float(low) <= 0 and (p.kind in (Kind.SIZE, Kind.POW2))):
        raise _fail(path, where, f"range {_show(p, rng)}: a size starts above 0")
    if p.unit in RATE_UNITS and float(low) <= 0:  # the emulator's 0 is no limit at all, not a slow rate
        raise _fail(path, where, f"range {_show(p, rng)}: a rate starts above 0 (the emulator reads 0 as "
                                 f"infinitely fast)")
    source = spec.get("source")
    if not isinstance(source, str) or not source.strip():
        raise _fail(path, where, 'give the range\'s source: source = "..." (a datasheet family, a survey of '
                                 'measured parts, the class literature)')
    return Assumption(p, nominal, low, high, source.strip())


def _fitted(path: Path, name: str, spec: Any, data: dict[str, Any]) -> Fitted:
    where = f'[fitted] "{name}"'
    p = _param(path, where, name, data)
    m = re.fullmatch(r"([a-z_.]+)(?:\[(\d+)\])?", name)
    index = int(m.group(2)) if m and m.group(2) is not None else None
    raw = lookup(data, p.path)
    if p.kind is Kind.PROGRAM:
        if index is None or not isinstance(raw, list) or index >= len(raw):
            raise _fail(path, where, f"name the page type fitted: {p.path}[N], N below the preset's "
                                     f"{len(raw) if isinstance(raw, list) else 0} program times")
    elif index is not None:
        raise _fail(path, where, f"{p.path} is one value: no [N]")
    elif raw is None:
        raise _fail(path, where, f"the preset sets no {p.path}: give the fitted value there")
    if p.kind not in (Kind.NUMBER, Kind.PROGRAM) or T not in p.reach:
        raise _fail(path, where, f"{p.path} is not a time or rate the published figures can fix")
    if not isinstance(spec, dict) or set(spec) - {"figure", "range", "source"}:
        raise _fail(path, where, 'must be { figure = "...", range = [LOW, HIGH], source = "..." }')
    fig = spec.get("figure")
    if fig not in PUBLISHED:
        raise _fail(path, where, f"figure must be one of the published rates: {', '.join(sorted(PUBLISHED))}")
    if not float(lookup(data, f"published.{fig}") or 0):
        raise _fail(path, where, f"the preset publishes no {fig}: there is nothing to fit {name} to")
    rng = spec.get("range")
    if not (isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                            for x in rng) and rng[0] < rng[1]):
        raise _fail(path, where, "range must be [LOW, HIGH], numbers: the values a fit may take")
    own = float(raw[index] if index is not None else raw)
    if not rng[0] <= own <= rng[1]:
        raise _fail(path, where, f"range {rng} excludes the preset's own fitted value {own:g}")
    source = spec.get("source")
    if not isinstance(source, str) or not source.strip():
        raise _fail(path, where, "give the range's source (the datasheet class that bounds it)")
    return Fitted(p, index, fig, float(rng[0]), float(rng[1]), source.strip())


def _example(p: Param) -> str:
    return {Kind.SIZE: 'e.g. range = ["4M", "64M"]', Kind.FLAG: "range = [false, true]",
            Kind.POW2: "e.g. range = [1, 4]"}.get(p.kind, "e.g. range = [100, 400]")


def _show(p: Param, rng: list) -> str:
    vals = [_number(p, x) for x in rng]
    return "[" + ", ".join(value_text(p, v) if v is not None else repr(x) for v, x in zip(vals, rng)) + "]"


# ---- the emulator's own limits ---------------------------------------------------------------

_CHECKED: dict[tuple[str, str], None] = {}  # (preset file, its text): its ranges passed the emulator


def check_limits(path: Path, text: str, footing: Footing, describe) -> None:
    """Each end of each range (assumed and fitted), set on the preset as a variant would be, read by
    the emulator's own parser (`describe`: emulator.describe): the limits live in one place, the
    emulator, and a range it would refuse (a negative time, 1e300, an 8G cache) is one line when the
    preset loads, naming the field, not a variant narrowed later and blamed on the published rates.
    Once per preset text and process."""
    from .emulator import EmulatorError
    if (str(path), text) in _CHECKED:
        return
    ends: list[tuple[str, str, str]] = []  # (where, path, TOML value)
    for a in footing.assumptions:
        for v in (a.low, a.high):
            ends.append((f'[assumptions."{a.param.path}"] range end {a.text(v)}', a.param.path,
                         toml_value(a.param, v)))
    data = tomllib.loads(text)
    for f in footing.fitted:
        for v in (f.low, f.high):
            if f.index is None:
                value = repr(float(v))
            else:  # one page type's time: the others as the preset has them
                times = [float(x) for x in lookup(data, f.param.path)]
                times[f.index] = float(v)
                value = "[" + ", ".join(repr(x) for x in times) + "]"
            ends.append((f'[fitted] "{f.key}" range end {v:g}', f.param.path, value))
    for where, field, value in ends:
        try:
            describe(path, None, ((field, value),))
        except EmulatorError as e:
            why = re.sub(r"\d{16,}", lambda m: f"{float(m.group()):g}", str(e).split(f"`{field}`: ", 1)[-1])
            raise _fail(path, where, f"the emulator refuses {field} = {value} ({why}): keep the range inside "
                                     f"what the device model takes") from None
    _CHECKED[(str(path), text)] = None
