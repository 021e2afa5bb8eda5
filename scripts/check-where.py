#!/usr/bin/env python3
"""The user's check on the host against the check in the lab, state by state, on the shipped examples.

    .venv/bin/python scripts/check-where.py [--pairs sqlite,sqlite-unsafe,ota,ota-unsafe,rotating]
                                            [--fs ext4] [--device emmc-8g@64M] [--max-states N]
                                            [--records N] [--verdicts DIR]

For each example pair (workload, check) and filesystem, the appcheck cell runs twice in virtual time
(so both runs record the same workload and list the same states): once with the check on the host
(the default) and once with `appcheck.check_in_lab=true`. Every state's verdict (its class and why,
the states that share another's included) is compared; printed per cell: the states, where the
checks ran, the verdict classes and the states whose verdicts differ (none may), then the totals.
Exit 1 when any differs. It boots the lab: run it under the lab's lock on a shared machine.

`wal400` is the per-record log check (examples/wal400.sh and walcheck.sh: a `dd` started per record).
With the check in the lab each of its runs starts a `dd` per acknowledged record in the lab kernel, so
`--records N` runs a log of the same shape but N records (every N/8th acknowledged, as every 50th of
400), written beside the runs from wal400.sh's own text; the check is walcheck.sh itself.

`--verdicts DIR` keeps the host's verdicts of the check in DIR across calls (crashhost/verdicts.py), as the
cells of one run keep them in its run directory: a call for a second filesystem takes the verdicts the
first one kept wherever its check would see the same, and its states are compared with the lab's all
the same. Each cell's line then says how many verdicts it took, and from how many other cells.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from flashbed import variants
from flashbed.cell import run_alone
from flashbed.devices import presets
from flashbed.lab.guest.protocol import StateFacts
from flashbed.lab.kernel import ensure_kernel
from flashbed.lab.labs import UmlLab
from flashbed.results import CellKey
from flashbed.studies import STUDIES, edge
from flashbed.studies.base import CellSpec
from flashbed.studies.crashstates import CHECKED_FILE, STATES_FILE, with_shared

DIGEST = re.compile(r"\b[0-9a-f]{16,}\b")
# a wall-clock second a workload wrote into its files (rotating-logger.sh's `date +%s` in each line): the lab's
# clock starts at the host's time at each boot, virtual time included, so each run's lines carry their own
EPOCH = re.compile(r"\b1[6-9][0-9]{8}\b")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PAIRS = {
    "sqlite": ("sqlite-logger.sh", "sqlite-check.sh"),
    "sqlite-unsafe": ("sqlite-logger-unsafe.sh", "sqlite-check.sh"),
    "ota": ("ota-update.sh", "ota-check.sh"),
    "ota-unsafe": ("ota-update-unsafe.sh", "ota-check.sh"),
    "rotating": ("rotating-logger.sh", "rotating-check.sh"),
    "wal400": ("wal400.sh", "walcheck.sh"),
}


def shorter_wal(records: int, into: Path) -> Path:
    """wal400.sh with `records` records, every records/8th acknowledged (400 and 50 in the example)."""
    text = (EXAMPLES / "wal400.sh").read_text()
    every = max(1, records // 8)
    for old, new in (('-le 400 ]', f'-le {records} ]'), ("% 50))", f"% {every}))"),
                     ("400 records", f"{records} records"), ("every 50th", f"every {every}th")):
        if old not in text:
            raise SystemExit(f"check-where: examples/wal400.sh no longer says '{old}': update shorter_wal")
        text = text.replace(old, new)
    out = into / f"wal{records}.sh"
    out.write_text(text)
    out.chmod(0o755)
    return out


def cell(device: str, fs: str, workload: str | Path, check: str, **params) -> CellSpec:
    dev = presets.load_spec(device)
    values = edge.overrides({"--workload": str(EXAMPLES / workload), "--check": str(EXAMPLES / check)})["appcheck"]
    return CellSpec(key=CellKey(dev.label, fs, "appcheck", "user"), device=dev, variant=variants.parse(fs, dev),
                    params=STUDIES["appcheck"].params(**{**values, **params}), seed=1, pace="none", clock="virtual")


def verdicts(root: Path, res, fs: str) -> dict[str, tuple[str, str]]:
    """Every state's verdict (its class and why), those shared with another state's included."""
    study = STUDIES["appcheck"]
    logs = root / res.attempt_dir if res.attempt_dir else next((root / "logs").rglob(STATES_FILE)).parent
    lab = [study.record(StateFacts.from_json(json.loads(line)), fs)
           for f in sorted(logs.rglob(CHECKED_FILE)) for line in f.read_text().splitlines() if line.strip()]
    states = json.loads(next(logs.rglob(STATES_FILE)).read_text())["states"]
    # a checksum in the reason is the run's own (ota-update writes /dev/urandom: each run's images differ), and
    # so is a time of day the workload wrote (rotating-logger.sh's lines, which its check quotes when torn)
    return {r["state"]: (str(r["class"]), EPOCH.sub("<time>", DIGEST.sub("<sum>", r.get("why", ""))))
            for r in with_shared(states, lab)}


def run(kernel, root: Path, spec: CellSpec, verdicts: Path | None = None):
    _, res = run_alone(spec, UmlLab(kernel), root, verdicts=verdicts)
    if res.status != "ok":
        raise SystemExit(f"check-where: {spec.key}: {res.error or res.headline}")
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", default="sqlite,sqlite-unsafe,ota,ota-unsafe,rotating")
    ap.add_argument("--fs", default="ext4")
    ap.add_argument("--device", default="emmc-8g@64M")
    ap.add_argument("--max-states", type=int, default=0, help="appcheck.max_states (0: every distinct state)")
    ap.add_argument("--records", type=int, default=400, help="records of the wal400 pair's log (400: the example)")
    ap.add_argument("--verdicts", type=Path, default=None,
                    help="keep the host's verdicts here across calls (as one run's cells do), and take them")
    a = ap.parse_args()
    pairs = [p for p in a.pairs.split(",") if p]
    unknown = [p for p in pairs if p not in PAIRS]
    if unknown:
        print(f"check-where: unknown pair {unknown[0]}: choose from {', '.join(PAIRS)}", file=sys.stderr)
        return 2
    if a.records < 8:
        print("check-where: --records must be at least 8 (every records/8th is acknowledged)", file=sys.stderr)
        return 2
    kernel = ensure_kernel(time_travel=True)
    differ = compared = cells = 0
    with tempfile.TemporaryDirectory(prefix="flashbed-check-where-") as tmp:
        for name in pairs:
            for fs in a.fs.split(","):
                w, c = PAIRS[name]
                if name == "wal400" and a.records != 400:
                    w = shorter_wal(a.records, Path(tmp))
                extra = {"max_states": a.max_states} if a.max_states else {}
                got, took = {}, {}
                for where, params in (("host", {}), ("lab", {"check_in_lab": True})):
                    root = Path(tmp) / f"{name}-{fs}-{where}"
                    started = time.monotonic()
                    res = run(kernel, root, cell(a.device, fs, w, c, **params, **extra),
                              a.verdicts if where == "host" else None)
                    took[where] = time.monotonic() - started
                    got[where] = (verdicts(root, res, fs), res.extra.get("check_where", {}))
                (host, hw), (lab, lw) = got["host"], got["lab"]
                diff = sorted(s for s in set(host) | set(lab) if host.get(s) != lab.get(s))
                differ += len(diff)
                compared += len(set(host) | set(lab))
                cells += 1
                classes = Counter(v[0] for v in lab.values())
                label = f"{name} ({a.records} records)" if name == "wal400" and a.records != 400 else name
                print(f"{label} on {fs} ({a.device}): {len(lab)} states (host run {len(host)}); checks on the host "
                      f"{hw.get('host', 0)}, in the lab {lw.get('lab', 0)}"
                      + (f", taken from kept verdicts {hw['shared']} ({hw.get('shared_other_cells', 0)} of other "
                         f"cells; {hw.get('key', '').split(':')[0]})" if hw.get("shared") else "") + "; classes "
                      + ", ".join(f"{k} {n}" for k, n in sorted(classes.items()))
                      + f"; {len(diff)} differ (the cell took {took['host']:.0f} s with the check on the host, "
                      f"{took['lab']:.0f} s in the lab)", flush=True)
                for st in diff[:5]:
                    print(f"  state {st}: on the host {host.get(st)}, in the lab {lab.get(st)}", flush=True)
    print(f"{compared} states compared in {cells} cell(s): {differ} differ", flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
