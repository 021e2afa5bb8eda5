"""The `flashbed run` line that measures what a run lacks, built from the run's own manifest.

A use case that cannot be decided names the command that would decide it: the missing
studies on the same device and filesystems, with the run's profile, repeats, seed, pace,
clock and the run's parameter overrides for those studies. When the run has cells of those
studies that the lab itself failed (status "error"), resuming the run retries them.
"""

from __future__ import annotations

import shlex
from typing import Any

from .. import profiles
from ..studies import STUDIES, inputs
from .load import RunData


def measure_command(run: RunData, device: str, studies: list[str], alone: bool = False) -> str:
    """`alone`: one lab at a time (--jobs 1), for figures a busy host left lab-bound."""
    studies = list(dict.fromkeys(studies))
    errored = any(f.status.retryable for f in run.failures if f.device == device and f.study in studies)
    if errored and not alone:
        return f"flashbed run --resume {shlex.quote(run.run_id)}"
    req = run.manifest.get("request") if isinstance(run.manifest.get("request"), dict) else {}
    on_device = run.filesystems(device)
    asked = [str(f) for f in req.get("fs") or () if f in on_device]
    fss = asked + [f for f in on_device if f not in asked]
    # a profile this flashbed does not know (a renamed one) cannot be asked for: the default is used
    args = ["flashbed", "run"] + (["--profile", run.profile] if run.profile in profiles.PROFILES else [])
    # a target of a run on several kernels is a device on one kernel: both go on the line
    dev, kern = run.targets.get(device, (device, ""))
    args += ["--device", dev] + (["--kernel", kern] if kern else [])
    args += ["--fs", ",".join(fss), "--study", ",".join(studies)]
    # pace: the default (auto) gives each study its own clock; only a run without delays is repeated as such
    for flag, key, default in (("--repeat", "repeat", (1,)), ("--seed", "seed", (1,)),
                               ("--pace", "pace", ("auto", "real"))):
        value = req.get(key)
        if value is not None and value not in default:
            args += [flag, str(value)]
    # the run's clock, when it is not today's default (auto): a run without one ran in real time
    clocks = req.get("clocks") if isinstance(req.get("clocks"), list) else []
    if len(clocks) <= 1 and clocks != ["auto"]:
        args += ["--clock", str(clocks[0]) if clocks else "real"]
    overrides = req.get("overrides") if isinstance(req.get("overrides"), dict) else {}
    sets: list[str] = []
    for study in studies:
        values = dict(overrides.get(study) or {})
        # what an option of the study's gave (your workload and check as files, --age, ...) goes back as it
        if study in STUDIES:
            words, values = inputs.argv(STUDIES[study], values, args)
            args += words
        sets += [f"{study}.{param}={_value(value)}" for param, value in sorted(values.items())]
    for item in sets:
        args += ["--set", item]
    if alone:
        args += ["--jobs", "1"]
    return " ".join(shlex.quote(a) for a in args)


def _value(v: Any) -> str:
    return ",".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v)
