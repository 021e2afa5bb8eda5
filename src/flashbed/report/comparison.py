"""Comparison of two runs: B against A, with ratios B/A (e.g. default vs tuned options, two presets).

Devices are paired by label, then (for different presets) by kind and order; filesystem
variants by name, then by filesystem family (ext4 -> ext4+noatime), so "default vs tuned"
runs line up. What only one run has is listed, not compared.

Beside the ratios, rank agreement: for every figure of a metric with a direction that
both runs measured on two or more filesystems, whether the same filesystem wins and
Kendall's tau-b of the two orders; per study, the share of same winners and the median
tau. A board run against a lab run (`flashbed report BOARD_RUN TWIN_RUN`, either order)
is a twin check: the lab run is A and the board B, so B / A is board / twin and the rank
agreement says how well the twin predicted the board's choice.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..errors import FlashbedError
from . import catalog, units
from . import figures as F
from . import recommend as R
from .doc import Cell, Column, Document, ListBlock, Paragraph, Section, Table
from .load import RunData, Stat, load_run
from .output import ReportPaths, write_outputs
from .provenance import fs_families, relevant_tools, tools_text
from .summary import SUMMARY_SCHEMA, r6, run_info
from .text import table_text

SAME = 1.05  # within 5 % counts as the same
MOVED = 1.2  # a figure that changed by more than 20 % is listed on its own ("moved")


@dataclass(frozen=True)
class Pair:
    a: str | None
    b: str | None

    @property
    def label(self) -> str:
        if self.a == self.b:
            return str(self.a)
        return f"{self.a or '—'} → {self.b or '—'}"


def pair_devices(a: RunData, b: RunData) -> list[Pair]:
    da, db = a.devices(), b.devices()
    pairs = [Pair(d, d) for d in da if d in db]
    left_a = [d for d in da if d not in db]
    left_b = [d for d in db if d not in da]
    for d in list(left_a):
        kind = a.device_info(d).get("kind")
        cand = [x for x in left_b if b.device_info(x).get("kind") == kind] or \
            [x for x in left_b if (b.device_info(x).get("kind") == "nand") == (kind == "nand")]
        if cand:
            pairs.append(Pair(d, cand[0]))
            left_a.remove(d)
            left_b.remove(cand[0])
    return pairs + [Pair(d, None) for d in left_a] + [Pair(None, d) for d in left_b]


def pair_filesystems(fa: list[str], fb: list[str]) -> list[Pair]:
    pairs = [Pair(f, f) for f in fa if f in fb]
    left_a = [f for f in fa if f not in fb]
    left_b = [f for f in fb if f not in fa]
    for key in (lambda f: f.split("+")[0], lambda f: tuple(fs_families(f))):
        for f in list(left_a):
            cand = [x for x in left_b if key(x) == key(f)]
            if cand:
                pairs.append(Pair(f, cand[0]))
                left_a.remove(f)
                left_b.remove(cand[0])
    pairs.sort(key=lambda p: units.natural_key(p.a or p.b or ""))
    return pairs + [Pair(f, None) for f in left_a] + [Pair(None, f) for f in left_b]


def verdict(metric_dir: str, ratio: float | None) -> tuple[str, str]:
    """('better'|'worse'|'same'|'', css class) for B against A."""
    if ratio is None or metric_dir == units.NEUTRAL:
        return "", ""
    if 1 / SAME <= ratio <= SAME:
        return "same", ""
    better = ratio > 1 if metric_dir == units.HIGHER else ratio < 1
    return ("better", "best") if better else ("worse", "bad")


def _ratio(sa: Stat | None, sb: Stat | None) -> float | None:
    if sa is None or sb is None or sa.mean == 0:
        return None
    return sb.mean / sa.mean


@dataclass
class Row:
    dev: Pair
    fs: Pair
    study: str
    case: str
    metric: str
    unit: str
    a: Stat | None
    b: Stat | None
    source: str = "measure"  # or "device"

    @property
    def ratio(self) -> float | None:
        return _ratio(self.a, self.b)

    @property
    def direction(self) -> str:
        return units.device_stat_direction(self.metric) if self.source == "device" else units.direction(self.metric)


def comparison_rows(a: RunData, b: RunData, devs: list[Pair]) -> list[Row]:
    rows: list[Row] = []
    for dp in devs:
        if not dp.a or not dp.b:
            continue
        studies = sorted(set(a.studies(dp.a)) & set(b.studies(dp.b)), key=units.study_sort_key)
        for study in studies:
            fps = [p for p in pair_filesystems(a.filesystems(dp.a, study), b.filesystems(dp.b, study)) if p.a and p.b]
            cases = a.cases(dp.a, study) + [c for c in b.cases(dp.b, study) if c not in a.cases(dp.a, study)]
            metrics = a.metrics(dp.a, study) + [m for m in b.metrics(dp.b, study) if m not in a.metrics(dp.a, study)]
            for fp in fps:
                for c in cases:
                    for m in metrics:
                        sa, sb = a.get(dp.a, fp.a, study, c, m), b.get(dp.b, fp.b, study, c, m)
                        if sa is None and sb is None:
                            continue
                        rows.append(Row(dp, fp, study, c, m, (sa or sb).unit, sa, sb))
                da, db = a.device_stat(dp.a, fp.a, study), b.device_stat(dp.b, fp.b, study)
                for k in sorted(set(da) | set(db), key=lambda k: (units.DEVICE_STAT_ORDER + [k]).index(k)):
                    if k in ("write_amplification", "erase_spread", "nand_erases", "busy_seconds"):
                        rows.append(Row(dp, fp, study, "(emulator)", k, units.device_stat_unit(k), da.get(k),
                                        db.get(k), "device"))
    return rows


def kendall_tau(xs: list[float], ys: list[float]) -> float | None:
    """Kendall's tau-b of two lists of values (ties in either count as neither agreeing nor
    disagreeing); None below two items or when one side is all ties."""
    n = len(xs)
    agree = disagree = tie_x = tie_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tie_x += 1
            elif dy == 0:
                tie_y += 1
            elif (dx > 0) == (dy > 0):
                agree += 1
            else:
                disagree += 1
    denom = math.sqrt((agree + disagree + tie_x) * (agree + disagree + tie_y))
    return None if n < 2 or denom == 0 else (agree - disagree) / denom


@dataclass(frozen=True)
class Ranking:
    """How two runs order the filesystems by one figure (device pair, study, case, metric)."""

    dev: Pair
    study: str
    case: str
    metric: str
    fs: tuple[Pair, ...]  # the filesystems both measured
    winner_a: str
    winner_b: str
    tau: float | None

    @property
    def same_winner(self) -> bool:
        return self.winner_a == self.winner_b


def rankings(rows: list[Row]) -> list[Ranking]:
    """Rank agreement of every measured figure with a direction, two or more filesystems."""
    groups: dict[tuple, list[Row]] = {}
    for r in rows:
        if r.source == "measure" and r.a is not None and r.b is not None and r.direction != units.NEUTRAL:
            groups.setdefault((r.dev, r.study, r.case, r.metric), []).append(r)
    out = []
    for (dev, study, case, metric), rs in groups.items():
        if len(rs) < 2:
            continue
        sign = 1 if rs[0].direction == units.HIGHER else -1  # larger is better after the sign
        best_a = max(rs, key=lambda r: sign * r.a.mean)
        best_b = max(rs, key=lambda r: sign * r.b.mean)
        tau = kendall_tau([r.a.mean for r in rs], [r.b.mean for r in rs])
        out.append(Ranking(dev, study, case, metric, tuple(r.fs for r in rs), str(best_a.fs.a), str(best_b.fs.b),
                           tau))
    return out


def rank_table(ranks: list[Ranking]) -> Table:
    cols = [Column("device (A → B)", numeric=False), Column("study", numeric=False), Column("case", numeric=False),
            Column("metric", numeric=False), Column("filesystems"), Column("A's best", numeric=False),
            Column("B's best", numeric=False), Column("same best", numeric=False), Column("Kendall tau")]
    rows = []
    for k in ranks:
        same = "yes" if k.same_winner else "no"
        rows.append([Cell(k.dev.label), Cell(k.study), Cell(k.case), Cell(units.metric_label(k.metric)),
                     Cell(str(len(k.fs)), len(k.fs)), Cell(k.winner_a), Cell(k.winner_b),
                     Cell(same, same, cls="" if k.same_winner else "bad"),
                     Cell(f"{k.tau:+.2f}" if k.tau is not None else "—", k.tau)])
    return Table("tab-cmp-ranks", "Rank agreement per figure (filesystems ordered by each run)", cols, rows,
                 "best: the filesystem with the best mean by the metric's direction; Kendall tau-b of the two "
                 "orders: +1 the same order, 0 unrelated, -1 reversed")


def study_agreement(ranks: list[Ranking]) -> list[dict]:
    """Per device pair and study: figures, same best, median tau."""
    out = []
    for dev, study in dict.fromkeys((k.dev, k.study) for k in ranks):
        ks = [k for k in ranks if k.dev == dev and k.study == study]
        taus = [k.tau for k in ks if k.tau is not None]
        out.append({"device": dev.label, "study": study, "figures": len(ks),
                    "same_winner": sum(k.same_winner for k in ks),
                    "median_tau": r6(statistics.median(taus)) if taus else None})
    return out


def agreement_table(agree: list[dict]) -> Table:
    cols = [Column("device (A → B)", numeric=False), Column("study", numeric=False), Column("figures"),
            Column("same best"), Column("median Kendall tau")]
    rows = [[Cell(g["device"]), Cell(g["study"]), Cell(str(g["figures"]), g["figures"]),
             Cell(f"{g['same_winner']} of {g['figures']}", g["same_winner"] / g["figures"],
                  cls="" if g["same_winner"] == g["figures"] else "bad"),
             Cell(f"{g['median_tau']:+.2f}" if g["median_tau"] is not None else "—", g["median_tau"])]
            for g in agree]
    return Table("tab-cmp-agreement", "Rank agreement per study", cols, rows,
                 "over the figures of the rank table: in how many the same filesystem is best, and the median "
                 "Kendall tau of the two orders")


def figures_table(rows: list[Row]) -> Table:
    """Every figure both runs measured, B / A: the comparison in one table."""
    cols = [Column("device (A → B)", numeric=False), Column("filesystem (A → B)", numeric=False),
            Column("study", numeric=False), Column("case", numeric=False), Column("metric", numeric=False),
            Column("unit", numeric=False), Column("A"), Column("B"), Column("B / A", "×")]
    out = []
    for r in rows:
        if r.source != "measure" or r.ratio is None:
            continue
        out.append([Cell(r.dev.label), Cell(r.fs.label), Cell(r.study), Cell(r.case), Cell(_label(r)),
                    Cell(units.display_unit(r.unit)), _fmt_stat(r.a, r.unit), _fmt_stat(r.b, r.unit),
                    Cell(units.ratio_text(r.ratio), round(r.ratio, 6))])
    return Table("tab-cmp-figures", "Every figure both runs measured, B / A", cols, out,
                 "A, B: mean ± sd over repeats")


def is_board_run(run: RunData) -> bool:
    return any(run.device_info(d).get("kind") == "board" for d in run.devices())


def twin_order(a: RunData, b: RunData) -> tuple[RunData, RunData, bool]:
    """(A, B, twin check): a board run against a lab run puts the lab (the twin) first."""
    if is_board_run(a) != is_board_run(b):
        return (b, a, True) if is_board_run(a) else (a, b, True)
    return a, b, False


def _label(r: Row) -> str:
    return units.device_stat_label(r.metric) if r.source == "device" else units.metric_label(r.metric)


def _fmt_stat(st: Stat | None, unit: str) -> Cell:
    if st is None:
        return Cell("—", None, cls="missing")
    txt = units.fmt(st.mean, unit) + (f" ±{units.fmt(st.sd, unit)}" if st.n > 1 else "")
    return Cell(txt, units.to_display(st.mean, unit), title=f"n={st.n}: " + ", ".join(units.fmt(v, unit)
                                                                                         for v in st.values))


def study_compare_table(dp: Pair, study: str, rows: list[Row]) -> Table:
    cols = [Column("filesystem (A → B)", numeric=False), Column("case", numeric=False),
            Column("metric", numeric=False), Column("unit", numeric=False), Column("A"), Column("B"),
            Column("B / A", "×"), Column("B is", numeric=False)]
    out = []
    for r in rows:
        ratio = r.ratio
        v, cls = verdict(r.direction, ratio)
        out.append([Cell(r.fs.label), Cell(r.case), Cell(_label(r)), Cell(units.display_unit(r.unit)),
                    _fmt_stat(r.a, r.unit), _fmt_stat(r.b, r.unit),
                    Cell(units.ratio_text(ratio) if ratio is not None else "—",
                         round(ratio, 6) if ratio is not None else None, cls=cls),
                    Cell(v or ("only in A" if r.b is None else "only in B" if r.a is None else ""), v, cls=cls)])
    return Table(units.slug("cmp", dp.label, study), f"{units.study_title(study)} — {dp.label}: B against A",
                 cols, out, "A, B: mean ± sd over repeats; B / A > 1 means B's value is larger; 'better'/'worse' "
                            "use the metric's direction, within 5 % is 'same'")


def _footer(a: RunData, b: RunData, dp: Pair, fss: list[str], study: str, ns_a: list[int], ns_b: list[int]) -> str:
    def one(tag: str, run: RunData, dev: str, ns: list[int]) -> str:
        return (f"{tag}: run {run.run_id} · device {run.device_text(dev)} · kernel {run.kernel_for(dev)} · profile "
                f"{run.profile} · repeats {run.repeats_text(ns)} · tools: "
                f"{tools_text(relevant_tools(run, fss, study))}")
    return one("A", a, dp.a, ns_a) + "\n" + one("B", b, dp.b, ns_b)


def ratio_fig(a: RunData, b: RunData, dp: Pair, study: str, rows: list[Row], colors: dict[str, str]):
    metric = catalog.primary_metric(study)
    rows = [r for r in rows if r.source == "measure" and r.metric == metric and r.ratio is not None]
    if not rows:
        return None
    groups = []
    for r in rows:
        if r.case not in groups:
            groups.append(r.case)
    series = []
    for r in rows:
        if r.fs.label not in series:
            series.append(r.fs.label)
    by = {(r.case, r.fs.label): r.ratio for r in rows}
    fss = sorted({x for r in rows for x in (r.fs.a, r.fs.b) if x})
    d = units.direction(metric)
    hint = {units.HIGHER: " (right = B better)", units.LOWER: " (left = B better)"}.get(d, "")
    unit = units.display_unit(rows[0].unit)
    return F.ratio_figure(
        a, colors, units.slug("fig-cmp", dp.label, study),
        f"{units.study_title(study)}: {units.metric_label(metric)} B / A — {dp.label}",
        groups, series, lambda g, s: by.get((g, s)),
        f"B / A of {units.metric_label(metric)} ({unit}){hint}, log scale",
        _footer(a, b, dp, fss, study, [r.a.n for r in rows if r.a], [r.b.n for r in rows if r.b]))


def provenance_table(a: RunData, b: RunData, devs: list[Pair]) -> Table:
    cols = [Column("what", numeric=False), Column("A", numeric=False), Column("B", numeric=False),
            Column("differs", numeric=False)]
    items = [("run", a.run_id, b.run_id), ("created", str(a.manifest.get("created")), str(b.manifest.get("created"))),
             ("profile", a.profile, b.profile), ("repeats", str(a.manifest.get("repeats")),
                                                 str(b.manifest.get("repeats"))),
             ("lab kernel", a.kernel_text, b.kernel_text), ("guest vCPUs", str(a.cpus), str(b.cpus)),
             ("flashbed", str(a.manifest.get("flashbed_version")), str(b.manifest.get("flashbed_version")))]
    for dp in devs:
        items.append((f"device {dp.label}", a.device_text(dp.a) if dp.a else "—", b.device_text(dp.b) if dp.b else "—"))
    for t in sorted(set(a.tools) | set(b.tools)):
        items.append((f"tool {t}", a.tools.get(t, "—"), b.tools.get(t, "—")))
    rows = []
    for what, x, y in items:
        diff = "yes" if x != y else ""
        rows.append([Cell(what), Cell(x), Cell(y), Cell(diff, diff, cls="bad" if diff and what != "run" else "")])
    return Table("tab-cmp-provenance", "What differs between the runs", cols, rows)


def pairs_table(a: RunData, b: RunData, devs: list[Pair]) -> Table:
    cols = [Column("device (A → B)", numeric=False), Column("filesystem in A", numeric=False),
            Column("filesystem in B", numeric=False), Column("compared", numeric=False)]
    rows = []
    for dp in devs:
        fps = pair_filesystems(a.filesystems(dp.a) if dp.a else [], b.filesystems(dp.b) if dp.b else [])
        for fp in fps:
            ok = bool(fp.a and fp.b and dp.a and dp.b)
            rows.append([Cell(dp.label), Cell(fp.a or "—"), Cell(fp.b or "—"),
                         Cell("yes" if ok else ("only in A" if fp.a else "only in B"), cls="" if ok else "missing")])
    return Table("tab-cmp-pairs", "What is compared with what", cols, rows,
                 "devices pair by label, else by kind; filesystem variants by name, else by filesystem family")


def recommendation_compare(a: RunData, b: RunData, devs: list[Pair], ra: dict, rb: dict) -> Table:
    cols = [Column("device (A → B)", numeric=False), Column("use case", numeric=False),
            Column("A: choose", numeric=False), Column("A score", "0–1"), Column("B: choose", numeric=False),
            Column("B score", "0–1"), Column("changed", numeric=False)]
    rows = []
    for dp in devs:
        if not dp.a or not dp.b:
            continue
        for x, y in zip(ra[dp.a], rb[dp.b]):
            wa, wb = x.winner, y.winner
            changed = x.choice_text() != y.choice_text()
            rows.append([Cell(dp.label), Cell(x.use_case.title),
                         Cell(x.choice_text()),
                         Cell(f"{wa.score:.2f}" if wa else "—", round(wa.score, 6) if wa else None),
                         Cell(y.choice_text()),
                         Cell(f"{wb.score:.2f}" if wb else "—", round(wb.score, 6) if wb else None),
                         Cell("yes" if changed else "", "yes" if changed else "", cls="bad" if changed else "")])
    return Table("tab-cmp-recommendation", "Recommendation in A and in B", cols, rows,
                 "each run is ranked on its own (scores are relative within a run and device)")


def moved_rows(rows: list[Row], threshold: float = MOVED) -> list[Row]:
    """The measured figures (of a metric with a direction) that changed by more than `threshold`
    either way, largest change first."""
    out = [r for r in rows if r.source == "measure" and r.ratio and r.direction != units.NEUTRAL
           and not 1 / threshold <= r.ratio <= threshold]
    return sorted(out, key=lambda r: (-abs(math.log(r.ratio)), r.dev.label, r.study, r.case, r.metric, r.fs.label))


def _busy(run: RunData, dev: str | None, fs: str | None, study: str, case: str) -> Cell:
    b = run.busy_for(dev, fs, study, case) if dev and fs else None
    if b is None:
        return Cell("—", None, cls="missing")
    lab = run.lab_bound_case(dev, fs, study, case) is not None
    return Cell(f"{min(b.util.mean, 100.0):.0f}" + (" lab-bound" if lab else ""), round(b.util.mean, 3),
                cls="labbound" if lab else "")


def moved_table(a: RunData, b: RunData, moved: list[Row], threshold: float = MOVED) -> Table:
    cols = [Column("device (A → B)", numeric=False), Column("filesystem (A → B)", numeric=False),
            Column("study", numeric=False), Column("case", numeric=False), Column("metric", numeric=False),
            Column("unit", numeric=False), Column("A"), Column("B"), Column("B / A", "×"),
            Column("B is", numeric=False), Column("device busy in A", "%"), Column("device busy in B", "%")]
    rows = []
    for r in moved:
        v, cls = verdict(r.direction, r.ratio)
        rows.append([Cell(r.dev.label), Cell(r.fs.label), Cell(r.study), Cell(r.case), Cell(_label(r)),
                     Cell(units.display_unit(r.unit)), _fmt_stat(r.a, r.unit), _fmt_stat(r.b, r.unit),
                     Cell(units.ratio_text(r.ratio), round(r.ratio, 6), cls=cls), Cell(v, v, cls=cls),
                     _busy(a, r.dev.a, r.fs.a, r.study, r.case), _busy(b, r.dev.b, r.fs.b, r.study, r.case)])
    return Table("tab-cmp-moved", f"Figures that moved by more than {threshold - 1:.0%} (B against A)", cols, rows,
                 "measured figures of a metric with a direction, largest change first; device busy = the "
                 "emulator's busy time over the figure's duration, lab-bound below "
                 f"{a.weights.lab_bound_below:g} %: where the device sat idle, the lab set the figure")


def kernels_differ(a: RunData, b: RunData) -> str:
    """One sentence naming the two runs' lab kernels when they differ ('' when not)."""
    if a.kernel_text == b.kernel_text and a.cpus == b.cpus:
        return ""
    vcpus = f" ({a.cpus} vs {b.cpus} guest vCPUs)" if a.cpus != b.cpus else ""
    return f"The runs differ in their lab: A ran on lab kernel {a.kernel_text}, B on {b.kernel_text}{vcpus}."


def build_comparison(a: RunData, b: RunData) -> tuple[Document, dict]:
    a, b, twin = twin_order(a, b)
    devs = pair_devices(a, b)
    if not any(dp.a and dp.b for dp in devs):
        raise FlashbedError(f"runs {a.run_id} and {b.run_id} have no device in common to compare")
    rows = comparison_rows(a, b, devs)
    if not any(r.a is not None and r.b is not None for r in rows):
        raise FlashbedError(f"runs {a.run_id} and {b.run_id} share no figures (studies {', '.join(a.studies())} "
                            f"against {', '.join(b.studies())}): compare runs of the same studies and filesystems")
    ranks = rankings(rows)
    agree = study_agreement(ranks)
    ra, rb = R.recommend(a), R.recommend(b)
    all_labels = sorted({r.fs.label for r in rows}, key=units.natural_key)
    colors = F.fs_colors(all_labels)

    head = Section("compare", "What is compared")
    head.add(Paragraph(f"**A** = run `{a.run_id}`, **B** = run `{b.run_id}`. Ratios are B / A of the means over "
                       f"repeats; better/worse follow each metric's direction (within 5 % = same)."))
    if twin:
        head.add(Paragraph(f"A twin check: **B** is the board (`{b.kernel_text}`), **A** its twin in the lab "
                           f"(`{a.kernel_text}`). B / A is board / twin: 1.00× is a perfect prediction; the rank "
                           f"agreement says whether the twin picks the board's best filesystem."))
    lab = kernels_differ(a, b)
    if lab and not twin:
        head.add(Paragraph(lab))
    head.add(provenance_table(a, b, devs), pairs_table(a, b, devs))
    only = [(s, "A") for s in a.studies() if s not in b.studies()] + [(s, "B") for s in b.studies()
                                                                        if s not in a.studies()]
    if only:
        head.add(Paragraph("Studies in one run only (not compared): " +
                           ", ".join(f"`{s}` (only in {w})" for s, w in only) + ".", cls="missing"))
    sections = [head]

    ranked = Section("cmp-ranks", "Rank agreement: does B order the filesystems as A does?")
    if ranks:
        ranked.add(agreement_table(agree), rank_table(ranks))
    else:
        ranked.add(Paragraph("No figure with a direction was measured on two or more filesystems in both runs.",
                             cls="missing"))
    ranked.add(figures_table(rows))
    sections.append(ranked)

    rec = Section("cmp-recommendation", "Recommendation: A vs B")
    rec.add(recommendation_compare(a, b, devs, ra, rb))
    sections.append(rec)

    moved = moved_rows(rows)
    mv = Section("cmp-moved", f"What moved by more than {MOVED - 1:.0%}")
    mv.add(Paragraph(f"{len(moved)} of {sum(1 for r in rows if r.source == 'measure' and r.ratio)} compared figures "
                     f"changed by more than {MOVED - 1:.0%} between A and B." +
                     (" Each is listed with how busy the device was in each run." if moved else "")))
    if moved:
        mv.add(moved_table(a, b, moved))
    sections.append(mv)

    # per device pair: the largest changes (directional metrics, one line per filesystem and case)
    for dp in devs:
        if not dp.a or not dp.b:
            continue
        ds = Section(units.slug("cmp", dp.label), f"Results: {dp.label}")
        drows = [r for r in rows if r.dev == dp]
        notable = [r for r in drows if r.ratio and r.direction != units.NEUTRAL and verdict(r.direction, r.ratio)[0]
                   in ("better", "worse")]
        notable.sort(key=lambda r: (-abs(math.log(r.ratio)), r.study, r.case, r.metric, r.fs.label))
        seen: set[tuple] = set()
        notable = [r for r in notable if not ((r.fs, r.study, r.case) in seen or seen.add((r.fs, r.study, r.case)))]
        if notable:
            items = []
            for r in notable[:8]:
                v = verdict(r.direction, r.ratio)[0]
                items.append(f"**{r.fs.label}**, {r.study} {r.case} {_label(r)}: B is {v}, "
                             f"{units.ratio_text(r.ratio)} A ({units.fmt_unit(r.b.mean, r.unit)} vs "
                             f"{units.fmt_unit(r.a.mean, r.unit)})")
            ds.add(Paragraph("Largest differences:"), ListBlock(items))
        for study in sorted({r.study for r in drows}, key=units.study_sort_key):
            srows = [r for r in drows if r.study == study]
            ss = Section(units.slug("cmp", dp.label, study, "sec"), units.study_title(study))
            fig = ratio_fig(a, b, dp, study, srows, colors)
            if fig:
                ss.add(fig)
            ss.add(study_compare_table(dp, study, srows))
            ds.add(ss)
        sections.append(ds)

    title = f"flashbed twin check: board {b.run_id} (B) against its twin {a.run_id} (A)" if twin else \
        f"flashbed comparison: {b.run_id} (B) vs {a.run_id} (A)"
    doc = Document(title=title,
                   subtitle="Differences between two runs, as ratios B / A.",
                   meta=[("A", f"`{a.run_id}` ({a.profile}, kernel {a.kernel_text}, "
                               f"{', '.join(a.devices())})"),
                         ("B", f"`{b.run_id}` ({b.profile}, kernel {b.kernel_text}, "
                               f"{', '.join(b.devices())})")],
                   sections=sections)
    summary = {
        "schema": SUMMARY_SCHEMA, "kind": "comparison", "a": run_info(a), "b": run_info(b),
        "device_pairs": [{"a": p.a, "b": p.b} for p in devs],
        "rows": [{"device_a": r.dev.a, "device_b": r.dev.b, "fs_a": r.fs.a, "fs_b": r.fs.b, "study": r.study,
                  "case": r.case, "metric": r.metric, "source": r.source, "unit": r.unit,
                  "a": r6(r.a.mean) if r.a else None, "b": r6(r.b.mean) if r.b else None,
                  "ratio": r6(r.ratio), "verdict": verdict(r.direction, r.ratio)[0]} for r in rows],
        "twin_check": twin,
        "rank_agreement": agree,
        "rankings": [{"device_a": k.dev.a, "device_b": k.dev.b, "study": k.study, "case": k.case,
                      "metric": k.metric, "filesystems": len(k.fs), "best_a": k.winner_a, "best_b": k.winner_b,
                      "same_best": k.same_winner, "tau": r6(k.tau) if k.tau is not None else None}
                     for k in ranks],
        "moved_threshold": MOVED,
        "moved": [{"device_a": r.dev.a, "device_b": r.dev.b, "fs_a": r.fs.a, "fs_b": r.fs.b, "study": r.study,
                   "case": r.case, "metric": r.metric, "unit": r.unit, "a": r6(r.a.mean), "b": r6(r.b.mean),
                   "ratio": r6(r.ratio), "verdict": verdict(r.direction, r.ratio)[0],
                   "lab_bound_a": a.lab_bound_case(r.dev.a, r.fs.a, r.study, r.case) is not None,
                   "lab_bound_b": b.lab_bound_case(r.dev.b, r.fs.b, r.study, r.case) is not None} for r in moved],
        "recommendation": {"a": R.summary_data(ra), "b": R.summary_data(rb)},
        "figures": [f.id for f in doc.figures()],
        "tables": [t.id for t in doc.tables()],
    }
    return doc, summary


TEXT_NAME = "comparison.txt"  # beside report.html: the rank agreement and every figure's ratio as text
TEXT_TABLES = ("tab-cmp-agreement", "tab-cmp-ranks", "tab-cmp-figures")


def comparison_text(doc: Document) -> str:
    """The comparison's heart as plain text: what `flashbed report A B` prints."""
    tables = {t.id: t for t in doc.tables()}
    return doc.title + "\n" + "".join("\n" + table_text(tables[t]) for t in TEXT_TABLES if t in tables)


def compare_runs(run_a: Path, run_b: Path, out_dir: Path, force: bool = False) -> ReportPaths:
    a, b = load_run(run_a), load_run(run_b)
    doc, summary = build_comparison(a, b)
    return write_outputs(doc, summary, out_dir, extra={TEXT_NAME: comparison_text(doc)}, force=force)
