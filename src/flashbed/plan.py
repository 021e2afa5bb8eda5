"""Turn a run request into cells (device × filesystem variant × study × case ×
repeat), checking everything before any cell runs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from . import cpus, profiles, robust, variants
from .devices import presets, realdev
from .devices.presets import Device, format_size
from .errors import FlashbedError
from .devices.session import session_class
from .lab import clock, cpuprofile, kernel
from .lab.target import PowerSwitch, WriteLog, session_has
from .results import CellKey
from .studies import STUDIES
from .studies.base import CellSpec


PACES = ("auto", "real", "none")


@dataclass(frozen=True)
class PlanRequest:
    """What `flashbed run` was asked for; the run's identity."""

    profile: str = "quick"
    fs: tuple[str, ...] = ()  # variant specs; default: the ten block filesystems
    # preset, preset@SIZE or a real device (`real:LABEL`, from its node); default: the profile's device
    devices: tuple[str, ...] = ()
    studies: tuple[str, ...] = ()  # default: the profile's studies
    repeat: int = 1
    seed: int = 1
    # per-study parameter changes as given (--set text, sizes made bytes): the run's
    # identity; checked against each study's Params when the plan is made
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the emulator's clock: "real" timing; "none": it skips its delays (timings then mean
    # nothing); "auto": none for the studies whose outcomes do not depend on timing
    # (Study.timing_free), real for the rest
    pace: str = "auto"
    # lab kernels by label (kernel.labels: 6.12, 7.3, 7.3:ptrace), cells of each; (): the
    # default kernel, which is not part of the identity: the manifest records the kernel a
    # run was made on, and the run is finished on that one (see run_kernels)
    kernels: tuple[str, ...] = ()
    cpus: int = 1  # guest vCPUs of every cell whose case does not set its own (Study.vcpus)
    target: str = ""  # a board (ssh://USER@HOST[:PORT]) whose own devices `devices` are; "": the lab
    # the lab's clocks (lab/clock.py): auto (virtual time for each cell that can run in it,
    # real time for the rest), or real, virtual, or both (cells of each); (): real time, not
    # part of the identity (runs from before the clock axis keep their ids; --clock real)
    clocks: tuple[str, ...] = clock.RUN_DEFAULT
    # guest CPU cost profiles of virtual time (lab/cpuprofile.py), cells of each; (): the
    # catalogue's default, which is not part of the identity (the manifest names it)
    cpu_profiles: tuple[str, ...] = ()
    # the robust pass (robust.py): the decisive studies also on variants of each emulated twin,
    # its assumptions at their ends and this many joint draws; None: no robust pass (then not part
    # of the identity)
    robust: int | None = None

    def resolved(self) -> "PlanRequest":
        prof = profiles.get(self.profile)
        fs = self.fs or profiles.BLOCK_FILESYSTEMS
        # a real device by its identity, not its node: the run id follows the device
        devices = tuple(realdev.canonical(d) if realdev.names_device(d) and not self.target else d
                        for d in self.devices) or (prof["device"],)
        studies = self.studies or tuple(prof["studies"])
        return PlanRequest(profile=self.profile, fs=fs, devices=devices, studies=studies, repeat=self.repeat,
                           seed=self.seed, overrides=self.overrides, pace=_pace(self.pace, studies, devices),
                           kernels=tuple(self.kernels), cpus=self.cpus, target=self.target,
                           clocks=_clocks(self.clocks, self.target),
                           cpu_profiles=tuple(self.cpu_profiles), robust=self.robust)

    def cell_pace(self, study: str) -> str:
        """The emulator's clock for the cells of `study` (of a resolved request) in real time; a
        virtual-time cell's emulator runs --pace virtual whatever this says (cell.run_cell): the
        device's delays cost no wall-clock time there, so there is nothing to skip."""
        if self.pace == "auto":
            return "none" if STUDIES[study].timing_free else "real"
        return self.pace

    def run_id(self) -> str:
        """Same request, same id: rerunning a command resumes its run."""
        r = asdict(self.resolved())
        # runs from before --pace, --kernel and --cpus keep their ids
        for name, default in (("pace", "real"), ("kernels", ()), ("cpus", 1), ("target", ""), ("clocks", ()),
                              ("cpu_profiles", ()), ("robust", None)):
            if r[name] == default:
                del r[name]
        digest = hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()[:8]
        return f"{r['profile']}-{digest}"


# fields whose default changed since runs were made: a stored request without one had this
# value (a run from before the clock axis ran in real time, not in today's default auto)
LEGACY_DEFAULTS: dict[str, Any] = {"clocks": ()}


def stored_request(stored: dict[str, Any]) -> dict[str, Any]:
    """A request as a run's manifest stores it (JSON: lists for tuples), every field it lacks at
    the value it had then: LEGACY_DEFAULTS where the default changed since, else today's."""
    return {**json.loads(json.dumps({**asdict(PlanRequest()), **LEGACY_DEFAULTS})), **stored}


def _clocks(clocks: tuple[str, ...], target: str) -> tuple[str, ...]:
    """Real time written as () (so runs from before the clock axis keep their ids), as is auto on a
    board (it keeps its own time, so every cell runs in real time: board runs keep their ids)."""
    if set(clocks) <= {"real"} or (target and tuple(clocks) == clock.RUN_DEFAULT):
        return ()
    return tuple(clocks)


def _pace(pace: str, studies: tuple[str, ...], devices: tuple[str, ...]) -> str:
    """"auto" written as the pace every cell gets when they all get the same one: the same
    cells make the same request, hence the same run id ("real" is left out of the id, so
    requests from before "auto" keep theirs)."""
    if pace != "auto" or any(s not in STUDIES for s in studies):
        return pace  # make_plan says what is wrong
    free = {STUDIES[s].timing_free for s in studies}
    if free == {False} or not any(not realdev.names_device(d) and presets.load_spec(d).emulated for d in devices):
        return "real"  # nothing is timing-free, or no device has a clock to skip
    return "none" if free == {True} else "auto"


@dataclass(frozen=True)
class NotApplicable:
    """A study the plan left out for a filesystem, and why (the report says "n/a (why)")."""

    device: str
    fs: str
    study: str
    why: str


READ_ONLY = "read-only"


@dataclass(frozen=True)
class Skipped:
    """Cells the plan leaves out: a case that sets its own vCPUs (Study.vcpus) on a kernel or
    host that cannot run them (6.12 has no SMP)."""

    device: str
    kernel: str
    fs: str
    study: str
    case: str
    cpus: int
    why: str


@dataclass(frozen=True)
class RealTime:
    """A cell that runs in real time although its run asked for virtual time (by name or by
    auto), and why (lab/clock.py RealWhy)."""

    device: str
    kernel: str
    study: str
    case: str
    cpus: int
    why: clock.RealWhy


@dataclass(frozen=True)
class Plan:
    request: PlanRequest
    devices: dict[str, Device]
    cells: list[CellSpec]
    not_applicable: list[NotApplicable] = field(default_factory=list)
    kernels: tuple[str, ...] = (kernel.DEFAULT_KERNEL,)  # the labels of the lab kernels the cells run on
    skipped: list[Skipped] = field(default_factory=list)
    real_time: list[RealTime] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one line each, said before the run (the robust pass)

    def skipped_lines(self) -> list[str]:
        """One line per study, kernel and reason: what the plan leaves out."""
        groups: dict[tuple[str, str, int, str], int] = {}
        for s in self.skipped:
            k = (s.study, s.kernel, s.cpus, s.why)
            groups[k] = groups.get(k, 0) + 1
        return [f"{study}: {n} cell{'s' if n > 1 else ''} at {cpus} vCPUs not run on lab kernel {kern}: {why}"
                for (study, kern, cpus, why), n in groups.items()]


def run_kernels(requested: tuple[str, ...], recorded: tuple[str, ...] | None) -> tuple[tuple[str, ...], str]:
    """The kernels a run's cells run on, and a one-line note ('' if none). A request that names
    no kernel means the default one, which may have changed since the run was made (6.12 until
    7.3 became the default): an existing run is finished on the kernel its manifest records,
    never silently on another. `recorded`: the existing run's kernels (None: a new run)."""
    if requested or not recorded:
        return requested or (kernel.DEFAULT_KERNEL,), ""
    unknown = [k for k in recorded if k.split(":")[0] not in kernel.KERNELS]
    if unknown:
        raise FlashbedError(f"this run was made on lab kernel {unknown[0]}, which this flashbed does not have "
                            f"({' or '.join(kernel.KERNELS)}): start a new run with --out DIR")
    if recorded == (kernel.DEFAULT_KERNEL,):
        return recorded, ""
    return recorded, (f"this run was made on lab kernel {', '.join(recorded)}: it is finished on "
                      f"{'it' if len(recorded) == 1 else 'them'}, not on today's default {kernel.DEFAULT_KERNEL} "
                      f"(for a run on {kernel.DEFAULT_KERNEL}: --kernel {kernel.DEFAULT_KERNEL} or --out DIR)")


def study_params(profile: str, overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every overridden study's Params, checked (one clear line for an unknown
    study, key or a bad value), and those of the studies the profile changes."""
    for s in overrides:
        if s not in STUDIES:
            raise FlashbedError(f"--set for unknown study '{s}': choose from {', '.join(STUDIES)}")
    return {s: st.params_at_edge({**profiles.overrides(profile, s), **overrides.get(s, {})})
            for s, st in STUDIES.items()}


def load_devices(specs: tuple[str, ...], destroy_data_on: tuple[str, ...] = ()) -> dict[str, Device]:
    """Every device of the request by label; real devices checked (one line per refusal), their
    data destroyed only where `destroy_data_on` names their node."""
    nodes = [realdev.node_of(s) for s in specs if realdev.names_device(s)]
    for path in destroy_data_on:  # a typo must not pass for permission
        if not any(realdev.same_node(path, n) for n in nodes):
            raise FlashbedError(f"--destroy-data-on {path} names no real device of this run ("
                                f"{', '.join(nodes) or 'it has none'}): repeat the --device path exactly")
    devices = [realdev.load(s, destroy_data_on) if realdev.names_device(s) else presets.load_spec(s) for s in specs]
    out: dict[str, Device] = {}
    for spec, d in zip(specs, devices):
        same = out.get(d.label)
        if same is not None and (same.path, same.capacity) != (d.path, d.capacity):
            first = specs[list(out).index(d.label)]
            raise FlashbedError(f"--device {first} and --device {spec} are both labelled {d.label}, so their cells "
                                f"would mix: rename one preset file")
        out[d.label] = d
    return out


REPEAT_MAX = 1000  # repeats of every cell: far beyond any study's need


def make_plan(req: PlanRequest, destroy_data_on: tuple[str, ...] = (), kernels: tuple[str, ...] | None = None,
              board: Any = None) -> Plan:
    """The cells of `req`. `kernels`: the lab kernels of a request that names none (run_kernels;
    default: the default kernel). `board`: the connected lab.board.Board of a request with a target."""
    if req.repeat < 1:
        raise FlashbedError(f"--repeat must be at least 1 (got {req.repeat})")
    if req.repeat > REPEAT_MAX:  # a plan of 10^23 repeats never finished being made
        raise FlashbedError(f"--repeat must be 1 to {REPEAT_MAX} (got {req.repeat})")
    if req.pace not in PACES:
        raise FlashbedError(f"--pace must be real or none, or auto (none for the studies whose outcomes do not "
                            f"depend on timing, real for the rest; the default), not '{req.pace}'")
    if req.cpus < 1:
        raise FlashbedError(f"--cpus must be at least 1 (got {req.cpus})")
    if req.robust is not None and req.robust < 0:
        raise FlashbedError(f"--robust DRAWS: the joint draws must be 0 or more (got {req.robust}); --robust alone "
                            f"draws {robust.DRAWS}")
    r = req.resolved()
    if board is not None:
        choices: list[Any] = [_OnBoard(board)]
        _check_board(r, board, destroy_data_on)
    else:
        choices = [kernel.choose(k) for k in kernel.labels(r.kernels or kernels or (kernel.DEFAULT_KERNEL,))]
        for choice in choices:  # --cpus for every cell: refused where it cannot run, before anything runs
            choice.check_cpus(r.cpus)
        cpus.check_count(r.cpus)
    asked = clock.labels(r.clocks or ("real",))  # auto, or the clocks of the cells (() is real time)
    auto = asked == clock.RUN_DEFAULT
    clocks = [clock.Clock.VIRTUAL] if auto else [clock.parse(c) for c in asked]
    if clock.Clock.VIRTUAL in clocks and not auto:  # asked for by name: refused where it cannot be had
        if board is not None:
            raise FlashbedError("--clock virtual is the lab's: a board keeps its own time: drop --clock")
        for choice in choices:
            choice.spec.time_travel_flavour()  # one line if a kernel has no virtual-time flavour
        if r.cpus > 1:
            raise FlashbedError(f"--clock virtual runs one vCPU (the time-travel kernel has no SMP): drop --cpus "
                                f"{r.cpus} or use --clock real")
    several = len(choices) > 1
    # the CPU profiles of virtual-time cells: an axis (in the cell key) only when there are several
    profiles = cpuprofile.labels(r.cpu_profiles) if r.cpu_profiles else (cpuprofile.default().name,)
    for s in r.studies:
        if s not in STUDIES:
            raise FlashbedError(f"unknown study '{s}': choose from {', '.join(STUDIES)}")
    params_all = study_params(r.profile, r.overrides)
    devices = load_devices(r.devices, destroy_data_on) if board is None else \
        {d.label: d for d in (board.load_device(n, destroy_data_on) for n in r.devices)}
    rerun: tuple[str, ...] = ()
    notes: list[str] = []
    if r.robust is not None:
        robust.check(devices, r.studies)
        devices = robust.expand(devices, r.robust, r.seed)
        rerun = robust.rerun_studies(r.studies)
        notes = robust.notes(devices, rerun)
    parsed = {spec: [variants.parse(spec, d) for d in devices.values()] for spec in r.fs}
    for spec in r.fs if board is not None else ():
        if parsed[spec][0].media == "mtd":
            raise FlashbedError(f"{spec} runs on raw NAND, and flashbed does not drive a board's raw NAND (/dev/mtdN) "
                                f"yet: run {spec} on a raw NAND preset in the lab (e.g. --device nand-2g-4k@128M), "
                                f"or drop it")

    cells: list[CellSpec] = []
    na: list[NotApplicable] = []
    skipped: list[Skipped] = []
    real_time: list[RealTime] = []
    for spec in r.fs:
        placed = False
        for dev, v in zip(devices.values(), parsed[spec]):
            want = "nandsim" if v.media == "mtd" else "block"
            if dev.kind != want:
                continue
            variants.check_device(v, dev)
            placed = True
            for sname in r.studies:
                study = STUDIES[sname]
                if v.media not in study.media or (dev.variant and sname not in rerun):
                    continue
                if study.power_switch and not session_has(session_class(dev), PowerSwitch) and board is not None:
                    raise FlashbedError(f"study {sname} cuts the device's power: give the board's power switch with "
                                        f"--power-cmd 'CMD {{action}}' (flashbed runs it with on, off or cycle), "
                                        f"or drop {sname}")
                if study.power_switch and not session_has(session_class(dev), PowerSwitch):
                    raise FlashbedError(
                        f"study {sname} cannot run on {dev.label} ({dev.path}): it cuts the device's power, which "
                        f"flashbed can do only to an emulated device (killing the lab is a kernel crash a real "
                        f"device rides out): run {sname} on a preset, or drop it for this device")
                if v.read_only and not study.runs_read_only:
                    na.append(NotApplicable(dev.label, v.spec, sname, READ_ONLY))  # it writes
                    continue
                if study.needs_write_log and not session_has(session_class(dev), WriteLog):
                    raise FlashbedError(f"study {sname} needs an emulated device (its write log), but {dev.label} "
                                        f"is not one: use e.g. --device emmc-8g@512M")
                for case, params in study.cases(params_all[sname], dev):
                    need = study.min_capacity(params)
                    if need > dev.capacity:
                        bigger = "use a larger device" if dev.backend == "real" else \
                            f"give a larger --device SIZE (e.g. {dev.name}@{format_size(_round_up(need))})"
                        raise FlashbedError(
                            f"study {sname} needs a device of at least {format_size(_round_up(need))} for its "
                            f"files ({study.capacity_reason(params) or 'its own sizes'}), but {dev.label} has "
                            f"{format_size(dev.capacity)}: {bigger}, or smaller files")
                    own = study.vcpus(params)
                    for rep in range(r.repeat):
                        for choice, clk in ((ch, c) for ch in choices for c in clocks):
                            n = own or r.cpus
                            why = _cannot_run(choice, n) or \
                                (VIRTUAL_UP if clk.time_travel and n > 1 and not auto else "")
                            if why:
                                skipped.append(Skipped(dev.label, choice.label, v.spec, sname, case, n, why))
                                continue
                            runs_on, real_why = _cell_clock(clk, choice, dev, study, n)
                            if real_why is clock.RealWhy.CPU_TIME and clock.Clock.REAL in clocks:
                                continue  # its real-time cell measures it
                            if real_why is not None:
                                real_time.append(RealTime(dev.label, choice.label, sname, case, n, real_why))
                            # real time runs at the lab's own CPU cost: no profile, once
                            for prof in profiles if runs_on.time_travel else ("",):
                                key = CellKey(dev.label, v.spec, sname, case, rep, choice.label if several else "",
                                              clk.value if len(clocks) > 1 else "",
                                              prof if len(profiles) > 1 else "")
                                cells.append(CellSpec(key=key, device=dev, variant=v, params=params,
                                                      seed=r.seed + rep, pace=r.cell_pace(sname),
                                                      kernel=choice.label, cpus=n, clock=runs_on.value,
                                                      cpu_profile=prof))
        if board is not None and placed:
            lacks = board.lacking({parsed[spec][0].base.fstype})
            if lacks:
                raise FlashbedError(f"{spec}: {lacks}")
        if not placed:
            kinds = "raw NAND (e.g. nand-2g-4k)" if parsed[spec][0].media == "mtd" else "block (e.g. emmc-8g)"
            raise FlashbedError(f"{spec} has no device to run on: add a {kinds} device with --device")
    if not cells and na:
        runs = ", ".join(s for s, st in STUDIES.items() if st.runs_read_only)
        raise FlashbedError(f"{', '.join(sorted({n.fs for n in na}))}: read-only, and every study asked for writes "
                            f"to the filesystem: ask for one of {runs}")
    if not cells:
        left_out = Plan(r, devices, [], skipped=skipped).skipped_lines()
        raise FlashbedError("the selection gives no cells: check --fs, --device and --study go together"
                            + (f" ({left_out[0]})" if left_out else ""))
    _no_cells_for(req, cells, na, skipped, devices)
    return Plan(r, devices, cells, na, tuple(c.label for c in choices), skipped, real_time, notes)


def _no_cells_for(req: PlanRequest, cells: list[CellSpec], na: list, skipped: list, devices: dict) -> None:
    """One line for a study the user named that no device or filesystem of the run can run (raw
    NAND for a block study: `--check` on nand-2g-4k was dropped silently). The profile's own
    studies may leave some out: only named ones are held to it."""
    have = {c.key.study for c in cells} | {n.study for n in na} | {k.study for k in skipped}
    for s in req.studies:
        if s not in have:
            st = STUDIES[s]
            what = "--check (study appcheck)" if s == "appcheck" else f"study {s}"
            raise FlashbedError(f"{what} runs on {' or '.join(m.replace('mtd', 'raw NAND') for m in st.media)} "
                                f"devices, and none of this run's ({', '.join(devices)}) with its filesystems is "
                                f"one: add one (e.g. --device emmc-8g@512M), or drop it")


def _cell_clock(clk: clock.Clock, choice: Any, dev: Device, study: Any,
                n: int) -> tuple[clock.Clock, clock.RealWhy | None]:
    """The clock a cell asked to run on `clk` runs on, and why it is real time if virtual time was
    asked for (by name or by auto; make_plan has refused a kernel or vCPUs virtual time cannot
    have when it was asked for by name, and left a virtual case of several vCPUs out)."""
    if not clk.time_travel:
        return clk, None
    if clock.effective(clk, dev.backend)[0] is not clk:
        return clock.Clock.REAL, clock.RealWhy.DEVICE
    if not getattr(getattr(choice, "spec", None), "time_travel_ok", False):
        return clock.Clock.REAL, clock.RealWhy.KERNEL
    if n > 1:
        return clock.Clock.REAL, clock.RealWhy.SMP
    if study.real_cpu_time:
        return clock.Clock.REAL, clock.RealWhy.CPU_TIME
    return clk, None


class _OnBoard:
    """A board in place of the lab kernels: its own kernel, its own CPUs."""

    label = "board"

    def __init__(self, board: Any):
        self.board = board

    def cpus_problem(self, n: int) -> str:
        return "" if n == 1 else "a board runs the steps on its own CPUs: flashbed gives it no vCPUs"


def _check_board(r: PlanRequest, board: Any, destroy_data_on: tuple[str, ...]) -> None:
    """What a board cannot do, one line each (before anything runs)."""
    if r.cpus != 1:
        raise FlashbedError("--cpus sets the lab's vCPUs; a board runs on its own CPUs: drop --cpus")
    if r.pace == "none":
        raise FlashbedError("--pace none skips an emulated device's delays; a board's device keeps its own time: "
                            "drop --pace")
    if r.kernels:
        raise FlashbedError("--kernel picks a lab kernel; a board runs its own: drop --kernel")
    if not r.devices or any(not d.startswith("/dev/") for d in r.devices):
        raise FlashbedError(f"--target {r.target}: give the board's device with --device /dev/... (e.g. "
                            f"/dev/mmcblk0p3); presets run in the lab, without --target")
    for path in destroy_data_on:  # a typo must not pass for permission
        if path not in r.devices:
            raise FlashbedError(f"--destroy-data-on {path} names no device of this run on the board "
                                f"({', '.join(r.devices)}): repeat the --device path exactly")


def _round_up(n: int, unit: int = 1 << 20) -> int:
    """A size as a user gives it: whole MiB, rounded up."""
    return -(-n // unit) * unit


VIRTUAL_UP = "virtual time runs one vCPU (the time-travel kernel has no SMP)"


def clock_notes(plan: "Plan") -> list[str]:
    """One line per reason some cells run in real time although the run asks for virtual time
    (by name or by auto), saying which; one if the run names CPU profiles while some of its
    cells run in real time (ignored there)."""
    groups: dict[clock.RealWhy, list[RealTime]] = {}
    for rt in plan.real_time:
        groups.setdefault(rt.why, []).append(rt)
    notes = [_real_time_line(why, groups[why], plan) for why in clock.RealWhy if why in groups]
    if plan.request.cpu_profiles and any(c.clock != "virtual" for c in plan.cells):
        notes.append(cpuprofile.REAL_TIME_NOTE)
    return notes


def _real_time_line(why: clock.RealWhy, rts: list[RealTime], plan: "Plan") -> str:
    n = len(rts)
    cells, run = (f"{n} cells", "run") if n > 1 else ("1 cell", "runs")
    if why is clock.RealWhy.DEVICE:
        devs = ", ".join(f"{d} ({plan.devices[d].backend})" for d in dict.fromkeys(rt.device for rt in rts))
        return (f"{cells} on {devs} {run} in real time: virtual time needs a device the emulator serves "
                f"(nandsim and real devices have no model clock)")
    if why is clock.RealWhy.KERNEL:
        kerns = ", ".join(dict.fromkeys(rt.kernel for rt in rts))
        with_tt = " or ".join(k for k, s in kernel.KERNELS.items() if s.time_travel_ok)
        return (f"{cells} on lab kernel {kerns} {run} in real time: it has no virtual-time flavour "
                f"(virtual time runs on lab kernel {with_tt})")
    if why is clock.RealWhy.SMP:
        where = ", ".join(f"{s} at {c} vCPUs" for s, c in dict.fromkeys((rt.study, rt.cpus) for rt in rts))
        return f"{cells} ({where}) {run} in real time: the virtual-time lab kernel runs one vCPU (it has no SMP)"
    studies = ", ".join(dict.fromkeys(rt.study for rt in rts))
    return (f"study {studies} measures the lab's real CPU time, apart from the timed figures: its cells run in "
            f"real time")


def cpu_profiles(plan: "Plan") -> dict[str, dict[str, Any]]:
    """The CPU profiles the plan's virtual-time cells run with, as the manifest records them."""
    return {n: cpuprofile.get(n).describe() for n in dict.fromkeys(c.cpu_profile for c in plan.cells) if n}


def _cannot_run(choice: kernel.KernelChoice, n: int) -> str:
    """Why a case of n vCPUs cannot run on kernel `choice` on this host ('' if it can)."""
    why = choice.cpus_problem(n)
    if not why and n > cpus.available() and not isinstance(choice, _OnBoard):
        why = f"{n} vCPUs need {n} host CPUs, this host has {cpus.available()}"
    return why
