"""The studies at the run command's edge, where the whole registry is read: a `--set` value by
its study's field (setting), the options the studies take as their parameters (apply,
overrides; inputs.py defines them), and a resume's check that the files they named are as
they were (check_resumable). Above every study, so none of them imports the registry."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .. import userwork
from ..errors import FlashbedError
from . import STUDIES
from .inputs import ALL
from .params import kinds


def setting(study: str, key: str, text: str) -> Any:
    """The value of a `--set STUDY.KEY=TEXT`, read by the field's kind and checked (one line
    if the study, key or value is wrong), in the form a run's request stores: a list when
    the text is one, sizes as bytes."""
    if study not in STUDIES:
        raise FlashbedError(f"--set for unknown study '{study}': choose from {', '.join(STUDIES)}")
    field = next((f for f in dataclasses.fields(STUDIES[study].Params)
                  if f.name == key or key in f.metadata.get("user_file", ())), None)
    if field is not None and field.metadata.get("set_by"):
        raise FlashbedError(f"--set {study}.{key} is not a setting: {field.metadata['set_by']} sets it (with the "
                            f"checks it needs); use {field.metadata['set_by']}")
    v = getattr(STUDIES[study].params_at_edge({key: text}), key)
    if isinstance(v, tuple):
        return list(v) if "," in text or len(v) != 1 else v[0]
    return v


def apply(given: dict[str, Any], overrides: dict[str, dict], studies: tuple[str, ...]
          ) -> tuple[dict[str, dict], tuple[str, ...]]:
    """The inputs given (option -> what the user gave) as the parameters of the studies that
    take them, over `overrides` (--set), and those studies added to the run's `studies`."""
    by_option = {i.option: i for i in ALL}
    for inp in ALL:
        if inp.option in given and inp.needs and inp.needs not in given:
            need = by_option[inp.needs]
            raise FlashbedError(f"{inp.option} needs {need.option} {need.metavar}: it applies to your workload")
    values = {o: by_option[o].value(v) for o, v in given.items()}  # each file loaded and checked once
    out = dict(overrides)
    joined = []
    for name, study in STUDIES.items():
        mine = [i for i in study.inputs if i.option in values]
        sets = {k: v for i in mine for k, v in i.params(study, values[i.option]).items()}
        if not mine or not study.joins(sets):
            continue
        brings = {k: v for i in mine for k, v in i.brings.items()}  # under a --set of the same
        out[name] = {**brings, **out.get(name, {}), **sets}
        joined.append(name)
    return out, tuple(studies) + tuple(s for s in joined if s not in studies)


def overrides(given: dict[str, Any]) -> dict[str, dict]:
    """The studies' parameters the inputs given set (no --set, no study named)."""
    return apply(given, {}, ())[0]


def check_resumable(overrides: dict[str, dict]) -> None:
    """One line if a run's workload or check file (its request's overrides) is gone or changed
    since the run started: a resume needs the files its id was made of (else every cell would
    fail on its own, one after another)."""
    for name, values in overrides.items():
        study = STUDIES.get(name)
        for f, kind in zip(dataclasses.fields(study.Params), kinds(study.Params).values()) if study else ():
            if not kind.user_file:
                continue
            path, want = values.get(kind.user_file[0]), values.get(kind.user_file[1])
            if not path or not want:
                continue
            option = f.metadata["set_by"].split()[0]
            try:
                have = userwork.digest(Path(path))
            except OSError as e:
                raise FlashbedError(f"this run's {option} {path} cannot be read ({e.strerror}): restore it to "
                                    f"resume the run") from None
            if have != want:
                raise FlashbedError(f"this run's {option} {path} changed since the run started (content hash "
                                    f"{want}): restore it to resume, or run the command again without --resume "
                                    f"for a new run of the new content")
