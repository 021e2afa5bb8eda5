"""`flashbed crashstate replay RUN CELL:STATE --image FILE [--check]`: a failed crash state again."""

from __future__ import annotations

import argparse

from .. import options


def add_parser(sub) -> None:
    cs = sub.add_parser("crashstate", help="a crash state of a run's crashstates cells")
    cs.set_defaults(handler=run)
    csub = cs.add_subparsers(dest="crashstate_cmd", required=True)
    rp = csub.add_parser("replay", help="rebuild a failed crash state as a device image (from the kept write log)")
    rp.add_argument("run", help="run id under runs/ or a run directory")
    rp.add_argument("state", help="CELL:STATE as `flashbed results` lists it (or STATE alone if one cell has it)")
    rp.add_argument("--image", type=options.path, required=True,
                    help="where the image goes: a new file (never inside a run directory)")
    rp.add_argument("--force", action="store_true", help="replace an existing --image file")
    rp.add_argument("--destroy-data-on", action="append", default=[], metavar="DEVICE",
                    help="allow --image to be this block device, whose data the image overwrites: repeat its path")
    rp.add_argument("--check", action="store_true",
                    help="also boot the lab on it and recover and verify it as the cell did")


def run(args: argparse.Namespace) -> int:
    from .. import crashreplay
    return crashreplay.replay(args.run, args.state, args.image, args.check,
                              destroy_data_on=tuple(args.destroy_data_on), force=args.force)
