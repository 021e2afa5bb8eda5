"""How a study's results are shown, declared by the study as data (the report
draws them; a study never imports the report).

A study lists its figures in `Study.figures`; with none, the report draws one
panel per metric (a study of one case) or grouped bars of its first directional
metrics. Failure studies get their outcome figures from `outcome_tables`.

`CaseLabel` writes a measurement's case label from named values and reads them
back: one template, both directions, so a figure can put a case's size or fill
level on an axis without a second copy of the label's format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Bars:
    """Grouped bars: cases on x, filesystems as bars, one row per metric. No
    metrics: every metric of the study. `cases`: only these cases (none: all)."""

    kind: str  # the figure id's last word: fig-<device>-<study>-<kind>
    metrics: tuple[str, ...]
    title: str
    cases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scaling:
    """A metric against a count (`x`: writers at once), one line per filesystem and value
    of a second count (`lines`: vCPUs), beside the ratio of each line to the filesystem's
    line at the smallest such value (2 vCPU / 1 vCPU); and a table of both. Cases are
    read with `label` (its fields `x` and `lines`)."""

    label: "CaseLabel"
    x: str
    lines: str
    metric: str
    title: str
    xlabel: str  # the x axis: "writers at once"
    x_words: str  # one x value: "{} writers"
    line_words: str  # one line value: "{} vCPU"
    nouns: tuple[str, str]  # what x and the lines count: ("writers", "vCPUs")


@dataclass(frozen=True)
class TopList:
    """Named figures a study keeps per case in its cells' `extra` (e.g. kernel threads by CPU
    seconds) as a table per case: the names among the `top` largest of any filesystem as rows,
    filesystems as columns (mean over repeats; a name missing from a repeat counts 0)."""

    kind: str  # the table id's last word: tab-<device>-<study>-<kind>-<case>
    key: str  # the extra's key, "{case}_kthreads"
    cases: tuple[str, ...]
    title: str
    unit: str
    top: int = 5
    note: str = ""  # how to read the names


@dataclass(frozen=True)
class Latency:
    """fio completion latency per case, p50 to p99 (metrics lat_p50, lat_p99)."""


@dataclass(frozen=True)
class Axis:
    """A case label's numeric field as a figure's x axis."""

    field: str
    words: str  # "fill level": the figure's title says "... vs fill level"
    xlabel: str  # "fill (%)"
    fixed: str  # how the other figures state a fixed value of it: "{} % full"
    log2: bool = False


@dataclass(frozen=True)
class Curves:
    """Lines of metrics against each axis in turn (the other axes fixed at their
    largest value), one panel per metric and value of `panels`; drawn when an
    axis has two values or more, else `fallback`."""

    label: "CaseLabel"
    axes: tuple[Axis, ...]
    panels: str  # the label field whose values get panels of their own
    panel_values: tuple[str, ...]  # in this order
    panel_words: str  # "{metric}, {value} reboot"
    metrics: tuple[str, ...]
    title: str  # "Mount time"
    fallback: Bars | None = None


_FIELD = re.compile(r"\{(\w+):(\w+)\}")
# placeholder types: how a value is written, and the pattern that reads it back
_TYPES: dict[str, tuple[str, str]] = {
    "int": ("{}", r"(\d+)"),
    "word": ("{}", r"(\S+)"),
    # a size in MiB, written "256MiB"; labels of older runs say "256MB"
    "mib": ("{}MiB", r"(\d+)\s*Mi?B"),
}


class CaseLabel:
    """A case label template such as "{size:mib} fill{fill:int} {state:word}"."""

    def __init__(self, template: str):
        self.template = template
        self.fields: list[tuple[str, str]] = _FIELD.findall(template)
        pattern, pos = "", 0
        for m in _FIELD.finditer(template):
            pattern += re.escape(template[pos:m.start()]) + _TYPES[m[2]][1]
            pos = m.end()
        self._re = re.compile("^" + pattern + re.escape(template[pos:]) + "$")

    def format(self, **values: Any) -> str:
        out, pos = "", 0
        for m in _FIELD.finditer(self.template):
            out += self.template[pos:m.start()] + _TYPES[m[2]][0].format(values[m[1]])
            pos = m.end()
        return out + self.template[pos:]

    def parse(self, label: str) -> dict[str, Any] | None:
        """The values a label was written from; None for a label of another form."""
        m = self._re.match(label)
        if m is None:
            return None
        return {name: (int(v) if kind in ("int", "mib") else v) for (name, kind), v in zip(self.fields, m.groups())}
