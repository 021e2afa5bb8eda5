"""How a filesystem scales (studies/views.Scaling: mixed's writers × vCPUs): a figure of the
metric against the count with one line per filesystem and vCPU count beside the ratio to the
fewest vCPUs, a table of both, and one paragraph naming who scales best."""

from __future__ import annotations

import math
from dataclasses import dataclass

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..studies.views import Scaling
from . import units
from .doc import Cell, Column, Figure, Paragraph, Table
from .frame import LabMarks, finish_chart
from .load import RunData, Stat
from .svg import new_figure

STYLES = ("-", "--", ":", "-.")


@dataclass(frozen=True)
class Grid:
    """A study's scaling figures on one target: value (fs, line, x) -> Stat, and the case of each."""

    xs: list[int]
    lines: list[int]
    fss: list[str]
    cases: dict[tuple[int, int], str]  # (line, x) -> case label

    def ratio(self, run: RunData, device: str, study: str, metric: str, fs: str, num: tuple[int, int],
              den: tuple[int, int]) -> float | None:
        a = run.get(device, fs, study, self.cases.get(den, ""), metric)
        b = run.get(device, fs, study, self.cases.get(num, ""), metric)
        return b.mean / a.mean if a is not None and b is not None and a.mean > 0 else None


def grid(run: RunData, device: str, study: str, spec: Scaling) -> Grid | None:
    cases = {}
    for c in run.cases(device, study):
        p = spec.label.parse(c)
        if p is not None:
            cases[(p[spec.lines], p[spec.x])] = c
    if not cases:
        return None
    fss = [fs for fs in run.filesystems(device, study)
           if any(run.get(device, fs, study, c, spec.metric) for c in cases.values())]
    return Grid(sorted({x for _l, x in cases}), sorted({ln for ln, _x in cases}), fss, cases) if fss else None


def skipped_note(run: RunData, device: str, study: str, spec: Scaling) -> str:
    """Which line values the plan left out on this target, and why ('' if none)."""
    whys: dict[str, set[int]] = {}
    for s in run.skipped(device, study):
        whys.setdefault(str(s.get("why")), set()).add(int(s.get("cpus") or 0))
    return "; ".join(f"{', '.join(spec.line_words.format(n) for n in sorted(ns))} not run: {why}"
                     for why, ns in sorted(whys.items()))


def figure(ctx, device: str, study: str, spec: Scaling) -> Figure | None:
    run = ctx.run
    g = grid(run, device, study, spec)
    if g is None:
        return None
    unit = run.unit(device, study, spec.metric)
    base = g.lines[0]
    ratios = len(g.lines) > 1
    ns: list[int] = []
    lab = LabMarks(run, lambda case, fs: run.lab_bound(device, fs, study, case, spec.metric),
                   Line2D([], [], marker="o", ls="", color="#444444", mfc="white", label="lab-bound"))
    with new_figure(11.0 if ratios else 6.5, 3.6) as fig:
        axes = fig.subplots(1, 2 if ratios else 1, squeeze=False)[0]
        ax = axes[0]
        for fs in g.fss:
            for i, line in enumerate(g.lines):
                pts = [(x, st, g.cases[(line, x)]) for x in g.xs
                       if (line, x) in g.cases and (st := run.get(device, fs, study, g.cases[(line, x)], spec.metric))]
                if not pts:
                    continue
                ax.plot([p[0] for p in pts], [units.to_display(p[1].mean, unit) for p in pts],
                        ls=STYLES[i % len(STYLES)], lw=1.3, color=ctx.colors[fs])
                for x, st, case in pts:
                    ns.append(st.n)
                    hollow = lab(case, fs) is not None
                    ax.plot([x], [units.to_display(st.mean, unit)], "o", ms=3.5, color=ctx.colors[fs],
                            mfc="white" if hollow else ctx.colors[fs])
        ax.set_ylim(bottom=0)
        ax.set_xticks(g.xs)
        ax.set_xlabel(spec.xlabel)
        ax.set_ylabel(f"{units.metric_label(spec.metric)} ({units.display_unit(unit)})")
        ax.set_title(f"{units.metric_label(spec.metric)} at once")
        if ratios:
            rax = axes[1]
            for fs in g.fss:
                for i, line in enumerate(g.lines[1:], start=1):
                    pts = [(x, r) for x in g.xs
                           if (r := g.ratio(run, device, study, spec.metric, fs, (line, x), (base, x))) is not None]
                    if pts:
                        rax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3.5,
                                 ls=STYLES[i % len(STYLES)], lw=1.3, color=ctx.colors[fs])
            rax.axhline(1.0, color="#444444", lw=0.7, ls=":")
            rax.set_xticks(g.xs)
            rax.set_xlabel(spec.xlabel)
            rax.set_ylabel(f"ratio to {spec.line_words.format(base)} (×)")
            rax.set_title(" and ".join(spec.line_words.format(v) for v in g.lines[1:]) +
                          f" / {spec.line_words.format(base)} (above 1: faster with more)")
        styles = [Line2D([], [], color="#444444", ls=STYLES[i % len(STYLES)], label=spec.line_words.format(v))
                  for i, v in enumerate(g.lines)]
        handles = [Patch(color=ctx.colors[f], label=f) for f in g.fss] + styles
        fig_id = units.slug("fig", device, study, "scaling")
        return finish_chart(ctx, fig, fig_id, spec.title, device, g.fss, study, ns, legend_fss=[], extra_handles=handles,
                       lab=lab, note=skipped_note(run, device, study, spec))


def table(run: RunData, device: str, study: str, spec: Scaling) -> Table | None:
    """Rows: filesystem × line value; the metric at each x, the last x over the first, and the
    ratio to the fewest-line row at each x."""
    g = grid(run, device, study, spec)
    if g is None:
        return None
    unit = run.unit(device, study, spec.metric)
    du = units.display_unit(unit)
    base, lo, hi = g.lines[0], g.xs[0], g.xs[-1]
    xw, lw = spec.x_words.format, spec.line_words.format
    cols = [Column("filesystem", numeric=False), Column(spec.nouns[1], numeric=False)]
    cols += [Column(f"{units.metric_label(spec.metric)} at {xw(x)}", du) for x in g.xs]
    if len(g.xs) > 1:
        cols.append(Column(f"{xw(hi)} / {lo}", "×"))
    if len(g.lines) > 1:
        cols += [Column(f"/ {lw(base)} at {xw(x)}", "×") for x in g.xs]
    rows = []
    for fs in g.fss:
        for line in g.lines:
            row = [Cell(fs, fs), Cell(spec.line_words.format(line), line)]
            for x in g.xs:
                st = run.get(device, fs, study, g.cases.get((line, x), ""), spec.metric)
                row.append(_value(st, unit))
            if len(g.xs) > 1:
                row.append(_ratio(g.ratio(run, device, study, spec.metric, fs, (line, hi), (line, lo))))
            if len(g.lines) > 1:
                row += [_ratio(g.ratio(run, device, study, spec.metric, fs, (line, x), (base, x))) if line != base
                        else Cell("—", None, cls="missing") for x in g.xs]
            rows.append(row)
    note = (f"{units.metric_label(spec.metric)} of all {spec.nouns[0]} together (mean over repeats); ratios above "
            f"1: faster with more {spec.nouns[0]} or more {spec.nouns[1]}")
    skipped = skipped_note(run, device, study, spec)
    if skipped:
        note += f"; {skipped}"
    return Table(units.slug("tab", device, study, "scaling"), f"{spec.title} — {device}", cols, rows, note)


def answer(run: RunData, device: str, study: str, spec: Scaling) -> Paragraph | None:
    """Who scales best with the count (at the fewest lines) and with the lines (at the largest count)."""
    g = grid(run, device, study, spec)
    if g is None or len(g.fss) < 2:
        return None
    base, lo, hi = g.lines[0], g.xs[0], g.xs[-1]
    parts = []
    if len(g.xs) > 1:
        r = {fs: v for fs in g.fss if (v := g.ratio(run, device, study, spec.metric, fs, (base, hi), (base, lo)))}
        if r:
            parts.append(f"with {spec.nouns[0]} ({spec.x_words.format(hi)} / {lo}, at "
                         f"{spec.line_words.format(base)}): " + _ranked(r))
    if len(g.lines) > 1:
        top = g.lines[-1]
        r = {fs: v for fs in g.fss if (v := g.ratio(run, device, study, spec.metric, fs, (top, hi), (base, hi)))}
        if r:
            parts.append(f"with {spec.nouns[1]} ({spec.line_words.format(top)} / {spec.line_words.format(base)}, "
                         f"at {spec.x_words.format(hi)}): " + _ranked(r))
    if not parts:
        return None
    bound = sum(1 for fs in g.fss for c in g.cases.values() if run.lab_bound(device, fs, study, c, spec.metric))
    caveat = (f" {bound} of the {len(g.fss) * len(g.cases)} figures are lab-bound (the device sat idle much of "
              f"the time): there the ratios say how the lab scales, not the filesystem." if bound else "")
    return Paragraph(f"Scaling of {units.metric_label(spec.metric)} " + "; ".join(parts) + "." + caveat,
                     cls="note")


def _ranked(r: dict[str, float]) -> str:
    return ", ".join(f"**{fs}** {units.ratio_text(v)}" if i == 0 else f"{fs} {units.ratio_text(v)}"
                     for i, (fs, v) in enumerate(sorted(r.items(), key=lambda kv: (-kv[1], kv[0]))))


def _value(st: Stat | None, unit: str) -> Cell:
    if st is None:
        return Cell("—", None, cls="missing")
    return Cell(units.fmt(st.mean, unit) + (f" ±{units.fmt(st.sd, unit)}" if st.n > 1 else ""),
                units.to_display(st.mean, unit), title=f"n={st.n}: " + ", ".join(units.fmt(v, unit) for v in st.values))


def _ratio(r: float | None) -> Cell:
    if r is None or not math.isfinite(r):
        return Cell("—", None, cls="missing")
    return Cell(units.ratio_text(r), round(r, 6))
