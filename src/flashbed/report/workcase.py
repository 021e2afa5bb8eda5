"""Your own workload's use case: the recommendation ranks filesystems for the workload the run
measured (--workload FILE) on that workload's own figures, with the built-in use cases' machinery.

Per device and workload (the workload study's case: the file's name without suffix), one
`UseCase` made from the run's data and weights.toml [workload], then ranked by recommend.rank
as any other:
  - criteria: the figures the workload study declared for ranking (its cells' extra "ranked":
    a script's wall time and each metric with a direction, each fio job's rate and p99 latency,
    the projected lifetime; timed ones are checked for being lab-bound), and two counters of
    the device over the workload (busy time; NAND pages programmed: the wear of one run);
  - requirements: [workload] requires (your check in every crash state the filesystem answers
    for, the appcheck study) when the run has your check on that device; without it the use case
    says it was not held. With your check on a part that damaged durable data in its crash
    states, one more criterion: the share of those states in which your check still passed (never a
    requirement: the loss is the device's).
"""

from __future__ import annotations

from pathlib import Path

from .load import RunData
from .weights import Criterion, UseCase

STUDY, CHECK_STUDY = "workload", "appcheck"
ID_PREFIX = "workload:"


def workload_file(run: RunData, device: str, case: str) -> str:
    """The workload's file name as the run recorded it (the case is its stem)."""
    for (d, _fs, s), extras in run.extras.items():
        if d == device and s == STUDY:
            for e in extras:
                if isinstance(e.get("file"), str) and Path(e["file"]).stem == case:
                    return e["file"]
    return case


def declared(run: RunData, device: str, case: str) -> list[dict]:
    """The figures the workload's cells declared for ranking, once each, in their order (a
    filesystem whose cell failed declared none; the others' declarations hold for it)."""
    seen: dict[tuple[str, str], dict] = {}
    for (d, _fs, s), extras in sorted(run.extras.items()):
        if d != device or s != STUDY:
            continue
        for e in extras:
            for f in e.get("ranked") or []:
                if isinstance(f, dict) and (f.get("case") == case or str(f.get("case", "")).startswith(case + ":")):
                    seen.setdefault((f["case"], f["metric"]), f)
    if not seen:  # a run from before the workload declared its figures: its wall time
        return [{"case": case, "metric": "seconds", "better": "lower", "kind": "wall_time", "label": "wall time"}]
    return list(seen.values())


def has_check(run: RunData, device: str) -> bool:
    return CHECK_STUDY in run.studies(device) or any(f.device == device and f.study == CHECK_STUDY
                                                     for f in run.failures)


def damaged(run: RunData, device: str) -> bool:
    """Whether the part damaged durable data in any crash state of your workload (appcheck)."""
    return any(d == device and st == CHECK_STUDY and m == "damaged_states" and v.mean > 0
               for (d, _fs, st, _c, m), v in run.values.items())


def use_case(run: RunData, device: str, case: str) -> UseCase:
    ww = run.weights.workload
    crits = [Criterion(label=f["label"], study=STUDY, metric=f["metric"], better=f["better"],
                       weight=ww.weights.get(f["kind"], 1.0), case=f["case"], decisive=f["kind"] in ww.decisive)
             for f in declared(run, device, case) if f.get("better") in ("higher", "lower")]
    crits += [Criterion(label="flash busy time", study=STUDY, metric="busy_seconds", better="lower",
                        weight=ww.weights["flash_time"], case=case, source="device",
                        decisive="flash_time" in ww.decisive),
              Criterion(label="NAND pages programmed (wear of one run)", study=STUDY, metric="nand_program_pages",
                        better="lower", weight=ww.weights["flash_wear"], case=case, source="device",
                        decisive="flash_wear" in ww.decisive)]
    checked = has_check(run, device)
    if checked and damaged(run, device):  # your data where the device's damage hit: scored, never a requirement
        crits.append(Criterion(label="your check in the states the device's damage hit", study=CHECK_STUDY,
                               metric="damage_survived", better="higher", weight=ww.weights["damage"],
                               decisive="damage" in ww.decisive))
    name = workload_file(run, device, case)
    summary = ("ranked on your workload's own figures (" + ", ".join(c.label for c in crits) + ")"
               + ("; eligible only if your check held in every crash state" if checked and ww.requires else
                  "; your check did not run (no --check): no filesystem was held to your data's consistency"))
    return UseCase(id=ID_PREFIX + case, title=f"Your workload: {name}", summary=summary, criteria=tuple(crits),
                   requires=ww.requires if checked else ())


def use_cases(run: RunData, device: str) -> list[UseCase]:
    """One use case per workload measured on the device."""
    if STUDY not in run.studies(device):
        return []
    # a workload's case is its file's stem; its fio jobs' figures are "<stem>:<job>"
    return [use_case(run, device, case) for case in run.cases(device, STUDY) if case and ":" not in case]


def is_workload(uc: UseCase) -> bool:
    return uc.id.startswith(ID_PREFIX)
