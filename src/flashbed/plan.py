"""Turn a run request into cells (device × filesystem variant × study × case ×
repeat), checking everything before any cell runs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from . import profiles, variants
from .devices import presets
from .devices.presets import Device, format_size
from .errors import FlashbedError
from .results import CellKey
from .studies import STUDIES
from .studies.base import CellSpec


@dataclass(frozen=True)
class PlanRequest:
    """What `flashbed run` was asked for; the run's identity."""

    profile: str = "quick"
    fs: tuple[str, ...] = ()  # variant specs; default: the ten block filesystems
    devices: tuple[str, ...] = ()  # preset or preset@SIZE; default: the profile's device
    studies: tuple[str, ...] = ()  # default: the profile's studies
    repeat: int = 1
    seed: int = 1
    # per-study parameter changes as given (--set text, sizes made bytes): the run's
    # identity; checked against each study's Params when the plan is made
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    pace: str = "real"  # "none": the emulator skips its sleeps (timings then mean nothing)

    def resolved(self) -> "PlanRequest":
        prof = profiles.get(self.profile)
        return PlanRequest(
            profile=self.profile,
            fs=self.fs or profiles.BLOCK_FILESYSTEMS,
            devices=self.devices or (prof["device"],),
            studies=self.studies or tuple(prof["studies"]),
            repeat=self.repeat, seed=self.seed, overrides=self.overrides, pace=self.pace)

    def run_id(self) -> str:
        """Same request, same id: rerunning a command resumes its run."""
        r = asdict(self.resolved())
        if r["pace"] == "real":
            del r["pace"]  # runs from before --pace keep their ids
        digest = hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()[:8]
        return f"{r['profile']}-{digest}"


@dataclass(frozen=True)
class Plan:
    request: PlanRequest
    devices: dict[str, Device]
    cells: list[CellSpec]


def study_params(profile: str, overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every overridden study's Params, checked (one clear line for an unknown
    study, key or a bad value), and those of the studies the profile changes."""
    for s in overrides:
        if s not in STUDIES:
            raise FlashbedError(f"--set for unknown study '{s}': choose from {', '.join(STUDIES)}")
    return {s: st.params_at_edge({**profiles.overrides(profile, s), **overrides.get(s, {})})
            for s, st in STUDIES.items()}


def make_plan(req: PlanRequest) -> Plan:
    if req.repeat < 1:
        raise FlashbedError(f"--repeat must be at least 1 (got {req.repeat})")
    if req.pace not in ("real", "none"):
        raise FlashbedError(f"--pace must be real or none (got '{req.pace}')")
    r = req.resolved()
    for s in r.studies:
        if s not in STUDIES:
            raise FlashbedError(f"unknown study '{s}': choose from {', '.join(STUDIES)}")
    params_all = study_params(r.profile, r.overrides)
    devices = {d.label: d for d in (presets.load_spec(spec) for spec in r.devices)}
    parsed = {spec: [variants.parse(spec, d) for d in devices.values()] for spec in r.fs}

    cells: list[CellSpec] = []
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
                if v.media not in study.media:
                    continue
                if study.needs_write_log and not dev.emulated:
                    raise FlashbedError(f"study {sname} needs an emulated device (its write log), but {dev.label} "
                                        f"is not one: use e.g. --device emmc-8g@512M")
                for case, params in study.cases(params_all[sname], dev):
                    need = study.min_capacity(params)
                    if need > dev.capacity:
                        raise FlashbedError(
                            f"study {sname} needs a device of at least {format_size(need)}, but {dev.label} "
                            f"has {format_size(dev.capacity)}: give a larger --device SIZE or a smaller profile")
                    for rep in range(r.repeat):
                        cells.append(CellSpec(key=CellKey(dev.label, v.spec, sname, case, rep), device=dev,
                                              variant=v, params=params, seed=r.seed + rep, pace=r.pace))
        if not placed:
            kinds = "raw NAND (e.g. nand-2g-4k)" if parsed[spec][0].media == "mtd" else "block (e.g. emmc-8g)"
            raise FlashbedError(f"{spec} has no device to run on: add a {kinds} device with --device")
    if not cells:
        raise FlashbedError("the selection gives no cells: check --fs, --device and --study go together")
    return Plan(r, devices, cells)
