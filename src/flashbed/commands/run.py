"""`flashbed run`: studies on emulated or real devices, resumably; the request is made
here, once, from the options (or read back from the run to resume)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .. import options
from ..errors import FlashbedError, no_traceback
from ..options import EXIT_CODES, items
from ..variants import fs_items


def add_parser(sub) -> None:
    from ..lab.power import BOOT_WAIT
    from ..studies import inputs
    r = sub.add_parser("run", help="run studies on emulated or real devices (resumable)", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.set_defaults(handler=run)
    what = r.add_argument_group("what to run")
    what.add_argument("--profile", default=None, help="quick (default) or paper")
    what.add_argument("--fs", action="append", help="filesystem variant, e.g. ext4, f2fs+tuned, ext2@f2fs, "
                      "ext4+o:commit=60,data=journal, 'f2fs+mkfs:-O extra_attr,compression+o:compress_algorithm=lz4' "
                      "(repeatable or comma-separated; default: the ten block filesystems; options: "
                      "`flashbed filesystems FS`)")
    what.add_argument("--fs-file", action="append", metavar="FILE", help="a file of variant specs, one a line "
                      "('#' comments), for long ones; added to --fs")
    what.add_argument("--study", action="append", help="study name (repeatable or comma-separated)")
    what.add_argument("--set", action="append", default=[], metavar="STUDY.PARAM=VALUE",
                      help="override a study parameter, e.g. bigfile.size=256M")
    what.add_argument("--iterations", type=int, help="power cuts / corruption runs per cell (powercut, corruption)")
    what.add_argument("--repeat", type=int, default=None, help="cells of each case this many times (default 1)")
    what.add_argument("--seed", type=int, default=None, help="the seed of the run's random choices (default 1; a "
                      "repeat adds its number)")
    what.add_argument("--tune", action="store_true", default=None,
                      help="then, for each use case, its winner and runner-up try their catalogue's options on the "
                      "use case's decisive studies (crash states included): one at a time, then the best "
                      "combination found; the answer names the options (docs/tuning.md)")
    devices = r.add_argument_group("devices")
    devices.add_argument("--device", action="append", help="device preset, optionally @SIZE (e.g. "
                         "lexar-c10-16g@1G), a preset file ./mypart.toml[@SIZE], or a real block device (/dev/sdX, "
                         "/dev/mmcblkN)")
    devices.add_argument("--destroy-data-on", action="append", default=[], metavar="DEVICE",
                         help="allow a run on a real device that carries data (a filesystem or partition table): "
                         "repeat its --device path")
    from ..robust import MAX_DRAWS, draw_count
    devices.add_argument("--robust", nargs="?", type=draw_count, const=-1, metavar="DRAWS",  # -1: the default
                         help="also run each use case's decisive studies on variants of the twin across its "
                         f"preset's assumptions (each at the ends of its range, and DRAWS joint draws, 0 to "
                         f"{MAX_DRAWS}; default 8); the report says whether each answer holds")
    _lab_options(r.add_argument_group("lab and clock"))
    board = r.add_argument_group("board")
    board.add_argument("--target", metavar="ssh://USER@HOST[:PORT]", help="run the studies on a board over SSH, on "
                       "its own kernel and its device (--device /dev/mmcblkNpM on the board)")
    board.add_argument("--ssh-key", metavar="FILE", help="the key for --target (default: your ssh config and agent)")
    board.add_argument("--ssh-config", metavar="FILE", help="an ssh_config for --target instead of your own")
    board.add_argument("--power-cmd", metavar="'CMD {action}'", help="the board's power switch for --target, a "
                       "command run here with {action} made on, off or cycle: enables the powercut study on the "
                       "board")
    board.add_argument("--boot-wait", type=options.seconds, metavar="SECONDS", help="with --power-cmd: how long "
                       f"the board may take after its power comes back until it answers SSH (default "
                       f"{BOOT_WAIT:g}); then it is power-cycled once and waited for as long again")
    yours = r.add_argument_group("your workload")
    for inp in inputs.ALL:  # the options the studies take (studies/inputs.py)
        yours.add_argument(inp.option, metavar=inp.metavar, type=inp.type, help=inp.help)
    ex = r.add_argument_group("execution")
    ex.add_argument("--jobs", type=int, help="cells at once (default: cores)")
    ex.add_argument("--out", type=options.path, help="run directory (default: runs/<id>)")
    ex.add_argument("--resume", metavar="RUN", help="finish an earlier run (its id under runs/ or its directory)")
    ex.add_argument("--executor", default="local", choices=["local", "dask"])
    ex.add_argument("--scheduler", help="Dask scheduler address, with --executor dask")
    ex.add_argument("--no-report", action="store_true", help="do not write the report at the end")


def _lab_options(lab) -> None:
    lab.add_argument("--kernel", action="append", help="lab kernel NAME[:MODE]: 6.12 or 7.3 (default), e.g. "
                     "7.3:ptrace (repeatable or comma-separated: cells of each)")
    lab.add_argument("--cpus", type=int, help="guest vCPUs of each lab (default 1; 7.3 only; each lab leases as "
                     "many host CPUs); a scaling case sets its own")
    lab.add_argument("--clock", action="append", help="the lab's clock: auto (default), real or virtual (real,"
                     "virtual: cells of each). Virtual: the time-travel lab kernel, each request of an emulated "
                     "device completing when its model says. Auto: virtual time for every cell that can run in it; "
                     "real time, one line per reason, for nandsim and real devices, a kernel without a virtual-time "
                     "flavour (6.12), more than one vCPU, and the cpu study; a board keeps its own time")
    lab.add_argument("--cpu-profile", action="append", help="in virtual time, the guest CPU's cost per syscall, "
                     "page fault and context switch: a profile of lab/cpuprofiles.toml (none, cortex-a8 (default), "
                     "cortex-a72, rpi4; repeatable or comma-separated: cells of each); ignored in real time")
    lab.add_argument("--pace", help="emulator clock of real-time cells: auto (default: none for the failure "
                     "studies, whose outcomes do not depend on timing, real for the rest), real, or none (skip the "
                     "device's delays); virtual-time cells cost no wall-clock time for them")


def _overrides(settings: list[str]) -> dict[str, dict]:
    """--set STUDY.PARAM=VALUE, each value read by its field's kind (a size, a number, a word:
    bandwidth.bs=4k stays the word fio takes) and checked against its range, once, here."""
    from ..studies import edge
    out: dict[str, dict] = {}
    for item in settings:
        key, eq, value = item.partition("=")
        study, dot, param = key.partition(".")
        if not (eq and dot and study and param):
            raise FlashbedError(f"bad --set '{item}': use STUDY.PARAM=VALUE, e.g. bigfile.size=256M")
        out.setdefault(study, {})[param] = edge.setting(study, param, value)
    return out


def run(args: argparse.Namespace) -> int:
    from .. import targets
    from ..execute import check_resume, execute
    from ..executors import make_executor
    from ..plan import clock_notes, make_plan
    # everything is checked before the run directory is made and anything is printed
    executor = make_executor(args.executor, args.jobs, args.scheduler)
    req, store, old_run = _resumed(args) if args.resume else _new(args)
    if not req.target and args.power_cmd is not None:  # a resumed lab run
        raise FlashbedError("--power-cmd is for --target ssh://...: the lab cuts an emulated device's power itself")
    if args.boot_wait is not None and args.power_cmd is None:
        raise FlashbedError("--boot-wait is how long a board may take to answer after --power-cmd's on: add "
                            "--power-cmd, or drop --boot-wait")
    with targets.open_run(req, args, store, executor) as target:  # where the cells run, chosen once
        plan = make_plan(req, target, tuple(args.destroy_data_on))
        check_resume(plan, store)  # a changed request or preset: refused before a kernel is built
        target.check_plan(plan)
        if plan.request.tune:  # the options the pass may try, checked as any variant's before a cell runs
            from ..tunepass import check as check_tuning
            check_tuning(plan, target)
        if hasattr(executor, "reach"):  # a cluster that is not there: said before the run directory is made
            executor.reach()
        store.create("--out" if args.out else "the run directory")  # one line, not after the notes
        for line in [*target.notes, *([old_run] if old_run else [])] + plan.skipped_lines() + clock_notes(plan) + plan.notes:
            _say(line)
        labs = target.labs(plan, store, _say)
        began = time.monotonic()
        results = execute(plan, store, labs, target.executor)
        if plan.request.tune:  # then the options: each step planned from the cells before it
            from ..tunepass import run_tuning
            plain = time.monotonic() - began
            results = run_tuning(plan, store, labs, target, execute, _say)
            _phases(store, plain, time.monotonic() - began - plain)
    return _finish(args, store, results)


def _phases(store, plain: float, tuning: float) -> None:
    """The wall time of the plain cells and of the tuning pass, side by side: said, and kept in the
    manifest (`phases`, this invocation's: a resumed run's count only what it ran then)."""
    from ..progress import format_duration
    _say(f"wall time: plain cells {format_duration(plain)}, tuning pass {format_duration(tuning)} "
         f"({tuning / plain:.2f}x the plain cells)" if plain > 0 else
         f"wall time: tuning pass {format_duration(tuning)}")
    man = store.manifest()
    man["phases"] = {"plain_seconds": round(plain, 1), "tuning_seconds": round(tuning, 1)}
    store.write_manifest(man)


def _say(line: str) -> None:
    print(f"flashbed: {line}", file=sys.stderr)


def _resumed(args: argparse.Namespace):
    """The request of the run `--resume` names, its files as they were (one line if not)."""
    from .. import identity
    from ..store import resolve_run
    from ..studies import edge, inputs
    given = [o for o in ("profile", "fs", "fs_file", "device", "study", "repeat", "seed", "iterations", "pace", "kernel",
                         "cpus", "target", "clock", "cpu_profile", *(i.dest for i in inputs.ALL))
             if getattr(args, o) is not None] + (["robust"] if args.robust is not None else []) \
        + (["tune"] if args.tune else [])
    if given or args.set:
        raise FlashbedError(f"--resume finishes the run's own plan; drop --{(given or ['set'])[0]}")
    store = resolve_run(args.resume)
    req = identity.request_of(store)
    edge.check_resumable(req.overrides)
    return req, store, ""


def _new(args: argparse.Namespace):
    """A new run's request, its run directory, and a line if this command's run from before auto
    was the default clock is left as it is."""
    from .. import identity
    from ..store import RunStore
    req = request(args)
    store = RunStore(args.out or Path("runs") / req.run_id())
    return req, store, identity.real_time_run(req, store) if not args.out else ""


def request(args: argparse.Namespace):
    """A new run's request from its options, each checked (one line), in the form its id is
    made of (identity.PlanRequest)."""
    from .. import clock, targets
    from ..devices.presets import absolute_spec
    from ..identity import PlanRequest
    from ..lab import cpuprofile, kernel
    from ..robust import draws as robust_draws
    from ..studies import edge, inputs
    overrides = _overrides(args.set)
    studies = items(args.study, "study")
    given = {i.option: getattr(args, i.dest) for i in inputs.ALL if getattr(args, i.dest) is not None}
    if given:  # the options the studies take: their parameters, and those studies in the run
        overrides, studies = edge.apply(given, overrides, studies)
    if args.iterations is not None:
        _iterations(args.iterations, studies, overrides)
    target = targets.url(args.target, args)  # its kind's one spelling, checked
    if not target and (args.ssh_key or args.ssh_config or args.power_cmd is not None):
        flag = "ssh-key" if args.ssh_key else "ssh-config" if args.ssh_config else "power-cmd"
        raise FlashbedError(f"--{flag} is for --target ssh://...: add --target, or drop it")
    req = PlanRequest(profile="quick" if args.profile is None else args.profile, fs=fs_items(args.fs, args.fs_file),
                      devices=tuple(d if target else absolute_spec(d) for d in items(args.device, "device")),
                      studies=studies, repeat=args.repeat if args.repeat is not None else 1,
                      seed=args.seed if args.seed is not None else 1, overrides=overrides,
                      pace="auto" if args.pace is None else args.pace,
                      kernels=kernel.labels(items(args.kernel, "kernel")),
                      cpus=args.cpus if args.cpus is not None else 1, target=target,
                      clocks=clock.labels(items(args.clock, "clock")),
                      cpu_profiles=cpuprofile.labels(items(args.cpu_profile, "cpu-profile")),
                      robust=robust_draws() if args.robust == -1 else args.robust, tune=bool(args.tune))
    _check_settings_of(args.set, req)
    return req


def _iterations(n: int, studies: tuple[str, ...], overrides: dict[str, dict]) -> None:
    """--iterations N: the iterations of each of the run's studies that iterate (one line if none does)."""
    from ..studies import STUDIES
    iterating = [name for name, st in STUDIES.items() if "iterations" in st.param_names()]
    looping = [s for s in studies if s in iterating]
    if n < 1:
        raise FlashbedError("--iterations must be at least 1")
    if not looping:
        raise FlashbedError("--iterations applies to --study " + " or ".join(iterating))
    for s in looping:
        overrides.setdefault(s, {})["iterations"] = n


def _finish(args: argparse.Namespace, store, results) -> int:
    from ..report.text import print_results
    from ..status import CellStatus
    print_results(store)
    if not args.no_report:
        try:
            from ..report import write_report
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


def _check_settings_of(settings: list[str], req) -> None:
    """One line for a --set of a study the run does not have: it would change nothing."""
    from ..profiles import PROFILES
    if req.profile not in PROFILES:
        return  # make_plan says so
    studies = req.studies or tuple(PROFILES[req.profile]["studies"])
    for item in settings:
        study = item.partition(".")[0]
        if study not in studies:
            raise FlashbedError(f"--set {item}: study {study} is not in this run ({', '.join(studies)}): add "
                                f"--study {study}, or drop the --set")
