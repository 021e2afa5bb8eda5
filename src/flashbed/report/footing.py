"""The answer's footing: each use case's choice tested against the twin's assumptions.

A robust pass (`flashbed run --robust`, robust.py) ran each use case's decisive studies on
variants of the nominal twin (each assumption at the ends of its range, joint draws), each a
device of the run. Here each variant is ranked as the nominal twin is (recommend.rank, the
same requirements and weights): its own cells for the studies it ran, the nominal twin's for
the rest (which it did not run again: the report says so). Per use case:

- holds: every variant chooses the nominal winner; else depends on: the assumption whose
  end of range changes the choice, with the threshold where the winner's margin crosses zero
  (interpolated between the nominal value and that end, on the assumption's own scale) and the
  measurement of one's own part that settles it (devices/assumptions.py `measure`);
- the winner's margin (its score minus the best other eligible score) on the nominal twin
  against its spread over the variants: a margin inside the spread is a tie on this evidence;
- a tornado chart: each assumption's ends as a bar of the winner's margin, the joint draws as
  points, zero (where the choice changes) marked.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from ..devices.assumptions import PARAMS
from . import recommend as R
from . import units
from .doc import Cell, Column, Figure, Paragraph, Section, Table
from .load import RunData, aggregate
from .weights import UseCase

NONE_ELIGIBLE = "none eligible"  # recommend.Ranking.choice_text's words when every candidate fails a requirement


@dataclass(frozen=True)
class Point:
    """One variant's outcome for one use case."""

    variant: str
    kind: str  # low, high, draw (robust.VariantKind)
    values: dict[str, str]  # assumption -> its value here, as text (the others nominal)
    numbers: dict[str, Any]
    winner: str | None  # its choice (None: none there)
    margin: float | None  # the nominal winner's score minus the best other's (None: not ranked)
    why: str = ""  # the nominal winner not ranked there: why
    choice: str = ""  # its choice in words: the winner, "none eligible", "not decided"


@dataclass(frozen=True)
class Assumed:
    """A varied assumption as the manifest records it."""

    param: str
    label: str
    nominal: str
    low: str
    high: str
    source: str
    measure: str


@dataclass(frozen=True)
class Dependence:
    """An assumption whose end of range changes the choice."""

    assumed: Assumed
    at: Point  # the one-at-a-time variant that changes it
    threshold: str  # where the margin crosses zero ('' when it cannot be placed: eligibility)
    side: str  # "below" or "above" (the threshold's side the other winner is on)


@dataclass
class CaseFooting:
    use_case: UseCase
    winner: str | None
    runner_up: str | None
    margin: float | None
    points: list[Point] = field(default_factory=list)
    depends: list[Dependence] = field(default_factory=list)
    choice: str = ""  # the nominal twin's answer in words: its winner, or "none eligible"

    @property
    def tested(self) -> bool:
        """An answer to test: a winner, or none eligible (which a variant may change); a use case
        not decided for want of a measurement has none."""
        return bool(self.winner) or self.choice == NONE_ELIGIBLE

    @property
    def holds(self) -> bool:
        return bool(self.points) and all(p.winner == self.winner for p in self.points)

    @property
    def flips(self) -> list[Point]:
        return [p for p in self.points if p.winner != self.winner]

    @property
    def spread(self) -> tuple[float, float] | None:
        ms = [p.margin for p in self.points if p.margin is not None]
        return (min(ms), max(ms)) if ms else None


@dataclass
class DeviceFooting:
    device: str
    studies: list[str]  # what the variants ran
    assumed: dict[str, Assumed]  # the varied assumptions by param
    not_varied: dict[str, str]  # param -> why
    ruled_out: dict[str, dict[str, dict[str, Any]]]  # param -> end -> {end, kept, why}
    dropped: list[dict[str, Any]]  # variants dropped (their manifest records)
    unfinished: list[str]  # variants whose cells are not all in yet
    cases: list[CaseFooting] = field(default_factory=list)
    draws: int = 0

    @property
    def ran(self) -> int:
        return len({p.variant for c in self.cases for p in c.points})


def footing(run: RunData, recs: dict[str, list[R.Ranking]]) -> dict[str, DeviceFooting]:
    """The footing of each device of `recs` that had a robust pass (none: {})."""
    out = {}
    for device, rankings in recs.items():
        info = run.device_info(run.device_of(device)).get("robust")
        if info:
            out[device] = _device_footing(run, device, rankings, info)
    return out


def _device_footing(run: RunData, device: str, rankings: list[R.Ranking], info: dict[str, Any]) -> DeviceFooting:
    label = run.device_of(device)
    fp = {a["param"]: a for a in (run.device_info(label).get("footing") or {}).get("assumptions", [])}
    # the words of today's catalogue where it knows the field (the manifest keeps those of the run's day)
    words = {p: (PARAMS[p].label, PARAMS[p].measure) if p in PARAMS else (fp[p]["label"], fp[p]["measure"])
             for p in fp}
    assumed = {p: Assumed(p, words[p][0], fp[p]["nominal"], fp[p]["low"], fp[p]["high"], fp[p]["source"],
                          words[p][1]) for p in info.get("varied", []) if p in fp}
    mine = defaultdict(list)  # variant label -> its cells
    plain = {c.key.fs for c in run.cells}  # a tuned answer's option set there is report/tuning.py's
    for c in run.variant_cells:
        v = (run.device_info(c.key.device).get("variant") or {})
        if v.get("of") == label and c.key.fs in plain:
            mine[c.key.device].append(c)
    rerun = sorted({c.key.study for cells in mine.values() for c in cells})
    nominal = [c for c in run.cells if c.key.device == label]
    wanted = {(c.key.fs, c.key.study, c.key.case, c.key.repeat) for c in nominal if c.key.study in rerun}
    df = DeviceFooting(device, rerun, assumed, dict(info.get("not_varied") or {}), dict(info.get("ruled_out") or {}),
                       [v for v in info.get("variants", []) if v.get("dropped")], [], draws=int(info.get("draws", 0)))
    views: dict[str, tuple[dict, RunData]] = {}
    for v in info.get("variants", []):
        if v.get("dropped"):
            continue
        vlabel = f"{label}~{v['name']}"
        cells = mine.get(vlabel, [])
        have = {(c.key.fs, c.key.study, c.key.case, c.key.repeat) for c in cells}
        if not cells or not wanted <= have:
            df.unfinished.append(v["name"])
            continue
        studies = {c.key.study for c in cells}
        results = [c for c in nominal if c.key.study not in studies] + \
            [replace(c, key=replace(c.key, device=label)) for c in cells]
        views[v["name"]] = (v, aggregate(run.root, run.manifest, results, run.weights))
    for r in rankings:
        df.cases.append(_case(r, device, views, assumed))
    return df


def _case(r: R.Ranking, device: str, views: dict[str, tuple[dict, RunData]],
          assumed: dict[str, Assumed]) -> CaseFooting:
    w = r.winner.fs if r.winner else None
    cf = CaseFooting(r.use_case, w, r.runner_up.fs if r.runner_up else None, _margin(r, w), choice=r.choice_text())
    for name, (v, view) in views.items():
        rv = R.rank(view, device, r.use_case)
        why = ""
        if w and not any(e.fs == w for e in rv.entries):
            ne = next((e for e in rv.not_eligible if e.fs == w), None)
            why = f"{w} not eligible: lacks {ne.text()}" if ne else f"{w} not ranked"
        cf.points.append(Point(name, v["kind"], v["values"], v.get("numbers", {}),
                               rv.winner.fs if rv.winner else None, _margin(rv, w) if w else None, why,
                               rv.choice_text()))
    if cf.tested:
        cf.depends = _depends(cf, assumed)
    return cf


def _margin(r: R.Ranking, fs: str | None) -> float | None:
    """fs's score minus the best other complete entry's (None: fs not ranked, or alone)."""
    mine = next((e for e in r.entries if e.fs == fs and e.complete), None)
    others = [e.score for e in r.entries if e.fs != fs and e.complete]
    if mine is None or not others:
        return None
    return mine.score - max(others)


def _depends(cf: CaseFooting, assumed: dict[str, Assumed]) -> list[Dependence]:
    out = []
    for p in cf.points:
        if p.kind == "draw" or p.winner == cf.winner or len(p.values) != 1:
            continue
        param = next(iter(p.values))
        a = assumed.get(param)
        if a is None:
            continue
        x1 = p.numbers.get(param)
        threshold, side = "", "below" if p.kind == "low" else "above"
        if isinstance(x1, bool):
            threshold = ""
        elif p.margin is not None and cf.margin is not None and cf.margin > 0 > p.margin:
            x0 = _parse_like(a.nominal)
            t = cf.margin / (cf.margin - p.margin)
            if x0 is not None and x0 > 0 and x1 > 0 and max(x0, x1) / min(x0, x1) >= 4:
                x = math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0)))
            elif x0 is not None:
                x = x0 + t * (x1 - x0)
            else:
                x = None
            threshold = _like(a, x) if x is not None else ""
        out.append(Dependence(a, p, threshold, side))
    return out


def _parse_like(text: str) -> float | None:
    """A value's number from its text ('24M', '10 ms', '0.07')."""
    from ..sizes import parse_size
    head = text.split()[0] if text else ""
    try:
        return float(parse_size(head))
    except Exception:
        try:
            return float(head)
        except ValueError:
            return None


def _like(a: Assumed, x: float) -> str:
    """x written as the assumption's values are."""
    if a.nominal[-1:] in "KMGT" and a.nominal[:-1].isdigit():
        for unit, n in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
            if x >= n:
                return f"{x / n:.3g}{unit}"
        return f"{x:.0f}"
    unit = a.nominal.split()[1] if len(a.nominal.split()) > 1 else ""
    return f"{x:.3g}" + (f" {unit}" if unit else "")


# ---- text ------------------------------------------------------------------------------------

def answer_text(df: DeviceFooting | None, use_case: UseCase) -> str:
    """The first screen's footing of one use case ('' without a robust pass)."""
    if df is None:
        return ""
    cf = next((c for c in df.cases if c.use_case.id == use_case.id), None)
    if cf is None or not cf.tested:
        return ""
    n = len(cf.points)
    if not n:
        return " Footing: no variant of this part has finished yet (" + \
            (f"{len(df.unfinished)} to run: `flashbed run` the same command again" if df.unfinished else "none kept") + ")."
    margin = _margin_text(cf)
    if df.unfinished:  # counted against the plan: a holding answer over the few in is no footing yet
        left = f" ({len(df.unfinished)} of {n + len(df.unfinished)} planned not finished: `flashbed run` the same " \
               f"command again)"
        held = sum(1 for p in cf.points if p.winner == cf.winner)
        return f" Footing unfinished: holds in {held} of the {n} finished variants of this part{left}{margin}."
    if cf.holds:
        return f" **Holds in {n} of {n} variants of this part**{margin}."
    parts = []
    for d in cf.depends:
        value = d.at.numbers.get(d.assumed.param)
        if d.threshold:
            where = f"{d.side} {d.threshold}"
        elif isinstance(value, bool):
            where = "with it" if value else "without it"
        else:
            where = f"at {d.at.values[d.assumed.param]}"
        other = d.at.winner or "no filesystem"
        because = f" ({d.at.choice}: {d.at.why})" if not d.at.winner and d.at.why else \
            f" ({d.at.choice})" if not d.at.winner else f" ({d.at.why})" if d.at.why else ""
        parts.append(f"**depends on {d.assumed.label}** (`{d.assumed.param}`, nominal {d.assumed.nominal}): {where} "
                     f"the winner is **{other}**{because}; measure it on your part: {_short(d.assumed.measure)}")
    draws = [p for p in cf.flips if p.kind == "draw"]
    if draws and not parts:
        p = draws[0]
        parts.append(f"**depends on the assumptions together**: {len(draws)} of "
                     f"{sum(1 for q in cf.points if q.kind == 'draw')} joint draws choose "
                     f"{', '.join(sorted({q.winner or q.choice for q in draws}))} (e.g. {p.variant}: "
                     + ", ".join(f"{k} {v}" for k, v in p.values.items()) + ")")
    held = sum(1 for p in cf.points if p.winner == cf.winner)
    return f" Holds in {held} of {n} variants of this part; " + "; ".join(parts) + f"{margin}."


def _short(measure: str) -> str:
    """How to measure it, up to its first detail (the Footing section's table has it whole)."""
    cut = min((i for i in (measure.find(": "), measure.find(" (")) if i > 0), default=len(measure))
    return measure[:cut] + (" (see Footing)" if cut < len(measure) else "")


def _margin_text(cf: CaseFooting) -> str:
    """The nominal margin against its spread over the variants; a margin the scores do not tell
    apart (under STRONG, the report's smallest difference worth naming) or one the assumptions
    move by more than its size is said to be one."""
    if cf.margin is None:
        return ""
    sp = cf.spread
    head = f" (margin {cf.margin:.3f} over {cf.runner_up}"
    if sp is None:
        return head + ")"
    note = ""
    if cf.margin < R.STRONG - 1:
        note = f" — under {R.STRONG - 1:.0%} of the score: a tie"
    elif sp[0] > 0 and sp[1] - sp[0] > cf.margin:
        note = " — the assumptions move it by more than its size"
    return head + f"; across variants {sp[0]:.3f} to {sp[1]:.3f}{note})"


def section(run: RunData, feet: dict[str, DeviceFooting], colors: dict[str, str]) -> Section | None:
    """The report's section on the answers' footing (None without a robust pass)."""
    if not feet:
        return None
    sec = Section("footing", "Footing: the answer against the twin's assumptions")
    sec.add(Paragraph(
        "A robust pass ran each use case's decisive studies again on variants of the twin: each assumption "
        "of its preset at either end of its range (the others nominal), and joint draws of all of them (a "
        "Latin hypercube). Every variant's fitted firmware times were solved again so it still gives the "
        "part's published rates; a variant that cannot is no plausible twin and was dropped. Each variant "
        "is ranked as the nominal twin, on its own figures for the studies it ran and the nominal twin's "
        "for the others. The margin is the nominal winner's score minus the best other eligible score."))
    for device, df in feet.items():
        ds = Section(units.slug("footing", device), f"Device {device}")
        ds.add(Paragraph(
            f"{df.ran} variants ran {', '.join(df.studies) or 'nothing yet'}"
            + (f"; {len(df.unfinished)} not finished ({', '.join(df.unfinished)}): run the same command again"
               if df.unfinished else "") + "; the other criteria are the nominal twin's figures."))
        if df.ruled_out:
            ds.add(Paragraph("Ruled out by the published rates: " + "; ".join(
                f"`{p}` {end['end']}" + (f" (varied to {end['kept']} instead)" if end.get("kept") else
                                          " (not varied that way)") + f": {end['why']}"
                for p, ends in df.ruled_out.items() for _k, end in ends.items()) + "."))
        other = [v for v in df.dropped if not v["dropped"].startswith("the same device") and
                 not any(v["name"].startswith(p.rsplit(".", 1)[1] + "-") for p in df.ruled_out)]
        if other:
            ds.add(Paragraph("Dropped (no plausible twin): " + "; ".join(f"{v['name']} ({v['dropped']})"
                                                                         for v in other) + ".", cls="missing"))
        if df.not_varied:
            ds.add(Paragraph("Declared, not varied: " + "; ".join(f"`{p}` ({why})" for p, why in df.not_varied.items())
                             + ".", cls="note"))
        undecided = [cf.use_case.title for cf in df.cases if not cf.tested]
        if undecided:
            ds.add(Paragraph("Not decided on the nominal twin, so nothing to test: " + ", ".join(undecided) + ".",
                             cls="missing"))
        for cf in df.cases:
            if not cf.tested:
                continue
            cs = Section(units.slug("footing", device, cf.use_case.id), cf.use_case.title)
            cs.add(Paragraph((f"Choice **{cf.winner}**. " if cf.winner else "No filesystem is eligible on the nominal "
                              "twin. ") + answer_text(df, cf.use_case).strip()))
            fig = tornado(run, device, df, cf)
            if fig:
                cs.add(fig)
            if cf.points:
                cs.add(_points_table(device, cf))
            ds.add(cs)
        ds.add(_assumptions_table(device, df))
        sec.add(ds)
    return sec


def _points_table(device: str, cf: CaseFooting) -> Table:
    cols = [Column("variant", numeric=False), Column("what it changes", numeric=False),
            Column("choice", numeric=False), Column("margin of " + (cf.winner or "—"), "score")]
    rows = []
    for p in cf.points:
        what = ", ".join(f"{k} {v}" for k, v in p.values.items())
        rows.append([Cell(p.variant, p.variant), Cell(what, what),
                     Cell(p.choice or "—", p.winner or "", cls="" if p.winner == cf.winner else "bad"),
                     Cell(f"{p.margin:.3f}" if p.margin is not None else (p.why or "—"), p.margin)])
    return Table(units.slug("footing", device, cf.use_case.id, "variants"), f"{cf.use_case.title} — variants",
                 cols, rows, "each variant ranked as the nominal twin; margin below 0: another filesystem wins")


def _assumptions_table(device: str, df: DeviceFooting) -> Table:
    cols = [Column("assumption", numeric=False), Column("nominal", numeric=False), Column("range", numeric=False),
            Column("source of the range", numeric=False), Column("how to measure it on your part", numeric=False)]
    rows = [[Cell(f"{a.label} ({a.param})", a.param), Cell(a.nominal, a.nominal), Cell(f"{a.low} – {a.high}", a.low),
             Cell(a.source, a.source), Cell(a.measure, a.measure)] for a in df.assumed.values()]
    return Table(units.slug("footing", device, "assumptions"), f"{device}: the assumptions varied", cols, rows,
                 "from the preset's [assumptions] table (`flashbed devices show`)")


# ---- the tornado chart ------------------------------------------------------------------------

def tornado(run: RunData, device: str, df: DeviceFooting, cf: CaseFooting) -> Figure | None:
    """Each assumption's effect on the winner's margin: a bar from its low end's margin to its high
    end's, the nominal margin and zero (where the choice changes) marked, the joint draws as points."""
    if cf.winner is None or cf.margin is None or not cf.points:
        return None
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from .svg import finish, new_figure, wrap_label
    rows = []
    for param, a in df.assumed.items():
        ends = {p.kind: p for p in cf.points if p.kind in ("low", "high") and set(p.values) == {param}}
        if ends:
            rows.append((a, ends))
    draws = [p for p in cf.points if p.kind == "draw"]
    known = [m for p in cf.points if (m := p.margin) is not None] + [cf.margin, 0.0]
    lo, hi = min(known), max(known)
    if hi - lo < 0.1:  # room for the labels on a chart where little moves
        lo, hi = min(lo, cf.margin - 0.05), max(hi, cf.margin + 0.05)
    pad = max(0.02, (hi - lo) * 0.12)
    floor = lo - pad  # where a variant the winner is not ranked in is drawn

    def x(p: Point) -> float:
        return p.margin if p.margin is not None else floor

    def span(row) -> float:
        xs = [x(p) for p in row[1].values()]
        return max(abs(v - cf.margin) for v in xs)
    rows.sort(key=span, reverse=True)
    def span_text(a: Assumed, ends: dict[str, Point]) -> str:
        """The values varied: the range's ends, or as far toward one as the published rates allowed."""
        lo = ends["low"].values[a.param] if "low" in ends else a.nominal
        hi = ends["high"].values[a.param] if "high" in ends else a.nominal
        ruled = [e for e, v in ((a.low, lo), (a.high, hi)) if v != e]
        return f"({lo} – {hi}" + (f"; {', '.join(ruled)} ruled out" if ruled else "") + ")"
    labels = [wrap_label(a.label, 30) + "\n" + span_text(a, ends) for a, ends in rows] + \
        (["joint draws"] if draws else [])
    colors = {"low": "#4c72b0", "high": "#dd8452"}
    with new_figure(8.0, 0.5 * len(labels) + 1.7) as fig:
        ax = fig.subplots()
        ax.grid(True, axis="x", alpha=0.3)
        ax.grid(False, axis="y")
        for i, (a, ends) in enumerate(rows):
            if all(p.margin is not None and abs(p.margin - cf.margin) < 5e-4 for p in ends.values()):
                vals = " or ".join(p.values[a.param] for p in ends.values())
                ax.text(cf.margin, i, f"  no change at {vals}", va="center", ha="left", fontsize=7, color="#555555")
                continue
            for kind, p in ends.items():
                ax.barh(i, x(p) - cf.margin, left=cf.margin, height=0.55, color=colors[kind],
                        hatch="//" if p.margin is None else None, edgecolor="#333333" if p.margin is None else None)
                txt = p.values[a.param] + ("" if p.winner == cf.winner else f" → {p.winner or p.choice}")
                if p.margin is None:  # the bar runs to the axis: its words go right of the nominal line
                    ax.text(cf.margin, i, f" {txt} ({cf.winner} not ranked)", va="center", ha="left", fontsize=7)
                    continue
                ha = "left" if x(p) >= cf.margin else "right"
                ax.text(x(p), i, f" {txt} ", va="center", ha=ha, fontsize=7)
        if draws:
            j = len(rows)
            ax.scatter([x(p) for p in draws], [j] * len(draws), marker="o", s=18, color="#55a868", zorder=3)
        ax.axvline(cf.margin, color="#333333", lw=1.0)
        ax.axvline(0, color="#c44e52", lw=1.0, ls="--")
        ax.set_yticks(range(len(labels)), labels)
        ax.set_ylim(len(labels) - 0.4, -0.6)  # top to bottom, clear of the axis
        ax.set_xlim(floor - pad * 0.5, hi + pad)
        ax.set_xlabel(f"margin of {cf.winner} over the best other eligible filesystem (score, 0–1)")
        handles = [Patch(color=colors["low"], label="low end of range"), Patch(color=colors["high"], label="high end"),
                   Line2D([], [], color="#333333", label=f"nominal twin ({cf.margin:.3f})"),
                   Line2D([], [], color="#c44e52", ls="--", label="0: the choice changes")]
        if draws:
            handles.append(Line2D([], [], marker="o", ls="", color="#55a868", label="joint draws"))
        fig_id = units.slug("fig", "tornado", device, cf.use_case.id)
        footer = (f"{device}: {cf.use_case.title}. Each variant ranked as the nominal twin (its own "
                  f"{', '.join(df.studies)}, the nominal twin's other figures); hatched: {cf.winner} not ranked there.")
        return finish(fig, fig_id, f"{cf.use_case.title}: the margin of {cf.winner} across the twin's assumptions",
                      handles, footer, ncols=5)
