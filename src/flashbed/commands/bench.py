"""`flashbed bench ...`: benchmarks that print figures."""

from __future__ import annotations

import argparse
import os

from .. import options
from ..errors import FlashbedError
from ..options import items, seconds
from ..variants import fs_items


def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="benchmarks that print figures")
    b.set_defaults(handler=run)
    bsub = b.add_subparsers(dest="bench_cmd", required=True)
    bf = bsub.add_parser("fuse", help="added latency of the emulator's FUSE path per 4 KiB read")
    bf.add_argument("--runs", type=int, default=5)
    bp = bsub.add_parser("presets", help="each preset's four rates measured in the lab vs the published ones")
    bp.add_argument("--device", action="append", help="preset or preset file (default: every calibrated preset)")
    bp.add_argument("--runs", type=int, default=3, help="measurements per preset; the median is shown (default 3)")
    bp.add_argument("--capacity", default="512M", help="device size for presets given without @SIZE")
    bp.add_argument("--runtime", type=seconds, default=10.0, help="seconds per fio job (default 10)")
    bp.add_argument("--clock", default="real", help="real (default) or virtual: the time-travel lab kernel, each "
                    "request completing when the device model says, so the figures do not depend on the host's load")
    buc = bsub.add_parser("usercheck", help="the user's check on the host per run: alone, the sandbox's own cost, "
                          "the check in the sandbox (medians, wall clock and CPU)")
    buc.add_argument("--check", type=options.path, help="a check script (default: examples/walcheck.sh, shipped with "
                     "flashbed: a dd per acknowledged record)")
    buc.add_argument("--records", type=int, default=400, help="records of 512 B in the log, all acknowledged")
    buc.add_argument("--runs", type=int, default=20, help="runs of each, interleaved (medians printed)")
    bhc = bsub.add_parser("hostcall", help="guest-to-host call round trip (every study's host calls pay it)")
    bhc.add_argument("--calls", type=int, default=300)
    bpc = bsub.add_parser("powercut", help="power-cut cycles per hour per core (cut, recover, verify)")
    bpc.add_argument("--device", default="emmc-8g@64M")
    bpc.add_argument("--fs", default="ext4,f2fs", help="comma-separated filesystem variants")
    bpc.add_argument("--cycles", type=int, default=10)
    bpc.add_argument("--pace", default="none", choices=["none", "real"])
    bpc.add_argument("--mode", default="async", choices=["async", "sync"])
    bpc.add_argument("--seed", type=int, default=1)
    bl = bsub.add_parser("lab", help="the lab kernels side by side: boot, syscall, cached reads, emmc-8g "
                         "rates, requests per 128 MiB write, power-cut cycles")
    bl.add_argument("--kernel", action="append",
                    help="kernel to measure, NAME[:MODE] (repeatable; default: 6.12 and 7.3)")
    bl.add_argument("--runs", type=int, default=3, help="runs per kernel, interleaved (medians printed)")
    bl.add_argument("--parts", default="lab,device,powercut",
                    help="comma-separated: lab (boot, syscall, cached read, python start), device (emmc-8g), "
                         "powercut, starts (where a program's start goes: fork, exec, page faults, at three "
                         "fault-around windows)")
    bl.add_argument("--cycles", type=int, default=10, help="power-cut cycles per kernel")
    bck = bsub.add_parser("clock", help="the same fio jobs in real and virtual time, against the device model's "
                          "own timing, with wall-clock seconds per figure")
    bck.add_argument("--device", default="emmc-8g@512M", help="an emulated block preset@SIZE")
    bck.add_argument("--runs", type=int, help="runs per clock, interleaved (medians printed; default 3, "
                     "with --profile 1)")
    bck.add_argument("--runtime", type=seconds, default=5.0, help="seconds (guest time) per random job")
    bck.add_argument("--hog", action="store_true", help="load every host CPU with a busy loop meanwhile")
    bck.add_argument("--profile", help="instead of the fio jobs: a whole `flashbed run --profile P` on --device in "
                     "each clock, timed as a process (default --runs 1)")
    bck.add_argument("--keep", type=options.path, help="with --profile: keep the runs' directories under this new directory")
    bcp = bsub.add_parser("cpu", help="each guest CPU cost profile in virtual time: a null-syscall loop's guest time "
                          "per call, fio 4 KiB QD1 random read with the device's and the CPU's share")
    bcp.add_argument("--device", default="emmc-8g@512M", help="an emulated block preset@SIZE")
    bcp.add_argument("--cpu-profile", action="append", help="profiles (repeatable or comma-separated; default all)")
    bcp.add_argument("--runtime", type=seconds, default=5.0, help="seconds (guest time) of the random read")
    bcp.add_argument("--calls", type=int, default=100_000, help="getppid calls in the null-syscall loop")
    btn = bsub.add_parser("tune", help="what --tune would add to a finished run, without running it: the tuning "
                          "pass's first step (option sets, cells, their plain variants' cell-seconds) against the run")
    btn.add_argument("run_dir", metavar="RUN", help="a run's id under runs/ or its directory")
    blo = bsub.add_parser("leftovers", help="interrupts (SIGINT, SIGTERM, SIGKILL at random moments) of commands, "
                          "then a scan for what they left: ~/.uml entries, processes, mounts, flashbed-* in the "
                          "temporary directory, files outside their output; exit 1 if any")
    blo.add_argument("--interrupts", type=int, default=50, help="commands started and interrupted (default 50)")
    blo.add_argument("--commands", default="lab", help="lab (default: lab smoke and a one-cell run, which boot "
                     "the lab), cheap (commands that boot none), or a comma-separated list of their names")
    blo.add_argument("--seed", type=int, default=1, help="the signals' and moments' draw")
    bcs = bsub.add_parser("crashstates", help="crash states checked per hour per core, and the time split")
    bcs.add_argument("--device", default="emmc-8g@128M")
    bcs.add_argument("--fs", default="ext4,f2fs", help="comma-separated filesystem variants")
    bcs.add_argument("--workload", default="powercut",
                     help="powercut, sequences, or your workload script (as `run --workload` takes it)")
    bcs.add_argument("--check", help="with your workload: your check (a trivial check runs beside it)")
    bcs.add_argument("--ops", type=int, default=60, help="powercut workload operations")
    bcs.add_argument("--pace", default="none", choices=["none", "real"])
    bcs.add_argument("--clock", default="virtual", choices=["real", "virtual"],
                     help="the lab's clock: virtual (default: the time-travel kernel, as `run` gives crash-state "
                          "cells on an emulated device) or real (the split per state on the wall clock)")
    bcs.add_argument("--no-dedup", action="store_true", help="check every state, not each distinct one once")
    bcs.add_argument("--seed", type=int, default=1)


def run(args: argparse.Namespace) -> int:
    if args.bench_cmd == "leftovers":
        from ..bench import leftovers
        return leftovers.bench(args.interrupts, args.commands, args.seed)
    {"lab": _lab, "powercut": _powercut, "crashstates": _crashstates, "clock": _clock, "cpu": _cpu,
     "hostcall": _hostcall, "usercheck": _usercheck, "fuse": _fuse, "presets": _presets,
     "tune": _tune}[args.bench_cmd](args)
    return 0


def _tune(args: argparse.Namespace) -> None:
    from ..bench import tunecost
    from ..store import resolve_run
    tunecost.bench(resolve_run(args.run_dir).root)


def _lab(args: argparse.Namespace) -> None:
    from ..bench import lab as lab_bench
    lab_bench.bench(args.kernel or ["6.12", "7.3"], args.runs, list(items([args.parts], "parts")), args.cycles)


def _powercut(args: argparse.Namespace) -> None:
    from ..bench import powercut
    if args.cycles < 1:
        raise FlashbedError("--cycles must be at least 1")
    powercut.bench(args.device, list(fs_items([args.fs])), args.cycles, args.pace, args.mode, args.seed)


def _crashstates(args: argparse.Namespace) -> None:
    from ..bench import crashstates
    if args.ops < 1:
        raise FlashbedError("--ops must be at least 1")
    from .. import clock as lab_clock
    crashstates.bench(args.device, list(fs_items([args.fs])), args.workload, args.ops, args.pace, args.seed,
                      check=args.check, dedup=not args.no_dedup, clock=lab_clock.parse(args.clock))


def _clock(args: argparse.Namespace) -> None:
    from ..bench import clock as clock_bench
    runs = args.runs if args.runs is not None else (1 if args.profile else 3)
    if runs < 1 or args.runtime <= 0:
        raise FlashbedError("--runs must be at least 1 and --runtime positive")
    if args.profile:
        _check_profile_options(args)
    elif args.keep:
        raise FlashbedError("--keep keeps the runs of --profile: give --profile, or drop --keep")
    _emulated_block(args.device, "bench clock")
    if args.profile:
        from .. import writeguard
        from ..bench import profilewall
        keep = writeguard.make_dir(args.keep_allowed) if args.keep else None  # where the guard checked it
        profilewall.bench(args.profile, args.device, runs, keep)
        return
    clock_bench.bench(args.device, runs, args.runtime, args.hog)


def _check_profile_options(args: argparse.Namespace) -> None:
    """bench clock --profile: a profile, no --hog, and --keep a new directory the guard allows."""
    from ..profiles import PROFILES
    if args.profile not in PROFILES:
        raise FlashbedError(f"--profile '{args.profile}' is not a profile: choose from "
                            f"{', '.join(PROFILES)}")
    if args.hog:
        raise FlashbedError("--hog times fio jobs, not a whole profile: drop --hog or --profile")
    if args.keep and os.path.lexists(args.keep):
        raise FlashbedError(f"--keep {args.keep} exists: name a new directory")
    if args.keep:
        from .. import writeguard
        args.keep_allowed = writeguard.check(args.keep, "--keep", writeguard.Output.DIR)


def _emulated_block(spec: str, what: str) -> None:
    """One line unless `spec` is an emulated block device (what bench clock and cpu measure)."""
    from ..devices import presets
    dev = presets.load_spec(spec)
    if dev.backend != "emulator" or dev.kind != "block":
        raise FlashbedError(f"{what} measures an emulated block device, not {spec}")


def _cpu(args: argparse.Namespace) -> None:
    from ..bench import cpu as cpu_bench
    from ..lab import cpuprofile
    profiles = cpuprofile.labels(items(args.cpu_profile, "cpu-profile"))
    if args.calls < 1 or not 0 < args.runtime < float("inf"):
        raise FlashbedError("--calls must be at least 1 and --runtime a positive number of seconds")
    _emulated_block(args.device, "bench cpu")
    cpu_bench.bench(args.device, profiles, args.runtime, args.calls)


def _hostcall(args: argparse.Namespace) -> None:
    from ..bench import hostcall
    if args.calls < 1:
        raise FlashbedError("--calls must be at least 1")
    hostcall.bench(args.calls)


def _usercheck(args: argparse.Namespace) -> None:
    from ..bench import usercheck
    if args.runs < 1 or args.records < 0:
        raise FlashbedError("--runs must be at least 1 and --records at least 0")
    if args.check and not os.path.isfile(args.check):
        raise FlashbedError(f"--check {args.check} is not a file: give the check script")
    usercheck.bench(args.check, args.records, args.runs)


def _fuse(args: argparse.Namespace) -> None:
    from ..bench import devices as bench
    if args.runs < 1:
        raise FlashbedError("--runs must be at least 1")
    bench.fuse_latency(args.runs)


def _presets(args: argparse.Namespace) -> None:
    from .. import clock as lab_clock
    from ..bench import presets as bench_presets
    if args.runs < 1 or args.runtime <= 0:
        raise FlashbedError("--runs must be at least 1 and --runtime positive")
    clock = lab_clock.parse(args.clock)
    bench_presets.run(list(items(args.device, "device")) or bench_presets.calibrated(), args.capacity,
                      args.runs, args.runtime, clock=clock)
