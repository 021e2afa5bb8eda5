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

from pathlib import Path

from .output import ReportPaths

__all__ = ["ReportPaths", "write_report", "compare", "recommendation_text"]


def write_report(run_dir: Path, out_dir: Path | None = None) -> ReportPaths:
    """Write report.html, report.md, summary.json (and report-figures/*.svg) into out_dir or run_dir."""
    from .build import build_document
    from .load import load_run
    from .output import write_outputs
    from .recommend import recommend
    from .summary import summary

    run = load_run(Path(run_dir))
    recs = recommend(run)
    doc = build_document(run, recs)
    return write_outputs(doc, summary(run, recs, doc), Path(out_dir) if out_dir is not None else Path(run_dir))


def compare(run_a: Path, run_b: Path, out_dir: Path) -> ReportPaths:
    """Write a comparison report of run B against run A (ratios B/A) into out_dir."""
    from .comparison import compare_runs
    return compare_runs(Path(run_a), Path(run_b), Path(out_dir))


def recommendation_text(run_dir: Path) -> str:
    """The recommendation section of the report, as Markdown."""
    from .load import load_run
    from .markdown import section_md
    from .recommend import recommendation_section

    run = load_run(Path(run_dir))
    return section_md(recommendation_section(run), 2).rstrip() + "\n"
