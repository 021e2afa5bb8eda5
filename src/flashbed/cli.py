"""flashbed command line: parse once at the edge, one clear line on bad input."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from . import __version__
from . import filesystems as fscat
from .errors import FlashbedError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="flashbed", description=__doc__)
    p.add_argument("--version", action="version", version=f"flashbed {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    k = sub.add_parser("kernel", help="the lab kernel (user-mode Linux)")
    ksub = k.add_subparsers(dest="kernel_cmd", required=True)
    ksub.add_parser("build", help="build the lab kernel, or reuse the cached one")
    ksub.add_parser("info", help="show the cached lab kernel")

    lab = sub.add_parser("lab", help="boot the lab kernel")
    lsub = lab.add_subparsers(dest="lab_cmd", required=True)
    sm = lsub.add_parser("smoke", help="make, use, check and verify every filesystem")
    sm.add_argument("--fs", action="append", help="filesystem (repeatable; default: all)")
    sm.add_argument("--out", type=Path, help="directory for logs and smoke.json")
    sm.add_argument("--jobs", type=int, help="lab kernels at once (default: cores)")
    bb = lsub.add_parser("bench-boot", help="benchmark: boot to agent-ready and halt")
    bb.add_argument("--boots", type=int, default=7)
    ex = lsub.add_parser("exec", help="run shell commands in one lab boot and print their output")
    ex.add_argument("--disk", type=Path, action="append", default=[], help="host file for /dev/ubdX")
    ex.add_argument("--timeout", type=float, default=300)
    ex.add_argument("cmd", nargs="+", help="a shell command (each argument is one step)")

    sub.add_parser("filesystems", help="list the filesystem catalogue")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except FlashbedError as e:
        print(f"flashbed: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("flashbed: interrupted; finished results are kept", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "kernel":
        from .lab import kernel
        if args.kernel_cmd == "build":
            info = kernel.ensure_kernel()
            print(json.dumps(asdict(info), indent=2))
            return 0
        info = kernel.cached_kernel()
        if info is None:
            raise FlashbedError("no lab kernel is built for the current source/config/patches: run `flashbed kernel build`")
        print(json.dumps(asdict(info), indent=2))
        return 0
    if args.command == "filesystems":
        for name, fs in fscat.CATALOGUE.items():
            print(f"{name:16} {fs.media:6} mkfs: {' '.join(fs.mkfs):28} fsck: "
                  f"{' '.join(fs.check) if fs.check else '(none)':24} {fs.description}")
        return 0
    if args.command == "lab":
        return _lab(args)
    raise AssertionError(args.command)


def _lab(args: argparse.Namespace) -> int:
    from .lab import smoke, uml
    if args.lab_cmd == "smoke":
        names = args.fs or list(fscat.CATALOGUE)
        for n in names:
            fscat.get(n)
        out = args.out or Path(tempfile.mkdtemp(prefix="flashbed-smoke-"))
        results = smoke.run_smoke(names, out, args.jobs)
        smoke.print_table(results)
        print(f"logs and smoke.json: {out}")
        return 0 if all(r.passed for r in results) else 1
    if args.lab_cmd == "bench-boot":
        if args.boots < 1:
            raise FlashbedError("--boots must be at least 1")
        from .lab.kernel import ensure_kernel
        kernel = ensure_kernel()
        ready, total = [], []
        with tempfile.TemporaryDirectory(prefix="flashbed-boot-") as tmp:
            for i in range(args.boots):
                r = uml.boot(uml.BootSpec(run_dir=Path(tmp) / f"b{i}", steps=(uml.Step("noop", "true"),),
                                          timeout=60), kernel)
                if not r.ok or r.boot_seconds is None:
                    raise FlashbedError(f"boot {i} failed: {r.status} {r.error} (console: {r.console_log})")
                ready.append(r.boot_seconds)
                total.append(r.total_seconds)
                print(f"boot {i + 1}/{args.boots}: agent ready {r.boot_seconds:.3f}s, halted {r.total_seconds:.3f}s",
                      file=sys.stderr)
        print(f"boot to agent-ready: median {statistics.median(ready):.3f}s (min {min(ready):.3f}, max {max(ready):.3f})")
        print(f"boot to halt:        median {statistics.median(total):.3f}s (min {min(total):.3f}, max {max(total):.3f})")
        print(f"kernel {kernel.release}, {args.boots} boots")
        return 0
    if args.lab_cmd == "exec":
        with tempfile.TemporaryDirectory(prefix="flashbed-exec-") as tmp:
            steps = tuple(uml.Step(f"s{i}", c, timeout=args.timeout, may_fail=True) for i, c in enumerate(args.cmd))
            disks = tuple(uml.BlockDevice(d) for d in args.disk)
            r = uml.boot(uml.BootSpec(run_dir=Path(tmp), steps=steps, disks=disks,
                                      timeout=args.timeout * len(steps) + 60))
            for s in r.steps:
                print(f"$ {s.cmd}  [{s.status}, rc {s.rc}, {s.seconds:.3f}s]")
                sys.stdout.write(s.stdout)
                sys.stderr.write(s.stderr)
            if not r.ok:
                print(Path(r.console_log).read_text()[-4000:], file=sys.stderr)
                raise FlashbedError(f"lab: {r.status}: {r.error}")
        return 0
    raise AssertionError(args.lab_cmd)


if __name__ == "__main__":
    sys.exit(main())
