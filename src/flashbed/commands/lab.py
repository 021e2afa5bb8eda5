"""`flashbed lab smoke|bench-boot|exec`: boot the lab kernel."""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
from pathlib import Path

from .. import options, scratch
from ..errors import FlashbedError
from ..options import seconds


def add_parser(sub) -> None:
    lab = sub.add_parser("lab", help="boot the lab kernel")
    lab.set_defaults(handler=run)
    lsub = lab.add_subparsers(dest="lab_cmd", required=True)
    sm = lsub.add_parser("smoke", help="make, use, check and verify every filesystem")
    sm.add_argument("--fs", action="append", help="filesystem (repeatable; default: all)")
    sm.add_argument("--out", type=options.path, help="directory for logs and smoke.json: new, empty, or one a "
                    "smoke test wrote before")
    sm.add_argument("--force", action="store_true", help="let --out be a directory of yours that holds files: "
                    "smoke.json and the filesystems' log directories there are replaced")
    sm.add_argument("--jobs", type=int, help="lab kernels at once (default: cores)")
    clock_option(sm)
    kernel_option(sm)
    bb = lsub.add_parser("bench-boot", help="benchmark: boot to agent-ready and halt")
    bb.add_argument("--boots", type=int, default=7)
    bb.add_argument("--compare-pinning", action="store_true",
                    help="also boot without pinning the lab to one CPU, interleaved, and print the ratio")
    kernel_option(bb)
    ex = lsub.add_parser("exec", help="run shell commands in one lab boot and print their output")
    ex.add_argument("--disk", type=options.path, action="append", default=[], help="a disk image for /dev/ubdX (its "
                    "writes go to an overlay unless --destroy-data-on names it), or a block device (only with "
                    "--destroy-data-on, after the checks of `run`)")
    ex.add_argument("--destroy-data-on", action="append", default=[], metavar="PATH",
                    help="let the lab write this --disk itself: repeat its path")
    ex.add_argument("--device", help="a device preset served as runs serve it (e.g. emmc-8g@256M): "
                    "/dev/ubda, or raw NAND through nandsim")
    ex.add_argument("--pace", default="real", choices=["real", "none"], help="emulator clock, with --device")
    clock_option(ex)
    ex.add_argument("--cpu-profile", help="with --clock virtual: the guest CPU's cost profile (default: the "
                    "catalogue's default; none: no cost)")
    kernel_option(ex)
    ex.add_argument("--cpus", type=int, default=1, help="guest vCPUs (7.3 only; leases as many host CPUs)")
    ex.add_argument("--timeout", type=seconds, default=300.0, help="seconds per command (default 300)")
    ex.add_argument("cmd", nargs="+", help="a shell command (each argument is one step)")


def clock_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--clock", default="real", help="real (default) or virtual: the time-travel flavour of the lab "
                   "kernel, each block request completing when the emulator's model says (devices the emulator "
                   "serves; others run in real time)")


def kernel_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kernel", help="lab kernel NAME[:MODE]: 6.12 or 7.3 (default), e.g. 7.3:ptrace")


def run(args: argparse.Namespace) -> int:
    from ..lab import kernel
    choice = kernel.choose(args.kernel)  # a bad name fails before anything is built
    return {"smoke": _smoke, "bench-boot": _bench_boot, "exec": _exec}[args.lab_cmd](args, choice)


def _smoke(args: argparse.Namespace, choice) -> int:
    from .. import clock, writeguard
    from .. import filesystems as fscat
    from ..lab import kernel, smoke
    clk = clock.parse(args.clock)
    if clk.time_travel:
        choice.spec.time_travel_flavour()  # one line if this kernel has none
    names = args.fs or list(fscat.CATALOGUE)
    for n in names:
        fscat.get(n)
    if args.jobs is not None and args.jobs < 1:
        raise FlashbedError(f"--jobs {args.jobs}: give the number of lab kernels at once, at least 1")
    if args.force and not args.out:
        raise FlashbedError("--force lets --out take a directory that holds files: give --out DIR, or drop --force")
    out = writeguard.make_dir(writeguard.check(args.out, "--out", writeguard.Output.DIR, mark="smoke.json",
                                               force=args.force)) if args.out \
        else Path(tempfile.mkdtemp(prefix="flashbed-smoke-", dir=scratch.system_tmp()))  # kept: the user reads it
    results = smoke.run_smoke(names, out, args.jobs, kernel_name=choice.label, time_travel=clk.time_travel)
    smoke.print_table(results)
    used = kernel.lab_kernel(choice.label, time_travel=clk.time_travel)  # built by now: only names it
    print(f"kernel {choice.label}: {used.release}, {used.boot_mode} mode, {clk.value} time; "
          f"logs and smoke.json: {out}")
    return 0 if all(r.passed for r in results) else 1


def _bench_boot(args: argparse.Namespace, choice) -> int:
    from .. import cpus
    from ..lab import kernel
    if args.boots < 1:
        raise FlashbedError("--boots must be at least 1")
    kern = kernel.ensure_kernel(choice.label)
    modes = ["pinned", "unpinned"] if args.compare_pinning else ["pinned" if cpus.enabled() else "unpinned"]
    ready: dict[str, list[float]] = {m: [] for m in modes}
    total: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="flashbed-boot-") as tmp:
        for i in range(args.boots):
            for mode in modes:  # interleaved, so both see the same host
                r = _boot_once(Path(tmp) / f"b{i}-{mode}", kern, mode)
                if not r.ok or r.boot_seconds is None:
                    raise FlashbedError(f"boot {i} failed: {r.status} {r.error} (console: {r.console_log})")
                ready[mode].append(r.boot_seconds)
                total[mode].append(r.total_seconds)
                print(f"boot {i + 1}/{args.boots} {mode}: agent ready {r.boot_seconds:.3f}s, "
                      f"halted {r.total_seconds:.3f}s", file=sys.stderr)
    for mode in modes:
        rd, tt = ready[mode], total[mode]
        print(f"{mode:8} boot to agent-ready: median {statistics.median(rd):.3f}s (min {min(rd):.3f}, max {max(rd):.3f})")
        print(f"{mode:8} boot to halt:        median {statistics.median(tt):.3f}s (min {min(tt):.3f}, max {max(tt):.3f})")
    if len(modes) == 2:
        ratio = statistics.median(ready["unpinned"]) / statistics.median(ready["pinned"])
        print(f"unpinned / pinned boot-to-ready: {ratio:.2f}x")
    print(f"kernel {choice.label} ({kern.release}, {kern.boot_mode}), {args.boots} boots per mode")
    return 0


def _boot_once(run_dir: Path, kern, mode: str):
    """One boot to the agent and halt, pinned to one CPU or not."""
    from .. import cpus
    from ..lab import uml
    from ..lab.boundary import BootSpec, Step
    with contextlib.ExitStack() as stack:
        if mode == "unpinned":
            stack.enter_context(cpus.unpinned())
        return uml.boot(BootSpec(run_dir=run_dir, steps=(Step("noop", "true"),), timeout=60), kern)


def _exec(args: argparse.Namespace, choice) -> int:
    from .. import clock, cpus
    from ..lab import cpuprofile, labexec
    disks = labexec.check_disks(args.disk, tuple(args.destroy_data_on))
    choice.check_cpus(args.cpus)
    cpus.check_count(args.cpus)  # the host's side, before any build
    clk = clock.parse(args.clock)
    if clk.time_travel:
        choice.spec.time_travel_flavour()  # one line if this kernel has none
        if args.cpus > 1:
            raise FlashbedError(f"--clock virtual runs one vCPU (the time-travel kernel has no SMP): "
                                f"drop --cpus {args.cpus} or use --clock real")
    prof = cpuprofile.get(args.cpu_profile)  # one line on an unknown profile, before any build
    if clk.time_travel:
        print(f"flashbed: CPU profile {prof.summary()}", file=sys.stderr)
    elif args.cpu_profile:
        print(f"flashbed: {cpuprofile.REAL_TIME_NOTE}", file=sys.stderr)
    return labexec.run(args.cmd, choice.label, cpus=args.cpus, device=args.device, disks=disks,
                       timeout=args.timeout, pace=args.pace, clock=clk, cpu=prof.costs)
