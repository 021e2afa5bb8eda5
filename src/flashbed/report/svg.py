"""SVG plumbing for the report's figures: matplotlib without pyplot, rendered to
inline SVG, deterministic for the same data.

No pyplot (no global state, no display): each figure is a matplotlib Figure saved as
SVG with a per-figure hash salt and SVG id (unique, stable element ids inside one HTML
page) and no date. Text stays text (svg.fonttype none), so a figure is small and its
words are searchable. `finish` puts the legend and the provenance footer inside the
SVG, so a figure carries how it was obtained wherever it goes. The charts themselves
are in figures.py.
"""

from __future__ import annotations

import io
import re
import textwrap
from contextlib import contextmanager
from typing import Iterator

import matplotlib
from matplotlib.figure import Figure as MplFigure

from .doc import Figure

RC = {
    "font.family": ["DejaVu Sans"],
    "font.size": 8.5,
    "axes.titlesize": 9,
    "axes.labelsize": 8.5,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.alpha": 0.35,
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "svg.fonttype": "none",
    "figure.dpi": 72,
}


@contextmanager
def new_figure(width: float, height: float) -> Iterator[MplFigure]:
    with matplotlib.rc_context(RC):
        fig = MplFigure(figsize=(width, height), layout="constrained")
        yield fig


def to_svg(fig: MplFigure, fig_id: str) -> str:
    """The figure as an <svg> element: stable ids (salted by the figure id), no date."""
    with matplotlib.rc_context({**RC, "svg.hashsalt": fig_id, "svg.id": f"{fig_id}-svg"}):
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    s = buf.getvalue()
    s = s[s.index("<svg"):]
    return _scope_ids(s, fig_id).strip() + "\n"


_REF_RE = re.compile(r'(\bid="|xlink:href="#|\bhref="#|url\(#)([^")]+)')


def _scope_ids(svg: str, fig_id: str) -> str:
    """Prefix every element id (and reference to it) with the figure id: matplotlib names groups
    'figure_1', 'axes_1', ... in every figure, and ids must be unique within one HTML page. Text
    falls back to similar fonts where DejaVu Sans is not installed."""
    root = f"{fig_id}-svg"

    def sub(m: re.Match) -> str:
        return m[0] if m[2] == root else f"{m[1]}{fig_id}--{m[2]}"
    svg = _REF_RE.sub(sub, svg)
    return svg.replace("font-family: 'DejaVu Sans'",
                       "font-family: 'DejaVu Sans', Verdana, 'Liberation Sans', Arial, sans-serif")


def finish(fig: MplFigure, fig_id: str, title: str, handles: list, footer: str, ncols: int = 6) -> Figure:
    """The legend on top, the provenance footer below (inside the SVG), rendered."""
    if handles:
        fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), ncols), frameon=False)
    wrapped = "\n".join(textwrap.fill(line, 150) for line in footer.split("\n"))
    fig.supxlabel(wrapped, fontsize=6.5, color="#555555", ha="left", x=0.01)
    return Figure(id=fig_id, title=title, svg=to_svg(fig, fig_id), caption=footer.replace("\n", " · "))


def wrap_label(s: str, width: int = 12) -> str:
    """Case labels wrap at spaces; filesystem names before '+' and '@' ('f2fs\n+discard')."""
    if len(s) <= width:
        return s
    if " " not in s:
        return re.sub(r"(?<=.)([+@])", r"\n\1", s)
    return "\n".join(textwrap.wrap(s, width, break_long_words=False, break_on_hyphens=False))

