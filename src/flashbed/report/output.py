"""Write report.html, report.md, summary.json and the figures as SVG files (atomically)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import FlashbedError
from ..results import write_json_atomic
from .doc import Document, Figure
from .html import render_html
from .markdown import render_markdown

FIGURES_DIR = "report-figures"


@dataclass(frozen=True)
class ReportPaths:
    html: Path
    markdown: Path
    summary: Path
    figures: Path  # directory of the figures as SVG files (linked from report.md)


def write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_outputs(doc: Document, summary: dict[str, Any], out_dir: Path) -> ReportPaths:
    out_dir = Path(out_dir)
    figs_dir = out_dir / FIGURES_DIR
    try:
        figs_dir.mkdir(parents=True, exist_ok=True)
        figs = doc.figures()
        wanted = {f"{f.id}.svg" for f in figs}
        for old in figs_dir.glob("*.svg"):
            if old.name not in wanted:
                old.unlink()
        for f in figs:
            write_text(figs_dir / f"{f.id}.svg", f.svg)

        def link(f: Figure) -> str:
            return f"{FIGURES_DIR}/{f.id}.svg"
        paths = ReportPaths(out_dir / "report.html", out_dir / "report.md", out_dir / "summary.json", figs_dir)
        write_text(paths.html, render_html(doc))
        write_text(paths.markdown, render_markdown(doc, link))
        write_json_atomic(paths.summary, summary)
    except OSError as e:
        raise FlashbedError(f"cannot write the report to {out_dir}: {e.strerror or e}") from None
    return paths
