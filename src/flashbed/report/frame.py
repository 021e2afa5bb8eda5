"""The frame every chart of the report is drawn in (figures.py, scaling.py): the drawing's
context (the run, a colour per filesystem), its legend and provenance footer (finish_chart),
and the lab-bound marks a chart collects while it draws (LabMarks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from matplotlib.patches import Patch

from .doc import Figure
from .load import Busy, RunData
from .provenance import figure_footer
from .svg import finish

LAB_HATCH = "////"


@dataclass
class Ctx:
    run: RunData
    colors: dict[str, str]


def finish_chart(ctx: Ctx, fig, fig_id: str, title: str, device: str, fss: list[str],
                 study: str | None, ns: list[int], legend_fss: list[str] | None = None,
                 extra_handles: list | None = None, lab: "LabMarks | None" = None, note: str = "") -> Figure:
    """A drawn chart's frame: its legend (a swatch per filesystem, and what else it drew), its
    provenance footer with the lab-bound note and the chart's own, as the report's Figure."""
    handles = [Patch(color=ctx.colors[f], label=f) for f in (legend_fss if legend_fss is not None else fss)]
    handles += extra_handles or []
    if lab and lab.hits:
        handles += lab.handles()
    footer = figure_footer(ctx.run, device, fss, study, ns)
    if lab and lab.hits:
        footer += "\n" + lab.note()
    if note:
        footer += "\n" + note
    return finish(fig, fig_id, title, handles, footer)


class LabMarks:
    """Which drawn figures were lab-bound (the device busy less than the threshold of their time):
    asked per (group, series) while drawing, remembered for the legend and the footer."""

    def __init__(self, run: RunData, find: Callable[[str, str], Busy | None], legend=None):
        self.run, self.find, self.hits = run, find, []
        self.legend = legend or Patch(facecolor="white", edgecolor="#444444", hatch=LAB_HATCH, label="lab-bound")

    def __call__(self, group: str, series: str) -> Busy | None:
        b = self.find(group, series)
        if b is not None:
            self.hits.append(b)
        return b

    def handles(self) -> list:
        return [self.legend]

    def note(self) -> str:
        lo = min(b.util.mean for b in self.hits)
        hi = max(b.util.mean for b in self.hits)
        return (f"lab-bound (marked, labelled 'lab' with the device's busy share): the device was busy less than "
                f"{self.run.weights.lab_bound_below:g} % of the figure's time ({lo:.0f}–{hi:.0f} % here), "
                f"so the lab, not the device, set it")
