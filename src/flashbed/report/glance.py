"""The report's opening picture: use cases x filesystem variants, taken in at a glance.

One grid per device: a row per use case the run measured (the first screen's), a column per
filesystem variant. A cell holds the variant's score for the use case (shaded by it), the choice
is framed and starred, the runner-up marked; a variant a requirement rules out is hatched grey
with what it lacks in a few words, one a decisive criterion does not apply to says n/a. A use
case that is not decided says so on its row and frames nobody: its scores are partial.

A view of the rankings recommend.py made (the same Ranking objects the text below it reads):
nothing here scores, decides or excludes anything of its own.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace
from enum import StrEnum

from . import recommend as R
from .doc import Figure
from .eligibility import Eligibility
from .load import RunData
from .provenance import figure_footer

GOOD = "#1a9850"  # a score of 1.00
CHOICE = "#0b3d1e"
NOT_ELIGIBLE = "#d9d9d9"
NOT_SCORED = "#f5f5f5"


class Mark(StrEnum):
    CHOICE = "choice"
    RUNNER_UP = "runner-up"
    RANKED = "ranked"  # scored, neither of the two (or the use case is not decided: partial)
    NOT_ELIGIBLE = "not eligible"
    NOT_CANDIDATE = "n/a"
    NOT_SCORED = "not scored"  # no criterion of the use case measured for it


@dataclass(frozen=True)
class GlanceCell:
    fs: str
    mark: Mark
    score: float | None = None
    why: str = ""  # what rules it out, in a few words


@dataclass(frozen=True)
class GlanceRow:
    use_case: str
    decided: bool
    choice: str  # the winner, or why there is none ("not decided", "none eligible")
    cells: tuple[GlanceCell, ...]


def lacks(e: Eligibility) -> str:
    """What a variant that is not eligible lacks, in a few words ('no owners, xattrs; data lost
    in 3 of 49 crash states')."""
    caps = [c.req.name.replace("_", " ") for c in e.failed if c.req.study == "caps"]
    rest = [_short(c.why or c.req.label) for c in e.failed if c.req.study != "caps"]
    if len(caps) > 3:  # a cell's room: the first few by name, the rest counted (the text below names all)
        caps = [*caps[:2], f"{len(caps) - 2} more"]
    return "; ".join(([f"no {', '.join(caps)}"] if caps else []) + rest)


def _short(why: str) -> str:
    # the durability evidence's words, shortened for a cell: the count is what a reader compares
    return why.replace("acknowledged data lost in", "lost data in").replace(" crash states", " states")


def rows(run: RunData, device: str, rankings: list[R.Ranking]) -> tuple[list[str], list[GlanceRow]]:
    """The device's grid: its variants (columns) and a row per use case the run measured."""
    fss = run.filesystems(device)
    out = []
    for r in rankings:
        if not R.asked(run, r):
            continue
        entries = {e.fs: e for e in r.entries}
        ne = {e.fs: e for e in r.not_eligible}
        nc = dict(r.not_candidates)
        cells = []
        for fs in fss:
            if fs in ne:
                cells.append(GlanceCell(fs, Mark.NOT_ELIGIBLE, why=lacks(ne[fs])))
            elif fs in nc:
                cells.append(GlanceCell(fs, Mark.NOT_CANDIDATE, why=nc[fs].split(":", 1)[0]))
            elif fs in entries:
                e = entries[fs]
                mark = Mark.CHOICE if r.winner is e else Mark.RUNNER_UP if r.runner_up is e else Mark.RANKED
                cells.append(GlanceCell(fs, mark, e.score))
            else:
                cells.append(GlanceCell(fs, Mark.NOT_SCORED))
        out.append(GlanceRow(r.use_case.title, r.decided, r.choice_text(), tuple(cells)))
    return fss, out


def _shade(score: float) -> str:
    """White at 0.5 and below, the report's green at 1.00: the differences that decide are near the top."""
    t = min(1.0, max(0.0, (score - 0.5) / 0.5))
    a = tuple(int(GOOD[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(255 + (c - 255) * t):02x}" for c in a)


def figure(run: RunData, recs: dict[str, list[R.Ranking]]) -> Figure | None:
    """The opening picture, or None when no use case was measured on any device (or the run recommends
    nothing). One row per use case, the devices' grids side by side, small enough that the first
    screen's lines below it still show without scrolling."""
    grids = [(d, *rows(run, d, rk)) for d, rk in recs.items()]
    grids = [(d, fss, rs) for d, fss, rs in grids if rs and fss]
    if not grids or R.run_failure(run):
        return None
    from matplotlib.patches import Rectangle

    from .svg import finish, new_figure, wrap_label
    titles = list(dict.fromkeys(r.use_case for _d, _f, rs in grids for r in rs))
    ncols = sum(len(fss) for _d, fss, _rs in grids) + GAP * (len(grids) - 1)
    width = min(2.4 + 0.95 * ncols, 17.5)
    footer = (f"★ the choice, ² the runner-up, score 0–1 (weighted criteria of {run.weights.path.name}, 1.00 = "
              f"best on every criterion); hatched: not eligible, a requirement fails (what); faded: not decided"
              + "".join(f"; device {run.device_text(d)}" for d, _f, _r in grids[1:]) + "\n"
              + figure_footer(run, grids[0][0], sorted({f for _d, fss, _r in grids for f in fss}), None, []))
    # the rows keep their height whatever the footer takes (its lines wrap at 150 characters)
    lines = sum(-(-len(line) // 150) for line in footer.split("\n"))
    height = 0.45 + 0.24 * len(titles) + 0.12 * lines
    with new_figure(width, height) as fig:
        ax = fig.subplots()
        ax.grid(False)
        for sp in ax.spines.values():
            sp.set_visible(False)
        ax.tick_params(length=0, pad=1)
        ax.xaxis.tick_top()
        ticks, labels, x0 = [], [], 0.0
        for device, fss, rs in grids:
            by = {r.use_case: r for r in rs}
            for k, fs in enumerate(fss):
                ticks.append(x0 + k)
                labels.append(wrap_label(fs, 13))
                for y, t in enumerate(titles):
                    if t in by:
                        _draw_cell(ax, Rectangle, x0 + k, y, by[t].cells[k], by[t].decided)
            if len(grids) > 1:  # which device each grid is: below the use cases, out of the labels' way
                ax.text(x0 + (len(fss) - 1) / 2, len(titles) - 0.45, run.device_text(device).split(" (")[0],
                        ha="center", va="top", fontsize=7, color="#444444")
            x0 += len(fss) + GAP
        ax.set_xlim(-0.5, ncols - 0.5)
        ax.set_ylim(len(titles) - 0.5 + (0.45 if len(grids) > 1 else 0), -0.5)
        ax.set_xticks(ticks, labels, fontsize=6.5)
        ax.set_yticks(range(len(titles)), [textwrap.shorten(t, 38, placeholder="…") for t in titles], fontsize=7)
        # the marks are said in the footer, not a legend: the picture stays small enough for the first screen
        out = finish(fig, "fig-glance", "At a glance: the choice per use case", [], footer)
        return replace(out, compact=True)


GAP = 0.4  # between two devices' grids, in cells


def _draw_cell(ax, Rectangle, x: float, y: int, c: GlanceCell, decided: bool) -> None:
    box = dict(xy=(x - 0.47, y - 0.42), width=0.94, height=0.84)
    if c.mark is Mark.NOT_ELIGIBLE:
        ax.add_patch(Rectangle(**box, facecolor=NOT_ELIGIBLE, hatch="///", edgecolor="#888888", linewidth=0.4))
        ax.text(x, y, "\n".join(textwrap.wrap(c.why or "not eligible", 24, max_lines=2, placeholder="…")),
                ha="center", va="center", fontsize=4.8, color="#7a0010", linespacing=0.95,
                bbox=dict(boxstyle="square,pad=0.05", facecolor=NOT_ELIGIBLE, edgecolor="none"))
        return
    if c.score is None:
        ax.add_patch(Rectangle(**box, facecolor=NOT_SCORED, edgecolor="#cccccc", linewidth=0.4))
        ax.text(x, y, "n/a" if c.mark is Mark.NOT_CANDIDATE else "not scored", ha="center", va="center",
                fontsize=5.5, color="#777777")
        return
    chosen = c.mark is Mark.CHOICE
    ax.add_patch(Rectangle(**box, facecolor=_shade(c.score), edgecolor=CHOICE if chosen else "#bbbbbb",
                           linewidth=1.6 if chosen else 0.4, alpha=1.0 if decided else 0.45))
    text = f"★ {c.score:.2f}" if chosen else f"{c.score:.2f}²" if c.mark is Mark.RUNNER_UP else f"{c.score:.2f}"
    ax.text(x, y, text, ha="center", va="center", fontsize=7 if chosen else 6.5,
            fontweight="bold" if chosen else "normal", color=CHOICE if c.score > 0.8 else "#1b1f24")
