"""`flashbed kernel build|info`: the lab kernels (user-mode Linux 6.12 and 7.3)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from ..errors import FlashbedError


def add_parser(sub) -> None:
    k = sub.add_parser("kernel", help="the lab kernels (user-mode Linux 6.12 and 7.3)")
    k.set_defaults(handler=run)
    ksub = k.add_subparsers(dest="kernel_cmd", required=True)
    kb = ksub.add_parser("build", help="build a lab kernel, or reuse the cached one")
    kb.add_argument("--kernel", help="6.12, 7.3 or all (default: the default kernel)")
    kb.add_argument("--clock", default="real", help="virtual: build the kernel's time-travel flavour instead")
    ksub.add_parser("info", help="show every lab kernel: built or not, source, patches, boot mode")


def run(args: argparse.Namespace) -> int:
    if args.kernel_cmd == "build":
        return _build(args)
    print(json.dumps(_info(), indent=2))
    return 0


def _build(args: argparse.Namespace) -> int:
    from .. import clock
    from ..lab import kernel
    tt = clock.parse(args.clock).time_travel
    names = list(kernel.KERNELS) if args.kernel == "all" else [kernel.choose(args.kernel).spec.name]
    if tt:
        names = [n for n in names if kernel.KERNELS[n].time_travel_ok] if args.kernel == "all" else names
        for n in names:
            kernel.KERNELS[n].time_travel_flavour()  # one line if it has none
    infos = [kernel.ensure_kernel(n, time_travel=tt) for n in names]
    print(json.dumps([asdict(i) for i in infos] if len(infos) > 1 else asdict(infos[0]), indent=2))
    return 0


def _info() -> list[dict]:
    """Every lab kernel: built or not, its source, patches and boot modes, its time-travel flavour."""
    from ..lab import kernel
    rows = []
    for name, spec in kernel.KERNELS.items():
        row: dict = {"name": name, "source_package": spec.package, "built": False,
                     "patches": [p.name for p in spec.patch_files()],
                     "boot_mode": spec.default_mode.value}
        try:
            info = kernel.cached_kernel(name)
            row.update(asdict(info) if info else {"source_version": kernel.source_version(spec)})
            row["built"] = info is not None
        except FlashbedError as e:  # 6.12's source package not installed: say so, show the rest
            row["source_version"] = f"unavailable: {e}"
        row["default"] = name == kernel.DEFAULT_KERNEL
        row["boot_modes"] = [m.value for m in spec.modes]
        if spec.time_travel_ok:  # the time-travel flavour (--clock virtual): built or not
            try:
                tt = kernel.cached_kernel(name, time_travel=True)
                row["time_travel_flavour"] = {"built": tt is not None, **({"key": tt.key, "path": tt.path} if tt else {})}
            except FlashbedError as e:
                row["time_travel_flavour"] = {"built": False, "error": str(e)}
        rows.append(row)
    return rows
