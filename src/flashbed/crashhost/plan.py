"""Which crash states a cell checks in the lab: each distinct state once, and, when the user
bounds it (`max_states`), a seeded stratified sample of them, with the coverage it gives.

Two states share a verdict only when everything the recovery and the verifier see is the
same:
  - the device image: every unit reads the same bytes, zeroes or EIO (a torn program's
    damage). The emulator tells these apart from its write log's index without building
    an image (`crash-states` with images=true: an image class per state, equal exactly when
    the images are; candidates found by hash are confirmed unit by unit, so no collision
    can merge two images); and
  - the verifier's input: for the built-in workloads (powercut, sequences) the workload's
    log up to the state's `acked` mark (the verifier reads every record before it); for
    the user's check (appcheck) the acknowledged labels, `$FLASHBED_ACKED` (the log's ack
    records before the mark: its begin and end records are not shown to the check).
Nothing else differs between two states checked by the same lab: each starts from the
device file alone (the guest drops the block device's buffers, the served state's scratch
writes are dropped at the next switch), the recovery commands and the check are the
cell's, and the state's own numbers (its id, kind, log position) reach neither. So one
check answers for every state of its class: what can still differ is the lab's own
nondeterminism (a timing-dependent recovery or check), which one lab checking each state
once would not pin down either. The recovered filesystem is not compared here (a stronger
merge, but sound only for a check that reads names, types, sizes, modes and contents): the
lab does that for the user's check alone, after each state's own recovery, keyed by what
the check is documented to read (lab/guest/trees.py, appcheck's share_trees).

Sampling (`max_states` = N > 0): the distinct states are split by kind. Every flush state
is checked (the states the block layer promises); the rest (the plain cut at an interval's
end or right after a mark, lost-cache subsets, torn programs) get N less the flushes,
shared among the kinds in proportion to their size, and each kind's share is a seeded
simple random sample of it. A clean sample of n states of a kind bounds the share of
that kind's distinct states that would fail: below 1 - 0.05^(1/n) with 95 % confidence
(the chance that n random draws all miss a share p is at most (1-p)^n).
"""

from __future__ import annotations

import bisect
import math
import random
from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class VerifierInput(StrEnum):
    """What a cell's verifier reads besides the device: it decides which states share a verdict."""

    RECORDS = "records"  # the workload log's records before the state's mark (the built-in verifiers)
    ACKS = "acks"  # the acknowledged labels before it (the user's check: $FLASHBED_ACKED)


FLUSH = "flush"
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Stratum:
    """One kind of state in a sample: how many distinct ones, how many checked."""

    kind: str
    distinct: int
    checked: int

    @property
    def bound(self) -> float | None:
        """The failing share of this kind a clean sample rules out (95 %): None when all were checked."""
        if self.checked >= self.distinct:
            return None
        if self.checked == 0:
            return 1.0
        return 1 - (1 - CONFIDENCE) ** (1 / self.checked)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "distinct": self.distinct, "checked": self.checked, "bound": self.bound}


@dataclass(frozen=True)
class CheckPlan:
    """A cell's crash states as the check loop takes them: found, distinct, checked."""

    found: int
    distinct: int  # states with their own (image, verifier input); each checked once
    checked: int  # of them, checked in the lab (all, unless sampled)
    dedup: bool = True
    max_states: int = 0
    seed: int = 0
    strata: tuple[Stratum, ...] = field(default_factory=tuple)  # per kind, when sampled

    @property
    def sampled(self) -> bool:
        return self.checked < self.distinct

    def to_json(self) -> dict[str, Any]:
        return {"found": self.found, "distinct": self.distinct, "checked": self.checked, "dedup": self.dedup,
                "max_states": self.max_states, "seed": self.seed, "strata": [s.to_json() for s in self.strata]}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> "CheckPlan | None":
        if not d:
            return None
        return cls(found=d["found"], distinct=d["distinct"], checked=d["checked"], dedup=d.get("dedup", True),
                   max_states=d.get("max_states", 0), seed=d.get("seed", 0),
                   strata=tuple(Stratum(s["kind"], s["distinct"], s["checked"]) for s in d.get("strata", [])))

    def coverage(self, judged: int | None = None) -> str:
        """What was checked and what a clean result then says, in one sentence; `judged`: how many
        of the checked states got a verdict (fewer than checked: the sample bounds nothing)."""
        head = f"{self.found} states found, {self.distinct} distinct"
        if judged is not None and judged < self.checked:
            return (f"{head}; {self.checked} to check{f' (a seeded sample, max_states {self.max_states})' if self.sampled else ''}"
                    f", {judged} with a verdict: {self.checked - judged} without one, so a clean result "
                    f"bounds nothing")
        if not self.sampled:
            return head + ", each checked"
        parts = []
        for s in self.strata:
            b = s.bound
            # a kind the sample left out entirely bounds nothing: said so, not "fewer than 100 %"
            parts.append(f"{s.kind} {s.checked} of {s.distinct}" + (
                "" if b is None else " (none checked: a clean result says nothing of them)" if not s.checked
                else f" (clean: fewer than {100 * b:.1f} % of them fail, 95 % confidence)"))
        return (f"{head}; a seeded sample of {self.checked} checked (max_states {self.max_states}, seed {self.seed}): "
                + ", ".join(parts))


def verifier_keys(states: list[dict], records: list[dict], verifier: VerifierInput) -> list[int]:
    """Per state, what its verifier reads as a number: how many of the workload log's records
    (RECORDS) or acknowledgements (ACKS) come before the state's `acked` mark. The log is
    one workload's, in order, so the count determines the records themselves."""
    marks = [r["m"] for r in records if verifier is VerifierInput.RECORDS or r.get("e") == "ack"]
    return [bisect.bisect_left(marks, s["acked"]) for s in states]


def plan_checks(states: list[dict], records: list[dict], verifier: VerifierInput, *, dedup: bool = True,
                max_states: int = 0, seed: int = 0) -> CheckPlan:
    """Marks each state that is not checked itself: `same` (the id of the state whose verdict
    it shares) or `out` (left out of the sample); the rest are checked, in listing order.
    Without image classes (`image` absent: an older emulator) nothing is merged."""
    keys = verifier_keys(states, records, verifier)
    first: dict[tuple, dict] = {}
    reps: list[dict] = []
    for s, k in zip(states, keys):
        s.pop("same", None)
        s.pop("out", None)
        if dedup and s.get("image") is not None:
            key = (s["image"], k)
            if key in first:
                s["same"] = first[key]["id"]
                continue
            first[key] = s
        reps.append(s)
    # a class's kind for sampling: flush if any of its states is one (the promise holds for all)
    kinds = {s["id"]: s["kind"] for s in reps}
    for s in states:
        if "same" in s and s["kind"] == FLUSH:
            kinds[s["same"]] = FLUSH
    strata: tuple[Stratum, ...] = ()
    if max_states and len(reps) > max_states:
        chosen, strata = _sample(reps, kinds, max_states, seed)
        for s in reps:
            if s["id"] not in chosen:
                s["out"] = True
    checked = sum(1 for s in reps if not s.get("out"))
    return CheckPlan(found=len(states), distinct=len(reps), checked=checked, dedup=dedup, max_states=max_states,
                     seed=seed, strata=strata)


def _sample(reps: list[dict], kinds: dict[str, str], n: int, seed: int) -> tuple[set[str], tuple[Stratum, ...]]:
    """Every flush; the other kinds share n less the flushes in proportion to their size (largest
    remainders), each a seeded simple random sample."""
    by_kind: dict[str, list[str]] = defaultdict(list)
    for s in reps:
        by_kind[kinds[s["id"]]].append(s["id"])
    chosen = set(by_kind.get(FLUSH, []))
    rest = {k: ids for k, ids in by_kind.items() if k != FLUSH}
    budget = max(0, n - len(chosen))
    total = sum(len(ids) for ids in rest.values())
    quota = _apportion({k: len(ids) for k, ids in rest.items()}, min(budget, total))
    rng = random.Random(seed)
    for k in sorted(rest):
        chosen.update(rng.sample(rest[k], quota[k]))
    order = [FLUSH, *sorted(rest)] if FLUSH in by_kind else sorted(rest)
    strata = tuple(Stratum(k, len(by_kind[k]), len(by_kind[k]) if k == FLUSH else quota[k]) for k in order)
    return chosen, strata


def _apportion(sizes: dict[str, int], n: int) -> dict[str, int]:
    """n seats shared in proportion to sizes, largest remainders first (ties by name)."""
    total = sum(sizes.values())
    if not total:
        return {k: 0 for k in sizes}
    exact = {k: n * v / total for k, v in sizes.items()}
    seats = {k: math.floor(x) for k, x in exact.items()}
    left = n - sum(seats.values())
    for k in sorted(sizes, key=lambda k: (-(exact[k] - seats[k]), k))[:left]:
        seats[k] += 1
    return seats


def shared_verdicts(states: list[dict], records: dict[str, dict]) -> list[dict]:
    """The records of the states that were not checked themselves but share a checked state's
    verdict (`same`): the checked state's record under the member's own id, kind and marks."""
    out = []
    for s in states:
        rep = records.get(s.get("same", ""))
        if rep is not None:
            out.append({**rep, "state": s["id"], "kind": s["kind"], "acked": s["acked"],
                        "damaged": s.get("damaged", 0), "same": rep["state"], "seconds": {}})
    return out


