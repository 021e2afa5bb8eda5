"""`flashbed run --tune`: which options, for each use case's choice.

After the plain run, each use case's winner and runner-up (per device) try the options their
filesystem's catalogue says matter on flash, on the use case's decisive studies (its decisive
criteria and its requirements: crash states included), in two steps:

1. **one option at a time from the defaults**: each catalogue value alone, the rest at the
   filesystem's defaults;
2. **the best combination found**: the options that each improved the use case's score and
   kept every requirement, together (one value per option name: the best one), tried once.

The answer for the filesystem is the best of its defaults, its single options and that
combination, ranked by the use case's own rule (report/recommend.rank) with its requirements
first: an option set that breaks one is never the answer, and is named with the state that
shows it. A coordinate search of one pass: it does not try pairs that did not each help alone,
values between the catalogue's, options outside the catalogue, options on filesystems other
than the two the plain run put first, nor the other criteria of a use case (they keep the
defaults' figures: docs/tuning.md says so with its cost).

This module is the search alone, a pure function of what the run has measured: it is given
the plain run's leads and a judge that ranks option sets from the run's results, and says
which option sets are still to run (`Search.pending`). The run command plans those as cells
of the same run (plan.make_plan: the same planner, executor and store as any cell), runs
them, and asks again until nothing is pending: a killed run resumes from its cells, since the
same results give the same next step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum


@dataclass(frozen=True, order=True)
class Option:
    """One value of one catalogue option to try: a mount option (`commit=60`, `noauto_da_alloc`)
    or an mkfs one (its arguments). `risk`: why it may lose acknowledged data by design ('' if it
    does not)."""

    name: str
    value: str = ""
    mkfs: tuple[str, ...] = ()  # mkfs arguments the option needs (f2fs compression: -O extra_attr,compression)
    mount: bool = True  # a mount option (False: an mkfs option alone)
    risk: str = ""

    @property
    def text(self) -> str:
        if not self.mount:
            return " ".join(self.mkfs)
        return f"{self.name}={self.value}" if self.value else self.name


@dataclass(frozen=True)
class OptionSet:
    """A filesystem variant of the plain run (`base`) with options added."""

    base: str
    options: tuple[Option, ...] = ()

    @property
    def spec(self) -> str:
        return variant_spec(self.base, self.options)

    @property
    def text(self) -> str:
        return ",".join(o.text for o in self.options) or "defaults"


def variant_spec(base: str, options: Iterable[Option]) -> str:
    """The variant spec of `base` with `options`: `f2fs+mkfs:-O extra_attr,compression+o:compress_algorithm=lz4`.
    The one place that spells the option syntax of a variant (variants.py reads it)."""
    opts = list(options)
    mkfs = [a for o in opts for a in o.mkfs]
    mount = [o.text for o in opts if o.mount]
    return base + (f"+mkfs:{' '.join(mkfs)}" if mkfs else "") + (f"+o:{','.join(mount)}" if mount else "")


@dataclass(frozen=True)
class Lead:
    """A filesystem the plain run put first or second for a use case on a device."""

    device: str
    use_case: str
    fs: str
    role: str  # "winner" | "runner-up"


@dataclass(frozen=True)
class Judgement:
    """An option set as the use case ranks it among the plain run's variants (report/recommend.rank)."""

    measured: bool  # every decisive study has its cells
    eligible: bool = True
    score: float | None = None  # its score in that ranking (None: not ranked)
    why: str = ""  # what requirement it breaks, with the evidence
    replay: str = ""  # the command that replays the state that shows it


# judge(device, use case, [option sets]) -> each option set's judgement, in one ranking
Judge = Callable[[str, str, list[OptionSet]], dict[OptionSet, Judgement]]


class Step(StrEnum):
    SINGLE = "single"
    COMBINED = "combined"


@dataclass
class LeadSearch:
    """What the search did for one lead: its defaults, each single option, the combination."""

    lead: Lead
    defaults: OptionSet
    singles: list[OptionSet]
    judged: dict[OptionSet, Judgement] = field(default_factory=dict)
    combined: OptionSet | None = None

    @property
    def done(self) -> bool:
        if not self.singles:  # nothing to try: its defaults are its answer (a read-only image's, erofs)
            return True
        every = [self.defaults, *self.singles] + ([self.combined] if self.combined else [])
        return all(s in self.judged and self.judged[s].measured for s in every) and \
            (self.combined is not None or not self._wants_combination())

    def _wants_combination(self) -> bool:
        return len(self.helped()) >= 2

    def helped(self) -> list[OptionSet]:
        """Single options that kept every requirement and raised the score, best first."""
        base = self.judged.get(self.defaults)
        if base is None or base.score is None:
            return []
        out = [s for s in self.singles if (j := self.judged.get(s)) and j.measured and j.eligible
               and j.score is not None and j.score >= base.score + MIN_GAIN]
        return sorted(out, key=lambda s: (-self.judged[s].score, s.text))

    def broke(self) -> list[OptionSet]:
        """Option sets that break a requirement the defaults keep."""
        base = self.judged.get(self.defaults)
        if base is None or not base.eligible:
            return []
        return [s for s in [*self.singles, *([self.combined] if self.combined else [])]
                if (j := self.judged.get(s)) and j.measured and not j.eligible]

    @property
    def best(self) -> OptionSet:
        """The answer: the best eligible option set measured (the defaults when nothing beat them)."""
        sets = [self.defaults, *self.singles] + ([self.combined] if self.combined else [])
        ok = [s for s in sets if (j := self.judged.get(s)) and j.measured and j.eligible and j.score is not None]
        base = self.judged.get(self.defaults)
        if base is not None and base.score is not None:  # a gain too small to show changes no default
            ok = [s for s in ok if s == self.defaults or self.judged[s].score >= base.score + MIN_GAIN]
        if not ok:
            return self.defaults
        return min(ok, key=lambda s: (-round(self.judged[s].score, 9), len(s.options), s.text))


EPSILON = 1e-6  # a score that moved less is no change
# an option set helps only when it raises the use case's score by this much: a hundredth of the
# 0-1 scale, the first screen's last digit (a gain it would show as 'score 0.92 vs 0.92' is no
# reason to leave a filesystem's defaults)
MIN_GAIN = 0.01


@dataclass
class Search:
    leads: list[LeadSearch]

    def pending(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """What is still to run: (device, variant spec) -> the decisive studies it needs (sorted)."""
        return dict(sorted(self._pending.items()))

    _pending: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return not self._pending


def leads(rankings: dict[str, dict[str, tuple[str | None, str | None]]]) -> list[Lead]:
    """The leads of the plain run: per device and use case, (winner, runner-up); a use case not
    decided has none (nothing to tune a choice that was not made)."""
    out = []
    for device, cases in rankings.items():
        for uc, (winner, runner_up) in cases.items():
            for fs, role in ((winner, "winner"), (runner_up, "runner-up")):
                if fs:
                    out.append(Lead(device, uc, fs, role))
    return out


def search(found: list[Lead], catalogue: Callable[[str], list[Option]],
           studies: Callable[[str], tuple[str, ...]], judge: Judge) -> Search:
    """The search as far as the results go: each lead's option sets judged where they were
    measured, its combination once every single was; `pending` holds what to run next.

    `catalogue(fs)`: the options to try on variant fs (none: nothing to tune); `studies(use case)`:
    its decisive studies; `judge`: the ranking of option sets from the run's results."""
    out = Search([])
    for lead in found:
        defaults = OptionSet(lead.fs)
        singles = [OptionSet(lead.fs, (o,)) for o in catalogue(lead.fs)]
        ls = LeadSearch(lead, defaults, singles)
        out.leads.append(ls)
        if not singles:
            continue
        ls.judged = judge(lead.device, lead.use_case, [defaults, *singles])
        missing = [s for s in singles if not ls.judged.get(s, Judgement(False)).measured]
        if not missing:
            helped = ls.helped()
            if len(helped) >= 2:
                ls.combined = combination(lead.fs, helped)
                ls.judged = judge(lead.device, lead.use_case, [defaults, *singles, ls.combined])
                missing = [] if ls.judged.get(ls.combined, Judgement(False)).measured else [ls.combined]
        for s in missing:
            key = (lead.device, s.spec)
            have = out._pending.get(key, ())
            out._pending[key] = tuple(sorted(set(have) | set(studies(lead.use_case))))
    return out


def combination(base: str, helped: list[OptionSet]) -> OptionSet:
    """The options that helped alone, together: one value per option name (the best one: `helped`
    is best first), in the catalogue's order of names."""
    chosen: dict[str, Option] = {}
    for s in helped:
        for o in s.options:
            chosen.setdefault(o.name, o)
    return OptionSet(base, tuple(sorted(chosen.values(), key=lambda o: (o.name, o.value))))


# ---- the options to try ------------------------------------------------------------------------


def catalogue(spec: str) -> list[Option]:
    """The options to try on plain variant `spec`: its filesystem's catalogue entries' values to try
    (fsoptions.Entry.tune), each with the mkfs arguments it needs and its risk; none for a layered,
    read-only or FUSE variant. An option the variant already sets (or its opposite) is not tried."""
    from . import fsoptions, variants
    from .errors import FlashbedError
    from .filesystems import Recovery
    if "@" in spec:
        return []
    base, *tags = spec.split("+")
    try:
        v = variants.parse(spec)
    except FlashbedError:  # a variant that needs its device (+tuned): its tags stand for its options
        v = variants.parse(base)
    if v.read_only or not v.fs.mounting.in_kernel:
        return []
    fstype = v.fs.fstype
    have = {fsoptions.option_name(o) for o in v.mount_extra} | set(tags)
    have |= {n for g in fsoptions.OPPOSITES if have & set(g) for n in g}
    flags = fsoptions.mkfs_flags_given(v.mkfs_extra)
    out = []
    for e in fsoptions.entries(fstype):
        for text in e.tried_on(fstype, v.fs.recovery is Recovery.JOURNAL):
            if e.kind is fsoptions.Kind.MKFS:
                words = fsoptions.split_mkfs(spec, text)
                if not fsoptions.mkfs_flags_given(words) & flags:
                    out.append(Option(e.name, text, mkfs=words, mount=False,
                                      risk=e.loses_data if e.risky(text) else ""))
                continue
            name, _, value = text.partition("=")
            if name not in have and fsoptions.option_name(text) not in have:
                out.append(Option(name, value, mkfs=e.needs, risk=fsoptions.risk(fstype, text)))
    return out
