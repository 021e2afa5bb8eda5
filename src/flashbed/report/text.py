"""Plain-text tables of a run's results (`flashbed results`)."""

from __future__ import annotations

import statistics
import sys
from collections import Counter, defaultdict

from ..store import RunStore
from ..studies import STUDIES
from ..studies.base import OutcomeTable, claimed_metrics
from ..studies.views import TopList
from . import catalog
from .load import ATTRIBUTED, EMULATOR_FIGURES, NOT_OBSERVABLE


def print_results(store: RunStore, studies: tuple[str, ...] = (), stream=None) -> None:
    stream = stream or sys.stdout  # the one of the moment, not of the import (a test's capture is replaced)
    results = list(store.results())
    man = store.manifest()
    kernels = man.get("kernels") or {}
    kern = ", ".join(f"{label} ({k.get('release')})" for label, k in kernels.items()) if len(kernels) > 1 \
        else man.get("kernel", {}).get("release")
    cpus = f", {man['cpus']} guest vCPUs" if (man.get("cpus") or 1) > 1 else ""
    planned = man.get("cells")
    if isinstance(planned, int) and len(results) < planned:  # first: the figures below are not the plan's
        print(f"run {man.get('run_id')} is UNFINISHED: {len(results)} of its {planned} planned cells are in "
              f"({planned - len(results)} not run): `flashbed run --resume {man.get('run_id')}` finishes it",
              file=stream)
    print(f"run {man.get('run_id')}: profile {man.get('profile')}, kernel {kern}{cpus}, "
          f"{len(results)}/{planned} cells", file=stream)
    for label, info in (man.get("devices") or {}).items():
        if isinstance(info, dict) and info.get("kind") == "real":
            print(f"device {label}: {info.get('description', 'real device')}; {EMULATOR_FIGURES}: "
                  f"{NOT_OBSERVABLE}", file=stream)
    by_study: dict[str, list] = defaultdict(list)
    for r in results:
        by_study[r.key.study].append(r)
    for study in sorted(by_study):
        if studies and study not in studies:
            continue
        print(f"\n== {study} ==", file=stream)
        rows: dict[tuple[str, str], list] = defaultdict(list)
        for r in by_study[study]:
            rows[(r.key.device + (f" {r.key.clock}" if r.key.clock else "") + (f" cpu-{r.key.cpu}" if r.key.cpu else ""),
                  fs_label(r))].append(r)
        for (dev, fs), rs in sorted(rows.items()):
            bad = [r for r in rs if not r.ok]
            head = "; ".join(sorted({r.headline for r in rs}))[:150]
            mark = "" if not bad else f" [{len(bad)} not ok: {bad[0].status}]"
            print(f"  {dev:18} {fs:22} {head}{mark}", file=stream)
        print_reproducers(str(man.get("run_id") or store.root.name), by_study[study], stream)
        left_out = Counter((s.get("device"), f"{s.get('fs')} ({s.get('kernel')})" if len(kernels) > 1 else s.get("fs"),
                            s.get("case"), s.get("kernel"), s.get("why"))
                           for s in man.get("skipped") or () if isinstance(s, dict) and s.get("study") == study)
        for (dev, fs, case, kern, why), n in left_out.items():  # one line for all repeats
            print(f"  {dev:18} {fs:22} {case} not run on lab kernel {kern} ({n} cell{'s' if n > 1 else ''}): {why}",
                  file=stream)
        tables = STUDIES[study].outcome_tables if study in STUDIES else ()
        if tables:
            print_outcome_tables(by_study[study], tables, stream)
            # what the tables do not show (times, iteration counts)
            prefixes = tuple({t.prefix for t in tables})
            print_measurements(by_study[study], stream, skip=lambda metric, p=prefixes: metric.startswith(p))
        else:
            print_measurements(by_study[study], stream)
        for spec in (STUDIES[study].figures if study in STUDIES else ()):
            if isinstance(spec, TopList):
                print_top(by_study[study], spec, stream)
    if by_study.get("workload") and (not studies or "workload" in studies):
        print_workload_summary(by_study["workload"], by_study.get("appcheck", []), stream)
    print_part_losses(results, stream)


def print_part_losses(results: list, stream) -> None:
    """Per device, the crash states its own damage lost (studies/crashstates.attribute): a finding
    about the part, which the report's first screen says with what it means."""
    per: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        if r.key.study in ATTRIBUTED and r.ok:
            for m in r.measurements:
                if m.metric == "cause:device" and m.value:
                    per[r.key.device][fs_label(r)] += int(m.value)
    for dev, by_fs in sorted(per.items()):
        print(f"\n{dev}: the device's own damage lost {sum(by_fs.values())} crash states (" +
              ", ".join(f"{fs} {n}" for fs, n in by_fs.most_common()) +
              "): its cut damaged flushed data and the same cut without the damage recovered; no filesystem is "
              "ruled out for these (the report says what the part needs)", file=stream)


def print_workload_summary(work: list, checks: list, stream) -> None:
    """The closing note of a run of your own workload: per device and filesystem its time, the
    device's write amplification, the projected lifetime, and your check's verdict over the
    crash states (studies/workload.py, studies/appcheck.py)."""
    verdicts = {(r.key.device, fs_label(r)): r for r in checks}
    print("\n== your workload, per filesystem ==", file=stream)
    print(f"  {'device':26} {'fs':8} {'seconds':>8} {'WAF':>6} {'years':>7} {'crash states: your check':30}",
          file=stream)
    for r in sorted(work, key=lambda r: (r.key.device, fs_label(r))):
        m = {x.metric: x.value for x in r.measurements}
        lt = r.extra.get("lifetime") or {}
        waf = f"{lt['waf']:.2f}" + ("" if lt.get("steady") else "*") if lt else "-"
        years = f"{lt['years']:.1f}" if lt and lt.get("years") not in (None, float("inf")) else "-"
        c = verdicts.get((r.key.device, fs_label(r)))
        if c is None:
            verdict = "not checked (no --check)"
        elif not c.ok:
            verdict = f"{c.status}: {c.error[:60]}"
        else:
            cm = {x.metric: x.value for x in c.measurements}
            n, bad = int(cm.get("iterations", 0)), int(cm.get("failures", 0))
            theirs = int(cm.get("fs_failures", bad))  # the filesystem's (all, before attribution)
            dev = int(cm.get("cause:device", 0))
            nv = int(cm.get("no_verdict", 0))  # no evidence either way (hung, not checked, unstable)
            verdict = f"{n - bad}/{n} consistent" + (f", {theirs} FAILED" if theirs else "") + \
                (f", {dev} lost to the device's damage" if dev else "") + \
                (f", {nv} of {int(cm.get('to_judge', nv))} without a verdict" if nv else "")
            if "distinct" in cm:  # each distinct state checked once (crashhost/plan.py)
                verdict += f" ({int(cm['distinct'])} distinct, {int(cm.get('checked', 0))} checked)"
        secs = f"{m['seconds']:.1f}" if "seconds" in m else "-"
        print(f"  {r.key.device:26} {fs_label(r):8} {secs:>8} {waf:>6} {years:>7} {verdict}"
              + ("" if r.ok else f" [{r.status}]"), file=stream)
    for c in sorted(checks, key=lambda r: (r.key.device, fs_label(r))):
        if "sample" in (c.extra.get("coverage") or ""):  # what a clean sampled result says
            print(f"  {fs_label(c)}: {c.extra['coverage']}", file=stream)
    if any(not (r.extra.get("lifetime") or {}).get("steady", True) for r in work):
        print("  * write amplification did not converge: the last pass's (give more passes: --age FILL, "
              "--set workload.passes=N)", file=stream)
    first = next((r for r in sorted(work, key=lambda r: (r.key.device, fs_label(r))) if r.extra.get("lifetime")),
                 None)
    lines = first.extra["lifetime"].get("lines") if first is not None else None
    if lines:
        print(f"  years, e.g. {fs_label(first)} on {first.key.device}: " + lines[1].strip()[2:] + " "
              + lines[2].strip(), file=stream)
        print("  " + lines[-1].strip(), file=stream)


def fs_label(r) -> str:
    """A cell's filesystem, with its lab kernel in a run of several ('ext4 (6.12)')."""
    return f"{r.key.fs} ({r.key.kernel})" if r.key.kernel else r.key.fs


def print_top(results: list, spec: TopList, stream) -> None:
    """A study's named figures from its cells' extra (e.g. the busiest kernel threads), per case and
    filesystem: the `top` largest, median over repeats."""
    for case in spec.cases:
        key = spec.key.format(case=case)
        per: dict[tuple[str, str], list[dict]] = defaultdict(list)
        for r in results:
            if r.ok and isinstance(r.extra.get(key), dict):
                per[(r.key.device, fs_label(r))].append(r.extra[key])
        if not per:
            continue
        print(f"\n  {spec.title} ({case}, {spec.unit}):", file=stream)
        for (dev, fs), lists in sorted(per.items()):
            names = {n for d in lists for n in d}
            med = {n: statistics.median(float(d.get(n, 0.0)) for d in lists) for n in names}
            top = sorted(med.items(), key=lambda kv: -kv[1])[:spec.top]
            print(f"    {fs:22} " + ", ".join(f"{n} {_fmt(v)}" for n, v in top), file=stream)


SHOWN_PER_CELL = 3  # failures printed per cell (the report lists more, the cell files all)


def print_reproducers(run_id: str, results: list, stream) -> None:
    per_cell = [(r, catalog.reproducers(run_id, r)) for r in results]
    total = sum(len(x) for _, x in per_cell)
    if not total:
        return
    print(f"\n  failures ({total}), each with the command that rebuilds it:", file=stream)
    for r, repro in per_cell:
        for x in repro[:SHOWN_PER_CELL]:
            cause = f", {x.cause}'s loss" if x.cause else ""
            print(f"    {x.fs} {x.case} {x.item}: {x.outcome}{cause} ({x.why[:160]})\n      {x.command}", file=stream)
        if len(repro) > SHOWN_PER_CELL:
            print(f"    ... {len(repro) - SHOWN_PER_CELL} more of {r.key.id} (its result file lists them)", file=stream)


def outcome_rows(results: list, table: OutcomeTable, claimed: frozenset[str]) -> dict:
    """{case: {(device, fs): {name: count, ..., "iterations": n}}}, summed over repeats."""
    out: dict[str, dict] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    for r in results:
        for m in r.measurements:
            if m.value is None:
                continue
            row = out[m.case][(r.key.device, fs_label(r))]
            if m.metric == "iterations":
                row["iterations"] += int(m.value)
            elif table.takes(m.metric, claimed):
                row[m.metric[len(table.prefix):]] += int(m.value)
    return out


def print_outcome_tables(results: list, tables: tuple[OutcomeTable, ...], stream) -> None:
    claimed = claimed_metrics(tables)
    for table in tables:
        for case, rows in sorted(outcome_rows(results, table, claimed).items()):
            names = list(table.names) + sorted({n for row in rows.values() for n in row
                                                if n != "iterations" and n not in table.names})
            widths = {n: max(5, len(n)) for n in names}
            one_device = len({dev for dev, _ in rows}) == 1
            label = {k: k[1] if one_device else f"{k[1]} on {k[0]}" for k in rows}
            fs_w = max(8, *(len(v) for v in label.values()))
            print(f"\n  {case or 'all'}: {table.title}", file=stream)
            print(f"    {'fs':{fs_w}} " + " ".join(f"{n:>{widths[n]}}" for n in names)
                  + (f" {'total':>6}" if table.per_iteration else ""), file=stream)
            for key, row in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
                line = f"    {label[key]:{fs_w}} " + " ".join(f"{row.get(n, 0):>{widths[n]}d}" for n in names)
                if table.per_iteration:
                    total = sum(row.get(n, 0) for n in names)
                    line += f" {total:>6d}"
                    if total != row.get("iterations", total):
                        line += f"  (!= {row['iterations']} iterations)"
                print(line, file=stream)


def print_measurements(results: list, stream, skip=lambda metric: False) -> None:
    """case × metric rows, one column per filesystem (median over repeats)."""
    cols = sorted({(r.key.device, fs_label(r)) for r in results})
    vals: dict[tuple[str, str, str], dict] = defaultdict(lambda: defaultdict(list))
    for r in results:
        for m in r.measurements:
            if skip(m.metric):
                continue
            vals[(m.case, m.metric, m.unit)][(r.key.device, fs_label(r))].append(m.value)
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


def table_text(t) -> str:
    """A report table (doc.Table) as aligned plain text: its title, header, rows, note."""
    head = [c.header for c in t.columns]
    body = [[c.text for c in row] for row in t.rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    numeric = [c.numeric for c in t.columns]

    def line(cells: list[str]) -> str:
        return "  ".join(x.rjust(w) if num else x.ljust(w) for x, w, num in zip(cells, widths, numeric)).rstrip()
    out = [f"== {t.title} ==", line(head), *(line(r) for r in body)]
    if t.note:
        out.append(f"({t.note})")
    return "\n".join(out) + "\n"
