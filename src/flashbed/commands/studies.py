"""`flashbed studies`: the studies with their parameters (what `--set` takes)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    sub.add_parser("studies", help="list the studies").set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..studies import STUDIES
    for name, st in STUDIES.items():
        facts = [f for f, on in (("timing-free: no delays at --pace auto", st.timing_free),
                                 ("runs on read-only images", st.runs_read_only)) if on]
        print(f"{name:12} {'/'.join(st.media):10} {st.description}" + (f" ({'; '.join(facts)})" if facts else ""))
        for line in st.param_lines():
            print(f"{'':12} {line}")
    return 0
