"""Turn a run request into cells (device × filesystem variant × study × case ×
repeat), checking everything before any cell runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import clock, fsspace, profiles, robust, variants
from .devices.presets import Device
from .errors import FlashbedError
from .identity import PlanRequest
from .lab import cpuprofile, kernel
from .lab.boundary import PowerSwitch, WriteLog, session_has
from .results import READ_ONLY, CellKey
from .sizes import format_size
from .studies import STUDIES
from .studies.base import CellSpec

if TYPE_CHECKING:
    from .targets import Target


PACES = ("auto", "real", "none")


@dataclass(frozen=True)
class NotApplicable:
    """A study the plan left out for a filesystem, and why (the report says "n/a (why)")."""

    device: str
    fs: str
    study: str
    why: str


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
    auto), and why (clock.RealWhy)."""

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


def study_params(profile: str, overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every overridden study's Params, checked (one clear line for an unknown
    study, key or a bad value), and those of the studies the profile changes."""
    for s in overrides:
        if s not in STUDIES:
            raise FlashbedError(f"--set for unknown study '{s}': choose from {', '.join(STUDIES)}")
    return {s: st.params_at_edge({**profiles.overrides(profile, s), **overrides.get(s, {})})
            for s, st in STUDIES.items()}


REPEAT_MAX = 1000  # repeats of every cell: far beyond any study's need


def make_plan(req: PlanRequest, target: "Target | None" = None, destroy_data_on: tuple[str, ...] = ()) -> Plan:
    """The cells of `req` on `target` (targets/: where they run; the UML lab when none is given,
    on the kernels a request that names none gets: the default one). Everything is checked here,
    one line per refusal, before any cell runs: the target's own refusals are its to say."""
    _check_numbers(req)
    r = req.resolved()
    if target is None:
        from .targets import LabTarget
        target = LabTarget()
    target.check(r, destroy_data_on)
    choices = target.choices(r)
    clocks = _asked_clocks(r, target, choices)
    for s in r.studies:
        if s not in STUDIES:
            raise FlashbedError(f"unknown study '{s}': choose from {', '.join(STUDIES)}")
    params_all = study_params(r.profile, r.overrides)
    devices = target.load_devices(r.devices, destroy_data_on)
    blank = [str(d.info["judged_blank"]) for d in devices.values() if d.info.get("judged_blank")]
    devices, rerun, notes = _robust(r, devices)
    notes = [*blank, *notes]  # a real device written without --destroy-data-on: why it may be
    parsed = {spec: [variants.parse(spec, d) for d in devices.values()] for spec in r.fs}
    for spec in r.fs:
        target.check_variant(spec, parsed[spec][0])
    b = _Build(r, target, choices, clocks, rerun)
    for spec in r.fs:
        placed = False
        for dev, v in zip(devices.values(), parsed[spec]):
            if dev.kind != ("nandsim" if v.media == "mtd" else "block"):
                continue
            variants.check_device(v, dev)
            placed = True
            for sname in r.studies:
                b.study(dev, v, sname, params_all[sname])
        if not placed:
            kinds = "raw NAND (e.g. nand-2g-4k)" if parsed[spec][0].media == "mtd" else "block (e.g. emmc-8g)"
            raise FlashbedError(f"{spec} has no device to run on: add a {kinds} device with --device")
    _no_cells(req, b, devices)
    _robust_in_virtual_time(r, b)
    return Plan(r, devices, b.cells, b.na, tuple(c.label for c in choices), b.skipped, b.real_time, notes)


def _robust(r: PlanRequest, devices: dict[str, Device]) -> tuple[dict[str, Device], tuple[str, ...], list[str]]:
    """The robust pass (robust.py): the devices with each emulated twin's variants, the studies the
    variants run (the use cases' decisive ones), and the plan's notes on them; without one, as given."""
    if r.robust is None:
        return devices, (), []
    robust.check(devices, r.studies)
    devices = robust.expand(devices, r.robust, r.seed)
    rerun = robust.rerun_studies(r.studies)
    return devices, rerun, robust.notes(devices, rerun)


def _robust_in_virtual_time(r: PlanRequest, b: "_Build") -> None:
    """One line if a robust pass's variants would run in real time (--clock real, or a kernel
    without a virtual-time flavour). The pass asks whether an answer holds across the device's
    assumptions; on the wall clock the host's own load moves the timed figures as much as an
    assumption does (a variant would hold or fail on the host's noise), and every variant would
    spend its device time on the wall clock. Refused rather than run."""
    if r.robust is None:
        return
    variants_of = {c.key.device for c in b.cells if c.device.variant}
    real = [c for c in b.cells if c.key.device in variants_of and not c.clock.time_travel]
    if not real:
        return
    kernels = sorted({t.kernel for t in b.real_time if t.why is clock.RealWhy.KERNEL and t.device in variants_of})
    if kernels:
        raise FlashbedError(f"--robust runs its variants in virtual time, and kernel {', '.join(kernels)} has no "
                            f"virtual-time flavour: use --kernel 7.3, or drop --robust")
    if clock.Clock.REAL in b.clocks.each:
        raise FlashbedError("--robust runs its variants in virtual time (in real time the host's load moves the "
                            "timed figures as much as an assumption does): drop --clock real, or drop --robust")
    why = sorted({str(t.why.value) for t in b.real_time if t.device in variants_of})
    raise FlashbedError(f"--robust runs its variants in virtual time, and {real[0].key.id} cannot "
                        f"({', '.join(why) or 'real time'}): drop --robust, or the study that needs real time")


def _check_numbers(req: PlanRequest) -> None:
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


@dataclass(frozen=True)
class _Clocks:
    """The clocks the cells are asked for: virtual under auto (each cell where it can), or those named."""

    each: tuple[clock.Clock, ...]
    auto: bool


def _asked_clocks(r: PlanRequest, target: "Target", choices: list) -> _Clocks:
    asked = clock.labels(r.clocks or ("real",))  # auto, or the clocks of the cells (() is real time)
    auto = asked == clock.RUN_DEFAULT
    clocks = (clock.Clock.VIRTUAL,) if auto else tuple(clock.parse(c) for c in asked)
    if clock.Clock.VIRTUAL in clocks and not auto:  # asked for by name: refused where it cannot be had
        target.check_virtual(r, choices)
    return _Clocks(clocks, auto)


@dataclass
class _Build:
    """The plan's cells as they are made, and what it leaves out (and why)."""

    r: PlanRequest
    target: "Target"
    choices: list
    clocks: _Clocks
    rerun: tuple[str, ...] = ()  # the studies a robust pass runs again on a twin's variants
    cells: list[CellSpec] = field(default_factory=list)
    na: list[NotApplicable] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    real_time: list[RealTime] = field(default_factory=list)

    @property
    def profiles(self) -> tuple[str, ...]:
        """The CPU profiles of virtual-time cells: an axis (in the cell key) only when there are several."""
        r = self.r
        return cpuprofile.labels(r.cpu_profiles) if r.cpu_profiles else (cpuprofile.default().name,)

    def study(self, dev: Device, v: Any, sname: str, params_all: Any) -> None:
        """The cells of study `sname` for filesystem variant `v` on `dev`, or why it has none."""
        study = STUDIES[sname]
        if v.media not in study.media or (dev.variant and sname not in self.rerun):
            return
        session = self.target.session_class(dev)
        if study.power_switch and not session_has(session, PowerSwitch):
            raise FlashbedError(self.target.no_power_switch(sname, dev))
        if v.read_only and not study.runs_read_only:
            self.na.append(NotApplicable(dev.label, v.spec, sname, READ_ONLY))  # it writes
            return
        if study.needs_write_log and not session_has(session, WriteLog):
            if self.r.target:  # a board's device has none, and --target takes no preset
                raise FlashbedError(f"study {sname} needs the flash emulator's write log, which a board's device "
                                    f"({dev.label}) has not: run it in the lab, without --target (e.g. --device "
                                    f"emmc-8g@512M), or drop it")
            raise FlashbedError(f"study {sname} needs an emulated device (its write log), but {dev.label} "
                                f"is not one: use e.g. --device emmc-8g@512M")
        for case, params in study.cases(params_all, dev):
            _check_capacity(study, sname, params, dev, v)
            for rep in range(self.r.repeat):
                for choice, clk in ((ch, c) for ch in self.choices for c in self.clocks.each):
                    self.cell(dev, v, study, case, params, rep, choice, clk)

    def cell(self, dev: Device, v: Any, study: Any, case: str, params: Any, rep: int, choice: Any,
             clk: clock.Clock) -> None:
        """One case's cell on `choice` in clock `clk` (one per CPU profile in virtual time), or why not."""
        r, sname, n = self.r, study.name, study.vcpus(params) or self.r.cpus
        why = choice.cpus_problem(n) or (VIRTUAL_UP if clk.time_travel and n > 1 and not self.clocks.auto else "")
        if why:
            self.skipped.append(Skipped(dev.label, choice.label, v.spec, sname, case, n, why))
            return
        runs_on, real_why = _cell_clock(clk, choice, dev, study, n)
        if real_why is clock.RealWhy.CPU_TIME and clock.Clock.REAL in self.clocks.each:
            return  # its real-time cell measures it
        if real_why is not None:
            self.real_time.append(RealTime(dev.label, choice.label, sname, case, n, real_why))
        several, profiles = len(self.choices) > 1, self.profiles
        # a real-time cell of one vCPU on a kernel with a time-travel build boots that build with time
        # travel off (whatever made it real time: --clock real, the cpu study, a device without a model
        # clock): only a cell of several vCPUs needs the kernel as configured (SMP), a second build
        flavour = kernel.TIME_TRAVEL if not runs_on.time_travel and n == 1 and choice.virtual else ""
        # real time runs at the lab's own CPU cost: no profile, once
        for prof in profiles if runs_on.time_travel else ("",):
            key = CellKey(dev.label, v.spec, sname, case, rep, choice.label if several else "",
                          clk.value if len(self.clocks.each) > 1 else "", prof if len(profiles) > 1 else "")
            self.cells.append(CellSpec(key=key, device=dev, variant=v, params=params, seed=r.seed + rep,
                                       pace=r.cell_pace(sname), kernel=choice.label, cpus=n, clock=runs_on,
                                       cpu_profile=prof, flavour=flavour))


def _check_capacity(study: Any, sname: str, params: Any, dev: Device, v: Any = None) -> None:
    need = study.min_capacity(params)
    if need > dev.capacity:
        bigger = "use a larger device" if dev.backend == "real" else \
            f"give a larger --device SIZE (e.g. {dev.name}@{format_size(_round_up(need))})"
        raise FlashbedError(
            f"study {sname} needs a device of at least {format_size(_round_up(need))} for its "
            f"files ({study.capacity_reason(params) or 'its own sizes'}), but {dev.label} has "
            f"{format_size(dev.capacity)}: {bigger}, or smaller files")
    space = study.min_space(params)
    free = fsspace.fits(v, dev.capacity, space) if space and v is not None else None
    if free is not None and space > free:  # what the filesystem's own mkfs leaves for files
        fits = next((c for c in (dev.capacity << k for k in range(1, 7))
                     if (fsspace.usable(v, c) or 0) >= space), None)
        bigger = "use a larger device" if dev.backend == "real" or fits is None else \
            f"give a larger --device SIZE (e.g. {dev.name}@{format_size(fits)})"
        raise FlashbedError(
            f"study {sname}'s files ({study.capacity_reason(params) or 'its own sizes'}) do not fit {v.spec} on "
            f"{dev.label}: its mkfs leaves {format_size(free)} of {format_size(dev.capacity)} for files "
            f"(over-provisioning and metadata): {bigger}, or smaller files")


def _no_cells(req: PlanRequest, b: _Build, devices: dict) -> None:
    """One line when the plan has no cells, or none of a study the user named."""
    if not b.cells and b.na:
        runs = ", ".join(s for s, st in STUDIES.items() if st.runs_read_only)
        raise FlashbedError(f"{', '.join(sorted({n.fs for n in b.na}))}: read-only, and every study asked for "
                            f"writes to the filesystem: ask for one of {runs}")
    if not b.cells:
        left_out = Plan(b.r, devices, [], skipped=b.skipped).skipped_lines()
        raise FlashbedError("the selection gives no cells: check --fs, --device and --study go together"
                            + (f" ({left_out[0]})" if left_out else ""))
    _no_cells_for(req, b.cells, b.na, b.skipped, devices)


def _no_cells_for(req: PlanRequest, cells: list[CellSpec], na: list, skipped: list, devices: dict) -> None:
    """One line for a study the user named that no device or filesystem of the run can run (raw
    NAND for a block study: `--check` on nand-2g-4k was dropped silently). The profile's own
    studies may leave some out: only named ones are held to it."""
    have = {c.key.study for c in cells} | {n.study for n in na} | {k.study for k in skipped}
    for s in req.studies:
        if s not in have:
            st = STUDIES[s]
            what = st.named_as or f"study {s}"
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
    if not choice.virtual:
        return clock.Clock.REAL, clock.RealWhy.KERNEL
    if n > 1:
        return clock.Clock.REAL, clock.RealWhy.SMP
    if study.real_cpu_time:
        return clock.Clock.REAL, clock.RealWhy.CPU_TIME
    return clk, None


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
    if plan.request.cpu_profiles and any(c.clock is not clock.Clock.VIRTUAL for c in plan.cells):
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
