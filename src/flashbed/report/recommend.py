"""Recommendation: per device and use case, a ranked list with the figures that decided it.

The criteria and weights live in weights.toml (see its comments for the scoring rule);
this module only applies them. A criterion nobody measured is listed as not measured;
a variant without a value for a criterion is not scored on it (and marked incomplete),
a variant whose cells failed scores 0 on it. A criterion lab-bound for any variant scores
nobody, and so does one whose figure the device could not have served for any variant (the
device check: its direct or synchronous writes acknowledged before the device had them). A use case missing a decisive criterion is not decided: no winner, a partial
ranking and the command that measures what is missing.

No evidence, no answer: a criterion whose every cell failed is not measured (never a tie at
zero that names a winner), and a run most of whose cells failed recommends nothing: its first
screen says so first, with the first error (run_failure). The first screen lists the use cases
the run measured (asked); those none of whose studies ran are one line at most.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from .. import variants
from ..status import DeviceVerdict, Measured
from . import devcheck, units, workcase
from .devcheck import DeviceCheck
from .doc import Cell, Column, ListBlock, Paragraph, Section, Table
from .eligibility import Eligibility, Verdict, can_run, eligibility, no_write_log
from .load import ATTRIBUTED, NOT_OBSERVABLE, Busy, RunData, Stat, variants_done
from .partloss import no_damage_why, part_loss
from .rerun import measure_command
from .weights import Criterion, UseCase

# why an emulator statistic is missing on a device that has none: no run can measure it there
NO_EMULATOR = "the device has no flash emulator statistics (raw NAND through nandsim, or a plain file)"
STRONG = 1.05  # a difference smaller than 5 % is not named as a strength or weakness


@dataclass
class Value:
    status: Measured
    value: float | None = None  # stored unit
    unit: str = ""
    n: int = 0  # repeats behind the value (smallest over matched cases)
    why: str = ""  # failure status
    lab: Busy | None = None  # set when the figure is lab-bound (the least busy matched case)
    cached: DeviceCheck | None = None  # set when the device did not receive the figure's writes during it


@dataclass
class Entry:
    fs: str
    score: float
    coverage: float  # share of the measured criteria's weight this variant was scored on
    values: dict[int, Value]  # criterion index -> value
    scores: dict[int, float] = field(default_factory=dict)
    text: str = ""

    @property
    def complete(self) -> bool:
        return self.coverage >= 0.999999


@dataclass
class Undecided:
    """A decisive criterion the device's ranking lacks: why, and what measures it."""

    criterion: int
    why: str
    command: str = ""
    ask: str = "measure it"  # what the command is for


@dataclass
class Ranking:
    device: str
    use_case: UseCase
    entries: list[Entry]
    measured: list[int]  # criterion indexes measured on this device
    not_measured: list[tuple[int, str]]  # (criterion index, reason)
    lab_bound: dict[int, list[tuple[str, Busy]]] = field(default_factory=dict)  # criterion -> (fs, busy)
    # criterion -> (fs, device check) of figures the device could not have served: scored for nobody
    cached: dict[int, list[tuple[str, DeviceCheck]]] = field(default_factory=dict)
    undecided: list[Undecided] = field(default_factory=list)
    # emulator statistics on a real device: listed as such, scored for nobody
    not_observable: list[int] = field(default_factory=list)
    # filesystems a decisive criterion does not apply to (a read-only one where writing decides)
    not_candidates: list[tuple[str, str]] = field(default_factory=list)  # (fs, why)
    # requirements before scores: filesystems that fail one (never ranked), and the requirement
    # checks of every candidate (eligibility.py)
    not_eligible: list[Eligibility] = field(default_factory=list)
    checks: dict[str, Eligibility] = field(default_factory=dict)
    # criteria with nothing to measure on this device (the device's damage survived, on a part that
    # damaged nothing): (criterion index, why); counted nowhere
    not_applicable: list[tuple[int, str]] = field(default_factory=list)

    @property
    def scored(self) -> list[int]:
        """Measured criteria that score: the lab-bound and the cached ones are ties for everyone."""
        return [i for i in self.measured if i not in self.lab_bound and i not in self.cached]

    @property
    def none_eligible(self) -> bool:
        """Every candidate fails a requirement: nothing to rank, whatever was measured."""
        return bool(self.checks) and not any(e.eligible for e in self.checks.values())

    @property
    def decided(self) -> bool:
        return bool(self.entries) and not self.undecided

    @property
    def winner(self) -> Entry | None:
        """The choice; None when nothing was measured or a decisive criterion is missing."""
        return self.entries[0] if self.decided else None

    @property
    def runner_up(self) -> Entry | None:
        return self.entries[1] if self.decided and len(self.entries) > 1 else None

    def choice_text(self) -> str:
        if self.winner:
            return self.winner.fs
        if self.none_eligible:
            return "none eligible"
        return "not decided" if self.measured else "nothing measured"


def _geomean(xs: list[float]) -> float:
    if all(x > 0 for x in xs):
        return math.exp(math.fsum(math.log(x) for x in xs) / len(xs))
    return math.fsum(xs) / len(xs)


def criterion_value(run: RunData, device: str, fs: str, c: Criterion) -> Value:
    if c.source == "device" and run.is_real(device):
        return Value(Measured.NOT_OBSERVABLE, why=NOT_OBSERVABLE)
    if c.source == "device":
        if c.case in ("*", ""):
            stats = [run.device_stat(device, fs, c.study).get(c.metric)]
        else:
            stats = [st.get(c.metric) for (d, f, s, kc), st in sorted(run.dstats.items())
                     if d == device and f == fs and s == c.study and kc != "*" and fnmatchcase(kc, c.case)] or \
                [st.get(c.metric) for (d, f, s, ph), st in sorted(run.pstats.items())
                 if d == device and f == fs and s == c.study and fnmatchcase(ph, c.case)]
        unit = units.device_stat_unit(c.metric)
        fails = run.failures_for(device, fs, c.study)
    else:
        cases = [k for k in run.cases(device, c.study) if fnmatchcase(k, c.case)]
        stats = [run.get(device, fs, c.study, k, c.metric) for k in cases]
        unit = next((s.unit for s in stats if s), "")
        fails = [f for f in run.failures_for(device, fs, c.study) if any(f.covers(k) for k in cases)
                 or (not cases and not f.case)]
    # an "error" cell is an infrastructure failure (retried on resume), not the filesystem's result
    fails = [f for f in fails if f.status.is_result]
    present: list[Stat] = [s for s in stats if s is not None]
    if present:
        labs = [] if c.source == "device" else \
            [b for k in cases if (b := run.lab_bound(device, fs, c.study, k, c.metric))]
        cached = [] if c.source == "device" else \
            [x for k in cases if (x := run.cached(device, fs, c.study, k, c.metric))]
        return Value(Measured.OK, _geomean([s.mean for s in present]), unit, min(s.n for s in present),
                     lab=min(labs, key=lambda b: b.util.mean) if labs else None,
                     cached=cached[0] if cached else None)
    if fails:
        return Value(Measured.FAILED, None, unit, why=fails[0].status)
    na = [w for k in (cases if c.source == "measure" and cases else [None])
          if (w := run.not_applicable(device, fs, c.study, k))]
    if na:
        return Value(Measured.NA, why=na[0])
    return Value(Measured.MISSING)


def rank(run: RunData, device: str, uc: UseCase) -> Ranking:
    fss = run.filesystems(device)
    vals = {fs: {i: criterion_value(run, device, fs, c) for i, c in enumerate(uc.criteria)} for fs in fss}
    # a filesystem a decisive criterion does not apply to is no candidate for the use case
    not_candidates = []
    for fs in fss:
        na = [(c, vals[fs][i]) for i, c in enumerate(uc.criteria) if c.decisive and vals[fs][i].status is Measured.NA]
        if na:
            not_candidates.append((fs, f"{na[0][1].why}: {', '.join(c.label for c, _v in na)} n/a"))
    fss = [fs for fs in fss if fs not in dict(not_candidates)]
    # requirements before scores: a filesystem that fails one is listed, never ranked
    checks = eligibility(run, device, uc, fss)
    not_eligible = [e for e in checks.values() if not e.eligible]
    # what was measured is the run's, eligible or not (a use case none is eligible for was measured)
    candidates, fss = fss, [fs for fs in fss if checks[fs].eligible]
    measured, not_measured, not_observable, not_applicable = [], [], [], []
    for i, c in enumerate(uc.criteria):
        failed = [fs for fs in candidates if vals[fs][i].status is Measured.FAILED]
        if any(vals[fs][i].status is Measured.OK for fs in candidates):
            measured.append(i)
        elif failed:  # no cell measured it: no evidence, and a tie at zero must not name a winner
            f = run.failures_for(device, failed[0], c.study)
            not_measured.append((i, f"every {c.study} cell that should have measured it failed (first: "
                                    f"{failed[0]} {f[0].status}: {f[0].error})" if f else
                                 f"every {c.study} cell that should have measured it failed"))
        elif candidates and all(vals[fs][i].status is Measured.NOT_OBSERVABLE for fs in candidates):
            not_observable.append(i)
        elif not can_run(run, device, c.study):
            not_measured.append((i, no_write_log(c.study, device)))
        elif c.study not in run.studies():
            not_measured.append((i, f"study {c.study} is not in this run"))
        elif c.study not in run.studies(device):
            not_measured.append((i, f"study {c.study} was not run on {device}"))
        elif c.source == "device" and not run.device_stat_keys(device):
            not_measured.append((i, NO_EMULATOR))
        elif c.study in ATTRIBUTED and c.metric == "damage_survived" and \
                any(k[0] == device and k[2] == c.study and k[4] == "damaged_states" for k in run.values):
            not_applicable.append((i, no_damage_why(run, device)))
        else:
            what = f"emulator statistic {c.metric}" if c.source == "device" else f"case '{c.case}' / {c.metric}"
            not_measured.append((i, f"{c.study} has no {what} on {device}"))
    lab_bound = {i: [(fs, vals[fs][i].lab) for fs in fss if vals[fs][i].lab] for i in measured}
    lab_bound = {i: v for i, v in lab_bound.items() if v}
    cached = {i: [(fs, vals[fs][i].cached) for fs in fss if vals[fs][i].cached] for i in measured}
    cached = {i: v for i, v in cached.items() if v}
    scored = [i for i in measured if i not in lab_bound and i not in cached]
    entries = []
    total_w = math.fsum(uc.criteria[i].weight for i in scored)
    for fs in fss:
        entries.append(Entry(fs=fs, score=0.0, coverage=0.0, values=vals[fs]))
    for i in scored:
        c = uc.criteria[i]
        oks = [(e, e.values[i].value) for e in entries if e.values[i].status is Measured.OK]
        if oks:
            xs = [v for _e, v in oks]
            best = max(xs) if c.better == "higher" else min(xs)
            d = 0.01 * max(abs(x) for x in xs) if best == 0 else 0.0
            for e, v in oks:
                if c.better == "higher":
                    s = v / best if best > 0 else 1.0
                else:
                    s = (best + d) / (v + d) if v + d > 0 else 1.0
                e.scores[i] = min(1.0, max(0.0, s))
        for e in entries:
            if e.values[i].status is Measured.FAILED:
                e.scores[i] = 0.0
    for e in entries:
        w = math.fsum(uc.criteria[i].weight for i in e.scores)
        e.score = math.fsum(uc.criteria[i].weight * s for i, s in e.scores.items()) / w if w else 0.0
        e.coverage = w / total_w if total_w else 0.0
    entries = [e for e in entries if e.scores]
    entries.sort(key=lambda e: (not e.complete, -round(e.score, 9), units.natural_key(e.fs)))
    r = Ranking(device, uc, entries, measured, not_measured, lab_bound, cached=cached,
                not_observable=not_observable, not_candidates=not_candidates, not_eligible=not_eligible,
                checks=checks, not_applicable=not_applicable)
    r.undecided = _undecided(run, r)
    for k, e in enumerate(entries):
        e.text = _sentence(r, k)
    return r


def _undecided(run: RunData, r: Ranking) -> list[Undecided]:
    """The decisive criteria this ranking lacks (not measured, or lab-bound), with what measures them."""
    out = []
    # requirements whose study did not run, per study: (labels, filesystems)
    unchecked: dict[str, tuple[list[str], list[str], list[str]]] = {}
    for e in r.checks.values():
        for c in e.checks:
            if c.verdict is Verdict.UNCHECKED and c.pending and e.eligible:
                # its checks ran but did not finish: not decided, with the count (eligibility.py)
                out.append(Undecided(-1, f"requirement {c.req.label} not decided for {e.fs}: {c.why}",
                                     measure_command(run, r.device, [c.req.study]),
                                     "give each state a verdict (a check that finishes, and gives one tree one "
                                     "verdict), then run it again"))
                continue
            if c.verdict is Verdict.UNCHECKED and e.eligible:
                labels, fss, failed = unchecked.setdefault(c.req.study, ([], [], []))
                labels += [c.req.label] if c.req.label not in labels else []
                fss += [e.fs] if e.fs not in fss else []
                if run.failures_for(r.device, e.fs, c.req.study) and f"{e.fs}: {c.why}" not in failed:
                    failed.append(f"{e.fs}: {c.why}")  # its cell failed: no evidence either way
    reasons = dict(r.not_measured)
    # a decisive criterion of the same study not measured says it, with the same command
    missing = {c.study for i, c in enumerate(r.use_case.criteria) if c.decisive and i in reasons}
    for study, (labels, fss, failed) in unchecked.items():
        if study in missing:
            continue
        why = f"not measured: {'; '.join(failed)}" if failed else f"study {study} did not run for them"
        out.append(Undecided(-1, f"requirement{'s' if len(labels) > 1 else ''} {', '.join(labels)} not checked "
                                 f"for {', '.join(fss)} ({why})",
                             measure_command(run, r.device, [study]), "check it"))
    for i, c in enumerate(r.use_case.criteria):
        if not c.decisive or reasons.get(i) in (NO_EMULATOR, no_write_log(c.study, r.device)):
            continue  # a decisive statistic no run can measure on this device does not hold the choice up
        if i in reasons:
            out.append(Undecided(i, f"{c.label} not measured ({reasons[i]})",
                                 measure_command(run, r.device, [c.study])))
        elif i in r.lab_bound:
            # a busy host starves the lab: alone on a quiet one, the same figure can be the device's
            out.append(Undecided(i, f"{c.label} is lab-bound ({_lab_list(r.lab_bound[i])}): the lab, "
                                    f"not the device, set it", measure_command(run, r.device, [c.study], alone=True),
                                 "measure it again on a quiet host"))
    return out


def _lab_list(items: list[tuple[str, Busy]]) -> str:
    return ", ".join(f"{fs} {b.text()}" for fs, b in items)


def _adv(c: Criterion, v: float, rv: float) -> float | None:
    """How many times better v is than rv (> 1 = better); None when not comparable."""
    if v is None or rv is None:
        return None
    if c.better == "higher":
        return v / rv if rv > 0 and v > 0 else None
    return rv / v if v > 0 and rv > 0 else None


def _phrase(c: Criterion, v: Value, rv: Value, ref: str, strength: bool) -> str:
    a, b = units.fmt_unit(v.value, v.unit), units.fmt_unit(rv.value, rv.unit)
    if units.display_unit(v.unit) == "%":
        return f"{c.label} {a} vs {b}"
    if c.better == "higher":
        r = units.ratio_text(v.value / rv.value)
        return f"{r} {ref}'s {c.label} ({a} vs {b})" if strength else \
            f"only {r} {ref}'s {c.label} ({a} vs {b})"
    if strength:
        return f"{c.label} {a} vs {b}"
    return f"{c.label} {units.ratio_text(v.value / rv.value)} {ref}'s ({a} vs {b})"


def _compare(r: Ranking, e: Entry, ref: Entry) -> tuple[list[int], list[int]]:
    """The scored criteria where e is clearly better / clearly worse than ref, weightiest first."""
    diffs = []
    for i in r.scored:
        c = r.use_case.criteria[i]
        mine, theirs = e.values[i], ref.values[i]
        if mine.status is Measured.OK and theirs.status is Measured.OK:
            a = _adv(c, mine.value, theirs.value)
            if a is not None:
                diffs.append((c.weight * abs(math.log(a)), a, i))
    diffs.sort(reverse=True)
    return [i for _w, a, i in diffs if a >= STRONG], [i for _w, a, i in diffs if a <= 1 / STRONG]


def deciding_text(r: Ranking) -> str:
    """The figures that decided the choice against the runner-up, as 'label value vs value': its
    clearest advantages and every decisive criterion (those where it is worse after a 'but')."""
    w, ru = r.winner, r.runner_up
    if w is None:
        return ""
    if ru is None:
        return "the only filesystem measured"
    strengths, weaknesses = _compare(r, w, ru)
    decisive = [i for i in r.scored if r.use_case.criteria[i].decisive]
    pro = strengths[:2] + [i for i in decisive if i not in strengths[:2] and i not in weaknesses]
    con = [i for i in decisive if i in weaknesses]

    def figure(i: int) -> str:
        c, v, rv = r.use_case.criteria[i], w.values[i], ru.values[i]
        theirs = units.fmt_unit(rv.value, rv.unit) if rv.status is Measured.OK else rv.why or rv.status
        return f"{c.label} {units.fmt_unit(v.value, v.unit)} vs {theirs}"
    pro_txt = [figure(i) for i in pro if w.values[i].status is Measured.OK]
    text = "; ".join(pro_txt) or f"on par with {ru.fs} on every criterion both were measured on"
    return text + ("; but " + "; ".join(figure(i) for i in con) if con else "")


def _sentence(r: Ranking, k: int) -> str:
    e = r.entries[k]
    uc = r.use_case
    head = f"**{e.fs}** (score {e.score:.2f})"
    if len(r.entries) == 1:
        body = "the only filesystem measured"
    else:
        ref = r.entries[1] if k == 0 else r.entries[0]
        strengths, weaknesses = _compare(r, e, ref)
        fails = [(uc.criteria[i], e.values[i]) for i in r.scored if e.values[i].status is Measured.FAILED]
        s_txt = [_phrase(uc.criteria[i], e.values[i], ref.values[i], ref.fs, True) for i in strengths]
        w_txt = [_phrase(uc.criteria[i], e.values[i], ref.values[i], ref.fs, False) for i in weaknesses]
        f_txt = [f"{c.label}: {v.why} (scores 0)" for c, v in fails]
        if k == 0:
            parts = s_txt[:3] or [f"on par with {ref.fs} on every criterion it was measured on"]
            body = ", ".join(parts)
            buts = (f_txt + w_txt)[:2]
        else:
            parts = (f_txt + w_txt)[:2] or [f"close to {ref.fs} on every criterion it was measured on"]
            body = ", ".join(parts)
            buts = []
            if s_txt:
                body += f"; better: {s_txt[0]}"
        if buts:
            body += "; but " + ", ".join(buts)
    missing = [uc.criteria[i].label for i in r.scored if e.values[i].status is Measured.MISSING]
    if missing:
        body += f" (incomplete: not measured on {', '.join(missing)})"
    na = [uc.criteria[i].label for i in r.scored if e.values[i].status is Measured.NA]
    if na:
        body += f" (n/a: {', '.join(na)})"
    return f"{head}: {body}."


def recommend(run: RunData) -> dict[str, list[Ranking]]:
    """Per device: your own workload's use case first (workcase.py), then the built-in ones. A run
    most of whose cells failed decides none of them (run_failure)."""
    recs = {d: [rank(run, d, uc) for uc in (*workcase.use_cases(run, d), *run.weights.use_cases)]
            for d in run.devices()}
    failed = run_failure(run)
    if failed:
        for rankings in recs.values():
            for r in rankings:
                r.undecided.insert(0, Undecided(-1, failed, measure_command(run, r.device, run.studies(r.device)),
                                                "resume it once the first error is fixed"))
    return recs


def unfinished_text(run: RunData) -> str:
    """'' for a run whose planned cells are all in; else that it is unfinished, first, with its cells
    (and a robust pass's variants) counted against the plan, and how to finish it."""
    planned = int(run.manifest.get("cells") or 0)
    have = len(run.cells) + len(run.variant_cells)
    if not planned or have >= planned:
        return ""
    done, variants = variants_done(run)
    robust = f"; robust pass: {done} of {variants} variants finished" if variants and done < variants else ""
    return (f"**This run is unfinished: {have} of its {planned} planned cells are in** ({planned - have} not run"
            f"{robust}). Every answer below rests on the finished cells only; `flashbed run --resume {run.run_id}` "
            f"finishes it.")


def run_failure(run: RunData) -> str:
    """'' for a run most of whose cells finished; else what failed, with the first error: such a
    run recommends nothing (its figures are the few cells that happened to finish)."""
    total = sum(sum(c.values()) for c in run.cell_status.values())
    bad = len(run.failures)
    if not total or 2 * bad <= total:
        return ""
    kinds = {}
    for f in run.failures:
        kinds[str(f.status)] = kinds.get(str(f.status), 0) + 1
    first = run.failures[0]
    return (f"{bad} of {total} cells of this run did not finish (" + ", ".join(f"{n} {k}" for k, n in
                                                                               sorted(kinds.items()))
            + f"): the first error, {first.id}: {first.error}")


def asked(run: RunData, r: Ranking) -> bool:
    """Whether the run measured anything of this use case on the device (a study of its criteria
    or requirements has cells there, finished or not): the first screen lists only those."""
    uc = r.use_case
    mine = set(run.studies(r.device))
    return workcase.is_workload(uc) or any(c.study in mine for c in uc.criteria) or \
        any(q.study in mine for q in uc.requires)


# ---- document blocks -----------------------------------------------------------

def _ranking_table(r: Ranking) -> Table:
    uc = r.use_case
    cols = [Column("rank", "", True), Column("filesystem", numeric=False), Column("score", "0–1")]
    for i in r.measured:
        u = next((e.values[i].unit for e in r.entries if e.values[i].status is Measured.OK), "")
        c = uc.criteria[i]
        tags = [f"w {c.weight:g}", c.better] + (["decisive"] if c.decisive else []) + \
            (["lab-bound: not scored"] if i in r.lab_bound else []) + \
            (["cached: not scored"] if i in r.cached else [])
        cols.append(Column(f"{c.label} [{', '.join(tags)}]", units.display_unit(u)))
    rows = []
    for k, e in enumerate(r.entries):
        row = [Cell(str(k + 1), k + 1), Cell(e.fs, e.fs), Cell(f"{e.score:.2f}", round(e.score, 6))]
        for i in r.measured:
            v = e.values[i]
            if v.status is Measured.OK and v.cached:
                row.append(Cell(f"{units.fmt(v.value, v.unit)} ({v.cached.text()})",
                                units.to_display(v.value, v.unit), title=f"not scored: {v.cached.counters_text()}",
                                cls="labbound"))
            elif v.status is Measured.OK and v.lab:
                row.append(Cell(f"{units.fmt(v.value, v.unit)} ({v.lab.mark}, {v.lab.text()})",
                                units.to_display(v.value, v.unit), title=f"not scored: {v.lab.text()} of "
                                f"{v.lab.basis}", cls="labbound"))
            elif v.status is Measured.OK:
                row.append(Cell(units.fmt(v.value, v.unit), units.to_display(v.value, v.unit),
                                title=f"score {e.scores[i]:.2f}" if i in e.scores else "not scored (lab-bound)",
                                cls="best" if e.scores.get(i) == 1.0 and len(r.entries) > 1 else ""))
            elif v.status is Measured.FAILED:
                row.append(Cell(v.why, None, title="scores 0", cls="bad"))
            elif v.status is Measured.NA:
                row.append(Cell(f"n/a ({v.why})", None, cls="na"))
            else:
                row.append(Cell("not measured", None, cls="missing"))
        rows.append(row)
    return Table(units.slug("rec", r.device, uc.id), f"{uc.title} — {r.device}: criteria", cols, rows,
                 "criterion values (geometric mean over matching cases); hover for the 0–1 criterion score")


def undecided_text(r: Ranking, head: str = "not decided") -> str:
    """'not decided: <what is missing>; measure it: `command`' (Markdown inline marks)."""
    why = [u.why + (f"; {u.ask}: `{u.command}`" if u.command else "") for u in r.undecided]
    if not r.entries and not why:
        why = ["every criterion measured here is lab-bound"]
    return f"{head}: " + "; ".join(why)


def answer_line(r: Ranking) -> str:
    """One line of the first screen: the choice, the runner-up and the deciding figures, or why not."""
    head = f"**{r.use_case.title}**: "
    tail = f" Not eligible: {not_eligible_text(r, short=True)}." if r.not_eligible else ""
    if r.winner:
        ru = f", runner-up {r.runner_up.fs}" if r.runner_up else ""
        risky = [f"{e.fs}: {t}" for e in (r.winner, r.runner_up) if e and (t := variants.risks_text(e.fs))]
        warn = f" **Risky by design**: {'; '.join(risky)}." if risky else ""
        return head + f"**{r.winner.fs}**{ru} — {deciding_text(r)}." + warn + tail
    if r.none_eligible:
        return head + "no filesystem meets the requirements." + tail
    if r.measured:
        return head + undecided_text(r, "**not decided**") + "." + tail
    return head + "nothing measured on this device (none of its studies ran here)." + tail


def not_eligible_text(r: Ranking, short: bool = False) -> str:
    """'vfat (lacks POSIX owners (chown) (why), …; replay one losing state: `command`)'. `short` (the
    first screen): what each lacks by name and how much data it lost, without the evidence's detail
    or commands (the use case's section has them)."""
    out = []
    for e in r.not_eligible:
        if short:
            caps = [c.req.name.replace("_", " ") for c in e.failed if c.req.study == "caps"]
            rest = [c.why or c.req.label for c in e.failed if c.req.study != "caps"]
            out.append(f"{e.fs} ({'; '.join(([('no ' + ', '.join(caps))] if caps else []) + rest)})")
            continue
        replay = [c.reproducer.command for c in e.failed if c.reproducer]
        out.append(f"{e.fs} (lacks {e.text()}" + (f"; replay one losing state: `{replay[0]}`" if replay else "")
                   + ")")
    return "; ".join(out)


def ranking_section(run: RunData, r: Ranking) -> Section:
    uc = r.use_case
    sec = Section(units.slug("rec", r.device, uc.id, "sec"), uc.title)
    if uc.summary:
        sec.add(Paragraph(uc.summary[0].upper() + uc.summary[1:] + ".", cls="note"))
    if r.decided:
        w, ru = r.winner, r.runner_up
        sec.add(Paragraph(f"Choose **{w.fs}**" + (f"; runner-up **{ru.fs}** (score {w.score:.2f} vs "
                                                  f"{ru.score:.2f})." if ru else ".")))
    elif r.measured:
        sec.add(Paragraph(undecided_text(r, "Not decided") + ".", cls="missing"))
        if r.entries:
            sec.add(Paragraph("Partial ranking, on the criteria that were measured: not a recommendation.",
                              cls="missing"))
    elif r.none_eligible:
        sec.add(Paragraph("No filesystem meets this use case's requirements on this device.", cls="missing"))
    else:
        sec.add(Paragraph("No filesystem was measured on any criterion of this use case on this device.",
                          cls="missing"))
    if r.entries:
        sec.add(ListBlock([e.text for e in r.entries], ordered=True))
        sec.add(_ranking_table(r))
    if r.lab_bound:
        sec.add(Paragraph("Lab-bound, not scored for anyone (the device sat idle waiting for the lab): " + "; ".join(
            f"{uc.criteria[i].label} — {_lab_list(items)}" for i, items in r.lab_bound.items()) + ".",
            cls="missing"))
    if r.cached:
        sec.add(Paragraph("Not served by the device, not scored for anyone (the writes were acknowledged before "
                          "the device received them): " + "; ".join(
                              f"{uc.criteria[i].label} — " + ", ".join(f"{fs} ({chk.text()})" for fs, chk in items)
                              for i, items in r.cached.items()) + ".", cls="missing"))
    if r.not_eligible:
        sec.add(Paragraph("Not eligible (a requirement of this use case fails; not ranked, whatever it scores): "
                          + not_eligible_text(r) + ".", cls="missing"))
    cannot = sorted({c.why for e in r.checks.values() for c in e.checks if c.verdict is Verdict.CANNOT})
    if cannot:
        sec.add(Paragraph("Requirements not checkable here: " + "; ".join(cannot) + ".", cls="missing"))
    if r.not_candidates:
        sec.add(Paragraph("Not candidates here: " + "; ".join(f"{fs} ({why})" for fs, why in r.not_candidates)
                          + ".", cls="missing"))
    if r.not_measured:
        sec.add(Paragraph("Not measured (not scored for anyone): " + "; ".join(
            f"{uc.criteria[i].label} — {why}" for i, why in r.not_measured) + ".", cls="missing"))
    if r.not_applicable:
        sec.add(Paragraph("Nothing to measure here (not scored for anyone): " + "; ".join(
            f"{uc.criteria[i].label} — {why}" for i, why in r.not_applicable) + ".", cls="note"))
    if r.not_observable:
        sec.add(Paragraph(f"{NOT_OBSERVABLE[0].upper()}{NOT_OBSERVABLE[1:]} (flash emulator statistics; not "
                          f"scored for anyone): " + "; ".join(uc.criteria[i].label for i in r.not_observable)
                          + ".", cls="missing"))
    return sec


def recommendation_section(run: RunData, recs: dict[str, list[Ranking]] | None = None) -> Section:
    recs = recs if recs is not None else recommend(run)
    top = Section("recommendation", "Recommendation")
    top.add(Paragraph(
        f"Per use case, filesystems are ranked by a weighted score (1.00 = best on every criterion) over the "
        f"criteria in `{run.weights.path.name}` (the package's editable weights table; its comments explain "
        f"the rule). Each line gives the figures that decided it against the runner-up (for the winner) or "
        f"the winner (for the rest). Filesystems are compared only with others on the same device. A use case "
        f"is decided only when its decisive criteria were measured; otherwise it says what to run, and its "
        f"ranking is partial. {lab_bound_method(run)} {device_check_method()}"))
    top.add(overview_table(recs))
    failed = run_failure(run)
    if failed:
        top.add(Paragraph(f"No recommendation: {failed}.", cls="missing"))
    for device, rankings in recs.items():
        ds = Section(units.slug("rec", device), f"Device {run.device_text(device)}")
        pl = part_loss(run, device)
        if pl is not None:
            ds.add(Paragraph(pl.text(), cls="missing"))
        for r in rankings:
            ds.add(ranking_section(run, r))
        top.add(ds)
    return top


def answer_section(run: RunData, recs: dict[str, list[Ranking]],
                   footing: Callable[[Ranking], str] | None = None) -> Section:
    """The report's first screen: per device, the device (and the real part it models), then per use
    case the choice, the runner-up and the deciding figures, or why it is not decided and what to run;
    with a robust pass, what each choice rests on (`footing`: report/footing.py)."""
    sec = Section("answer", "Answer")
    unfinished = unfinished_text(run)
    if unfinished:  # first: every answer below rests on the cells that are in
        sec.add(Paragraph(unfinished, cls="missing"))
    failed = run_failure(run)
    if failed:  # before anything else: no figure below can be read as an answer
        sec.add(Paragraph(f"**No recommendation: most of this run failed.** {failed}. Fix that and resume the run "
                          f"(`flashbed run --resume {run.run_id}`); the tables below hold only the cells that "
                          f"finished.", cls="missing"))
    for device, rankings in recs.items():
        part = run.device_part(device)
        sec.add(Paragraph(f"**Device {run.device_text(device)}**" + (f" — {part}" if part else "") + ".",
                          cls="device"))
        pl = part_loss(run, device)
        if pl is not None:  # once per device: what the part itself did, before any use case
            sec.add(Paragraph(pl.text(), cls="missing"))
        shown = [r for r in rankings if asked(run, r)]
        if shown and not failed:
            sec.add(ListBlock([answer_line(r) + (footing(r) if footing else "") for r in shown]))
        hidden = [r.use_case.title for r in rankings if r not in shown]
        if hidden and not failed:  # one line for what nobody asked here, never a line each
            sec.add(Paragraph(f"Built-in use cases ({', '.join(hidden)}): none of their studies ran on {device}; "
                              f"`flashbed run --profile quick --device {run.device_of(device)}` measures them.",
                              cls="note"))
        if run.ignores_direct(device):  # what no benchmark tool sees, and what kept a figure from deciding
            sec.add(Paragraph(ignores_direct_text(run, device), cls="note"))
    sec.add(Paragraph(f"Lab kernel {run.kernel_text}; profile {run.profile}; repeats {run.repeats_text()}; "
                      f"tool versions under Run. Rankings, trade-offs and every figure follow.", cls="note"))
    return sec


def device_check_method() -> str:
    """How figures are checked against what the device received, for the report's methods text."""
    return ("Every timed figure whose workload was told its writes were on the device (O_DIRECT, O_SYNC, a "
            "database commit) is checked against the device's own counters over the job alone: the bytes it "
            "received and its flushes. A figure whose device received less than "
            f"{devcheck.RECEIVED_BELOW:g} % of them was served from the lab's page cache, not by the device: "
            "it is marked cached and its criterion scores nobody. A served 4 KiB random write rate above the "
            "part's published random write rate is shown with the device's request pattern (request sizes, "
            "sequential share).")


def ignores_direct_text(run: RunData, device: str) -> str:
    """Which filesystems served O_DIRECT writes from the page cache on the device, as measured."""
    bad = run.ignores_direct(device)
    checked = sorted({fs for (d, fs, _s, _c), chk in run.checks.items() if d == device and chk.claim.direct
                      and chk.verdict is not DeviceVerdict.UNCHECKED}, key=units.natural_key)
    if not checked:
        return "No direct write was checked on this device (no device statistics)."
    if not bad:
        return (f"Every filesystem checked had its direct writes on the device when it acknowledged them (measured): "
                f"{', '.join(checked)}.")
    return ("Filesystems that ignore O_DIRECT for writes (measured: the device did not receive their direct "
            "writes during the job): " + "; ".join(
                f"{fs} ({', '.join(f'{chk.claim.case}: {chk.counters_text()}' for chk in chks)})"
                for fs, chks in bad.items()) +
            (f". Their direct writes on the device when acknowledged: {', '.join(f for f in checked if f not in bad)}."
             if set(checked) - set(bad) else "."))


def lab_bound_method(run: RunData) -> str:
    """How lab-bound figures are found and treated, for the report's methods text."""
    if not run.paced:
        return ("This run ran the emulator without its delays (--pace none): its times and rates are not "
                "device figures, and no figure is checked for being lab-bound.")
    return (f"A timed figure is lab-bound when the flash device was busy less than "
            f"{run.weights.lab_bound_below:g} % of the figure's own duration (the emulator's busy time in the "
            f"figure's statistics phase over fio's run time or the measured time; for fio jobs paced by their own "
            f"rate or think time, over the time their requests were outstanding): the device sat idle waiting "
            f"for the lab, so the lab set the figure. Lab-bound figures are marked in tables and figures; a "
            f"criterion lab-bound for any filesystem on a device scores nobody there and decides nothing. "
            f"Figures without a statistics phase of their own (mount times, appio's operations) are not checked.")


def overview_table(recs: dict[str, list[Ranking]]) -> Table:
    """One row per device and use case: winner, runner-up, scores, what was not measured."""
    cols = [Column("device", numeric=False), Column("use case", numeric=False), Column("choose", numeric=False),
            Column("score", "0–1"), Column("runner-up", numeric=False), Column("runner-up score", "0–1"),
            Column("criteria measured", "count"), Column("not measured", numeric=False),
            Column("not eligible", numeric=False)]
    rows = []
    for device, rankings in recs.items():
        for r in rankings:
            w, ru = r.winner, r.runner_up
            if r.measured:
                nm = ", ".join([r.use_case.criteria[i].label for i, _why in r.not_measured] +
                               [f"{r.use_case.criteria[i].label} ({NOT_OBSERVABLE})" for i in r.not_observable])
            else:
                nm = f"all {len(r.use_case.criteria)} criteria (none was measured on {device})"
            choice = r.choice_text()
            ne = ", ".join(f"{e.fs} ({', '.join(c.req.name.replace('_', ' ') for c in e.failed)})"
                           for e in r.not_eligible)
            rows.append([
                Cell(device, device), Cell(r.use_case.title, r.use_case.title),
                Cell(choice, w.fs if w else "", cls="" if w else "missing",
                     title=undecided_text(r).replace("`", "") if r.undecided else ""),
                Cell(f"{w.score:.2f}" if w else "—", round(w.score, 6) if w else None),
                Cell(ru.fs if ru else "—", ru.fs if ru else ""),
                Cell(f"{ru.score:.2f}" if ru else "—", round(ru.score, 6) if ru else None),
                Cell(f"{len(r.measured)} of {len(r.use_case.criteria) - len(r.not_applicable)}", len(r.measured)),
                Cell(nm or "—", nm, cls="missing" if nm else ""),
                Cell(ne or "—", ne, title=not_eligible_text(r).replace("`", ""))])
    return Table("tab-recommendation", "Recommendation at a glance", cols, rows,
                 "details, deciding figures and trade-offs per use case below")


def weights_table(run: RunData) -> Table:
    cols = [Column("use case", numeric=False), Column("criterion", numeric=False), Column("weight", "relative"),
            Column("better", numeric=False), Column("study / case / metric", numeric=False)]
    rows = []
    for uc in run.weights.use_cases:
        for c in uc.criteria:
            rows.append([Cell(uc.title, uc.title), Cell(c.label, c.label), Cell(f"{c.weight:g}", c.weight),
                         Cell(c.better, c.better), Cell(c.describe(), c.describe())])
    return Table("tab-weights", f"Recommendation weights ({run.weights.path.name})", cols, rows,
                 "edit the TOML file to change them; the report reads it every time it runs")


def summary_data(recs: dict[str, list[Ranking]]) -> dict:
    out: dict = {}
    for device, rankings in recs.items():
        d = out.setdefault(device, {})
        for r in rankings:
            uc = r.use_case
            d[uc.id] = {
                "title": uc.title,
                "decided": r.decided,
                "winner": r.winner.fs if r.winner else None,
                "runner_up": r.runner_up.fs if r.runner_up else None,
                "deciding": deciding_text(r),
                "not_decided": [{"criterion": uc.criteria[u.criterion].label if u.criterion >= 0 else "requirement",
                                 "why": u.why,
                                 "command": u.command} for u in r.undecided],
                "ranking_partial": bool(r.entries) and not r.decided,
                "ranking": [{"fs": e.fs, "score": round(e.score, 4), "coverage": round(e.coverage, 4),
                             "complete": e.complete, "text": e.text,
                             "criteria": {uc.criteria[i].label: _value_data(e, i) for i in r.measured}}
                            for e in r.entries],
                "not_measured": [{"criterion": uc.criteria[i].label, "why": why} for i, why in r.not_measured],
                "not_applicable": [{"criterion": uc.criteria[i].label, "why": why} for i, why in r.not_applicable],
                "not_candidates": [{"fs": fs, "why": why} for fs, why in r.not_candidates],
                "not_eligible": [{"fs": e.fs, "lacks": [c.req.name for c in e.failed], "why": e.text(),
                                  "replay": [c.reproducer.command for c in e.failed if c.reproducer]}
                                 for e in r.not_eligible],
                "lab_bound": [{"criterion": uc.criteria[i].label,
                               "device_busy_pct": {fs: _round(b.util.mean) for fs, b in items}}
                              for i, items in r.lab_bound.items()],
                "cached": [{"criterion": uc.criteria[i].label,
                            "received_pct": {fs: _round(chk.received_pct) for fs, chk in items},
                            "why": {fs: chk.text() for fs, chk in items}}
                           for i, items in r.cached.items()],
                "not_observable": [uc.criteria[i].label for i in r.not_observable],
            }
    return out


def _value_data(e: Entry, i: int) -> dict:
    v = e.values[i]
    if v.status is not Measured.OK:
        return {"status": v.status, "why": v.why}
    out = {"value": _round(v.value), "unit": v.unit,
           "score": round(e.scores[i], 4) if i in e.scores else None}
    if v.lab:
        out["lab_bound"] = {"device_busy_pct": _round(v.lab.util.mean), "basis": v.lab.basis}
    if v.cached:
        out["cached"] = {"received_pct": _round(v.cached.received_pct), "why": v.cached.text()}
    return out


def _round(v: float | None) -> float | None:
    if v is None:
        return None
    return float(f"{v:.6g}")
