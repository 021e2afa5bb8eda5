"""`flashbed results RUN [--study S]`: a run's figures as text tables."""

from __future__ import annotations

import argparse

from ..errors import FlashbedError
from ..options import items


def add_parser(sub) -> None:
    res = sub.add_parser("results", help="print a run's results as a table")
    res.set_defaults(handler=run)
    res.add_argument("run", help="run id under runs/ or a run directory")
    res.add_argument("--study", action="append")


def run(args: argparse.Namespace) -> int:
    from ..report.text import print_results
    from ..store import resolve_run
    store = resolve_run(args.run)
    studies = items(args.study, "study")
    _check_studies_of(store, studies)
    print_results(store, studies=studies)
    return 0


def _check_studies_of(store, studies: tuple[str, ...]) -> None:
    """One line for a --study the run does not have (an empty table would pass for no results)."""
    from ..studies import STUDIES
    for s in studies:
        if s not in STUDIES:
            raise FlashbedError(f"unknown study '{s}': choose from {', '.join(STUDIES)}")
    have = sorted({r.key.study for r in store.results()})
    missing = [s for s in studies if s not in have]
    if missing:
        raise FlashbedError(f"run {store.root.name} has no cells of study {missing[0]}: it has "
                            f"{', '.join(have) or 'none yet'}")
