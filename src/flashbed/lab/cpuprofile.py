"""Guest CPU cost profiles for virtual time (issue 17): `--cpu-profile NAME`.

In virtual time guest CPU work costs no guest time (UML's time-travel inf-cpu mode),
which is as wrong as UML's own 10-17 us system calls in real time. Lab patch 0008
charges a fixed guest time per system call, page fault and context switch instead;
a profile says how much, from a board's published lmbench figures (cpuprofiles.toml,
each figure cited, derived or marked an estimate). One kernel serves every profile:
the costs go on its command line (`flashbed_cpu=SYSCALL_NS,FAULT_NS,SWITCH_NS`).

A profile applies to virtual time only: in real time the lab's own CPU sets the cost.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..errors import FlashbedError
from .boundary import CpuCosts

CATALOGUE = Path(__file__).resolve().parent / "cpuprofiles.toml"


@dataclass(frozen=True)
class CpuProfile:
    name: str
    title: str
    costs: CpuCosts
    source: str  # where the figures come from
    derived: str = ""  # how a figure not published as such was computed
    estimate: str = ""  # set: no measurement of this board; how the figures were made

    def describe(self) -> dict[str, object]:
        """What a run's manifest and a cell's provenance say about the profile."""
        d: dict[str, object] = {"name": self.name, "title": self.title, "syscall_ns": self.costs.syscall_ns,
                                "fault_ns": self.costs.fault_ns, "switch_ns": self.costs.switch_ns,
                                "source": self.source}
        if self.derived:
            d["derived"] = self.derived
        if self.estimate:
            d["estimate"] = self.estimate
        return d

    def summary(self) -> str:
        """One line: name, title, the three costs, and "estimate" where it is one."""
        c = self.costs
        return (f"{self.name}: {self.title}; {c.syscall_ns} ns per syscall, {c.fault_ns} ns per page fault, "
                f"{c.switch_ns} ns per context switch" + (" (estimate)" if self.estimate else ""))


@dataclass(frozen=True)
class Catalogue:
    profiles: dict[str, CpuProfile]
    default: str


def _costs(name: str, entry: dict) -> CpuCosts:
    vals = []
    for key in ("syscall_ns", "fault_ns", "switch_ns"):
        v = entry.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 10_000_000:
            raise FlashbedError(f"{CATALOGUE.name}: profile {name}: {key} must be whole ns from 0 to 10000000, "
                                f"not {v!r}")
        vals.append(v)
    return CpuCosts(*vals)


def parse_catalogue(text: str) -> Catalogue:
    """The catalogue's TOML, checked: every profile's three costs and its source."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise FlashbedError(f"{CATALOGUE.name}: {e}") from None
    profiles: dict[str, CpuProfile] = {}
    for name, entry in (data.get("profile") or {}).items():
        if not isinstance(entry, dict):
            raise FlashbedError(f"{CATALOGUE.name}: profile {name} is not a table")
        if not str(entry.get("source") or "").strip():
            raise FlashbedError(f"{CATALOGUE.name}: profile {name} names no source for its figures")
        profiles[name] = CpuProfile(name=name, title=str(entry.get("title") or name), costs=_costs(name, entry),
                                    source=str(entry["source"]), derived=str(entry.get("derived") or ""),
                                    estimate=str(entry.get("estimate") or ""))
    default = data.get("default")
    if default not in profiles:
        raise FlashbedError(f"{CATALOGUE.name}: the default profile {default!r} is not one of its profiles")
    return Catalogue(profiles, default)


@functools.cache
def catalogue() -> Catalogue:
    return parse_catalogue(CATALOGUE.read_text())


def names() -> list[str]:
    return list(catalogue().profiles)


def default() -> CpuProfile:
    cat = catalogue()
    return cat.profiles[cat.default]


def get(name: str | None) -> CpuProfile:
    """A profile by name (None or "": the default); one clear line on an unknown one."""
    if not name:
        return default()
    cat = catalogue()
    prof = cat.profiles.get(name.strip())
    if prof is None:
        raise FlashbedError(f"unknown CPU profile '{name}': choose {', '.join(cat.profiles)} "
                            f"(--cpu-profile; default {cat.default})")
    return prof


def cell_costs(clock: Clock, profile: str | None) -> CpuCosts | None:
    """The guest CPU's cost per event for a cell (its clock and CPU profile) in virtual time;
    None in real time, or without a profile."""
    return get(profile).costs if clock is Clock.VIRTUAL and profile else None


def guest_cpu(start: Any, end: Any) -> dict[str, float]:
    """A phase's guest time and the part of it charged to the CPU profile (virtual time, lab
    patch 0008), from where the guest's clock and charge stood at its start and end; {}
    when the guest did not say (real time, or a kernel without the charge)."""
    try:
        guest = (int(end["ns"]) - int(start["ns"])) / 1e9
        cpu = (int(end["cpu_ns"]) - int(start["cpu_ns"])) / 1e9
    except (TypeError, KeyError, ValueError):
        return {}
    return {"guest_seconds": round(guest, 9), "cpu_seconds": round(cpu, 9)} if guest >= 0 and cpu >= 0 else {}


def labels(texts: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Profiles as given, each once, in order; one clear line on an unknown one."""
    return tuple(dict.fromkeys(get(t).name for t in texts))


REAL_TIME_NOTE = ("--cpu-profile applies to virtual time only: cells in real time run at the lab's own CPU cost "
                  "(the profile is ignored there)")
