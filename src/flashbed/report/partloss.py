"""What the part itself destroyed: the crash states whose loss was the device's, not the
filesystem's (studies/crashstates.attribute: the state's cut damaged durable data, and the
same cut without the damage recovered), per device, said once on the report's first screen.

No filesystem is ruled out for these (eligibility.py holds only the filesystem's losses); they
are a finding about the part, with what it means and which filesystem survived the damage best
(the crash-state studies' `damage_survived`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from . import units
from .load import ATTRIBUTED, RunData


@dataclass
class PartLoss:
    device: str
    states: int = 0  # crash states checked on the device (every filesystem, both studies)
    damaged: int = 0  # ... whose cut damaged durable data (a torn program's paired pages)
    flushed: int = 0  # ... of which the damage hit data a flush had made durable
    caused: dict[str, int] = field(default_factory=dict)  # fs -> failed states the device's damage alone lost
    survived: dict[str, float] = field(default_factory=dict)  # fs -> % of its damaged states it survived
    protected: bool | None = None  # the preset's protect_paired_pages (None: the manifest does not say)
    preset: str = ""

    @property
    def losses(self) -> int:
        return sum(self.caused.values())

    def best(self) -> list[str]:
        """The filesystems that survived the damage best (ties together)."""
        if not self.survived:
            return []
        top = max(self.survived.values())
        return sorted((fs for fs, v in self.survived.items() if v == top), key=units.natural_key)

    def text(self) -> str:
        """The first screen's finding (Markdown inline marks)."""
        who = ", ".join(f"{fs} {n}" for fs, n in sorted(self.caused.items(), key=lambda kv: (-kv[1], kv[0])) if n)
        more = f" ({self.damaged - self.flushed} more lost data not yet flushed)" if self.damaged > self.flushed else ""
        head = (f"**This part destroyed data it had acknowledged as durable.** In {self.flushed} of the "
                f"{self.states} crash states checked here the cut tore a NAND program whose paired pages held "
                f"flushed data{more}; {self.losses} failed state{'s were' if self.losses != 1 else ' was'} its doing "
                f"alone — the same cut{'s' if self.losses != 1 else ''} without the damage recovered ({who}). ")
        why = (f"Its model has no paired-page or power-loss protection (preset {self.preset}: "
               f"protect_paired_pages = false). " if self.protected is False else
               f"The damage comes from its model (preset {self.preset}). ")
        means = ("No filesystem can make this part safe: choose a part with power-loss protection (or a hold-up "
                 "capacitor), or keep a read-only root and a small journalled data partition on it. ")
        best = self.best()
        if best:
            v = self.survived[best[0]]
            rest = sorted(((fs, p) for fs, p in self.survived.items() if fs not in best),
                          key=lambda kv: (-kv[1], units.natural_key(kv[0])))
            tail = f"; then {', '.join(f'{fs} {p:.0f} %' for fs, p in rest[:4])}" if rest else ""
            means += (f"Of the filesystems measured, {' and '.join(best)} survived its damage best ({v:.0f} % of "
                      f"the damaged states recovered with every acknowledged operation{tail}).")
        return head + why + means


def part_loss(run: RunData, device: str) -> PartLoss | None:
    """The device's own losses over the crash-state cells of the run; None when it caused none."""
    pl = PartLoss(device)
    surv: dict[str, list[tuple[float, float]]] = defaultdict(list)  # fs -> (% survived, damaged states)
    for (d, fs, study, case, metric), st in run.values.items():
        if d != device or study not in ATTRIBUTED:
            continue
        total = sum(st.values)
        if metric == "iterations":
            pl.states += int(total)
        elif metric == "damaged_states":
            pl.damaged += int(total)
            dmg = run.get(d, fs, study, case, "damage_survived")
            if dmg is not None and total:
                surv[fs].append((dmg.mean, total))
        elif metric == "damaged_flushed_states":
            pl.flushed += int(total)
        elif metric == "cause:device" and total:
            pl.caused[fs] = pl.caused.get(fs, 0) + int(total)
    if not pl.losses:
        return None
    pl.survived = {fs: sum(p * n for p, n in xs) / sum(n for _p, n in xs) for fs, xs in surv.items()}
    info = run.device_info(device)
    pl.protected = info.get("protect_paired_pages") if isinstance(info.get("protect_paired_pages"), bool) else None
    pl.preset = str(info.get("name") or run.device_of(device))
    return pl


def no_damage_why(run: RunData, device: str) -> str:
    """Why `damage_survived` has no value on a device whose crash states ran: it damaged nothing."""
    info = run.device_info(device)
    protect = " (its model protects paired pages)" if info.get("protect_paired_pages") is True else ""
    return f"{device} damaged no durable data in any crash state{protect}: nothing to survive"
