"""`flashbed filesystems`: the filesystem catalogue, two lines each."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    sub.add_parser("filesystems", help="list the filesystem catalogue").set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from .. import filesystems as fscat
    for name, fs in fscat.CATALOGUE.items():
        mkfs = " ".join(a for a in fs.mkfs if "{" not in a)
        extra = f" (variants: {', '.join(f'+{c}' for c in fs.compressors)})" if fs.read_only \
            else ""
        print(f"{name:16} {fs.media:6} mkfs: {mkfs:28} fsck: "
              f"{' '.join(fs.check) if fs.check else '(none)':24} {fs.description}{extra}")
        print(f"{'':23} recovery: {fs.recovery}; online resize: {fs.online_resize} "
              f"({fscat.FACTS_SOURCE[fs.facts]})")
    return 0
