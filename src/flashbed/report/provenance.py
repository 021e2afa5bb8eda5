"""What every figure and table states: device preset, kernel, tool versions, profile, repeats."""

from __future__ import annotations

import re

from .. import filesystems as fscat
from . import catalog
from .load import RunData


def fs_families(fs: str) -> list[str]:
    """'ext2@f2fs' -> ['ext2', 'f2fs']; 'ext4+noatime' -> ['ext4']; 'ext4-nojournal' -> ['ext4']."""
    return [re.split(r"[+\-]", part)[0] for part in fs.split("@") if part]


def relevant_tools(run: RunData, fss: list[str], study: str | None) -> dict[str, str]:
    tools = run.tools
    if not tools:
        return {}
    # a filesystem's tools: its catalogue package (e2fsprogs), or a tool named after it (mkfs.ext4)
    hints = [h for fs in fss for fam in fs_families(fs) for h in (fam, _package(fam)) if h]
    hints += catalog.tools(study)  # tools the study drives directly
    picked = {k: v for k, v in tools.items() if any(h in k.lower() for h in hints)}
    return picked or tools


def _package(family: str) -> str:
    fs = fscat.CATALOGUE.get(family)
    return fs.package if fs is not None else ""


def tools_text(tools: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in tools.items()) if tools else "not recorded"


def cpus_text(run: RunData) -> str:
    """' · 2 guest vCPUs' when the run's cells had more than one (--cpus), else ''."""
    return f" · {run.cpus} guest vCPUs" if run.cpus > 1 else ""


def figure_footer(run: RunData, device: str, fss: list[str], study: str | None, ns: list[int]) -> str:
    """Two lines under every figure (inside the SVG, so it travels with it)."""
    reps = run.repeats_text(ns)
    eb = "; error bars: min–max over repeats" if ns and max(ns) > 1 else ""
    timing = f" · {run.timing_for(device)}" if run.timing_for(device) else ""
    line1 = (f"device {run.device_text(device)} · kernel {run.kernel_for(device)}{cpus_text(run)}{timing} · profile "
             f"{run.profile} · repeats {reps}{eb}")
    return line1 + "\ntools: " + tools_text(relevant_tools(run, fss, study))
