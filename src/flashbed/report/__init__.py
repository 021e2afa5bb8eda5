"""The flashbed report: HTML (self-contained), Markdown and summary.json from a run's cell results.

    write_report(run_dir, out_dir=None) -> ReportPaths   one run
    compare(run_a, run_b, out_dir) -> ReportPaths        B against A, with ratios
    recommendation_text(run_dir) -> str                  the recommendation section as Markdown

Only manifest.json and cells/*.json are read. Recommendation weights: weights.toml in this
package (documented in its comments). Errors a user can act on raise FlashbedError.
The comparison lives in comparison.py: a submodule named `compare` would replace the
function `compare` on this package once imported.
"""

from __future__ import annotations

import os
from pathlib import Path

from .output import ReportPaths

__all__ = ["ReportPaths", "write_report", "compare", "recommendation_text"]


def write_report(run_dir: Path, out_dir: Path | None = None, force: bool = False) -> ReportPaths:
    """Write report.html, report.md, summary.json (and report-figures/*.svg) into out_dir or run_dir
    (out_dir: where writeguard allows a report; `force` replaces files of the report's names there
    that flashbed did not write)."""
    from .build import build_document
    from .load import load_run
    from .output import write_outputs
    from .recommend import recommend
    from .summary import summary

    where = out_dir_for(out_dir, "--out", own_run=Path(run_dir)) if out_dir is not None else Path(run_dir)
    run = load_run(Path(run_dir))
    recs = recommend(run)
    doc = build_document(run, recs)
    own = os.path.realpath(where) == os.path.realpath(run_dir)
    return write_outputs(doc, summary(run, recs, doc), where, own_run=own, force=force)


def compare(run_a: Path, run_b: Path, out_dir: Path, force: bool = False) -> ReportPaths:
    """Write a comparison report of run B against run A (ratios B/A) into out_dir (never a run's)."""
    from .comparison import compare_runs
    return compare_runs(Path(run_a), Path(run_b), out_dir_for(out_dir, "--out"), force=force)


def out_dir_for(out_dir: Path, option: str, own_run: Path | None = None) -> Path:
    """Where writeguard lets a report go (resolved; made when the report is written)."""
    from .. import writeguard
    return writeguard.check(out_dir, option, writeguard.Output.REPORT,
                            own_run=Path(os.path.realpath(own_run)) if own_run is not None else None).path


def recommendation_text(run_dir: Path) -> str:
    """The recommendation section of the report, as Markdown."""
    from .load import load_run
    from .markdown import section_md
    from .recommend import recommendation_section

    run = load_run(Path(run_dir))
    return section_md(recommendation_section(run), 2).rstrip() + "\n"
