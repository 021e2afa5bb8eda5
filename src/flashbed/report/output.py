"""Write report.html, report.md, summary.json and the figures as SVG files (atomically).

A report writes only the files it owns: the ones it lists in its directory's index
(`.flashbed-report.json`) when it writes them. Writing again, it replaces those and deletes
the ones it no longer writes (a figure gone); a file of the same name it did not write is
replaced only with --force, and nothing else is ever deleted. In a run's own directory
(the default) the report's files are flashbed's by definition, also in runs from before the
index. Where a report may go at all is writeguard's decision (report/__init__.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import writeguard
from ..errors import FlashbedError
from .doc import Document, Figure
from .html import render_html
from .markdown import render_markdown

FIGURES_DIR = "report-figures"
INDEX = ".flashbed-report.json"  # the files this directory's report wrote: the only ones it replaces or deletes


@dataclass(frozen=True)
class ReportPaths:
    html: Path
    markdown: Path
    summary: Path
    figures: Path  # directory of the figures as SVG files (linked from report.md)


def write_text(path: Path, text: str) -> None:
    """A file the report owns, written whole (a temporary file renamed over it)."""
    writeguard.write_file(writeguard.Allowed(str(path), path, exists=path.exists(), replace=True), text)


def _owned(out_dir: Path) -> set[str]:
    """The files the report in `out_dir` wrote before (its index), by path relative to it."""
    try:
        listed = json.loads((out_dir / INDEX).read_text()).get("files", [])
    except (OSError, ValueError, AttributeError):
        return set()
    return {f for f in listed if isinstance(f, str) and "/" not in f.removeprefix(f"{FIGURES_DIR}/") and
            ".." not in f}


def write_files(out_dir: Path, files: dict[str, str], *, own_run: bool = False, force: bool = False) -> None:
    """`files` (name relative to out_dir -> text) written into out_dir, which writeguard allowed."""
    out_dir = Path(out_dir)
    before = _owned(out_dir)
    figs = out_dir / FIGURES_DIR
    if os.path.islink(figs) or (figs.exists() and not figs.is_dir()):
        raise FlashbedError(f"{figs} is not a directory the report made: move it away, or give another --out")
    if own_run:  # a run's own directory: its report files are flashbed's, listed or not (older runs)
        before |= {n for n in ("report.html", "report.md", "summary.json", "comparison.txt")}
        before |= {f"{FIGURES_DIR}/{p.name}" for p in figs.glob("*.svg")} if figs.is_dir() else set()
    clash = sorted(n for n in files if os.path.lexists(out_dir / n) and n not in before)
    if clash and not force:
        raise FlashbedError(f"--out {out_dir}: {clash[0]} is there and flashbed did not write it"
                            f"{f' (nor {len(clash) - 1} more of the report files)' if len(clash) > 1 else ''}: give "
                            f"another directory, or --force to replace the report's files")
    try:
        figs.mkdir(parents=True, exist_ok=True)
        # the index first, naming what is about to be written: an interrupted write leaves no file unowned
        write_text(out_dir / INDEX, json.dumps({"files": sorted(set(files) | (before & _existing(out_dir, before)))}))
        for name, text in files.items():
            write_text(out_dir / name, text)
        for stale in sorted(before - set(files)):
            p = out_dir / stale
            if p.is_file() and not p.is_symlink():
                p.unlink()
        write_text(out_dir / INDEX, json.dumps({"files": sorted(files)}))
    except OSError as e:
        raise FlashbedError(f"cannot write the report to {out_dir}: {e.strerror or e}") from None


def _existing(out_dir: Path, names: set[str]) -> set[str]:
    return {n for n in names if (out_dir / n).is_file()}


def write_outputs(doc: Document, summary: dict[str, Any], out_dir: Path, *, extra: dict[str, str] | None = None,
                  own_run: bool = False, force: bool = False) -> ReportPaths:
    out_dir = Path(out_dir)
    figs = doc.figures()

    def link(f: Figure) -> str:
        return f"{FIGURES_DIR}/{f.id}.svg"
    files = {link(f): f.svg for f in figs}
    files["report.html"] = render_html(doc)
    files["report.md"] = render_markdown(doc, link)
    files["summary.json"] = json.dumps(summary, indent=1, sort_keys=False)
    files.update(extra or {})
    write_files(out_dir, files, own_run=own_run, force=force)
    return ReportPaths(out_dir / "report.html", out_dir / "report.md", out_dir / "summary.json",
                       out_dir / FIGURES_DIR)
