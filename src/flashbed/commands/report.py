"""`flashbed report RUN [B]`: a run's report, or two runs compared."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .. import options
from ..errors import FlashbedError


def add_parser(sub) -> None:
    rep = sub.add_parser("report", help="write report.html, report.md, summary.json for a run (or compare two)")
    rep.set_defaults(handler=run)
    rep.add_argument("runs", nargs="+", metavar="RUN")
    rep.add_argument("--out", type=options.path, help="the report's directory (default: the run's own; for two runs "
                     "compare-A-vs-B): never inside another run")
    rep.add_argument("--force", action="store_true", help="replace files of the report's names in --out that "
                     "flashbed did not write")


def run(args: argparse.Namespace) -> int:
    from ..report import compare, write_report
    from ..store import resolve_run
    if args.force and args.out is None and len(args.runs) == 1:
        raise FlashbedError("--force replaces files in --out: a run's own report needs none; drop --force")
    if len(args.runs) == 1:
        store = resolve_run(args.runs[0])
        if args.out is None and not os.access(store.root, os.W_OK | os.X_OK):  # said before it is rendered
            raise FlashbedError(f"cannot write the report into run {store.root} (permission denied: its owner's): "
                                f"give --out DIR, a directory of your own, for the report")
        paths = write_report(store.root, args.out, force=args.force)
        if not any(r.ok for r in store.results()):  # no evidence: the report recommends nothing
            print(f"report: {paths.html}")
            print(f"flashbed: no cell of run {store.root.name} finished: its report recommends nothing",
                  file=sys.stderr)
            return 1
    elif len(args.runs) == 2:
        a, b = (resolve_run(r).root for r in args.runs)
        paths = compare(a, b, args.out or Path(f"compare-{a.name}-vs-{b.name}"), force=args.force)
        from ..report.comparison import TEXT_NAME
        print((paths.html.parent / TEXT_NAME).read_text(), end="")
    else:
        raise FlashbedError("flashbed report takes one run, or two runs to compare")
    print(f"report: {paths.html}")
    return 0
