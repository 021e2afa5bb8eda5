"""Tables: one per study and device, plus device statistics, failures and the run overview.

Cells show the mean over repeats (± standard deviation when there are several);
the tooltip lists every repeat. The best value of a row group is marked when the
metric has a direction. Units are in every numeric column header.
"""

from __future__ import annotations

from ..status import CellStatus, DeviceVerdict
from ..studies.views import Scaling, TopList
from . import catalog, scaling, units
from .devcheck import DeviceCheck
from .doc import Block, Cell, Column, Table
from .load import Busy, RunData, Stat


def _stat_cell(st: Stat | None, unit: str, fail: str = "", na: str = "") -> Cell:
    if st is None and na:
        return Cell(f"n/a ({na})", None, cls="na", title="does not apply to this filesystem")
    if st is None:
        return Cell(fail or "—", None, cls="bad" if fail else "missing")
    text = units.fmt(st.mean, unit)
    if st.n > 1:
        text += f" ±{units.fmt(st.sd, unit)}"
    tip = f"n={st.n}: " + ", ".join(units.fmt(v, unit) for v in st.values)
    return Cell(text, units.to_display(st.mean, unit), title=tip)


def _lab_mark(cell: Cell, lab: Busy | None, say: bool = True) -> Cell:
    """A lab-bound figure keeps its value, says so with the utilisation (in its text, or with
    say=False only in its style and tooltip, when the row's device-busy column says it), and is
    never 'best'."""
    if lab is not None:
        if say:
            cell.text += f" ({lab.mark}, {lab.text()})"
        cell.title = f"{lab.text()} of {lab.basis}; {cell.title}"
        cell.cls = "labbound"
    return cell


def _cached_mark(cell: Cell, chk: DeviceCheck | None, say: bool = True) -> Cell:
    """A figure the device could not have served keeps its value, says so, and is never 'best'."""
    if chk is not None:
        if say:
            cell.text += f" ({chk.text()})"
        cell.title = f"{chk.counters_text()}; {cell.title}"
        cell.cls = "labbound"
    return cell


def _check_cell(run: RunData, device: str, fs: str, study: str, case: str) -> Cell:
    chk = run.device_check(device, fs, study, case)
    if chk is None:
        return Cell("—", None, cls="missing", title="the job promised nothing of the device (buffered or read)")
    return Cell(chk.text(), chk.verdict, title=chk.counters_text(),
                cls="labbound" if chk.verdict is DeviceVerdict.CACHED else "")


def device_check_table(run: RunData, device: str) -> Table | None:
    """Every checked figure of the device: the workload's claim against the device's counters."""
    keys = [k for k in run.checks if k[0] == device]
    if not keys:
        return None
    cols = [Column("study", numeric=False), Column("case", numeric=False), Column("filesystem", numeric=False),
            Column("job", numeric=False), Column("claimed", "MiB"), Column("device received", "MiB"),
            Column("received", "%"), Column("durable writes or commits", "count"), Column("device flushes", "count"),
            Column("device write pattern", numeric=False), Column("verdict", numeric=False)]
    rows = []
    for d, fs, study, case in sorted(keys, key=lambda k: (units.study_sort_key(k[2]),
                                                          units.case_sort_key(k[2], k[3]), units.natural_key(k[1]))):
        chk = run.checks[(d, fs, study, case)]
        c = chk.claim
        rows.append([Cell(study, study), Cell(case, case), Cell(fs, fs), Cell(c.what, c.what),
                     Cell(units.fmt(c.write_bytes, "bytes") if c.write_bytes else "—",
                          units.to_display(c.write_bytes, "bytes") if c.write_bytes else None),
                     Cell(units.fmt(chk.write_bytes, "bytes"),
                          None if chk.write_bytes is None else units.to_display(chk.write_bytes, "bytes")),
                     Cell("—" if chk.received_pct is None else f"{chk.received_pct:.0f}", chk.received_pct),
                     Cell(f"{chk.synced:,}" if chk.synced else "—", chk.synced or None),
                     Cell("—" if chk.flushes is None else f"{chk.flushes:,.0f}", chk.flushes),
                     Cell(chk.pattern_text(), chk.pattern_text()),
                     Cell(chk.text(), chk.verdict, cls="labbound" if chk.verdict is DeviceVerdict.CACHED else "")])
    return Table(units.slug("tab", device, "devcheck"), f"Device check — {device}", cols, rows,
                 "each figure whose workload was told its writes were on the device, against what the device "
                 "received during the job alone (the worst repeat); cached figures score nobody")


def _busy_cell(run: RunData, device: str, fs: str, study: str, case: str) -> Cell:
    b = run.busy_for(device, fs, study, case)
    if b is None:
        return Cell("—", None, cls="missing", title="no statistics phase of its own")
    lab = run.lab_bound_case(device, fs, study, case)
    u = b.util
    return Cell(f"{min(u.mean, 100.0):.0f}" + (f" {lab.mark}" if lab else ""), round(u.mean, 3),
                title=f"{b.text()} of {b.basis} (n={u.n})", cls="labbound" if lab else "")


def _mark_best(cells: list[Cell], stats: list[Stat | None], direction: str) -> None:
    vals = [(s.mean, i) for i, s in enumerate(stats) if s is not None]
    if direction == units.NEUTRAL or len(vals) < 2:
        return
    best = max(vals)[0] if direction == units.HIGHER else min(vals)[0]
    for v, i in vals:
        if v == best:
            cells[i].cls = "best"


def _status_text(run: RunData, device: str, fs: str, study: str, case: str) -> Cell:
    fl = run.failures_for(device, fs, study, case)
    if not fl:
        return Cell(CellStatus.OK, CellStatus.OK)
    text = ", ".join(sorted({f.status for f in fl})) + f" ({len(fl)} cell{'s' if len(fl) > 1 else ''})"
    return Cell(text, text, title=" | ".join(f"{f.id}: {f.error}" for f in fl), cls="bad")


def study_table(run: RunData, device: str, study: str) -> Table | None:
    cases = run.cases(device, study)
    fss = run.filesystems(device, study)
    metrics = run.metrics(device, study)
    if not cases or not fss:
        return None
    tid = units.slug("tab", device, study)
    title = f"{units.study_title(study)} — {device}"
    timing = f"; {run.timing_for(device)}" if run.timing_for(device) else ""
    note = (f"device {run.device_text(device)}; kernel {run.kernel_for(device)}{timing}; profile {run.profile}; mean ± standard "
            f"deviation over repeats (hover a value for every repeat); best per row group in bold")
    busy = any(run.busy_for(device, fs, study, c) for fs in fss for c in cases)
    if busy:
        note += (f"; device busy = the emulator's busy time over the figure's own duration, lab-bound below "
                 f"{run.weights.lab_bound_below:g} % (the lab, not the device, set the figure; never marked best)")
        if any((b := run.busy_for(device, fs, study, c)) and b.virtual for fs in fss for c in cases):
            note += (f"; in virtual time CPU = the share of the figure's guest time charged to the CPU profile, "
                     f"CPU-bound above {run.weights.cpu_bound_above:g} % (the modelled CPU, not the device, set "
                     f"the figure; never marked best)")
    if len(metrics) == 1 and len(fss) > 1:
        # one metric: cases down, filesystems across
        m = metrics[0]
        unit = run.unit(device, study, m)
        du = units.display_unit(unit)
        cols = [Column("case", numeric=False)] + [Column(f"{fs}: {units.metric_label(m)}", du) for fs in fss]
        rows = []
        for c in cases:
            labs = [run.lab_bound(device, fs, study, c, m) for fs in fss]
            stats = [run.get(device, fs, study, c, m) for fs in fss]
            cached = [run.cached(device, fs, study, c, m) for fs in fss]
            cells = [_cached_mark(_lab_mark(_stat_cell(st, unit, _fail(run, device, fs, study, c),
                                                       run.not_applicable(device, fs, study, c)), lab), chk)
                     for st, fs, lab, chk in zip(stats, fss, labs, cached)]
            _mark_best(cells, [None if lab or chk else st for st, lab, chk in zip(stats, labs, cached)],
                       units.direction(m))
            rows.append([Cell(c or "(whole study)", None)] + cells)
        return Table(tid, title, cols, rows, note)
    cols = [Column("case", numeric=False), Column("filesystem", numeric=False)]
    cols += [Column(units.metric_label(m), units.display_unit(run.unit(device, study, m))) for m in metrics]
    if busy:
        cols.append(Column("device busy", "%"))
    checked = any(k[0] == device and k[2] == study for k in run.checks)
    if checked:
        cols.append(Column("device check", numeric=False))
    cols.append(Column("cells", numeric=False))
    rows = []
    for c in cases:
        group = []
        grid: list[list[Stat | None]] = []
        for fs in fss:
            stats = [run.get(device, fs, study, c, m) for m in metrics]
            fail = _fail(run, device, fs, study, c)
            na = run.not_applicable(device, fs, study, c)
            if all(s is None for s in stats) and not fail and not na:
                continue  # this filesystem has no such case
            labs = [run.lab_bound(device, fs, study, c, m) for m in metrics]
            cached = [run.cached(device, fs, study, c, m) for m in metrics]
            group.append([Cell(c or "(whole study)", None), Cell(fs, None)] +
                         [_cached_mark(_lab_mark(_stat_cell(st, run.unit(device, study, m), fail,
                                                            na if st is None else ""), lab, say=False), chk, say=False)
                          for st, m, lab, chk in zip(stats, metrics, labs, cached)] +
                         ([_busy_cell(run, device, fs, study, c)] if busy else []) +
                         ([_check_cell(run, device, fs, study, c)] if checked else []) +
                         [Cell(f"n/a ({na})", None, cls="na") if na and all(s is None for s in stats)
                          else _status_text(run, device, fs, study, c)])
            grid.append([None if lab or chk else st for st, lab, chk in zip(stats, labs, cached)])
        for j, m in enumerate(metrics):
            _mark_best([r[2 + j] for r in group], [g[j] for g in grid], units.direction(m))
        rows += group
    return Table(tid, title, cols, rows, note)


def view_blocks(run: RunData, device: str, study: str) -> list[Block]:
    """The tables (and the scaling answer) a study declares beside its figures: Scaling, TopList."""
    st = catalog.study(study)
    out: list[Block] = []
    for spec in st.figures if st is not None else ():
        if isinstance(spec, Scaling):
            out += [b for b in (scaling.answer(run, device, study, spec), scaling.table(run, device, study, spec))
                    if b is not None]
        elif isinstance(spec, TopList):
            out += [t for case in spec.cases if (t := top_table(run, device, study, spec, case)) is not None]
    return out


def top_table(run: RunData, device: str, study: str, spec: TopList, case: str) -> Table | None:
    """The names among the `top` largest of any filesystem (rows, largest first) by filesystem."""
    key = spec.key.format(case=case)
    fss = run.filesystems(device, study)
    tops = {fs: run.top_values(device, fs, study, key) for fs in fss}
    tops = {fs: t for fs, t in tops.items() if t}
    if not tops:
        return None
    names = list(dict.fromkeys(n for t in tops.values() for n in list(t)[:spec.top]))
    names.sort(key=lambda n: -max((t[n].mean for t in tops.values() if n in t), default=0.0))
    cols = [Column("name", numeric=False)] + [Column(fs, spec.unit) for fs in tops]
    rows = [[Cell(n, n)] + [_stat_cell(t.get(n), spec.unit) for t in tops.values()] for n in names]
    return Table(units.slug("tab", device, study, spec.kind, case), f"{spec.title} ({case}) — {device}", cols, rows,
                 f"the {spec.top} largest of each filesystem, mean over repeats ('—': not among the figures a "
                 f"filesystem's cells kept)" + (f"; {spec.note}" if spec.note else ""))


def _fail(run: RunData, device: str, fs: str, study: str, case: str) -> str:
    fl = run.failures_for(device, fs, study, case)
    return fl[0].status if fl else ""


def device_stats_table(run: RunData, device: str) -> Table | None:
    keys = run.device_stat_keys(device)
    if not keys:
        return None
    cols = [Column("study", numeric=False), Column("filesystem", numeric=False)]
    cols += [Column(units.device_stat_label(k), units.display_unit(units.device_stat_unit(k))) for k in keys]
    rows = []
    for study in run.studies(device):
        fss = [fs for fs in run.filesystems(device, study) if run.device_stat(device, fs, study)]
        group = []
        grid = []
        for fs in fss:
            ds = run.device_stat(device, fs, study)
            stats = [ds.get(k) for k in keys]
            group.append([Cell(study, None), Cell(fs, None)] +
                         [_stat_cell(s, units.device_stat_unit(k)) for s, k in zip(stats, keys)])
            grid.append(stats)
        for j, k in enumerate(keys):
            _mark_best([r[2 + j] for r in group], [g[j] for g in grid], units.device_stat_direction(k))
        rows += group
    return Table(units.slug("tab", device, "device-stats"), f"Flash emulator statistics — {device}", cols, rows,
                 "whole study per filesystem (its cells' 'workload' phase combined); write amplification = NAND "
                 "bytes programmed / host bytes written, weighted by host bytes; mean ± sd over repeats")


def overview_table(run: RunData) -> Table:
    cols = [Column("study", numeric=False), Column("what", numeric=False), Column("devices", numeric=False),
            Column("filesystems", "count"), Column("cells ok", "count"), Column("cells failed", "count"),
            Column("status", numeric=False)]
    rows = []
    present = run.studies()
    na = {st: why for (_d, _f, st), why in run.na.items()}
    for study in sorted(set(present) | set(run.missing_studies()) | set(na), key=units.study_sort_key):
        if study not in present and study in na:
            rows.append([Cell(study, study), Cell(units.study_title(study)), Cell("—"), Cell("—", None, cls="na"),
                         Cell("—", None, cls="na"), Cell("—", None, cls="na"),
                         Cell(f"n/a ({na[study]}) for every filesystem", "n/a", cls="na")])
            continue
        if study not in present:
            rows.append([Cell(study, study), Cell(units.study_title(study)), Cell("—"), Cell("—", None, cls="missing"),
                         Cell("—", None, cls="missing"), Cell("—", None, cls="missing"),
                         Cell("missing: not in this run", "missing", cls="missing")])
            continue
        counts = [(k, c) for k, c in run.cell_status.items() if k[2] == study]
        ok = sum(c[CellStatus.OK] for _k, c in counts)
        failed = sum(sum(c.values()) - c[CellStatus.OK] for _k, c in counts)
        devs = sorted({k[0] for k, _c in counts}, key=units.natural_key)
        nfs = len({(k[0], k[1]) for k, _c in counts})
        rows.append([Cell(study, study), Cell(units.study_title(study)), Cell(", ".join(devs)), Cell(str(nfs), nfs),
                     Cell(str(ok), ok), Cell(str(failed), failed, cls="bad" if failed else ""),
                     Cell("present" if not failed else "present, with failures", "present")])
    return Table("tab-overview", "Studies in this run", cols, rows,
                 "a missing study is shown as missing: nothing in the report is estimated for it")


def failures_table(run: RunData) -> Table | None:
    if not run.failures:
        return None
    cols = [Column("cell", numeric=False), Column("status", numeric=False), Column("error", numeric=False)]
    rows = [[Cell(f.id, f.id), Cell(f.status, f.status, cls="bad"), Cell(f.error, f.error)] for f in run.failures]
    return Table("tab-failures", "Cells that did not finish", cols, rows,
                 "failed, hang and crash are results (the filesystem did not survive that cell); error is a "
                 "failure of the lab itself, retried when the run is resumed")


REPRODUCERS_PER_CELL = 20


def reproducers_table(run: RunData, device: str, study: str) -> Table | None:
    mine = [r for r in run.reproducers if r.device == device and r.study == study]
    if not mine:
        return None
    per_cell: dict[str, list] = {}
    for r in mine:
        per_cell.setdefault(r.cell, []).append(r)
    rows = [r for c in per_cell.values() for r in c[:REPRODUCERS_PER_CELL]]
    more = {c: len(x) - REPRODUCERS_PER_CELL for c, x in per_cell.items() if len(x) > REPRODUCERS_PER_CELL}
    caused = any(r.cause for r in rows)  # crash states: whose loss each is (studies/crashstates.attribute)
    cols = [Column("filesystem", numeric=False), Column("case", numeric=False), Column("what", numeric=False),
            Column("outcome", numeric=False), *([Column("whose loss", numeric=False)] if caused else []),
            Column("why", numeric=False), Column("reproduce", numeric=False)]
    cells = [[Cell(r.fs, r.fs), Cell(r.case, r.case), Cell(r.item, r.item), Cell(r.outcome, r.outcome, cls="bad"),
              *([Cell(r.cause or "—", r.cause)] if caused else []),
              Cell(r.why, r.why), Cell(r.command, r.command)] for r in rows]
    note = "run the command from the directory the run was made in"
    if more:
        note += "; not listed here: " + ", ".join(f"{n} more of {c}" for c, n in more.items()) + \
            " (each cell's result file lists them)"
    return Table(units.slug("tab", device, study, "reproducers"), "Failures, each with the command that reproduces it",
                 cols, cells, note)


def lifetime_table(run: RunData, device: str, study: str) -> Table | None:
    """Your workload's projected lifetime per filesystem (studies/workload.py: extra["lifetime"]),
    with every assumption it rests on."""
    rows, notes = [], []
    for fs in sorted({k[1] for k in run.extras if k[0] == device and k[2] == study}, key=units.natural_key):
        for e in run.extras.get((device, fs, study), []):
            lt = e.get("lifetime")
            if not isinstance(lt, dict):
                continue
            years = lt.get("years")
            yt = "unbounded" if years is None or years == float("inf") else f"{years:.1f}"
            waf = f"{lt['waf']:.2f}" + ("" if lt.get("steady") else " (not converged)")
            spread = lt.get("erase_spread") or ["?", "?"]
            age = e.get("age") or {}
            fill = f"{age['fill']:.0%}" if isinstance(age.get("fill"), (int, float)) else "blank"
            rows.append([Cell(fs, fs), Cell(yt, years if yt != "unbounded" else None), Cell(waf, lt["waf"]),
                         Cell(str(lt.get("passes")), lt.get("passes")), Cell(fill, fill),
                         Cell(f"{(lt.get('daily_bytes') or 0) / (1 << 30):.2f}", lt.get("daily_bytes")),
                         Cell(f"{spread[0]}-{spread[1]}", spread[1])])
            daily = "--daily-writes" if lt.get("daily_source") == "--daily-writes" else \
                "each filesystem's last pass's measured host write rate, around the clock"
            notes = [f"years = capacity {(lt.get('capacity') or 0) / (1 << 30):.1f} GiB x {lt.get('pe_cycles')} P/E "
                     f"cycles ({lt.get('pe_source')}) / (host writes a day x steady WAF) / 365; host writes a day: "
                     f"{daily}; WAF: the mean of the last passes when they converged, else the last pass's.",
                     *[x for x in lt.get("lines", []) if x.strip().startswith("assumes")]]
    if not rows:
        return None
    cols = [Column("filesystem", numeric=False), Column("lifetime", "years"), Column("steady WAF", "x"),
            Column("passes"), Column("fill before", numeric=False), Column("host writes a day", "GiB"),
            Column("erase counts", numeric=False)]
    return Table(units.slug("tab", device, study, "lifetime"), "Projected lifetime of the part under this workload",
                 cols, rows, " ".join(x.strip() for x in notes))


def tools_table(run: RunData) -> Table:
    cols = [Column("tool", numeric=False), Column("version", numeric=False)]
    rows = [[Cell(k, k), Cell(v, v)] for k, v in run.tools.items()]
    return Table("tab-tools", "Tool versions (from the run manifest)", cols, rows)


def devices_table(run: RunData) -> Table:
    keys = ["name", "kind", "ftl", "capacity_bytes", "page_size", "erase_block_bytes"]
    cols = [Column("device", numeric=False), Column("preset", numeric=False), Column("kind", numeric=False),
            Column("FTL", numeric=False), Column("capacity", "MiB"), Column("page size", "bytes"),
            Column("erase block", "KiB")]
    rows = []
    for d in run.devices():
        info = run.device_info(d)
        vals = [info.get(k) for k in keys]

        def num(v, div=1.0):
            return Cell(units.fmt(v / div) if isinstance(v, (int, float)) else "—",
                        v if isinstance(v, (int, float)) else None)
        preset = f"none: {info.get('node') or 'a real device'}" if run.is_real(d) else str(vals[0] or d)
        rows.append([Cell(d, d), Cell(preset), Cell(str(vals[1] or "—")), Cell(str(vals[2] or "—")),
                     num(vals[3], 1048576.0), num(vals[4]), num(vals[5], 1024.0)])
    # the real part each preset reproduces and where its figures come from, when the presets say
    for name, text in (("real part", run.real_part), ("sources", run.sources)):
        if any(text(d) for d in run.devices()):
            cols.append(Column(name, numeric=False))
            for row, d in zip(rows, run.devices()):
                row.append(Cell(text(d) or "—", text(d)))
    return Table("tab-devices", "Devices (from the run manifest)", cols, rows)


def workload_table(run: RunData, device: str, study: str) -> Table | None:
    """Your workload per filesystem on one line: its time, what the device received and did over it,
    the projected lifetime, and your check over the crash states (the workload and appcheck studies)."""
    if study != "workload":
        return None
    cases = [c for c in run.cases(device, study) if c and ":" not in c]
    page = (run.device_info(device) or {}).get("page_size")
    rows = []
    for case in cases:
        for fs in run.filesystems(device, study):
            def val(metric: str, s: str = study, k: str = case) -> float | None:
                st = run.get(device, fs, s, k, metric)
                return st.mean if st else None
            ds = run.device_stat(device, fs, study, case) or run.device_stat(device, fs, study)
            host = ds["host_write_bytes"].mean if "host_write_bytes" in ds else None
            nand = ds["nand_program_pages"].mean * page if "nand_program_pages" in ds and page else None
            waf = ds["write_amplification"].mean if "write_amplification" in ds else None
            busy = run.busy_for(device, fs, study, case)
            n, bad, lost = (val(m, "appcheck", "user") for m in ("iterations", "failures", "class:data-loss"))
            if n is None:
                verdict = "not checked" if "appcheck" not in run.studies(device) else "—"
            else:
                why = next((f.get("why", "") for e in run.extras.get((device, fs, "appcheck"), [])
                            for f in e.get("failures") or []), "")
                nv, of = val("no_verdict", "appcheck", "user"), val("to_judge", "appcheck", "user")
                verdict = f"{n - (bad or 0):.0f}/{n:.0f} consistent" + \
                    (f", {bad:.0f} failed ({lost or 0:.0f} by your check): {why[:80]}" if bad else "") + \
                    (f"; {nv:.0f} of {of or nv:.0f} without a verdict (not decided)" if nv else "")
                cover = next((e.get("coverage") for e in run.extras.get((device, fs, "appcheck"), [])
                              if "sample" in (e.get("coverage") or "")), None)
                if cover:  # a seeded sample of the distinct states: what a clean result then bounds
                    verdict += f" — {cover}"
            years = val("lifetime_years")
            rows.append([Cell(case, case), Cell(fs, fs),
                         Cell(units.fmt(val("seconds"), "s"), val("seconds")),
                         Cell(units.fmt(host / 1e6) if host is not None else "—", host),
                         Cell(units.fmt(nand / 1e6) if nand is not None else "—", nand),
                         Cell(units.fmt(waf) if waf is not None else "—", waf),
                         Cell(units.fmt(val("flushes"), "count"), val("flushes")),
                         Cell(f"{busy.util.mean:.0f}" if busy else "—", busy.util.mean if busy else None,
                              cls="labbound" if busy and busy.util.mean < run.weights.lab_bound_below else ""),
                         Cell(units.fmt(years) if years is not None else "—", years),
                         Cell(verdict, verdict, cls="bad" if bad else "")])
    if not rows:
        return None
    cols = [Column("workload", numeric=False), Column("filesystem", numeric=False), Column("wall time", "s"),
            Column("host writes", "MB"), Column("NAND writes", "MB"), Column("WAF", "x"), Column("flushes", "count"),
            Column("device busy", "%"), Column("lifetime", "years"), Column("crash states: your check", numeric=False)]
    return Table(units.slug("tab", device, study, "summary"), "Your workload, per filesystem", cols, rows,
                 "the last pass's figures and the device's counters over it; device busy = its busy time over the "
                 "pass's wall time (below the lab-bound line the lab, not the device, set the time); lifetime: "
                 "the table below; crash states: those where the filesystem recovered and your check (or fio's "
                 "verification) held, of all checked")
