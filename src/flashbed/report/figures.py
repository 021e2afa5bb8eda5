"""Charts of the report: what each study's results look like as figures.

Every chart is drawn with matplotlib through svg.py (deterministic inline SVG with
its provenance footer). What a study gets is the study's own declaration
(Study.figures, outcome_tables; studies/views.py), else a default for its shape.
"""

from __future__ import annotations

import math
from typing import Callable

from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from ..studies.base import OutcomeTable, claimed_metrics
from ..studies.views import Bars, Curves, Latency, Scaling, TopList
from . import catalog, scaling, units
from .doc import Figure
from .frame import LAB_HATCH, Ctx, LabMarks, finish_chart
from .load import Busy, RunData, Stat
from .svg import finish, new_figure, wrap_label

_FS_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
              "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#8c6d31", "#7b4173", "#3182bd"]
_GOOD_COLORS = ["#1a9850", "#91cf60", "#d9ef8b", "#66bd63"]
_BAD_COLORS = ["#fee08b", "#fdae61", "#f46d43", "#d73027", "#a50026", "#762a83", "#542788", "#40004b"]
FAIL_COLOR = "#b2182b"

MAX_GROUPS_PER_ROW = 10


def fs_colors(names: list[str]) -> dict[str, str]:
    """One stable colour per filesystem variant across the whole report."""
    return {n: _FS_COLORS[i % len(_FS_COLORS)] for i, n in enumerate(sorted(set(names), key=units.natural_key))}


def _chunks(items: list[str]) -> list[list[str]]:
    if len(items) <= MAX_GROUPS_PER_ROW:
        return [items]
    rows = math.ceil(len(items) / MAX_GROUPS_PER_ROW)
    per = math.ceil(len(items) / rows)
    return [items[i:i + per] for i in range(0, len(items), per)]


def _use_log(values: list[float]) -> bool:
    pos = [v for v in values if v > 0]
    return len(pos) >= 2 and max(pos) / min(pos) > 50


def _grouped_bars(ax, groups: list[str], series: list[str], colors: dict[str, str],
                  value: Callable[[str, str], Stat | None], failed: Callable[[str, str], str],
                  unit: str, log: bool, lab: Callable[[str, str], Busy | None] | None = None) -> list[int]:
    """Bars: one group per x label, one bar per series; error bars = min-max over repeats.
    Bars `lab` calls lab-bound are hatched and labelled with the device's busy share."""
    ns: list[int] = []
    n = max(len(series), 1)
    width = 0.8 / n
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for j, s in enumerate(series):
        xs, hs, lo, hi, hatch = [], [], [], [], []
        for i, g in enumerate(groups):
            x = i - 0.4 + width * (j + 0.5)
            st = value(g, s)
            if st is None or (log and st.mean <= 0):
                why = failed(g, s)
                if why:
                    ax.text(x, 0.02, why, transform=trans, rotation=90, fontsize=6, color=FAIL_COLOR,
                            ha="center", va="bottom")
                continue
            m = units.to_display(st.mean, unit)
            xs.append(x)
            hs.append(m)
            lo.append(m - units.to_display(st.lo, unit))
            hi.append(units.to_display(st.hi, unit) - m)
            ns.append(st.n)
            busy = lab(g, s) if lab else None
            hatch.append(LAB_HATCH if busy else "")
            if busy:
                ax.text(x, units.to_display(st.hi, unit), f" lab {min(busy.util.mean, 100):.0f}%", rotation=90,
                        fontsize=5.5, color="#333333", ha="center", va="bottom")
        if not xs:
            continue
        yerr = [lo, hi] if any(v > 0 for v in lo + hi) else None
        ax.bar(xs, hs, width * 0.95, color=colors[s], yerr=yerr, hatch=hatch if any(hatch) else None,
               edgecolor="white" if any(hatch) else None, linewidth=0,
               error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "#222222"})
    ax.set_xticks(range(len(groups)), [wrap_label(g) for g in groups])
    ax.set_xlim(-0.5, len(groups) - 0.5)
    if log:
        ax.set_yscale("log")
    return ns


def _shared_ylim(ax, stats: list[Stat], unit: str, log: bool) -> None:
    """The same y range on every row of one metric, so rows compare at a glance."""
    hi = [units.to_display(s.hi, unit) for s in stats]
    lo = [units.to_display(s.lo, unit) for s in stats if s.lo > 0]
    if not hi or max(hi) <= 0:
        return
    if log and lo:
        ax.set_ylim(min(lo) / 1.4, max(hi) * 1.4)
    elif not log:
        ax.set_ylim(min(0.0, min(units.to_display(s.lo, unit) for s in stats)), max(hi) * 1.08)


def _failed_text(run: RunData, device: str, study: str) -> Callable[[str, str], str]:
    def f(case: str, fs: str) -> str:
        fl = run.failures_for(device, fs, study, case)
        return fl[0].status if fl else ""
    return f


def bars_figure(ctx: Ctx, device: str, study: str, metrics: list[str], title: str, kind: str,
                cases: list[str] | None = None) -> Figure | None:
    """Grouped bars: cases on x, filesystems as bars, one row per metric (and per chunk of cases)."""
    run = ctx.run
    cases = cases if cases is not None else run.cases(device, study)
    fss = run.filesystems(device, study)
    metrics = [m for m in metrics if any(run.get(device, fs, study, c, m) for fs in fss for c in cases)]
    if not metrics or not cases or not fss:
        return None
    rows = [(m, chunk) for m in metrics for chunk in _chunks(cases)]
    width = min(11.0, max(6.0, 0.25 * len(fss) * min(len(cases), MAX_GROUPS_PER_ROW) + 2.5))
    ns: list[int] = []
    fig_id = units.slug("fig", device, study, kind)
    lab = LabMarks(run, lambda c, fs: None)
    with new_figure(width, 2.3 * len(rows) + 1.1) as fig:
        axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
        for ax, (m, chunk) in zip(axes, rows):
            unit = run.unit(device, study, m)
            stats = [s for fs in fss for c in cases if (s := run.get(device, fs, study, c, m))]
            log = _use_log([s.mean for s in stats])
            lab.find = lambda c, fs, m=m: run.lab_bound(device, fs, study, c, m)
            ns += _grouped_bars(ax, chunk, fss, ctx.colors, lambda c, fs, m=m: run.get(device, fs, study, c, m),
                                _failed_text(run, device, study), unit, log, lab)
            _shared_ylim(ax, stats, unit, log)
            ax.set_ylabel(f"{units.metric_label(m)} ({units.display_unit(unit) or 'value'})")
        return finish_chart(ctx, fig, fig_id, title, device, fss, study, ns, lab=lab)


def metric_panels_figure(ctx: Ctx, device: str, study: str, case: str, metrics: list[str], title: str,
                         kind: str) -> Figure | None:
    """One small panel per metric (own unit), filesystems as bars: for single-case studies."""
    run = ctx.run
    fss = run.filesystems(device, study)
    metrics = [m for m in metrics if any(run.get(device, fs, study, case, m) for fs in fss)]
    if not metrics:
        return None
    ncol = min(len(metrics), 3)
    nrow = math.ceil(len(metrics) / ncol)
    ns: list[int] = []
    fig_id = units.slug("fig", device, study, kind)
    lab = LabMarks(run, lambda _g, fs: None)
    with new_figure(min(11.0, 3.2 * ncol + 0.5), 2.4 * nrow + 1.1) as fig:
        axes = fig.subplots(nrow, ncol, squeeze=False).ravel()
        for ax, m in zip(axes, metrics):
            unit = run.unit(device, study, m)
            lab.find = lambda _g, fs, m=m: run.lab_bound(device, fs, study, case, m)
            ns += _grouped_bars(ax, [""], fss, ctx.colors, lambda _g, fs, m=m: run.get(device, fs, study, case, m),
                                lambda _g, fs: (fl[0].status if (fl := run.failures_for(device, fs, study, case))
                                                else ""), unit, False, lab)
            ax.set_xticks([])
            ax.set_title(units.metric_label(m))
            ax.set_ylabel(units.display_unit(unit) or "value")
        for ax in axes[len(metrics):]:
            ax.set_visible(False)
        return finish_chart(ctx, fig, fig_id, title, device, fss, study, ns, lab=lab)


def curve_figures(ctx: Ctx, device: str, study: str, spec: Curves) -> list[Figure]:
    """Metrics against each of the spec's axes in turn (e.g. mount and UBI attach time
    vs fill level and vs device size), one panel per metric and panel value."""
    run = ctx.run
    parsed = {c: p for c in run.cases(device, study) if (p := spec.label.parse(c)) is not None}
    if not parsed:
        return []
    values = {a.field: sorted({p[a.field] for p in parsed.values()}) for a in spec.axes}
    panels = [v for v in spec.panel_values if any(p[spec.panels] == v for p in parsed.values())]
    metrics = [m for m in spec.metrics if m in run.metrics(device, study)]
    fss = run.filesystems(device, study)
    out = []
    for axis in spec.axes:
        xs = values[axis.field]
        if len(xs) < 2 or not metrics:
            continue
        # the other axes at their largest value
        fixed = {a.field: max(values[a.field]) for a in spec.axes if a is not axis}
        ns: list[int] = []
        fixed_txt = ", ".join(a.fixed.format(fixed[a.field]) for a in spec.axes if a is not axis)
        title = f"{spec.title} vs {axis.words} ({fixed_txt})"
        fig_id = units.slug("fig", device, study, f"vs-{axis.field}")
        with new_figure(min(11.0, 3.6 * len(panels) + 1.0), 2.5 * len(metrics) + 1.1) as fig:
            axes = fig.subplots(len(metrics), len(panels), squeeze=False, sharex=True)
            for r, m in enumerate(metrics):
                unit = run.unit(device, study, m)
                for c, panel in enumerate(panels):
                    ax = axes[r][c]
                    for fs in fss:
                        pts = []
                        for x in xs:
                            want = {**fixed, axis.field: x, spec.panels: panel}
                            case = next((k for k, p in parsed.items() if p == want), None)
                            st = run.get(device, fs, study, case, m) if case else None
                            if st is not None:
                                pts.append((x, units.to_display(st.mean, unit)))
                                ns.append(st.n)
                        if pts:
                            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3.5, lw=1.4,
                                    color=ctx.colors[fs])
                    ax.set_title(spec.panel_words.format(metric=units.metric_label(m), value=panel))
                    ax.set_ylabel(f"{units.metric_label(m)} ({units.display_unit(unit)})")
                    ax.set_ylim(bottom=0)
                    if axis.log2:
                        ax.set_xscale("log", base=2)
                        ax.set_xticks(xs, [str(x) for x in xs])
                        ax.minorticks_off()
                    else:
                        ax.set_xticks(xs)
                    if r == len(metrics) - 1:
                        ax.set_xlabel(axis.xlabel)
            out.append(finish_chart(ctx, fig, fig_id, title, device, fss, study, ns))
    return out


def outcome_figure(ctx: Ctx, device: str, study: str, title: str, table: OutcomeTable,
                   claimed: frozenset[str], key: str = "outcomes") -> Figure | None:
    """One outcome table's counts stacked per filesystem, one panel per case (so
    per-iteration and per-file counts are never stacked together)."""
    run = ctx.run
    metrics = [m for m in run.metrics(device, study) if table.takes(m, claimed)]
    cases = run.cases(device, study)
    fss = run.filesystems(device, study)
    if not metrics or not cases:
        return None
    spec = run.weights.outcomes.get(study, {"good": (), "bad": ()})
    good = set(spec["good"]) or catalog.good_outcomes(study)
    names = [m.split(":", 1)[1] for m in metrics]
    order = [n for n in spec["good"] if n in names] + [n for n in spec["bad"] if n in names] + \
        sorted(n for n in names if n not in spec["good"] and n not in spec["bad"])
    prefix = metrics[0].split(":", 1)[0] + ":"
    colors = {}
    gi = bi = 0
    for n in order:
        if n in good:
            colors[n] = _GOOD_COLORS[gi % len(_GOOD_COLORS)]
            gi += 1
        else:
            colors[n] = _BAD_COLORS[bi % len(_BAD_COLORS)]
            bi += 1
    ns: list[int] = []
    fig_id = units.slug("fig", device, study, key)
    with new_figure(min(11.0, 3.0 * len(cases) + 1.5), 3.4) as fig:
        axes = fig.subplots(1, len(cases), squeeze=False)[0]
        for ax, case in zip(axes, cases):
            trans = blended_transform_factory(ax.transData, ax.transAxes)
            for i, fs in enumerate(fss):
                bottom = 0.0
                drawn = False
                for n in order:
                    st = run.get(device, fs, study, case, prefix + n)
                    if st is None or st.mean <= 0:
                        continue
                    ax.bar(i, st.mean, 0.7, bottom=bottom, color=colors[n], edgecolor="white", linewidth=0.4)
                    bottom += st.mean
                    drawn = True
                    ns.append(st.n)
                sv = run.get(device, fs, study, case, "survived")
                if drawn and sv is not None and key == "outcomes":
                    ax.text(i, bottom, f"{sv.mean:.0f}%", ha="center", va="bottom", fontsize=6.5)
                if not drawn:
                    fl = run.failures_for(device, fs, study, case)
                    if fl:
                        ax.text(i, 0.02, fl[0].status, transform=trans, rotation=90, fontsize=7,
                                color=FAIL_COLOR, ha="center", va="bottom")
            ax.set_xticks(range(len(fss)), [wrap_label(f, 10) for f in fss])
            ax.set_title(f"{case}")
            ax.set_ylabel("iterations (count)" if table.per_iteration else "outcomes (count)")
        handles = [Patch(color=colors[n], label=n) for n in order]
        label = " (label: % survived)" if key == "outcomes" else ""
        return finish_chart(ctx, fig, fig_id, title + label, device, fss, study, ns, legend_fss=[],
                       extra_handles=handles)


def wear_figure(ctx: Ctx, device: str) -> Figure | None:
    """Write amplification and erase-count spread per filesystem, by study (emulator statistics)."""
    run = ctx.run
    keys = [k for k in ("write_amplification", "erase_spread") if k in run.device_stat_keys(device)]
    studies = [s for s in run.studies(device)
               if any(run.device_stat(device, fs, s).get(k) for fs in run.filesystems(device, s) for k in keys)]
    if not keys or not studies:
        return None
    fss = sorted({fs for s in studies for fs in run.filesystems(device, s)}, key=units.natural_key)
    ns: list[int] = []
    fig_id = units.slug("fig", device, "wear")
    with new_figure(min(11.0, max(6.0, 0.22 * len(fss) * len(studies) + 2.5)), 2.4 * len(keys) + 1.1) as fig:
        axes = fig.subplots(len(keys), 1, squeeze=False)[:, 0]
        for ax, k in zip(axes, keys):
            ns += _grouped_bars(ax, studies, fss, ctx.colors,
                                lambda s, fs, k=k: run.device_stat(device, fs, s).get(k),
                                lambda s, fs: (fl[0].status if (fl := run.failures_for(device, fs, s)) and
                                               not run.device_stat(device, fs, s) else ""),
                                units.device_stat_unit(k), False)
            ax.set_ylabel(f"{units.device_stat_label(k)} ({units.display_unit(units.device_stat_unit(k))})")
            if k == "write_amplification":
                ax.axhline(1.0, color="#444444", lw=0.7, ls=":")
        return finish_chart(ctx, fig, fig_id, "Write amplification and erase-count spread (flash emulator)",
                       device, fss, None, ns)


def latency_figure(ctx: Ctx, device: str, study: str = "bandwidth") -> Figure | None:
    """Latency percentiles per case: p50 (dot) to p99 (triangle), log scale."""
    run = ctx.run
    cases = [c for c in run.cases(device, study)
             if any(run.get(device, fs, study, c, "lat_p99") or run.get(device, fs, study, c, "lat_p50")
                    for fs in run.filesystems(device, study))]
    fss = run.filesystems(device, study)
    if not cases:
        return None
    unit = run.unit(device, study, "lat_p50") or run.unit(device, study, "lat_p99")
    ns: list[int] = []
    n = len(fss)
    fig_id = units.slug("fig", device, study, "latency")
    lab = LabMarks(run, lambda c, fs: run.lab_bound(device, fs, study, c, "lat_p50"),
                   Line2D([], [], marker="o", ls="--", color="#444444", mfc="white", label="lab-bound"))
    with new_figure(8.0, 0.28 * len(cases) * max(n, 2) / 2 + 1.6) as fig:
        ax = fig.subplots()
        ax.grid(True, axis="x", which="both", alpha=0.3)
        ax.grid(False, axis="y")
        for i, c in enumerate(cases):
            for j, fs in enumerate(fss):
                y = i - 0.35 + 0.7 * (j + 0.5) / n
                p50, p99 = run.get(device, fs, study, c, "lat_p50"), run.get(device, fs, study, c, "lat_p99")
                pts = [s.mean for s in (p50, p99) if s]
                busy = lab(c, fs) if pts else None
                face = "white" if busy else ctx.colors[fs]  # lab-bound: hollow markers, dashed
                if len(pts) == 2:
                    ax.plot(pts, [y, y], color=ctx.colors[fs], lw=1.2, ls="--" if busy else "-")
                if p50:
                    ax.plot([p50.mean], [y], "o", color=ctx.colors[fs], mfc=face, ms=3.5)
                    ns.append(p50.n)
                if p99:
                    ax.plot([p99.mean], [y], "^", color=ctx.colors[fs], mfc=face, ms=4)
                    ns.append(p99.n)
                if busy:
                    ax.text(max(pts), y, f"  lab {min(busy.util.mean, 100):.0f}%", fontsize=5.5, color="#333333",
                            va="center", ha="left")
        ax.set_yticks(range(len(cases)), cases)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel(f"completion latency ({unit or 'µs'})")
        extra = [Line2D([], [], marker="o", ls="", color="#444444", label="p50"),
                 Line2D([], [], marker="^", ls="", color="#444444", label="p99")]
        return finish_chart(ctx, fig, fig_id, "Latency percentiles (fio completion latency)", device, fss, study, ns,
                       extra_handles=extra, lab=lab)


def ratio_figure(run: RunData, colors: dict[str, str], fig_id: str, title: str, groups: list[str],
                 series: list[str], ratio: Callable[[str, str], float | None], xlabel: str,
                 footer: str) -> Figure | None:
    """Horizontal bars of B/A ratios (log scale), for the comparison report."""
    if not groups or not series:
        return None
    n = len(series)
    with new_figure(8.0, 0.22 * len(groups) * max(n, 2) / 1.6 + 1.6) as fig:
        ax = fig.subplots()
        ax.grid(True, axis="x", which="both", alpha=0.3)
        ax.grid(False, axis="y")
        vals = []
        for j, s in enumerate(series):
            ys, ws = [], []
            for i, g in enumerate(groups):
                r = ratio(g, s)
                if r is None or r <= 0:
                    continue
                ys.append(i - 0.4 + 0.8 * (j + 0.5) / n)
                ws.append(r)
                vals.append(r)
            if ys:
                ax.barh(ys, [math.log10(w) for w in ws], 0.8 / n * 0.95, color=colors[s])
        if not vals:
            return None
        lim = max(abs(math.log10(v)) for v in vals) * 1.1 or 0.1
        lim = max(lim, math.log10(1.25))
        ax.set_xlim(-lim, lim)
        ticks = [t for t in (0.1, 0.2, 0.5, 0.8, 1, 1.25, 2, 5, 10) if abs(math.log10(t)) <= lim]
        ax.set_xticks([math.log10(t) for t in ticks], [f"{t:g}×" for t in ticks])
        ax.axvline(0, color="#333333", lw=0.8)
        ax.set_yticks(range(len(groups)), groups)
        ax.invert_yaxis()
        ax.set_xlabel(xlabel)
        return finish(fig, fig_id, title, [Patch(color=colors[s], label=s) for s in series], footer, ncols=5)


def _spec_figures(ctx: Ctx, device: str, study: str, spec) -> list[Figure | None]:
    run = ctx.run
    if isinstance(spec, Bars):
        cases = [c for c in run.cases(device, study) if c in spec.cases] if spec.cases else None
        return [bars_figure(ctx, device, study, list(spec.metrics) or run.metrics(device, study), spec.title,
                            spec.kind, cases)]
    if isinstance(spec, Scaling):
        return [scaling.figure(ctx, device, study, spec)]
    if isinstance(spec, TopList):
        return []  # a table (tables.top_tables)
    if isinstance(spec, Latency):
        return [latency_figure(ctx, device, study)]
    if isinstance(spec, Curves):
        figs = curve_figures(ctx, device, study, spec)
        return figs or (_spec_figures(ctx, device, study, spec.fallback) if spec.fallback else [])
    raise TypeError(f"unknown figure spec {spec!r} of study {study}")


def study_figures(ctx: Ctx, device: str, study: str) -> list[Figure]:
    """The study's figures as it declares them (Study.figures, outcome_tables), or
    the default for its shape: panels per metric for one case, else grouped bars."""
    run = ctx.run
    figs: list[Figure | None] = []
    cases = run.cases(device, study)
    st = catalog.study(study)
    tables = st.outcome_tables if st is not None else ()
    if tables:
        claimed = claimed_metrics(tables)
        first = True
        for t in tables:
            # the first table drawn carries the "% survived" labels and the study's figure id
            f = outcome_figure(ctx, device, study, f"{units.study_title(study)}: {t.title}", t, claimed,
                               "outcomes" if first else units.slug("outcomes", t.title))
            first = first and f is None
            figs.append(f)
        counted = tuple({t.prefix for t in tables})
        other = [m for m in run.metrics(device, study)
                 if not m.startswith(counted) and m not in ("iterations", "survived")]
        if other:
            figs.append(bars_figure(ctx, device, study, other, f"{units.study_title(study)}: times", "times"))
    elif st is not None and st.figures:
        for spec in st.figures:
            figs += _spec_figures(ctx, device, study, spec)
    elif len(cases) == 1:
        figs.append(metric_panels_figure(ctx, device, study, cases[0], run.metrics(device, study),
                                         units.study_title(study), "panels"))
    else:
        metrics = [m for m in run.metrics(device, study) if units.direction(m) != units.NEUTRAL][:4] or \
            run.metrics(device, study)[:4]
        figs.append(bars_figure(ctx, device, study, metrics, units.study_title(study), "bars"))
    return [f for f in figs if f is not None]
