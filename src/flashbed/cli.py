"""flashbed command line: parse once at the edge, one clear line on bad input."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path

from . import __version__
from . import filesystems as fscat
from .errors import FlashbedError, no_traceback
from .options import Parser as _Parser
from .options import one_line, seconds


EXIT_CODES = """exit codes:
  0    done: every cell ran (a measured outcome such as a filesystem hanging on corrupted media is a result)
  1    done, but cells failed or errored: a study step that had to succeed broke, or flashbed or the lab
       did (`flashbed results RUN` lists them; a rerun retries the errored ones); a smoke test or a replayed
       crash state that did not come out as recorded
  2    bad input or a refusal: nothing was run (one line on stderr says what to do)
  130  interrupted (Ctrl-C): finished cells are kept; the same command resumes
  143  terminated (SIGTERM): as Ctrl-C
  141  the reader of stdout went away (e.g. `| head`)"""


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="flashbed", description=__doc__, epilog=EXIT_CODES,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"flashbed {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    k = sub.add_parser("kernel", help="the lab kernels (user-mode Linux 6.12 and 7.3)")
    ksub = k.add_subparsers(dest="kernel_cmd", required=True)
    kb = ksub.add_parser("build", help="build a lab kernel, or reuse the cached one")
    kb.add_argument("--kernel", help="6.12, 7.3 or all (default: the default kernel)")
    kb.add_argument("--clock", default="real", help="virtual: build the kernel's time-travel flavour instead")
    ksub.add_parser("info", help="show every lab kernel: built or not, source, patches, boot mode")

    lab = sub.add_parser("lab", help="boot the lab kernel")
    lsub = lab.add_subparsers(dest="lab_cmd", required=True)
    sm = lsub.add_parser("smoke", help="make, use, check and verify every filesystem")
    sm.add_argument("--fs", action="append", help="filesystem (repeatable; default: all)")
    sm.add_argument("--out", type=Path, help="directory for logs and smoke.json")
    sm.add_argument("--jobs", type=int, help="lab kernels at once (default: cores)")
    _clock_option(sm)
    _kernel_option(sm)
    bb = lsub.add_parser("bench-boot", help="benchmark: boot to agent-ready and halt")
    bb.add_argument("--boots", type=int, default=7)
    bb.add_argument("--compare-pinning", action="store_true",
                    help="also boot without pinning the lab to one CPU, interleaved, and print the ratio")
    _kernel_option(bb)
    ex = lsub.add_parser("exec", help="run shell commands in one lab boot and print their output")
    ex.add_argument("--disk", type=Path, action="append", default=[], help="a disk image for /dev/ubdX (its "
                    "writes go to an overlay unless --destroy-data-on names it), or a block device (only with "
                    "--destroy-data-on, after the checks of `run`)")
    ex.add_argument("--destroy-data-on", action="append", default=[], metavar="PATH",
                    help="let the lab write this --disk itself: repeat its path")
    ex.add_argument("--device", help="a device preset served as runs serve it (e.g. emmc-8g@256M): "
                    "/dev/ubda, or raw NAND through nandsim")
    ex.add_argument("--pace", default="real", choices=["real", "none"], help="emulator clock, with --device")
    _clock_option(ex)
    ex.add_argument("--cpu-profile", help="with --clock virtual: the guest CPU's cost profile (default: the "
                    "catalogue's default; none: no cost)")
    _kernel_option(ex)
    ex.add_argument("--cpus", type=int, default=1, help="guest vCPUs (7.3 only; leases as many host CPUs)")
    ex.add_argument("--timeout", type=seconds, default=300.0, help="seconds per command (default 300)")
    ex.add_argument("cmd", nargs="+", help="a shell command (each argument is one step)")

    sub.add_parser("filesystems", help="list the filesystem catalogue")
    dv = sub.add_parser("devices", help="list the device presets, or show one")
    dsub = dv.add_subparsers(dest="devices_cmd")
    dsh = dsub.add_parser("show", help="a preset as resolved: the part it reproduces, its sources and rates")
    dsh.add_argument("preset", help="preset name or preset file, optionally @SIZE")
    from .probe import command as probe_command
    probe_command.add_parser(sub)
    sub.add_parser("studies", help="list the studies")

    r = sub.add_parser("run", help="run studies on emulated or real devices (resumable)", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--profile", default=None, help="quick (default) or paper")
    r.add_argument("--fs", action="append", help="filesystem variant, e.g. ext4, f2fs+tuned, ext2@f2fs "
                   "(repeatable or comma-separated; default: the ten block filesystems)")
    r.add_argument("--device", action="append", help="device preset, optionally @SIZE (e.g. lexar-c10-16g@1G), "
                   "a preset file ./mypart.toml[@SIZE], or a real block device (/dev/sdX, /dev/mmcblkN)")
    r.add_argument("--destroy-data-on", action="append", default=[], metavar="DEVICE",
                   help="allow a run on a real device that carries data (a filesystem or partition table): "
                   "repeat its --device path")
    r.add_argument("--study", action="append", help="study name (repeatable or comma-separated)")
    r.add_argument("--workload", metavar="FILE", help="your own workload: a fio job file (.fio) or an executable "
                   "script (run with $FLASHBED_MNT, the filesystem under test, as its working directory)")
    r.add_argument("--check", metavar="FILE", help="with --workload: an executable run after recovery in every "
                   "crash state of the workload (exit 0: your data is consistent)")
    r.add_argument("--age", type=int, metavar="FILL", help="with --workload: fill the filesystem to FILL %% with "
                   "a file population and churn it first, then run the workload as a lifetime phase (6 passes "
                   "unless --set workload.passes=N)")
    r.add_argument("--daily-writes", metavar="SIZE", help="with --workload: host writes a day for the projected "
                   "lifetime, e.g. 2G (default: the workload's measured rate, around the clock)")
    r.add_argument("--repeat", type=int, default=None)
    r.add_argument("--seed", type=int, default=None)
    r.add_argument("--set", action="append", default=[], metavar="STUDY.PARAM=VALUE",
                   help="override a study parameter, e.g. bigfile.size=256M")
    r.add_argument("--iterations", type=int, help="power cuts / corruption runs per cell (powercut, corruption)")
    r.add_argument("--jobs", type=int, help="cells at once (default: cores)")
    r.add_argument("--out", type=Path, help="run directory (default: runs/<id>)")
    r.add_argument("--resume", metavar="RUN", help="finish an earlier run (its id under runs/ or its directory)")
    r.add_argument("--executor", default="local", choices=["local", "dask"])
    r.add_argument("--scheduler", help="Dask scheduler address, with --executor dask")
    r.add_argument("--no-report", action="store_true", help="do not write the report at the end")
    r.add_argument("--pace", help="emulator clock of real-time cells: auto (default: none for the failure studies, "
                   "whose outcomes do not depend on timing, real for the rest), real, or none (skip the device's "
                   "delays); virtual-time cells cost no wall-clock time for them")
    r.add_argument("--kernel", action="append", help="lab kernel NAME[:MODE]: 6.12 or 7.3 (default), e.g. "
                   "7.3:ptrace (repeatable or comma-separated: cells of each)")
    r.add_argument("--cpus", type=int, help="guest vCPUs of each lab (default 1; 7.3 only; each lab leases as "
                   "many host CPUs); a scaling case sets its own")
    r.add_argument("--target", metavar="ssh://USER@HOST[:PORT]", help="run the studies on a board over SSH, on "
                   "its own kernel and its device (--device /dev/mmcblkNpM on the board)")
    r.add_argument("--ssh-key", metavar="FILE", help="the key for --target (default: your ssh config and agent)")
    r.add_argument("--ssh-config", metavar="FILE", help="an ssh_config for --target instead of your own")
    r.add_argument("--power-cmd", metavar="'CMD {action}'", help="the board's power switch for --target, a command "
                   "run here with {action} made on, off or cycle: enables the powercut study on the board")
    r.add_argument("--clock", action="append", help="the lab's clock: auto (default), real or virtual (real,virtual: "
                   "cells of each). Virtual: the time-travel lab kernel, each request of an emulated device "
                   "completing when its model says. Auto: virtual time for every cell that can run in it; real "
                   "time, one line per reason, for nandsim and real devices, a kernel without a virtual-time "
                   "flavour (6.12), more than one vCPU, and the cpu study; a board keeps its own time")
    r.add_argument("--robust", nargs="?", type=int, const=-1, metavar="DRAWS",  # -1: the default draws
                   help="also run each use case's decisive studies on variants of the twin across its preset's "
                   "assumptions (each at the ends of its range, and DRAWS joint draws; default 8); the report says "
                   "whether each answer holds")
    r.add_argument("--cpu-profile", action="append", help="in virtual time, the guest CPU's cost per syscall, "
                   "page fault and context switch: a profile of lab/cpuprofiles.toml (none, cortex-a8 (default), "
                   "cortex-a72, rpi4; repeatable or comma-separated: cells of each); ignored in real time")

    b = sub.add_parser("bench", help="benchmarks that print figures")
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
                         "powercut")
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
    bck.add_argument("--keep", help="with --profile: keep the runs' directories under this new directory")
    bcp = bsub.add_parser("cpu", help="each guest CPU cost profile in virtual time: a null-syscall loop's guest time "
                          "per call, fio 4 KiB QD1 random read with the device's and the CPU's share")
    bcp.add_argument("--device", default="emmc-8g@512M", help="an emulated block preset@SIZE")
    bcp.add_argument("--cpu-profile", action="append", help="profiles (repeatable or comma-separated; default all)")
    bcp.add_argument("--runtime", type=seconds, default=5.0, help="seconds (guest time) of the random read")
    bcp.add_argument("--calls", type=int, default=100_000, help="getppid calls in the null-syscall loop")
    bcs = bsub.add_parser("crashstates", help="crash states checked per hour per core, and the time split")
    bcs.add_argument("--device", default="emmc-8g@128M")
    bcs.add_argument("--fs", default="ext4,f2fs", help="comma-separated filesystem variants")
    bcs.add_argument("--workload", default="powercut",
                     help="powercut, sequences, or your workload script (as `run --workload` takes it)")
    bcs.add_argument("--check", help="with your workload: your check (a trivial check runs beside it)")
    bcs.add_argument("--ops", type=int, default=60, help="powercut workload operations")
    bcs.add_argument("--pace", default="none", choices=["none", "real"])
    bcs.add_argument("--clock", default="real", choices=["real", "virtual"],
                     help="the lab's clock (virtual: the time-travel kernel, as `run` gives crash-state cells)")
    bcs.add_argument("--no-dedup", action="store_true", help="check every state, not each distinct one once")
    bcs.add_argument("--seed", type=int, default=1)

    cs = sub.add_parser("crashstate", help="a crash state of a run's crashstates cells")
    csub = cs.add_subparsers(dest="crashstate_cmd", required=True)
    rp = csub.add_parser("replay", help="rebuild a failed crash state as a device image (from the kept write log)")
    rp.add_argument("run", help="run id under runs/ or a run directory")
    rp.add_argument("state", help="CELL:STATE as `flashbed results` lists it (or STATE alone if one cell has it)")
    rp.add_argument("--image", type=Path, required=True,
                    help="where the image goes: a new file (never inside a run directory)")
    rp.add_argument("--force", action="store_true", help="replace an existing --image file")
    rp.add_argument("--destroy-data-on", action="append", default=[], metavar="DEVICE",
                    help="allow --image to be this block device, whose data the image overwrites: repeat its path")
    rp.add_argument("--check", action="store_true",
                    help="also boot the lab on it and recover and verify it as the cell did")

    res = sub.add_parser("results", help="print a run's results as a table")
    res.add_argument("run", help="run id under runs/ or a run directory")
    res.add_argument("--study", action="append")

    rep = sub.add_parser("report", help="write report.html, report.md, summary.json for a run (or compare two)")
    rep.add_argument("runs", nargs="+", metavar="RUN")
    rep.add_argument("--out", type=Path, help="the report's directory (default: the run's own; for two runs "
                     "compare-A-vs-B): never inside another run")
    rep.add_argument("--force", action="store_true", help="replace files of the report's names in --out that "
                     "flashbed did not write")
    return p


def _clock_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--clock", default="real", help="real (default) or virtual: the time-travel flavour of the lab "
                   "kernel, each block request completing when the emulator's model says (devices the emulator "
                   "serves; others run in real time)")


def _kernel_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kernel", help="lab kernel NAME[:MODE]: 6.12 or 7.3 (default), e.g. 7.3:ptrace")


class Terminated(KeyboardInterrupt):
    """SIGTERM: stopped as Ctrl-C stops flashbed (labs killed, finished results kept)."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    old = signal.signal(signal.SIGTERM, _on_sigterm) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        rc = _dispatch(_parser().parse_args(argv))
        # stdout to a pipe is buffered: a reader that is gone (`| head`) shows here, not at exit
        sys.stdout.flush()
        return rc
    except FlashbedError as e:
        print(f"flashbed: error: {one_line(str(e))}", file=sys.stderr)
        return e.exit_code
    except Terminated:
        print("flashbed: terminated (SIGTERM); finished results are kept: the same command resumes", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("flashbed: interrupted; finished results are kept", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader stopped reading (`| head`): not an error of ours; stdout's last
        # flush at exit must not fail again
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "kernel":
        return _kernel(args)
    if args.command == "filesystems":
        for name, fs in fscat.CATALOGUE.items():
            mkfs = " ".join(a for a in fs.mkfs if "{" not in a)
            extra = f" (variants: {', '.join(f'+{c}' for c in fs.compressors)})" if fs.read_only \
                else ""
            print(f"{name:16} {fs.media:6} mkfs: {mkfs:28} fsck: "
                  f"{' '.join(fs.check) if fs.check else '(none)':24} {fs.description}{extra}")
            print(f"{'':23} recovery: {fs.recovery}; online resize: {fs.online_resize} "
                  f"({fscat.FACTS_SOURCE[fs.facts]})")
        return 0
    if args.command == "lab":
        return _lab(args)
    if args.command == "probe":
        from .probe import command as probe_command
        return probe_command.run(args)
    if args.command == "devices" and args.devices_cmd == "show":
        from .devices import show
        print(show.text(args.preset))
        return 0
    if args.command == "devices":
        from .devices import presets
        for name in presets.available():
            try:
                d = presets.load(name)
                print(f"{name:26} {d.info.get('kind', d.kind):8} {d.capacity / (1 << 30):7.2f} GiB  page "
                      f"{d.page_size:>6} B  erase {d.erase_block >> 10:>6} KiB  {d.info.get('description', '')}")
            except FlashbedError as e:
                print(f"{name:26} (unavailable: {e})")
        return 0
    if args.command == "studies":
        from .studies import STUDIES
        for name, st in STUDIES.items():
            facts = [f for f, on in (("timing-free: no delays at --pace auto", st.timing_free),
                                     ("runs on read-only images", st.runs_read_only)) if on]
            print(f"{name:12} {'/'.join(st.media):10} {st.description}" + (f" ({'; '.join(facts)})" if facts else ""))
            for line in st.param_lines():
                print(f"{'':12} {line}")
        return 0
    if args.command == "run":
        return _run(args)
    if args.command == "results":
        from .report.text import print_results
        from .store import resolve_run
        store = resolve_run(args.run)
        studies = _split(args.study, "study")
        _check_studies_of(store, studies)
        print_results(store, studies=studies)
        return 0
    if args.command == "report":
        return _report(args)
    if args.command == "crashstate":
        from . import crashreplay
        return crashreplay.replay(args.run, args.state, args.image, args.check,
                                  destroy_data_on=tuple(args.destroy_data_on), force=args.force)
    if args.command == "bench":
        from .bench import devices as bench
        if args.bench_cmd == "lab":
            from .bench import lab as lab_bench
            lab_bench.bench(args.kernel or ["6.12", "7.3"], args.runs, list(_split([args.parts], "parts")),
                            args.cycles)
            return 0
        if args.bench_cmd == "powercut":
            from .bench import powercut
            if args.cycles < 1:
                raise FlashbedError("--cycles must be at least 1")
            powercut.bench(args.device, list(_split([args.fs], "fs")), args.cycles, args.pace, args.mode, args.seed)
            return 0
        if args.bench_cmd == "crashstates":
            from .bench import crashstates
            if args.ops < 1:
                raise FlashbedError("--ops must be at least 1")
            crashstates.bench(args.device, list(_split([args.fs], "fs")), args.workload, args.ops, args.pace, args.seed,
                              check=args.check, dedup=not args.no_dedup, clock=args.clock)
            return 0
        if args.bench_cmd == "clock":
            from .bench import clock as clock_bench
            from .devices import presets
            runs = args.runs if args.runs is not None else (1 if args.profile else 3)
            if runs < 1 or args.runtime <= 0:
                raise FlashbedError("--runs must be at least 1 and --runtime positive")
            if args.profile:
                from .profiles import PROFILES
                if args.profile not in PROFILES:
                    raise FlashbedError(f"--profile '{args.profile}' is not a profile: choose from "
                                        f"{', '.join(PROFILES)}")
                if args.hog:
                    raise FlashbedError("--hog times fio jobs, not a whole profile: drop --hog or --profile")
                if args.keep and os.path.lexists(args.keep):
                    raise FlashbedError(f"--keep {args.keep} exists: name a new directory")
                if args.keep:
                    from . import writeguard
                    writeguard.check(args.keep, "--keep", writeguard.Target.DIR)
            elif args.keep:
                raise FlashbedError("--keep keeps the runs of --profile: give --profile, or drop --keep")
            dev = presets.load_spec(args.device)
            if dev.backend != "emulator" or dev.kind != "block":
                raise FlashbedError(f"bench clock measures an emulated block device, not {args.device}")
            if args.profile:
                from .bench import profilewall
                keep = None
                if args.keep:
                    keep = Path(args.keep)
                    keep.mkdir(parents=True)
                profilewall.bench(args.profile, args.device, runs, keep)
                return 0
            clock_bench.bench(args.device, runs, args.runtime, args.hog)
            return 0
        if args.bench_cmd == "cpu":
            from .bench import cpu as cpu_bench
            from .devices import presets
            from .lab import cpuprofile
            profiles = cpuprofile.labels(_split(args.cpu_profile, "cpu-profile"))
            if args.calls < 1 or not 0 < args.runtime < float("inf"):
                raise FlashbedError("--calls must be at least 1 and --runtime a positive number of seconds")
            dev = presets.load_spec(args.device)
            if dev.backend != "emulator" or dev.kind != "block":
                raise FlashbedError(f"bench cpu measures an emulated block device, not {args.device}")
            cpu_bench.bench(args.device, profiles, args.runtime, args.calls)
            return 0
        if args.bench_cmd == "hostcall":
            from .bench import hostcall
            if args.calls < 1:
                raise FlashbedError("--calls must be at least 1")
            hostcall.bench(args.calls)
            return 0
        if args.bench_cmd == "fuse":
            if args.runs < 1:
                raise FlashbedError("--runs must be at least 1")
            bench.fuse_latency(args.runs)
        else:
            from .bench import presets as bench_presets
            from .lab import clock as lab_clock
            if args.runs < 1 or args.runtime <= 0:
                raise FlashbedError("--runs must be at least 1 and --runtime positive")
            clock = lab_clock.parse(args.clock)
            bench_presets.run(list(_split(args.device, "device")) or bench_presets.calibrated(), args.capacity,
                              args.runs, args.runtime, clock=clock)
        return 0
    raise AssertionError(args.command)


def _split(values: list[str] | None, option: str = "") -> tuple[str, ...]:
    """A repeatable, comma-separated option's items. An empty item is refused: `--fs ""` or
    `--fs ,` must not pass for leaving the option out (which means every default)."""
    out = tuple(x.strip() for v in (values or []) for x in v.split(","))
    if "" in out:
        given = next(v for v in values or [] if "" in (x.strip() for x in v.split(",")))
        raise FlashbedError(f"--{option} '{given}' has an empty item: name what you want (e.g. --{option} "
                            f"{EXAMPLES.get(option, 'NAME')}), or leave --{option} out for the default")
    return out


EXAMPLES = {"fs": "ext4,f2fs", "study": "bandwidth", "device": "emmc-8g@512M", "kernel": "7.3", "parts": "lab",
            "cpu-profile": "cortex-a8,none"}


def _overrides(items: list[str]) -> dict[str, dict]:
    """--set STUDY.PARAM=VALUE, each value read by its field's kind (a size, a number, a word:
    bandwidth.bs=4k stays the word fio takes) and checked against its range, once, here."""
    from .studies import params as P
    out: dict[str, dict] = {}
    for item in items:
        key, eq, value = item.partition("=")
        study, dot, param = key.partition(".")
        if not (eq and dot and study and param):
            raise FlashbedError(f"bad --set '{item}': use STUDY.PARAM=VALUE, e.g. bigfile.size=256M")
        out.setdefault(study, {})[param] = P.setting(study, param, value)
    return out


def _user_workload(workload: str | None, check: str | None, overrides: dict[str, dict],
                   studies: tuple[str, ...], age: int | None = None,
                   daily: str | None = None) -> tuple[dict[str, dict], tuple[str, ...]]:
    """--workload, --check, --age and --daily-writes as the overrides of the studies that run
    them (the files' content hashes in the run id), those studies added to the run's."""
    from . import userwork
    from .devices.presets import parse_size
    if not workload:
        given = "--check" if check else "--age" if age is not None else "--daily-writes"
        raise FlashbedError(f"{given} needs --workload FILE: it applies to your workload")
    if age is not None and not 1 <= age <= 95:
        raise FlashbedError(f"--age {age}: give the fill in % of the filesystem, 1 to 95")
    w = userwork.load(workload, "--workload")
    c = userwork.load(check, "--check", fio_allowed=False) if check else None
    out = dict(overrides)
    mine = userwork.overrides(w, c)  # workload, and appcheck with a check or a fio job's own verification
    for study, values in mine.items():
        out[study] = {**out.get(study, {}), **values}
    if age is not None:
        out["workload"] = {"passes": userwork.AGE_PASSES, **out["workload"], "fill": age}
    if daily:
        try:
            size = parse_size(daily)
        except FlashbedError:
            size = 0
        if size <= 0:
            raise FlashbedError(f"--daily-writes {daily}: give a size a day, e.g. 2G or 500M")
        out["workload"]["daily_writes"] = size
    wanted = tuple(mine)
    return out, tuple(studies) + tuple(s for s in wanted if s not in studies)


def _run(args: argparse.Namespace) -> int:
    from .execute import execute
    from .executors import make_executor
    from .lab import clock, cpuprofile, kernel
    from .lab.labs import UmlLabs
    from .plan import PlanRequest, clock_notes, make_plan, run_kernels
    from .store import RunStore, resolve_run
    # everything is checked before the run directory is made and anything is printed
    executor = make_executor(args.executor, args.jobs, args.scheduler)
    if args.resume:
        given = [o for o in ("profile", "fs", "device", "study", "repeat", "seed", "iterations", "pace", "kernel",
                             "cpus", "target", "clock", "cpu_profile", "workload", "check", "age", "daily_writes")
                 if getattr(args, o) is not None] + (["robust"] if args.robust is not None else [])
        if given or args.set:
            raise FlashbedError(f"--resume finishes the run's own plan; drop --{(given or ['set'])[0]}")
        store = resolve_run(args.resume)
        req = _stored_request(store)
        from .userwork import check_resumable
        check_resumable(req.overrides)
    else:
        overrides = _overrides(args.set)
        studies = _split(args.study, "study")
        if args.workload or args.check or args.age is not None or args.daily_writes:
            overrides, studies = _user_workload(args.workload, args.check, overrides, studies, args.age,
                                                args.daily_writes)
        if args.iterations is not None:
            from .studies import STUDIES
            iterating = [name for name, st in STUDIES.items() if "iterations" in st.param_names()]
            looping = [s for s in studies if s in iterating]
            if args.iterations < 1:
                raise FlashbedError("--iterations must be at least 1")
            if not looping:
                raise FlashbedError("--iterations applies to --study " + " or ".join(iterating))
            for s in looping:
                overrides.setdefault(s, {})["iterations"] = args.iterations
        from .devices.presets import absolute_spec
        from .robust import draws as robust_draws
        target = ""
        if args.target:
            from .lab.ssh import parse_target
            target = parse_target(args.target, args.ssh_key or "", args.ssh_config or "").url
        elif args.ssh_key or args.ssh_config or args.power_cmd is not None:
            flag = "ssh-key" if args.ssh_key else "ssh-config" if args.ssh_config else "power-cmd"
            raise FlashbedError(f"--{flag} is for --target ssh://...: add --target, or drop it")
        req = PlanRequest(profile="quick" if args.profile is None else args.profile, fs=_split(args.fs, "fs"),
                          devices=tuple(d if target else absolute_spec(d) for d in _split(args.device, "device")),
                          studies=studies, repeat=args.repeat if args.repeat is not None else 1,
                          seed=args.seed if args.seed is not None else 1, overrides=overrides,
                          pace="auto" if args.pace is None else args.pace,
                          kernels=kernel.labels(_split(args.kernel, "kernel")),
                          cpus=args.cpus if args.cpus is not None else 1, target=target,
                          clocks=clock.labels(_split(args.clock, "clock")),
                          cpu_profiles=cpuprofile.labels(_split(args.cpu_profile, "cpu-profile")),
                          robust=robust_draws() if args.robust == -1 else args.robust)
        _check_settings_of(args.set, req)
        store = RunStore(args.out or Path("runs") / req.run_id())
    # this command's run from before auto was the default clock, left as it is (said with the notes below)
    old_run = _real_time_run(req, store) if not args.resume and not args.out else ""
    if req.target:
        return _run_board(args, req, store)
    if args.power_cmd is not None:  # a resumed lab run
        raise FlashbedError("--power-cmd is for --target ssh://...: the lab cuts an emulated device's power itself")
    kernels, note = run_kernels(req.kernels, _recorded_kernels(store))
    plan = make_plan(req, tuple(args.destroy_data_on), kernels)
    from .execute import check_resume
    check_resume(plan, store)  # a changed request or preset: refused before a kernel is built
    if any(d.backend == "emulator" for d in plan.devices.values()):
        from .devices.emulator import check_fuse
        check_fuse()  # no /dev/fuse or no right to mount: one line, not a failed cell each
    if args.executor == "dask" and any(d.backend == "real" for d in plan.devices.values()):
        raise FlashbedError("a real device is attached to this machine, not to Dask workers: run it with the "
                            "local executor")
    store.create("--out" if args.out else "the run directory")  # one line, not after the notes
    for line in [n for n in (note, old_run) if n] + plan.skipped_lines() + clock_notes(plan) + plan.notes:
        print(f"flashbed: {line}", file=sys.stderr)
    flavours = sorted({c.clock == "virtual" for c in plan.cells})  # False: real time, True: virtual
    infos = [kernel.ensure_kernel(k, time_travel=tt) for k in plan.kernels for tt in flavours]
    if any(c.variant.base.fuse_daemon for c in plan.cells):
        from .yaffs2.build import ensure_daemon
        ensure_daemon()  # built at setup; else now, once (the guest runs the host's binary)
    for line in _build_changes(store, infos):
        print(f"flashbed: {line}", file=sys.stderr)
    results = execute(plan, store, UmlLabs(*infos), executor)
    return _finish(args, store, results)


def _run_board(args: argparse.Namespace, req, store) -> int:
    """A run on a board over SSH (lab/board.py): the board is checked before anything is written."""
    from .execute import execute
    from .lab.board import Board, BoardLabs
    from .lab.ssh import parse_target
    from .plan import make_plan
    if args.executor == "dask":
        raise FlashbedError("a board is reached from this machine, not from Dask workers: run it with the local "
                            "executor")
    from .executors import LocalExecutor
    from .lab.power import parse_power_cmd
    power = parse_power_cmd(args.power_cmd) if args.power_cmd is not None else None
    board = Board(parse_target(req.target, args.ssh_key or "", args.ssh_config or ""), power).open()
    try:
        plan = make_plan(req, tuple(args.destroy_data_on), board=board)
        from .execute import check_resume
        check_resume(plan, store)  # a changed request: refused before anything runs
        for line in plan.skipped_lines():
            print(f"flashbed: {line}", file=sys.stderr)
        store.create("--out" if args.out else "the run directory")
        # one cell at a time: every cell writes the board's one device
        results = execute(plan, store, BoardLabs(board), LocalExecutor(1))
    finally:
        board.close()
    return _finish(args, store, results)


def _finish(args: argparse.Namespace, store, results) -> int:
    from .report.text import print_results
    from .status import CellStatus
    print_results(store)
    if not args.no_report:
        try:
            from .report import write_report
            paths = write_report(store.root)
            print(f"report: {paths.html}")
        except ImportError:
            pass
    # a step that broke (failed) or flashbed/the lab did (error): not a measured outcome
    bad = [r for r in results if r.status in (CellStatus.FAILED, CellStatus.ERROR)]
    if results and not any(r.ok for r in results):  # no evidence: the report recommends nothing
        first = no_traceback(results[0].error or results[0].headline or "")[:200]
        print(f"flashbed: no cell of this run finished ({len(results)} cells; the first {results[0].status}: "
              f"{first}): nothing is recommended", file=sys.stderr)
        return 1
    return 1 if bad else 0


def _check_studies_of(store, studies: tuple[str, ...]) -> None:
    """One line for a --study the run does not have (an empty table would pass for no results)."""
    from .studies import STUDIES
    for s in studies:
        if s not in STUDIES:
            raise FlashbedError(f"unknown study '{s}': choose from {', '.join(STUDIES)}")
    have = sorted({r.key.study for r in store.results()})
    missing = [s for s in studies if s not in have]
    if missing:
        raise FlashbedError(f"run {store.root.name} has no cells of study {missing[0]}: it has "
                            f"{', '.join(have) or 'none yet'}")


def _check_settings_of(items: list[str], req) -> None:
    """One line for a --set of a study the run does not have: it would change nothing."""
    from .profiles import PROFILES
    if req.profile not in PROFILES:
        return  # make_plan says so
    studies = req.studies or tuple(PROFILES[req.profile]["studies"])
    for item in items:
        study = item.partition(".")[0]
        if study not in studies:
            raise FlashbedError(f"--set {item}: study {study} is not in this run ({', '.join(studies)}): add "
                                f"--study {study}, or drop the --set")


def _real_time_run(req, store) -> str:
    """A line when this command made a run in real time before auto became the default ('' if
    not): that run has another id, so it is left as it is, not finished in virtual time."""
    import dataclasses
    from .lab import clock
    from .store import RunStore
    if req.resolved().clocks != clock.RUN_DEFAULT or store.exists():
        return ""
    old = RunStore(store.root.parent / dataclasses.replace(req, clocks=()).run_id())
    if not old.exists():
        return ""
    return (f"run {old.root.name}, this command's run in real time (the default before auto), is left as it is: "
            f"`flashbed run --resume {old.root.name}` finishes it in real time")


def _stored_request(store):
    """The request an existing run's manifest records, its fields of the types a new one has."""
    from .plan import PlanRequest, stored_request
    stored = store.manifest().get("request")
    if isinstance(stored, dict):  # a field it lacks had its value of then, not today's default
        stored = stored_request(stored)
    from .store import REQUEST_LISTS, REQUEST_NUMBERS, REQUEST_TEXTS, request_problem
    ok = isinstance(stored, dict) and \
        set(stored) <= {*REQUEST_TEXTS, *REQUEST_LISTS, *REQUEST_NUMBERS, "overrides", "robust"} \
        and not request_problem(stored)
    if not ok:
        raise FlashbedError(f"{store.manifest_path}: its request is not one flashbed makes, so the run cannot be "
                            f"resumed: start a new run with --out DIR")
    return PlanRequest(**{k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()})


def _recorded_kernels(store) -> tuple[str, ...] | None:
    """The lab kernels an existing run was made on (its manifest), None for a new run."""
    if not store.exists():
        return None
    from .lab.kernel import recorded_label
    man = store.manifest()
    kernels = man.get("kernels") or {"": man.get("kernel") or {}}
    # a kernel's time-travel flavour (virtual time) is the same label's other build
    labels = tuple(dict.fromkeys(label for p in kernels.values() if (label := recorded_label(p))))
    return labels or None


def _build_changes(store, infos) -> list[str]:
    """One line per kernel of an existing run whose build (source, config or patches) is not
    the one its cells so far ran on: the rest of the run uses this flashbed's build."""
    if not store.exists():
        return []
    from .lab.kernel import recorded_label
    man = store.manifest()
    before = {(recorded_label(p), bool(p.get("flavour"))): p
              for p in (man.get("kernels") or {"": man.get("kernel") or {}}).values()}
    out = []
    for info in infos:
        old = before.get((info.label, info.time_travel)) or {}
        if old.get("key") and old["key"] != info.key:
            out.append(f"lab kernel {info.label}: this run's cells so far ran on build {old['key']} (patches "
                       f"{', '.join(p[:4] for p in old.get('patches') or []) or 'none'}); the rest run on build "
                       f"{info.key} (patches {', '.join(p[:4] for p in info.patches) or 'none'})")
    return out


def _report(args: argparse.Namespace) -> int:
    from .report import compare, write_report
    from .store import resolve_run
    if args.force and args.out is None and len(args.runs) == 1:
        raise FlashbedError("--force replaces files in --out: a run's own report needs none; drop --force")
    if len(args.runs) == 1:
        store = resolve_run(args.runs[0])
        paths = write_report(store.root, args.out, force=args.force)
        if not any(r.ok for r in store.results()):  # no evidence: the report recommends nothing
            print(f"report: {paths.html}")
            print(f"flashbed: no cell of run {store.root.name} finished: its report recommends nothing",
                  file=sys.stderr)
            return 1
    elif len(args.runs) == 2:
        a, b = (resolve_run(r).root for r in args.runs)
        paths = compare(a, b, args.out or Path(f"compare-{a.name}-vs-{b.name}"), force=args.force)
        from .report.comparison import TEXT_NAME
        print((paths.html.parent / TEXT_NAME).read_text(), end="")
    else:
        raise FlashbedError("flashbed report takes one run, or two runs to compare")
    print(f"report: {paths.html}")
    return 0


def _kernel(args: argparse.Namespace) -> int:
    from .lab import kernel
    if args.kernel_cmd == "build":
        from .lab import clock
        tt = clock.parse(args.clock).time_travel
        names = list(kernel.KERNELS) if args.kernel == "all" else [kernel.choose(args.kernel).spec.name]
        if tt:
            names = [n for n in names if kernel.KERNELS[n].time_travel_ok] if args.kernel == "all" else names
            for n in names:
                kernel.KERNELS[n].time_travel_flavour()  # one line if it has none
        infos = [kernel.ensure_kernel(n, time_travel=tt) for n in names]
        print(json.dumps([asdict(i) for i in infos] if len(infos) > 1 else asdict(infos[0]), indent=2))
        return 0
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
    print(json.dumps(rows, indent=2))
    return 0


def _lab(args: argparse.Namespace) -> int:
    from .lab import kernel, smoke, uml
    from .lab.target import BootSpec, Step
    choice = kernel.choose(args.kernel)  # a bad name fails before anything is built
    if args.lab_cmd == "smoke":
        from .lab import clock
        clk = clock.parse(args.clock)
        if clk.time_travel:
            choice.spec.time_travel_flavour()  # one line if this kernel has none
        names = args.fs or list(fscat.CATALOGUE)
        for n in names:
            fscat.get(n)
        from . import writeguard
        if args.jobs is not None and args.jobs < 1:
            raise FlashbedError(f"--jobs {args.jobs}: give the number of lab kernels at once, at least 1")
        out = writeguard.make_dir(writeguard.check(args.out, "--out", writeguard.Target.DIR,
                                                   mark="smoke.json")) if args.out \
            else Path(tempfile.mkdtemp(prefix="flashbed-smoke-"))
        results = smoke.run_smoke(names, out, args.jobs, kernel_name=choice.label, time_travel=clk.time_travel)
        smoke.print_table(results)
        used = kernel.ensure_kernel(choice.label, time_travel=clk.time_travel)  # built by now: only names it
        print(f"kernel {choice.label}: {used.release}, {used.boot_mode} mode, {clk.value} time; "
              f"logs and smoke.json: {out}")
        return 0 if all(r.passed for r in results) else 1
    if args.lab_cmd == "bench-boot":
        if args.boots < 1:
            raise FlashbedError("--boots must be at least 1")
        kern = kernel.ensure_kernel(choice.label)
        from . import cpus
        modes = ["pinned", "unpinned"] if args.compare_pinning else ["pinned" if cpus.enabled() else "unpinned"]
        ready: dict[str, list[float]] = {m: [] for m in modes}
        total: dict[str, list[float]] = {m: [] for m in modes}
        with tempfile.TemporaryDirectory(prefix="flashbed-boot-") as tmp:
            for i in range(args.boots):
                for mode in modes:  # interleaved, so both see the same host
                    with contextlib.ExitStack() as stack:
                        if mode == "unpinned":
                            stack.enter_context(cpus.unpinned())
                        r = uml.boot(BootSpec(run_dir=Path(tmp) / f"b{i}-{mode}", steps=(Step("noop", "true"),),
                                             timeout=60), kern)
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
    if args.lab_cmd == "exec":
        from .lab import labexec
        disks = labexec.check_disks(args.disk, tuple(args.destroy_data_on))
        choice.check_cpus(args.cpus)
        from . import cpus
        cpus.check_count(args.cpus)  # the host's side, before any build
        from .lab import clock
        clk = clock.parse(args.clock)
        if clk.time_travel:
            choice.spec.time_travel_flavour()  # one line if this kernel has none
            if args.cpus > 1:
                raise FlashbedError(f"--clock virtual runs one vCPU (the time-travel kernel has no SMP): "
                                    f"drop --cpus {args.cpus} or use --clock real")
        from .lab import cpuprofile
        prof = cpuprofile.get(args.cpu_profile)  # one line on an unknown profile, before any build
        if clk.time_travel:
            print(f"flashbed: CPU profile {prof.summary()}", file=sys.stderr)
        elif args.cpu_profile:
            print(f"flashbed: {cpuprofile.REAL_TIME_NOTE}", file=sys.stderr)
        return labexec.run(args.cmd, choice.label, cpus=args.cpus, device=args.device, disks=disks,
                           timeout=args.timeout, pace=args.pace, clock=clk, cpu=prof.costs)
    raise AssertionError(args.lab_cmd)


if __name__ == "__main__":
    sys.exit(main())
