"""Load and check the recommendation weights (weights.toml beside this module)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FlashbedError

DEFAULT_WEIGHTS = Path(__file__).with_name("weights.toml")


@dataclass(frozen=True)
class Criterion:
    label: str
    study: str
    metric: str
    better: str  # "higher" | "lower"
    weight: float
    case: str = "*"  # exact case or glob
    source: str = "measure"  # "measure" | "device"
    decisive: bool = False  # the use case cannot be decided without it

    def describe(self) -> str:
        what = f"{self.study} / {self.case} / {self.metric}" if self.source == "measure" else \
            f"{self.study} / {self.case} / emulator {self.metric}"
        return what


@dataclass(frozen=True)
class Requirement:
    """A hard requirement: a filesystem whose value of `metric` (every matching case and repeat)
    is outside the bound is not eligible for a use case that requires it, whatever it scores."""

    name: str
    label: str  # what it lacks, in "not eligible: <label>"
    study: str
    metric: str
    case: str = "*"
    at_least: float | None = None
    at_most: float | None = None

    def holds(self, value: float) -> bool:
        return (self.at_least is None or value >= self.at_least) and (self.at_most is None or value <= self.at_most)

    def worst(self, values: list[float]) -> float:
        """The value that decides: the lowest against a floor, the highest against a ceiling."""
        return min(values) if self.at_least is not None else max(values)


@dataclass(frozen=True)
class UseCase:
    id: str
    title: str
    summary: str
    criteria: tuple[Criterion, ...]
    requires: tuple[Requirement, ...] = ()


# the kinds of criteria of your own workload's use case ([workload]; report/workcase.py)
WORKLOAD_KINDS = ("wall_time", "metric", "job_rate", "job_latency", "lifetime", "flash_time", "flash_wear",
                  "damage")


@dataclass(frozen=True)
class WorkloadWeights:
    """How your own workload's use case is made: the weight of each kind of criterion, the kinds
    it cannot be decided without, and the requirements held when the run has your check."""

    weights: dict[str, float] = field(default_factory=lambda: {k: 1.0 for k in WORKLOAD_KINDS})
    decisive: tuple[str, ...] = ()
    requires: tuple[Requirement, ...] = ()


@dataclass(frozen=True)
class Weights:
    path: Path
    use_cases: tuple[UseCase, ...]
    # study -> {"good": [...], "bad": [...], "ignore": [...]} outcome names for the derived
    # "survived" metric
    outcomes: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    # a timed figure whose device was busy less than this share of its time (%) is lab-bound
    lab_bound_below: float = 50.0
    # in virtual time: a timed figure whose guest time was charged to the CPU profile more than
    # this share (%) is CPU-bound
    cpu_bound_above: float = 50.0
    requirements: dict[str, Requirement] = field(default_factory=dict)
    workload: WorkloadWeights = field(default_factory=WorkloadWeights)


def load_weights(path: Path | None = None) -> Weights:
    path = path or DEFAULT_WEIGHTS
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise FlashbedError(f"recommendation weights file {path} is missing") from None
    except tomllib.TOMLDecodeError as e:
        raise FlashbedError(f"{path}: not valid TOML ({e})") from None

    def bad(msg: str) -> FlashbedError:
        return FlashbedError(f"{path}: {msg} (see the comments at the top of the file)")

    outcomes: dict[str, dict[str, tuple[str, ...]]] = {}
    for study, spec in (data.get("outcomes") or {}).items():
        if not isinstance(spec, dict):
            raise bad(f"[outcomes.{study}] must be a table with good = [...] and bad = [...]")
        good, badl, ignore = spec.get("good", []), spec.get("bad", []), spec.get("ignore", [])
        if not all(isinstance(x, str) for x in [*good, *badl, *ignore]):
            raise bad(f"[outcomes.{study}] good/bad/ignore must be lists of names")
        both = (set(good) & set(badl)) | (set(ignore) & (set(good) | set(badl)))
        if both:
            raise bad(f"[outcomes.{study}] lists {', '.join(sorted(both))} more than once")
        outcomes[study] = {"good": tuple(good), "bad": tuple(badl), "ignore": tuple(ignore)}

    requirements: dict[str, Requirement] = {}
    for name, r in (data.get("requirement") or {}).items():
        where = f"[requirement.{name}]"
        if not isinstance(r, dict):
            raise bad(f"{where} must be a table with label, study, metric and at_least or at_most")
        for k in ("label", "study", "metric"):
            if not isinstance(r.get(k), str) or not r.get(k):
                raise bad(f"{where}: '{k}' is missing")
        unknown = set(r) - {"label", "study", "metric", "case", "at_least", "at_most"}
        if unknown:
            raise bad(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        bounds = [r.get(k) for k in ("at_least", "at_most") if k in r]
        if len(bounds) != 1 or isinstance(bounds[0], bool) or not isinstance(bounds[0], (int, float)):
            raise bad(f"{where}: give one bound, at_least or at_most, as a number")
        requirements[name] = Requirement(name, r["label"], r["study"], r["metric"], str(r.get("case", "*")),
                                         r.get("at_least"), r.get("at_most"))

    ucs = []
    seen: set[str] = set()
    for i, u in enumerate(data.get("use_case") or []):
        uid = u.get("id")
        if not isinstance(uid, str) or not uid:
            raise bad(f"use case #{i + 1} has no id")
        if uid in seen:
            raise bad(f"use case '{uid}' appears twice")
        seen.add(uid)
        crits = []
        for j, c in enumerate(u.get("criterion") or []):
            where = f"use case '{uid}', criterion #{j + 1}"
            for k in ("label", "study", "metric", "better", "weight"):
                if k not in c:
                    raise bad(f"{where}: '{k}' is missing")
            unknown = set(c) - {"label", "study", "metric", "better", "weight", "case", "source", "decisive"}
            if unknown:
                raise bad(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
            if c["better"] not in ("higher", "lower"):
                raise bad(f"{where}: better must be \"higher\" or \"lower\", not {c['better']!r}")
            w = c["weight"]
            if isinstance(w, bool) or not isinstance(w, (int, float)) or w <= 0:
                raise bad(f"{where}: weight must be a positive number, not {w!r}")
            src = c.get("source", "measure")
            if src not in ("measure", "device"):
                raise bad(f"{where}: source must be \"measure\" or \"device\", not {src!r}")
            if src == "measure" and "case" not in c:
                raise bad(f"{where}: 'case' is missing")
            if not isinstance(c.get("decisive", False), bool):
                raise bad(f"{where}: decisive must be true or false, not {c['decisive']!r}")
            crits.append(Criterion(label=str(c["label"]), study=str(c["study"]), metric=str(c["metric"]),
                                   better=c["better"], weight=float(w), case=str(c.get("case", "*")),
                                   source=src, decisive=c.get("decisive", False)))
        if not crits:
            raise bad(f"use case '{uid}' has no criteria")
        req = u.get("requires", [])
        if not isinstance(req, list) or not all(isinstance(x, str) for x in req):
            raise bad(f"use case '{uid}': requires must be a list of [requirement.NAME] names")
        unknown = [x for x in req if x not in requirements]
        if unknown:
            raise bad(f"use case '{uid}' requires {', '.join(unknown)}, which no [requirement.NAME] table defines")
        ucs.append(UseCase(id=uid, title=str(u.get("title", uid)), summary=str(u.get("summary", "")),
                           criteria=tuple(crits), requires=tuple(requirements[x] for x in req)))
    if not ucs:
        raise bad("no [[use_case]] tables")
    lab = data.get("lab_bound") or {}
    below = lab.get("device_busy_below", 50.0) if isinstance(lab, dict) else None
    if isinstance(below, bool) or not isinstance(below, (int, float)) or not 0 <= below <= 100:
        raise bad(f"[lab_bound] device_busy_below must be a percentage from 0 to 100, not {below!r}")
    above = lab.get("cpu_share_above", 50.0) if isinstance(lab, dict) else None
    if isinstance(above, bool) or not isinstance(above, (int, float)) or not 0 <= above <= 100:
        raise bad(f"[lab_bound] cpu_share_above must be a percentage from 0 to 100, not {above!r}")
    return Weights(path=path, use_cases=tuple(ucs), outcomes=outcomes, lab_bound_below=float(below),
                   cpu_bound_above=float(above), requirements=requirements,
                   workload=_workload(data.get("workload"), requirements, bad))


def _workload(spec, requirements: dict[str, Requirement], bad) -> WorkloadWeights:
    if spec is None:
        return WorkloadWeights()
    if not isinstance(spec, dict):
        raise bad("[workload] must be a table of weights")
    unknown = set(spec) - {*WORKLOAD_KINDS, "requires", "decisive"}
    if unknown:
        raise bad(f"[workload]: unknown field(s) {', '.join(sorted(unknown))} (weights: {', '.join(WORKLOAD_KINDS)})")
    weights = {}
    for k in WORKLOAD_KINDS:
        w = spec.get(k, 1.0)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or w <= 0:
            raise bad(f"[workload]: {k} must be a positive number, not {w!r}")
        weights[k] = float(w)
    decisive, req = spec.get("decisive", []), spec.get("requires", [])
    for name, xs, known in (("decisive", decisive, WORKLOAD_KINDS), ("requires", req, tuple(requirements))):
        if not isinstance(xs, list) or not all(isinstance(x, str) for x in xs):
            raise bad(f"[workload]: {name} must be a list of names")
        if wrong := [x for x in xs if x not in known]:
            raise bad(f"[workload]: {name} names {', '.join(wrong)}, which is not one of {', '.join(known)}")
    return WorkloadWeights(weights, tuple(decisive), tuple(requirements[x] for x in req))
