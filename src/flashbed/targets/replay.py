"""Recorded boots of real lab runs as a Target (the tests': tests/replay.py records them): the
plan is the lab's (its devices, kernels and refusals), every boot is served from the
recording (lab/replay.py's ReplayLabs), no kernel, no emulator."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .lab import LabTarget


@dataclass
class ReplayTarget(LabTarget):
    root: Path = field(default_factory=Path)  # the recording: a directory per cell, and the run's manifest

    def check_plan(self, plan) -> None:
        pass  # nothing is attached to this machine

    def labs(self, plan, store, say: Callable[[str], None]):
        from ..lab.replay import ReplayLabs
        return ReplayLabs(self.root)
