"""The seam below a cell: a Lab boots a BootSpec and returns a BootResult.

    UmlLab      the real lab: a user-mode Linux kernel (uml.boot)
    ReplayLab   recorded guest results of real runs, served without a kernel (replay.py)

A cell runs against one Lab; executors hand each cell the lab of a LabFactory
(`labs(spec)`), which is where a cell's own kernel will be chosen once cells
have one. Factories are plain picklable objects: they travel to Dask workers.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol

from .kernel import KernelInfo
from .uml import BootResult, BootSpec, HostHandler, boot


class Lab(Protocol):
    """Boots the lab once with a spec's steps; never raises for what happens in the guest."""

    @property
    def release(self) -> str:
        """The lab kernel's release (a result's provenance)."""
        ...

    def boot(self, spec: BootSpec, host: HostHandler | None = None,
             kill: threading.Event | None = None) -> BootResult:
        ...


class LabFactory(Protocol):
    def __call__(self, cell: Any) -> Lab:
        """The lab cell `cell` (a CellSpec) runs in."""
        ...

    def describe(self) -> dict[str, Any]:
        """The kernel as a run's manifest records it."""
        ...


@dataclass(frozen=True)
class UmlLab:
    kernel: KernelInfo

    @property
    def release(self) -> str:
        return self.kernel.release

    def boot(self, spec: BootSpec, host: HostHandler | None = None,
             kill: threading.Event | None = None) -> BootResult:
        return boot(spec, self.kernel, host=host, kill=kill)


@dataclass(frozen=True)
class UmlLabs:
    """Every cell in the one built lab kernel."""

    kernel: KernelInfo

    def __call__(self, cell: Any) -> UmlLab:
        return UmlLab(self.kernel)

    def describe(self) -> dict[str, Any]:
        return self.kernel.provenance()
