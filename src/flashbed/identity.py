"""A run's identity, and what keeps the ids of runs made before.

A run's id is a hash of its request, resolved (`PlanRequest.run_id`): the same command makes
the same request, hence the same run directory, and running it again resumes the run. Every
default that changed since runs were made keeps the ids of the requests that did not change
with it: fields at their old default are left out of the hash; real time is written as no
clock (runs from before the clock axis), as is the auto clock on a board (it keeps its own
time); --pace auto as the pace every cell gets when they all get one. A run's stored request
reads a field it lacks at the value it had then (LEGACY_DEFAULTS), never at today's default;
a run made when the default kernel was another is finished on the kernel its manifest
records (`run_kernels`); the command whose run was made in real time before auto became the
default clock is told where that run is (`real_time_run`). tests/unit/test_identity.py pins
requests' ids, and tests/unit/test_runid_table.py every command's id of a table of commands.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from . import clock, profiles
from .devices import presets, realdev
from .errors import FlashbedError
from .lab import kernel
from .lab.kernel import recorded_label
from .store import REQUEST_LISTS, REQUEST_NUMBERS, REQUEST_TEXTS, RunStore, request_problem
from .studies import STUDIES


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
    # the lab's clocks (clock.py): auto (virtual time for each cell that can run in it,
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
    # the tuning pass (tune.py): each use case's winner and runner-up try their catalogue's options on
    # its decisive studies after the plain cells; False: none (then not part of the identity)
    tune: bool = False

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
                           cpu_profiles=tuple(self.cpu_profiles), robust=self.robust,
                           tune=self.tune)

    def cell_pace(self, study: str) -> clock.Pace:
        """An emulated device's pace for the cells of `study` (of a resolved request) in real
        time; a virtual-time cell's device runs in the model's time whatever this says: the
        device's delays cost no wall-clock time there, so there is nothing to skip."""
        if self.pace == "auto":
            return clock.Pace.NONE if STUDIES[study].timing_free else clock.Pace.REAL
        return clock.Pace(self.pace)

    def run_id(self) -> str:
        """Same request, same id: rerunning a command resumes its run."""
        r = asdict(self.resolved())
        # runs from before --pace, --kernel and --cpus keep their ids
        for name, default in (("pace", "real"), ("kernels", ()), ("cpus", 1), ("target", ""), ("clocks", ()),
                              ("cpu_profiles", ()), ("robust", None), ("tune", False)):
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


def real_time_run(req: PlanRequest, store: RunStore) -> str:
    """A line when this command made a run in real time before auto became the default ('' if
    not): that run has another id, so it is left as it is, not finished in virtual time."""
    if req.resolved().clocks != clock.RUN_DEFAULT or store.exists():
        return ""
    old = RunStore(store.root.parent / replace(req, clocks=()).run_id())
    if not old.exists():
        return ""
    return (f"run {old.root.name}, this command's run in real time (the default before auto), is left as it is: "
            f"`flashbed run --resume {old.root.name}` finishes it in real time")


def request_of(store: RunStore) -> PlanRequest:
    """The request an existing run's manifest records, its fields of the types a new one has."""
    stored = store.manifest().get("request")
    if isinstance(stored, dict):  # a field it lacks had its value of then, not today's default
        stored = stored_request(stored)
    ok = isinstance(stored, dict) and \
        set(stored) <= {*REQUEST_TEXTS, *REQUEST_LISTS, *REQUEST_NUMBERS, "overrides", "robust", "tune"} \
        and not request_problem(stored)
    if not ok:
        raise FlashbedError(f"{store.manifest_path}: its request is not one flashbed makes, so the run cannot be "
                            f"resumed: start a new run with --out DIR")
    return PlanRequest(**{k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()})


def recorded_kernels(store: RunStore) -> tuple[str, ...] | None:
    """The lab kernels an existing run was made on (its manifest), None for a new run."""
    if not store.exists():
        return None
    man = store.manifest()
    kernels = man.get("kernels") or {"": man.get("kernel") or {}}
    # a kernel's time-travel flavour (virtual time) is the same label's other build
    labels = tuple(dict.fromkeys(label for p in kernels.values() if (label := recorded_label(p))))
    return labels or None
