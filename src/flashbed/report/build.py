"""Assemble the report document of one run: recommendation, run overview, per-device studies."""

from __future__ import annotations

from ..status import CellStatus
from . import catalog, footing, glance, tuning, units
from . import figures as F
from . import recommend as R
from . import tables as T
from . import yaffs2note as yaffs2_note
from .doc import Document, Paragraph, Section
from .load import EMULATOR_FIGURES, NOT_OBSERVABLE, RunData


def run_meta(run: RunData) -> list[tuple[str, str]]:
    m = run.manifest
    ok = sum(c[CellStatus.OK] for c in run.cell_status.values())
    total = sum(sum(c.values()) for c in run.cell_status.values())
    return [
        ("run", f"`{run.run_id}`"),
        ("created", str(m.get("created", "?"))),
        ("profile", run.profile),
        ("repeats", str(m.get("repeats", "?"))),
        ("lab kernel" if len(run.kernels) == 1 else "lab kernels", run.kernel_text),
        *([("guest vCPUs", str(run.cpus))] if run.cpus > 1 else []),
        ("devices", "; ".join(run.device_text(d) for d in run.devices())),
        ("cells", f"{total} ({ok} ok, {total - ok} did not finish)"),
        ("flashbed", str(m.get("flashbed_version", "?"))),
    ]


def build_document(run: RunData, recs: dict[str, list[R.Ranking]] | None = None) -> Document:
    recs = recs if recs is not None else R.recommend(run)
    # a study's figures list the filesystems the plan left it out for too (n/a): each has its colour
    all_fs = sorted({k[1] for k in run.cell_status} | {fs for (_d, fs, _s) in run.na}, key=units.natural_key)
    ctx = F.Ctx(run, F.fs_colors(all_fs))
    feet = footing.footing(run, recs)  # a robust pass: each answer against the twin's assumptions
    tn = tuning.tuning(run, recs)  # a tuning pass: which options, for each use case's choice
    sections = [R.recommendation_section(run, recs)] + \
        [s for s in [tuning.section(tn), footing.section(run, feet, ctx.colors)] if s]

    ov = Section("run", "Run")
    ov.add(Paragraph("Everything in this report comes from the run's cell results (`cells/*.json`) and its "
                     "manifest; logs and images are not read. Values are means over repeats of the cells that "
                     "finished; a cell that failed, hung or crashed is shown as such, never filled in."))
    ov.add(T.overview_table(run))
    missing = run.missing_studies()
    if missing:
        ov.add(Paragraph("Missing studies (not in this run, nothing estimated for them): "
                         + ", ".join(f"`{s}`" for s in missing) + ".", cls="missing"))
    for note in run.notes:
        ov.add(Paragraph(note, cls="missing"))
    ov.add(T.devices_table(run), T.tools_table(run))
    ft = T.failures_table(run)
    if ft:
        ov.add(ft)
    sections.append(ov)

    for device in run.devices():
        ds = Section(units.slug("dev", device), f"Results: {device}")
        kern = f" Lab kernel {run.kernel_for(device)}." if run.kernel_of(device) else ""
        timing = f" Timed figures: {run.timing_for(device)}." if run.timing_for(device) else ""
        ds.add(Paragraph(f"Device {run.device_text(device)}.{kern}{timing}"))
        for study in run.studies(device):
            ss = Section(units.slug("dev", device, study), units.study_title(study))
            if catalog.description(study):
                ss.add(Paragraph(f"`{study}`: {catalog.description(study)}.", cls="note"))
            if any(yaffs2_note.on_fuse(fs) for fs in run.filesystems(device, study)):
                ss.add(Paragraph(yaffs2_note.path_note(study), cls="note"))
            skipped = run.skipped(device, study)
            if skipped:
                whys = sorted({f"{s.get('case')} ({s.get('why')})" for s in skipped})
                ss.add(Paragraph(f"Not run here: {', '.join(whys)}.", cls="missing"))
            ss.add(*F.study_figures(ctx, device, study))
            ss.add(*T.view_blocks(run, device, study))
            wt = T.workload_table(run, device, study)
            if wt:
                ss.add(wt)
            t = T.study_table(run, device, study)
            if t:
                ss.add(t)
            lt = T.lifetime_table(run, device, study)
            if lt:
                ss.add(lt)
            rt = T.reproducers_table(run, device, study)
            if rt:
                ss.add(rt)
            ds.add(ss)
        ct = T.device_check_table(run, device)
        if ct:
            cs = Section(units.slug("dev", device, "devcheck"), "Device check: what the device received")
            cs.add(Paragraph(R.device_check_method()))
            cs.add(Paragraph(R.ignores_direct_text(run, device)))
            cs.add(ct)
            ds.add(cs)
        wear = F.wear_figure(ctx, device)
        dt = T.device_stats_table(run, device)
        if wear or dt or run.is_real(device):
            ws = Section(units.slug("dev", device, "wear"), "Flash wear: write amplification and erase counts")
            if run.is_real(device):
                ws.add(Paragraph(f"{EMULATOR_FIGURES[0].upper()}{EMULATOR_FIGURES[1:]}: {NOT_OBSERVABLE}. The "
                                 f"flash emulator counts them; a real device's controller does not report them, "
                                 f"so they are neither shown nor scored for {device}.", cls="missing"))
            if wear:
                ws.add(wear)
            if dt:
                ws.add(dt)
            ds.add(ws)
        not_here = [s for s in run.expected_studies() if s not in run.studies(device)]
        if not_here:
            ds.add(Paragraph(f"Not run on {device}: " + ", ".join(not_here) + ".", cls="missing"))
        sections.append(ds)

    ap = Section("weights", "Recommendation weights")
    ap.add(Paragraph(f"From `{run.weights.path.name}` in the flashbed.report package: a documented, editable "
                     f"table; the report reads it every time it runs."))
    ap.add(R.weights_table(run))
    sections.append(ap)
    answer = R.answer_section(run, recs, lambda r: tuning.answer_text(tn, r)
                              + footing.answer_text(feet.get(r.device), r.use_case))
    picture = glance.figure(run, recs)
    if picture is not None:  # the report opens with it, above the first screen's text (an unfinished run's line first)
        answer.blocks.insert(1 if R.unfinished_text(run) else 0, picture)
    return Document(title=f"flashbed report: {run.run_id}",
                    subtitle="Which filesystem, with which options, for this flash part and this workload.",
                    meta=run_meta(run), sections=sections, answer=answer)
