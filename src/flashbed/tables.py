"""Plain-text tables of a run's results (`flashbed results`)."""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict

from .store import RunStore


def print_results(store: RunStore, studies: tuple[str, ...] = (), stream=sys.stdout) -> None:
    results = list(store.results())
    man = store.manifest()
    print(f"run {man.get('run_id')}: profile {man.get('profile')}, kernel {man.get('kernel', {}).get('release')}, "
          f"{len(results)}/{man.get('cells')} cells", file=stream)
    by_study: dict[str, list] = defaultdict(list)
    for r in results:
        by_study[r.key.study].append(r)
    for study in sorted(by_study):
        if studies and study not in studies:
            continue
        print(f"\n== {study} ==", file=stream)
        rows: dict[tuple[str, str], list] = defaultdict(list)
        for r in by_study[study]:
            rows[(r.key.device, r.key.fs)].append(r)
        for (dev, fs), rs in sorted(rows.items()):
            bad = [r for r in rs if not r.ok]
            head = "; ".join(sorted({r.headline for r in rs}))[:150]
            mark = "" if not bad else f" [{len(bad)} not ok: {bad[0].status}]"
            print(f"  {dev:18} {fs:22} {head}{mark}", file=stream)
        print_measurements(by_study[study], stream)


def print_measurements(results: list, stream) -> None:
    """case × metric rows, one column per filesystem (median over repeats)."""
    cols = sorted({(r.key.device, r.key.fs) for r in results})
    vals: dict[tuple[str, str, str], dict] = defaultdict(lambda: defaultdict(list))
    for r in results:
        for m in r.measurements:
            vals[(m.case, m.metric, m.unit)][(r.key.device, r.key.fs)].append(m.value)
    if not vals:
        return
    width = max(10, *(len(fs) for _, fs in cols))
    label_w = max(len(f"{c} {m} ({u})") for c, m, u in vals)
    print("  " + " " * label_w + " " + " ".join(f"{fs:>{width}}" for _, fs in cols), file=stream)
    for (case, metric, unit), per in sorted(vals.items()):
        cells = []
        for col in cols:
            v = per.get(col)
            cells.append(f"{_fmt(statistics.median(v)):>{width}}" if v else f"{'-':>{width}}")
        print(f"  {f'{case} {metric} ({unit})':{label_w}} " + " ".join(cells), file=stream)


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"
