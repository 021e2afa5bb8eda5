"""The tuning pass in the report: which options, what each bought, what breaks a requirement.

The search itself is tune.py's, a pure function; here is its judge, from a run's results: an
option set is ranked by the use case's own rule (recommend.rank), requirements first, among the
plain run's variants, on a view of the run where the option set has its own cells for the
studies it ran (the use case's decisive ones) and its plain variant's figures for the others
(the options' effect on those was not measured: the report says so). The same cells give the
same search in the run command (what to run next) and here (what was found).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .. import tune as T
from ..results import CellResult
from ..status import CellStatus, Measured
from . import recommend as R
from . import units
from .doc import Cell, Column, Paragraph, Section, Table
from .load import RunData, aggregate
from .weights import UseCase


def decisive_studies(uc: UseCase) -> tuple[str, ...]:
    """The studies an option set runs for a use case: its decisive criteria's, its requirements' (crash
    states, capabilities), and the weightiest studies of its criteria until they hold half of its
    weight (what the score mostly is: logging's overwrites, database's SQLite and fio jobs)."""
    weight: dict[str, float] = {}
    for c in uc.criteria:
        weight[c.study] = weight.get(c.study, 0.0) + c.weight
    total, held, heavy = sum(weight.values()), 0.0, set()
    for study, w in sorted(weight.items(), key=lambda kv: (-kv[1], kv[0])):
        if held >= total / 2:
            break
        heavy.add(study)
        held += w
    return tuple(sorted({c.study for c in uc.criteria if c.decisive} | {q.study for q in uc.requires} | heavy))


@dataclass
class View:
    """One ranking of option sets among the plain variants, and which of them were measured."""

    ranking: R.Ranking
    measured: dict[T.OptionSet, bool]


class Tuning:
    """A run's tuning pass as far as its cells go: the search, and the rankings behind it."""

    def __init__(self, run: RunData, recs: dict[str, list[R.Ranking]]):
        self.run, self.recs = run, recs
        self.use_cases = {r.use_case.id: r.use_case for rk in recs.values() for r in rk}
        self._mine: dict[tuple[str, str], list[CellResult]] = {}
        for c in run.tuned_cells:
            if c.status is not CellStatus.ERROR:  # an error is retried: no evidence yet
                self._mine.setdefault((c.key.device, c.key.fs), []).append(c)
        self._views: dict[tuple, View] = {}
        leads = T.leads({d: {r.use_case.id: ((r.winner.fs if r.winner else None),
                                             (r.runner_up.fs if r.runner_up else None))
                             for r in rk if R.asked(run, r) and self._studies(r.use_case.id, d)}
                         for d, rk in recs.items()})
        self.search = T.search(leads, T.catalogue, self._studies_of, self.judge)

    def _studies_of(self, uc_id: str) -> tuple[str, ...]:
        return tuple(s for s in decisive_studies(self.use_cases[uc_id]) if s in self.run.studies())

    def _studies(self, uc_id: str, device: str) -> tuple[str, ...]:
        return tuple(s for s in self._studies_of(uc_id) if s in self.run.studies(device))

    def view(self, device: str, uc_id: str, sets: list[T.OptionSet]) -> View:
        key = (device, uc_id, tuple(sets))
        if key in self._views:
            return self._views[key]
        label = self.run.device_of(device)
        needed = self._studies(uc_id, device)
        cells = list(self.run.cells)
        measured = {}
        for s in sets:
            if not s.options:
                measured[s] = True
                continue
            mine = self._mine.get((label, s.spec), [])
            base = [c for c in self.run.cells if c.key.device == label and c.key.fs == s.base]
            want = {(c.key.study, c.key.case, c.key.repeat) for c in base if c.key.study in needed}
            have = {(c.key.study, c.key.case, c.key.repeat) for c in mine}
            measured[s] = bool(want) and want <= have
            if measured[s]:
                ran = {c.key.study for c in mine}
                cells += mine + [replace(c, key=replace(c.key, fs=s.spec)) for c in base if c.key.study not in ran]
        view = aggregate(self.run.root, self.run.manifest, cells, self.run.weights)
        out = View(R.rank(view, device, self.use_cases[uc_id]), measured)
        self._views[key] = out
        return out

    def judge(self, device: str, uc_id: str, sets: list[T.OptionSet]) -> dict[T.OptionSet, T.Judgement]:
        v = self.view(device, uc_id, sets)
        out = {}
        for s in sets:
            if not v.measured.get(s):
                out[s] = T.Judgement(False)
                continue
            e = next((e for e in v.ranking.entries if e.fs == s.spec), None)
            chk = v.ranking.checks.get(s.spec)
            if chk is not None and not chk.eligible:
                replay = next((c.reproducer.command for c in chk.failed if c.reproducer), "")
                out[s] = T.Judgement(True, False, None, chk.text(), replay)
            else:
                out[s] = T.Judgement(True, True, e.score if e else None)
        return out

    # ---- what the answer says ----

    def answer(self, device: str, uc_id: str) -> "Answer | None":
        """The tuned answer of a use case: the best option set of its winner and of its runner-up,
        ranked together; None while the search is not done (or had nothing to try)."""
        mine = [ls for ls in self.search.leads if ls.lead.device == device and ls.lead.use_case == uc_id]
        if not mine or not all(ls.done for ls in mine) or not any(ls.singles for ls in mine):
            return None
        bests = [ls.best for ls in mine]
        v = self.view(device, uc_id, [ls.defaults for ls in mine] + [b for b in bests if b.options])
        judged = self.judge(device, uc_id, [ls.defaults for ls in mine] + [b for b in bests if b.options])
        ranked = sorted(mine, key=lambda ls: -(judged[ls.best].score or 0.0))
        top = ranked[0]
        return Answer(top, judged[top.best], judged[top.defaults], self.effects(device, uc_id, top), ranked[1:], v)

    def effects(self, device: str, uc_id: str, ls: T.LeadSearch) -> list[tuple[T.OptionSet, str]]:
        """Each option of the answer alone against the defaults, in the deciding figures; and what the
        options that break a requirement break (with the state that shows it)."""
        out = []
        chosen = ls.best
        singles = [s for s in ls.singles if s.options and set(s.options) <= set(chosen.options)]
        for s in singles + ([chosen] if len(chosen.options) > 1 else []):
            out.append((s, self.figures(device, uc_id, ls.defaults, s)))
        return out

    def figures(self, device: str, uc_id: str, base: T.OptionSet, s: T.OptionSet) -> str:
        """'NAND writes −38 %, SQLite commits −4 %, crash states still 100 %': the decisive criteria
        (and the criteria that moved most) of `s` against `base`, both as the use case ranks them."""
        r = self.view(device, uc_id, [base, s]).ranking
        uc = r.use_case
        mine = next((e for e in r.entries if e.fs == s.spec), None)
        theirs = next((e for e in r.entries if e.fs == base.spec), None)
        if mine is None or theirs is None:
            return ""
        ran = set(self._studies(uc_id, device))
        moves = []
        for i in r.scored:
            c = uc.criteria[i]
            a, b = mine.values[i], theirs.values[i]
            if c.study not in ran or a.status is not Measured.OK or b.status is not Measured.OK:
                continue
            if units.display_unit(a.unit) == "%":
                text = f"{c.label} still {units.fmt_unit(a.value, a.unit)}" if abs(a.value - b.value) < 1e-9 else \
                    f"{c.label} {units.fmt_unit(a.value, a.unit)} (was {units.fmt_unit(b.value, b.unit)})"
                change = abs(a.value - b.value)
            else:
                pct = (a.value / b.value - 1) * 100 if b.value else 0.0
                change = abs(pct)
                text = f"{c.label} {pct:+.0f} %".replace("-", "−") if change >= 0.5 else f"{c.label} unchanged"
            moves.append((not c.decisive, -change, text))
        moves.sort()
        shown = [t for d, ch, t in moves if not d] + [t for d, ch, t in moves if d and ch <= -0.5][:2]
        return ", ".join(shown)


    # ---- the tuned answer across the twin's assumptions (--tune --robust) ----

    def variants_of(self, device: str) -> list[str]:
        """The kept variants of `device`'s twin, as device labels ([] without a robust pass)."""
        label = self.run.device_of(device)
        info = self.run.device_info(label).get("robust") or {}
        return [f"{label}~{v['name']}" for v in info.get("variants", []) if not v.get("dropped")]

    def robust_studies(self, uc_id: str, device: str) -> tuple[str, ...]:
        """The use case's decisive studies a robust pass runs on the variants (robust.rerun_studies)."""
        from ..robust import rerun_studies
        return rerun_studies(self._studies(uc_id, device))

    def _on_variant(self, device: str, variant: str, spec: str, studies: tuple[str, ...]) -> bool:
        """Has the option set's every nominal cell of `studies` its counterpart on `variant`?"""
        want = {(c.key.study, c.key.case, c.key.repeat) for c in self._mine.get((self.run.device_of(device), spec), [])
                if c.key.study in studies}
        have = {(c.key.study, c.key.case, c.key.repeat) for c in self.run.variant_cells
                if c.key.device == variant and c.key.fs == spec and c.status is not CellStatus.ERROR}
        return bool(want) and want <= have

    def robust_pending(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """Once the search is done: each tuned answer's option set still to run on its twin's variants,
        (device, spec) -> the use case's decisive studies the robust pass reruns (sorted)."""
        if not self.search.done:
            return {}
        out: dict[tuple[str, str], tuple[str, ...]] = {}
        for device, uc_id in dict.fromkeys((ls.lead.device, ls.lead.use_case) for ls in self.search.leads):
            a = self.answer(device, uc_id)
            studies = self.robust_studies(uc_id, device)
            if a is None or not a.options.options or not studies:
                continue
            if any(not self._on_variant(device, v, a.options.spec, studies) for v in self.variants_of(device)):
                key = (device, a.options.spec)
                out[key] = tuple(sorted(set(out.get(key, ())) | set(studies)))
        return dict(sorted(out.items()))

    def robust_footing(self, device: str, uc_id: str) -> "TunedFooting | None":
        """The tuned answer on each variant of the twin, ranked as the nominal one is: its own cells
        there for the studies it ran there, the nominal twin's for the rest (as the plain footing)."""
        a = self.answer(device, uc_id)
        variants = self.variants_of(device)
        if a is None or not a.options.options or not variants:
            return None
        label, spec, base = self.run.device_of(device), a.options.spec, a.options.base
        studies = self.robust_studies(uc_id, device)
        plain = {c.key.fs for c in self.run.cells}
        out = TunedFooting(a.options)
        for v in variants:
            name = v.partition("~")[2]
            if not self._on_variant(device, v, spec, studies):
                out.unfinished.append(name)
                continue
            there = [c for c in self.run.variant_cells if c.key.device == v and (c.key.fs in plain or c.key.fs == spec)]
            ran = {c.key.study for c in there}
            cells = [c for c in self.run.cells if c.key.device == label and c.key.study not in ran]
            cells += [replace(c, key=replace(c.key, device=label)) for c in there]
            mine_ran = ran | {c.key.study for c in self._mine.get((label, spec), [])}
            cells += [c for c in self._mine.get((label, spec), []) if c.key.study not in ran]
            cells += [replace(c, key=replace(c.key, fs=spec)) for c in self.run.cells
                      if c.key.device == label and c.key.fs == base and c.key.study not in mine_ran]
            r = R.rank(aggregate(self.run.root, self.run.manifest, cells, self.run.weights), device,
                       self.use_cases[uc_id])
            chk = r.checks.get(spec)
            mine = next((e for e in r.entries if e.fs == spec), None)
            theirs = next((e for e in r.entries if e.fs == base), None)
            if chk is not None and not chk.eligible:
                out.points.append(TunedPoint(name, False, False, f"breaks {chk.text()}"))
            elif mine is None or theirs is None:
                out.points.append(TunedPoint(name, False, False, "not ranked there"))
            else:
                gain = mine.score - theirs.score
                out.points.append(TunedPoint(name, gain >= -T.EPSILON, bool(r.winner and r.winner.fs == spec),
                                             "" if gain >= -T.EPSILON else
                                             f"score {mine.score:.2f} below {base}'s defaults' {theirs.score:.2f}"))
        return out


@dataclass(frozen=True)
class TunedPoint:
    """The tuned answer on one variant of the twin."""

    variant: str
    holds: bool  # eligible, and at least as good as its filesystem's defaults there
    first: bool  # still ranked first among the plain variants there
    why: str = ""  # why it does not hold


@dataclass
class TunedFooting:
    options: T.OptionSet
    points: list[TunedPoint] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)

    def text(self) -> str:
        """' Tuned footing: `opts` holds in 4 of 5 variants of this part (…)'."""
        n = len(self.points)
        if self.unfinished:
            return (f" Tuned footing: `{self.options.text}` not yet run on {len(self.unfinished)} of the part's "
                    f"{n + len(self.unfinished)} variants (`flashbed run` the same command again).")
        held = [p for p in self.points if p.holds]
        first = sum(1 for p in self.points if p.first)
        text = f" Tuned footing: `{self.options.text}` holds in {len(held)} of {n} variants of this part " \
               f"(keeps every requirement and its gain over {self.options.base}'s defaults; first in {first} of {n})"
        bad = [p for p in self.points if not p.holds]
        if bad:
            text += f"; not at {bad[0].variant}: {bad[0].why}" + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
        return text + "."


@dataclass
class Answer:
    lead: T.LeadSearch  # the filesystem whose option set the use case ranks first
    judged: T.Judgement  # that option set's
    defaults: T.Judgement  # its defaults'
    effects: list[tuple[T.OptionSet, str]]
    others: list[T.LeadSearch]  # the other lead's search (the runner-up's, or the winner's)
    view: View

    @property
    def options(self) -> T.OptionSet:
        return self.lead.best


def answer_text(tn: Tuning | None, r: R.Ranking) -> str:
    """The first screen's words on a use case's options: ' With options: **f2fs** with
    `compress_algorithm=lz4` (score …): each option's effect; what breaks a requirement.'"""
    if tn is None or not r.decided:
        return ""
    a = tn.answer(r.device, r.use_case.id)
    if a is None:
        pending = [ls for ls in tn.search.leads if ls.lead.device == r.device and ls.lead.use_case == r.use_case.id
                   and not ls.done]
        return " Options: not tuned yet (the tuning pass did not finish: run the same command again)." \
            if pending else ""
    best = a.options
    tried = sum(len(ls.singles) for ls in a.others)
    if not a.lead.singles:  # a read-only image (erofs) or a filesystem whose catalogue has none to try
        head = f" Options: **{best.base}** has none to try" + \
            (f"; no option of {', '.join(ls.lead.fs for ls in a.others)} ({tried} tried) ranks it above" if tried else "")
    elif not best.options:
        head = f" Options: **{best.base}** at its defaults (no option of its catalogue raised its score"
        head += f" and kept every requirement; {len(a.lead.singles)} tried)"
    else:
        gain = f"score {a.judged.score:.2f} vs {a.defaults.score:.2f} at its defaults" \
            if a.judged.score is not None and a.defaults.score is not None else ""
        head = f" Options: **{best.base}** with `{best.text}` ({gain})"
        eff = [f"`{s.text}`: {fig}" for s, fig in a.effects if fig]
        if eff:
            head += ": " + "; ".join(eff)
        risky = [o for o in best.options if o.risk]
        if risky:  # chosen on this twin's crash states, which did not show the loss its design allows
            head += (". **Risky by design**: " + "; ".join(f"`{o.text}` can lose acknowledged data ({o.risk})"
                                                            for o in risky)
                     + ": no crash state here lost any, which holds for this twin's cache model only")
    tf = tn.robust_footing(r.device, r.use_case.id)
    if tf is not None:
        head += "." + tf.text().rstrip(".")
    broke = [(s, a.lead.judged[s]) for s in a.lead.broke()]
    if broke:  # each, with the state that shows it: the options a team would otherwise try next
        head += ". Breaks a requirement: " + "; ".join(
            f"`{s.text}` ({j.why}" + (f"; replay: `{j.replay}`" if j.replay else "") + ")" for s, j in broke)
    return head + "."


def section(tn: Tuning | None) -> Section | None:
    """The Tuning section: per device and use case, every option set tried with its score, its
    effect and what it breaks; what the search explored and what it left out."""
    if tn is None or not tn.search.leads:
        return None
    sec = Section("tuning", "Tuning: which options")
    sec.add(Paragraph(
        "For each use case, the plain run's winner and runner-up tried the options of their filesystem's catalogue "
        "on the use case's decisive studies (its decisive criteria and requirements, crash states included): each "
        "option alone from the defaults, then the options that each raised the score and kept every requirement, "
        "together. Each option set is ranked by the use case's own rule among the plain variants, requirements "
        "first, with its own figures for the studies it ran and its plain variant's for the others (the options' "
        "effect on those was not measured). Not explored: pairs of options that did not each help alone, values "
        "between the catalogue's, options outside it, and filesystems other than the first two.", cls="note"))
    rows = []
    for ls in tn.search.leads:
        uc = tn.use_cases[ls.lead.use_case].title
        for s in [ls.defaults, *ls.singles, *([ls.combined] if ls.combined else [])]:
            j = ls.judged.get(s, T.Judgement(False))
            what = "not run yet" if not j.measured else \
                (f"breaks: {j.why}" + (f"; replay: {j.replay}" if j.replay else "")) if not j.eligible else \
                tn.figures(ls.lead.device, ls.lead.use_case, ls.defaults, s) if s.options else "—"
            step = "defaults" if not s.options else "combined" if s is ls.combined else "one option"
            chosen = s == ls.best and ls.done
            risk = "; ".join(o.risk for o in s.options if o.risk)
            rows.append([Cell(ls.lead.device, ls.lead.device), Cell(uc, uc), Cell(ls.lead.fs, ls.lead.fs),
                         Cell(s.text + (" (chosen)" if chosen else ""), s.text, cls="best" if chosen else ""),
                         Cell(step, step),
                         Cell(f"{j.score:.2f}" if j.score is not None else "—", j.score),
                         Cell(what or "—", what or "", cls="bad" if j.measured and not j.eligible else ""),
                         Cell(risk or "—", risk)])
    sec.add(Table("tab-tuning", "Option sets tried, per use case and filesystem",
                  [Column("device", numeric=False), Column("use case", numeric=False),
                   Column("filesystem", numeric=False), Column("options", numeric=False),
                   Column("step", numeric=False), Column("score", "0–1"),
                   Column("effect against the defaults / what breaks", numeric=False),
                   Column("may lose acknowledged data by design", numeric=False)], rows,
                  "score: the use case's, among the plain variants; effect: its decisive figures"))
    pending = tn.search.pending()
    if pending:
        sec.add(Paragraph(f"Not finished: {len(pending)} option set{'s' if len(pending) != 1 else ''} still to run; "
                          f"run the same command again to finish the pass.", cls="missing"))
    return sec


def summary_data(tn: Tuning | None) -> dict | None:
    if tn is None:
        return None
    out: dict = {}
    for ls in tn.search.leads:
        d = out.setdefault(ls.lead.device, {}).setdefault(ls.lead.use_case, {})
        a = tn.answer(ls.lead.device, ls.lead.use_case)
        if a is not None:
            d["answer"] = {"fs": a.options.base, "options": a.options.text, "spec": a.options.spec,
                           "score": a.judged.score, "defaults_score": a.defaults.score,
                           "effects": {s.text: fig for s, fig in a.effects}}
            tf = tn.robust_footing(ls.lead.device, ls.lead.use_case)
            if tf is not None:
                d["answer"]["footing"] = {"held": sum(p.holds for p in tf.points), "of": len(tf.points),
                                          "unfinished": tf.unfinished,
                                          "variants": {p.variant: {"holds": p.holds, "first": p.first, "why": p.why}
                                                       for p in tf.points}}
        d.setdefault("tried", []).extend(
            {"fs": ls.lead.fs, "role": ls.lead.role, "options": s.text, "spec": s.spec,
             "measured": j.measured, "eligible": j.eligible, "score": j.score, "breaks": j.why, "replay": j.replay}
            for s in [*ls.singles, *([ls.combined] if ls.combined else [])]
            for j in [ls.judged.get(s, T.Judgement(False))])
    return out


def tuning(run: RunData, recs: dict[str, list[R.Ranking]]) -> Tuning | None:
    """The run's tuning pass (None: the run had none)."""
    req = run.manifest.get("request") if isinstance(run.manifest.get("request"), dict) else {}
    return Tuning(run, recs) if req.get("tune") else None

