"""`flashbed devices show NAME|FILE`: a preset as flashbed resolves it, with
the real part it reproduces, its sources and its published rates."""

from __future__ import annotations

import json

from ..sizes import format_size
from .assumptions import VARIED_REACH
from .presets import Device, load_spec
from .rates import FIGURES


def _comments(text: str) -> list[str]:
    """The preset file's leading comment block: what it models and its sources."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            out.append(line[1:].strip())
        elif line.strip():
            break
    return out


def text(spec: str) -> str:
    dev = load_spec(spec)
    raw = dev.path.read_text()
    lines = [f"{dev.label}: {dev.info.get('description', '')}", f"  file      {dev.path}"]
    if dev.part:
        lines.append("  part      " + "; ".join(f"{k}: {v}" for k, v in dev.part.items()))
    lines += ["  | " + c for c in _comments(raw)]
    lines += _geometry(dev)
    pub = dev.published
    if dev.kind == "block" and dev.emulated:
        figures = [(label, pub.get(key) or 0, unit, (pub.get("sources") or {}).get(key, ""))
                   for key, label, unit in FIGURES]
        if any(v for _, v, _, _ in figures):
            how = pub.get("method") or "method not stated"
            span = f", random I/O over {format_size(pub['span_bytes'])}" if pub.get("span_bytes") else ""
            lines.append(f"  published rates ({how}{span}):")
            for label, value, unit, source in figures:
                shown = f"{value:>9g} {unit:4}" if value else f"{'-':>9} {unit:4}"
                lines.append(f"    {label:24} {shown}  {source or ('no source' if value else 'none published')}")
        else:
            lines.append("  published rates: none (this preset reproduces no measured part)")
    if dev.footing is not None:
        lines += footing_lines(dev)
    if dev.kind == "nandsim":
        t = dev.nand_timing
        lines.append(f"  timing    tR {t.read_us:g} µs, tPROG {t.program_us:g} µs, tBERS {t.erase_us:g} µs, "
                     f"{t.cycle_ns:g} ns/byte -> nandsim {json.dumps(t.nandsim_params())}" if t else
                     "  timing    none: nandsim runs without delays")
    return "\n".join(lines)


def _geometry(dev: Device) -> list[str]:
    i = dev.info
    out = [f"  capacity  {format_size(dev.capacity)} ({dev.capacity} bytes)",
           f"  geometry  page {format_size(dev.page_size)}, erase unit {format_size(dev.erase_block)}"]
    if i.get("ftl"):
        ftl = f"  ftl       {i['ftl']}"
        if i["ftl"] == "hybrid":
            ftl += f", {i.get('open_aus')} open AUs" + (", in-order appends only" if i.get("sequential_log") else "")
        ftl += f", cell {i.get('cell')}, {i.get('planes')} planes, write cache {format_size(i.get('cache_bytes', 0))}"
        out.append(ftl)
    slc = dev.slc_buffer
    if slc:
        out.append(f"  slc buffer {format_size(slc.bytes)} programmed in SLC mode ({slc.program_us:g} µs a page), folded "
                   f"into the array after {slc.idle_ms:g} ms idle or when full (writes beyond it run at the "
                   f"array's sustained rate)"
                   + (f"; a sequential stream past its first {format_size(slc.bypass)} goes straight to the array"
                      if slc.bypass else ""))
    return out


def footing_lines(dev: Device) -> list[str]:
    """What the preset's values rest on: measured, fitted (to which published rate), assumed (the
    range and its source); what the robust pass varies (`flashbed run --robust`)."""
    f = dev.footing
    if not (f.assumptions or f.fitted or f.measured):
        return ["  footing   no [assumptions], [fitted] or [measured] table: every value is the preset's word "
                "(nothing for `flashbed run --robust` to vary)"]
    out = []
    if f.measured:
        out.append("  measured (the part's own figures):")
        out += [f"    {m.param.path:28} {m.how}" for m in f.measured]
    if f.fitted:
        out.append("  fitted (solved so the model gives the published rate; refitted for each variant):")
        out += [f"    {x.key:28} to {x.figure}, within [{x.low:g}, {x.high:g}] ({x.source})" for x in f.fitted]
    if f.assumptions:
        out.append("  assumed (no source gives them for this part; `flashbed run --robust` varies those marked *):")
        for a in f.assumptions:
            mark = "*" if a.param.reach & VARIED_REACH else " "
            out.append(f"  {mark} {a.param.path:28} {a.text(a.nominal):>8}  range {a.text(a.low)} – {a.text(a.high)}"
                       f"  ({a.param.label}; acts on {', '.join(sorted(a.param.reach))})")
            out.append(f"      source: {a.source}")
    return out
