"""summary.json: the report's numbers as data (deterministic: no generation time, rounded floats)."""

from __future__ import annotations

import dataclasses
from typing import Any

from . import recommend as R
from .doc import Document
from .load import RunData
from .partloss import part_loss

SUMMARY_SCHEMA = 1


def r6(v: float | None) -> float | None:
    """6 significant digits: stable across platforms, plenty for a report."""
    return None if v is None else float(f"{v:.6g}")


def run_info(run: RunData) -> dict[str, Any]:
    m = run.manifest
    return {"run_id": run.run_id, "created": m.get("created"), "flashbed_version": m.get("flashbed_version"),
            "profile": run.profile, "repeats": m.get("repeats"), "kernel": m.get("kernel"), "tools": run.tools,
            "devices": m.get("devices") or {}}


def footing_data(run: RunData, recs: dict[str, list[R.Ranking]]) -> dict[str, Any]:
    """Per device and use case of a robust pass: holds, or what the choice depends on, and each
    variant's choice and margin (report/footing.py)."""
    from .footing import footing
    out: dict[str, Any] = {}
    for device, df in footing(run, recs).items():
        out[device] = {cf.use_case.id: {
            "winner": cf.winner, "holds": cf.holds, "margin": r6(cf.margin),
            "spread": [r6(x) for x in cf.spread] if cf.spread else None,
            "depends": [{"param": d.assumed.param, "at": d.at.variant, "winner": d.at.winner, "side": d.side,
                         "threshold": d.threshold, "measure": d.assumed.measure} for d in cf.depends],
            "variants": [{"variant": p.variant, "values": p.values, "winner": p.winner, "choice": p.choice,
                          "margin": r6(p.margin),
                          "why": p.why} for p in cf.points]} for cf in df.cases}
        out[device]["_unfinished"] = df.unfinished
    return out


def tuning_data(run: RunData, recs: dict[str, list[R.Ranking]]) -> dict[str, Any] | None:
    """The tuning pass's option sets and answers (report/tuning.py); None for a run without one."""
    from .tuning import summary_data, tuning
    return summary_data(tuning(run, recs))


def summary(run: RunData, recs: dict[str, list[R.Ranking]], doc: Document) -> dict[str, Any]:
    studies: dict[str, Any] = {}
    for (_dev, _fs, study), c in sorted(run.cell_status.items()):
        s = studies.setdefault(study, {"status": "present", "cells": {}})
        for k, n in sorted(c.items()):
            s["cells"][k] = s["cells"].get(k, 0) + n
    for study in run.missing_studies():
        studies[study] = {"status": "missing", "cells": {}}
    results = [{"device": d, "fs": f, "study": s, "case": c, "metric": m, "unit": st.unit, "mean": r6(st.mean),
                "sd": r6(st.sd), "n": st.n, "min": r6(st.lo), "max": r6(st.hi)}
               for (d, f, s, c, m), st in sorted(run.values.items())]
    dstats = [{"device": d, "fs": f, "study": s, "cell_case": c, "stat": k, "unit": st.unit, "mean": r6(st.mean),
               "n": st.n} for (d, f, s, c), stats in sorted(run.dstats.items()) for k, st in sorted(stats.items())]
    busy = [{"device": d, "fs": f, "study": s, "case": c, "device_busy_pct": r6(b.util.mean), "n": b.util.n,
             "lab_bound": run.lab_bound_case(d, f, s, c) is not None and not b.virtual, "basis": b.basis,
             # virtual time: the share of guest time charged to the CPU profile, CPU-bound above the threshold
             **({"cpu_pct": r6(b.cpu.mean) if b.cpu else None,
                 "cpu_bound": run.lab_bound_case(d, f, s, c) is not None} if b.virtual else {})}
            for (d, f, s, c), b in sorted(run.busy.items())]
    return {
        "schema": SUMMARY_SCHEMA,
        "kind": "run",
        "run": run_info(run),
        "studies": dict(sorted(studies.items())),
        "missing_studies": run.missing_studies(),
        "recommendation": R.summary_data(recs),
        # a run most of whose cells failed recommends nothing: why ("" when most finished)
        "run_failure": R.run_failure(run),
        # per device, the crash states its own damage lost (report/partloss.py): a finding, no verdict on anyone
        "part_losses": {d: dataclasses.asdict(pl) for d in run.devices() if (pl := part_loss(run, d)) is not None},
        "footing": footing_data(run, recs),
        # a tuning pass (--tune): per device and use case, the option sets tried and the answer
        "tuning": tuning_data(run, recs),
        "failures": [{"id": f.id, "status": f.status, "error": f.error} for f in run.failures],
        "notes": list(run.notes),
        "results": results,
        "device_stats": dstats,
        # per timed case: the device's busy share of the figure's duration; lab-bound below the threshold
        "lab_bound_below_pct": run.weights.lab_bound_below if run.paced else None,
        "cpu_bound_above_pct": run.weights.cpu_bound_above,
        # which clock and CPU profile each target's timed figures come from
        "timing": {t: run.timing_for(t) for t in run.devices() if run.timing_for(t)},
        "device_busy": busy,
        "figures": [f.id for f in doc.figures()],
        "tables": [t.id for t in doc.tables()],
    }
