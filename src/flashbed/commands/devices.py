"""`flashbed devices [show PRESET]`: the device presets, or one as resolved."""

from __future__ import annotations

import argparse

from ..errors import FlashbedError


def add_parser(sub) -> None:
    dv = sub.add_parser("devices", help="list the device presets, or show one")
    dv.set_defaults(handler=run)
    dsub = dv.add_subparsers(dest="devices_cmd")
    dsh = dsub.add_parser("show", help="a preset as resolved: the part it reproduces, its sources and rates")
    dsh.add_argument("preset", help="preset name or preset file, optionally @SIZE")


def run(args: argparse.Namespace) -> int:
    if args.devices_cmd == "show":
        from ..devices import show
        print(show.text(args.preset))
        return 0
    from ..devices import presets
    for name in presets.available():
        try:
            d = presets.load(name)
            print(f"{name:26} {d.info.get('kind', d.kind):8} {d.capacity / (1 << 30):7.2f} GiB  page "
                  f"{d.page_size:>6} B  erase {d.erase_block >> 10:>6} KiB  {d.info.get('description', '')}")
        except FlashbedError as e:
            print(f"{name:26} (unavailable: {e})")
    return 0
