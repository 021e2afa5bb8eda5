"""What every study shares: the cell it runs in, and the Study interface.

A study turns its parameters into guest steps (one or more lab boots) and
turns the boots' results into measurements. It never touches the device or
the lab itself: cell.py does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from ..clock import Clock, Pace
from ..devices.presets import Device
from ..lab.boundary import BootResult, Nandsim, Step
from ..lab.guest.protocol import Call
from ..results import CellKey, Measurement
from ..shellwords import TOOLS
from ..status import CellStatus
from ..variants import FsVariant
from . import params as P

PY = "/usr/bin/python3 -S -I"
TOOL = f"{PY} {TOOLS}/fbtool.py"
MNT = "/mnt"
RUN = "$FLASHBED_RUN"  # the shared run directory, as the guest sees it
MB = 1_000_000
MiB = 1 << 20
CRASHLOG = "crashlog"  # where the cell puts the device's write log: in the boot's run directory


@dataclass(frozen=True)
class CellSpec:
    """Everything a cell needs; all of it is data (it can travel to a Dask worker)."""

    key: CellKey
    device: Device
    variant: FsVariant
    params: Any  # the study's Params
    seed: int = 1
    # an emulated device's pace in real time: its delays waited out, or skipped (clock.Pace)
    pace: Pace = Pace.REAL
    # the lab kernel's label (7.3, 6.12, 7.3:ptrace); "": the lab factory's only kernel
    kernel: str = ""
    cpus: int = 1  # guest vCPUs (the lab leases as many host CPUs)
    # the lab's clock: real, or virtual (the time-travel kernel; the emulator's model sets
    # every request's guest time: clock.py)
    clock: Clock = Clock.REAL
    # in virtual time: the guest CPU's cost profile (lab/cpuprofile.py); "": none (real time)
    cpu_profile: str = ""
    # the lab kernel's build a real-time cell boots: "timetravel" (kernel.TIME_TRAVEL), its
    # time-travel build with time travel off, for every cell of one vCPU on a kernel that has one, so
    # only SMP needs a second build; "" the kernel as configured (several vCPUs, 6.12, a board).
    # Virtual time is always the time-travel build.
    flavour: str = ""

    def __post_init__(self) -> None:  # given as their words (a test, a stored spec): the typed values
        object.__setattr__(self, "pace", Pace(self.pace))
        object.__setattr__(self, "clock", Clock(self.clock))


@dataclass
class Outcome:
    """A study's reading of its boots."""

    measurements: list[Measurement]
    headline: str
    extra: dict[str, Any] = field(default_factory=dict)
    status: CellStatus = CellStatus.OK
    error: str = ""


@dataclass(frozen=True)
class OutcomeTable:
    """How a failure study's outcome counts read as a table: the metrics
    `prefix + name` of each case, one column per name, one row per filesystem.
    With `per_iteration`, every iteration lands in exactly one column, so a
    row's total must equal the case's iterations."""

    title: str
    prefix: str
    names: tuple[str, ...]
    per_iteration: bool = False

    def takes(self, metric: str, claimed: frozenset[str]) -> bool:
        """Whether `metric` is one of this table's columns. `claimed` holds the
        metrics every table of the study names (claimed_metrics); the
        per-iteration table also takes its prefix's unclaimed ones, so no count
        is ever left out."""
        return metric.startswith(self.prefix) and (
            metric[len(self.prefix):] in self.names or (self.per_iteration and metric not in claimed))


def claimed_metrics(tables: tuple[OutcomeTable, ...]) -> frozenset[str]:
    return frozenset(t.prefix + n for t in tables for n in t.names)


@dataclass(frozen=True)
class Reproducer:
    """One failure a study lets anyone reproduce: where, what happened, and the command."""

    cell: str  # the cell's id
    device: str
    fs: str
    study: str
    case: str
    item: str  # what in the cell failed (e.g. a crash state's id)
    outcome: str
    why: str
    command: str
    cause: str = ""  # a crash state's: whose loss it was (status.LossCause), "" where not attributed


class Case(NamedTuple):
    """One cell's worth of a study: its label (the cell key's case, "" when the
    study is one case) and its parameters."""

    label: str
    params: Any


class Study:
    """Base class: a study's whole definition. Subclasses set the class facts
    below, declare `Params` and implement boots/parse (and cases, when a study
    splits into several cells). Register it in studies/__init__.py."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""  # the report's heading
    description: ClassVar[str] = ""  # one line: what it measures and how
    order: ClassVar[int] = 1000  # place in listings and the report
    primary_metric: ClassVar[str] = ""  # what a comparison of two runs plots
    # the report's figures (views.py); none: the report's default for its shape
    figures: ClassVar[tuple] = ()
    # words of its case labels in the order a reader expects (read before write, ...)
    case_order: ClassVar[tuple[str, ...]] = ()
    tools: ClassVar[tuple[str, ...]] = ()  # tools it drives directly (named under its figures)
    # outcome names that count as good (the report's colours when weights.toml has no list)
    good_outcomes: ClassVar[frozenset[str]] = frozenset()
    media: tuple[str, ...] = ("block", "mtd")  # which device media it supports
    # does the cell sample the emulator's statistics around its workload?
    device_stats: bool = True
    # does it need the emulator's power cut? (a real device has no power switch: refused)
    power_switch: ClassVar[bool] = False
    # it runs on a read-only filesystem, on an image of its files; the other studies write to
    # the filesystem and do not apply there (the plan marks them "n/a (read-only)")
    runs_read_only: ClassVar[bool] = False
    # its outcomes do not depend on the device's timing (what survives a power cut, a
    # corrupted write): at --pace auto (the default) its cells run the emulator without
    # its delays, which only makes them faster
    timing_free: ClassVar[bool] = False
    # its outcomes depend on the filesystem alone, on no parameter of the device model (what a
    # filesystem can hold): the robust pass (robust.py) does not run it again on a twin's variants
    device_free: ClassVar[bool] = False
    # it measures the lab's real CPU time (schedstat on the host's clock): in virtual time
    # the scheduler's clock counts guest ticks, so its cells always run in real time
    real_cpu_time: ClassVar[bool] = False
    # the options of `flashbed run` it takes (inputs.py: --workload, --check, ...); given, they
    # set its parameters and it joins the run where `joins` says
    inputs: ClassVar[tuple] = ()
    # how a refusal names it when an option brought it into the run ("" : "study NAME")
    named_as: ClassVar[str] = ""
    # keep booting after a boot that failed or hung (iteration studies: each
    # boot's outcome is a result, not the end of the cell)
    continue_after_failure: bool = False
    # failure studies: their outcome counts as tables (`flashbed results`, report)
    outcome_tables: tuple[OutcomeTable, ...] = ()
    # needs the device's write log (an emulated device): the plan refuses other devices
    needs_write_log: bool = False

    def before_boot(self, spec: "CellSpec", index: int, run_dir: Path) -> None:
        """Hook run on the host before boot `index` (e.g. to prepare its files)."""

    def nandsim(self, spec: "CellSpec", nand: "Nandsim | None") -> "Nandsim | None":
        """The raw NAND the lab gets (e.g. with bad blocks or bit flips in `extra`)."""
        return nand

    @dataclass(frozen=True)
    class Params:
        """This study takes no parameters."""

    def params(self, **values: Any) -> Any:
        """The study's Params with `values` over the defaults, checked (one clear line if not)."""
        return P.check(self.name, self.Params, values)

    def param_names(self) -> tuple[str, ...]:
        """Its parameters as a request and a result store them (a user file as its keys)."""
        return P.stored(self.Params)

    def joins(self, sets: dict[str, Any]) -> bool:
        """Whether it joins a run whose inputs set these of its parameters (it takes one given)."""
        return True

    def param_lines(self) -> list[str]:
        return P.describe(self.Params)

    def params_at_edge(self, values: dict[str, Any]) -> Any:
        """Params from a profile and --set: as params(), and no per-case field given by hand."""
        return P.check(self.name, self.Params, values, edge=True)

    def cases(self, params: Any, device: Device) -> list[Case]:
        """Split into cells; one unnamed case by default."""
        return [Case("", params)]

    def min_capacity(self, params: Any) -> int:
        return 0

    def min_space(self, params: Any) -> int:
        """The bytes of files the study writes at once, which the filesystem must hold (fsspace.py);
        0: its min_capacity margin is enough."""
        return 0

    def capacity_reason(self, params: Any) -> str:
        """The settings min_capacity follows, as --set would give them (the sizes of its files)."""
        ks = P.kinds(self.Params)
        return ", ".join(f"{self.name}.{k}={P.text(getattr(params, k), kind.unit)}" for k, kind in ks.items()
                         if kind.unit in ("bytes", "MB") and not kind.per_case and getattr(params, k) is not None)

    def vcpus(self, params: Any) -> int | None:
        """The guest vCPUs a case runs on when the case itself sets them (a scaling case);
        None: the run's (--cpus)."""
        return None

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        raise NotImplementedError

    def boot_pace(self, spec: CellSpec, index: int) -> Pace | None:
        """The device's pace for boot `index` when it is not the cell's (a phase whose timing
        nothing measures, as preconditioning, may run unpaced); None: the cell's."""
        return None

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        raise NotImplementedError

    def reproducers(self, run_id: str, result: Any) -> list[Reproducer]:
        """The failures of a cell result (results.CellResult) with the command that
        reproduces each (the report and `flashbed results` list them)."""
        return []


# --- step helpers ----------------------------------------------------------------------

def boot_dir(run_dir: Path, index: int) -> Path:
    """The run directory of boot `index` of a cell of several boots (cell.py: a cell of one boot
    runs in the cell's own directory)."""
    return run_dir / f"boot{index}"


def make_and_mount(v: FsVariant) -> list[Step]:
    steps = [Step(f"mkfs{i}" if i else "mkfs", c, timeout=600) for i, c in enumerate(v.make_cmds())]
    steps += [Step(f"mount{i}" if i else "mount", c, timeout=300) for i, c in enumerate(v.mount_cmds(MNT))]
    return steps


def mount(v: FsVariant, name: str = "mount", ro: bool = False) -> list[Step]:
    return [Step(f"{name}{i}" if i else name, c, timeout=300) for i, c in enumerate(v.mount_cmds(MNT, ro))]


def tree_on_device(v: FsVariant, src: str, install: str = "install") -> list[Step]:
    """The tree `src` on the filesystem, mounted at MNT: the filesystem made, mounted and the
    tree copied in (step `install`); or, read-only, an image of the tree built (step mkfs),
    written to the device (flash) and mounted."""
    if v.read_only:
        build, flash = v.image_cmds(src)
        return [Step("mkfs", build, timeout=3600), Step("flash", flash, timeout=3600), *mount(v)]
    return [*make_and_mount(v), Step(install, f"cp -a {src}/. {MNT}/ && sync", timeout=3600)]


def umount(v: FsVariant, name: str = "umount") -> list[Step]:
    return [Step(f"{name}{i}" if i else name, c, timeout=300) for i, c in enumerate(v.umount_cmds(MNT))]


def block_stat(device: str) -> str:
    """The block layer's counters of `device` in the guest (Documentation/block/stat.rst): its
    /sys/class/block entry, whatever its node is called where the steps run (/dev/ubda in the
    UML lab, the board's own partition, a loop device)."""
    return f"/sys/class/block/$(basename $(readlink -f {device}))/stat"


def drop_caches(name: str = "drop-caches") -> Step:
    return Step(name, "sync; echo 3 > /proc/sys/vm/drop_caches", timeout=300)


def stats_reset(phase: str = "workload") -> Step:
    return Step(f"stats-reset-{phase}", host=Call.RESET_STATS, args={"phase": phase})


def stats_take(phase: str = "workload") -> Step:
    # sync first: what the page cache still holds has not reached the device
    return Step(f"stats-{phase}", host=Call.STATS, args={"phase": phase})


def step_json(res: BootResult, name: str) -> dict[str, Any] | None:
    s = res.step(name)
    if s is None or not s.status.ok:
        return None
    try:
        return json.loads(s.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def seconds(res: BootResult, name: str) -> float | None:
    s = res.step(name)
    return s.seconds if s is not None and s.status.ok else None


def first_failure(boots: list[BootResult], allowed: set[str] = frozenset()) -> str:
    """'' if every step that had to succeed did; else a one-line reason."""
    for b in boots:
        for s in b.steps:
            if not s.status.ok and s.name not in allowed:
                lines = (s.stderr or s.stdout).strip().splitlines()
                return f"step '{s.name}' {s.status} (rc {s.rc}): {lines[-1] if lines else ''}"[:400]
        if not b.status.as_planned:
            return f"lab {b.status}: {b.error}"[:400]
    return ""


def passed(ok: bool) -> CellStatus:
    """A study's reading: ok, or failed (a step that had to succeed did not)."""
    return CellStatus.OK if ok else CellStatus.FAILED


def m(case: str, metric: str, value: float | None, unit: str) -> list[Measurement]:
    return [] if value is None else [Measurement(case, metric, round(float(value), 6), unit)]
