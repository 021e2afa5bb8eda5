"""The UML lab's factories (the Lab and LabFactory protocols are in boundary.py).

    UmlLab      the real lab: a user-mode Linux kernel (uml.boot)
    ReplayLab   recorded guest results of real runs, served without a kernel (replay.py)

A cell runs against one Lab; executors hand each cell the lab of a LabFactory
(`labs(spec)`), which picks the cell's own kernel (`CellSpec.kernel`).
Factories are plain picklable objects: they travel to Dask workers, which find
(or build) the kernel themselves, by its label, and check it is the same build.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import Clock, Pace
from ..devices.session import open_session
from ..errors import FlashbedError
from .boundary import BootResult, BootSpec, DeviceSession, HostHandler
from .kernel import TIME_TRAVEL, KernelInfo, ensure_kernel
from .uml import LAYOUT, boot


@dataclass(frozen=True)
class UmlLab:
    kernel: KernelInfo
    layout = LAYOUT  # the guest's device and programs (written into every boot's steps.json)

    @property
    def release(self) -> str:
        return self.kernel.release

    @property
    def max_cpus(self) -> int:
        """vCPUs a guest can have (target.VCpus)."""
        return self.kernel.max_cpus

    def open_session(self, device: Any, scratch: Path, seed: int = 1, pace: Pace = Pace.REAL,
                     clock: Clock = Clock.REAL) -> DeviceSession:
        """The device as ubd or nandsim give it to the lab (devices/session.py)."""
        return open_session(device, scratch, seed=seed, pace=pace, clock=clock)

    def boot(self, spec: BootSpec, host: HostHandler | None = None,
             kill: threading.Event | None = None) -> BootResult:
        return boot(spec, self.kernel, host=host, kill=kill)


class UmlLabs:
    """Each cell in the lab kernel its spec names (CellSpec.kernel, a label; "" when the run
    has one kernel), given as built here. Where a cell runs (here, or a Dask worker) the
    kernel is looked up by its label in that machine's cache, not by this machine's path,
    and must be the same build (cache key)."""

    def __init__(self, *kernels: KernelInfo):
        if not kernels:
            raise ValueError("UmlLabs needs at least one kernel")
        # by label and flavour: a cell in virtual time runs the label's time-travel build
        self.kernels: dict[tuple[str, bool], KernelInfo] = {(k.label, k.time_travel): k for k in kernels}

    def __call__(self, cell: Any) -> UmlLab:
        label = getattr(cell, "kernel", "") or next(iter(self.kernels))[0]
        virtual = Clock(getattr(cell, "clock", Clock.REAL)).time_travel
        tt = virtual or getattr(cell, "flavour", "") == TIME_TRAVEL  # the build: time travel on or off
        want = self.kernels.get((label, tt))
        if want is None:
            raise FlashbedError(f"cell {cell.key.id} asks for lab kernel {label}{' (time travel)' if tt else ''}; "
                                f"this run has {', '.join(_name(k) for k in self.kernels.values())}")
        info = _local(label, want.key, tt)
        return UmlLab(info if virtual else info.in_real_time())

    def describe(self) -> dict[str, Any]:
        return manifest_kernels(list(self.kernels.values()))


def _name(k: KernelInfo) -> str:
    """A kernel as a run's manifest names it: its label, `+timetravel` for that flavour."""
    return f"{k.label}+{k.flavour}" if k.flavour else k.label


def manifest_kernels(kernels: list[KernelInfo]) -> dict[str, Any]:
    """How a run's manifest records its lab kernels: `kernels` by label (provenance, label,
    vCPUs); `kernel`, the one kernel's provenance (as before the kernel axis), or with several
    their names and releases joined, for a reader that shows one line."""
    by_label = {_name(k): {**k.provenance(), "label": k.label, "max_cpus": k.max_cpus} for k in kernels}
    if len(kernels) == 1:
        one: dict[str, Any] = kernels[0].provenance()
    else:
        one = {"name": ", ".join(by_label), "release": ", ".join(k.release for k in kernels)}
    return {"kernel": one, "kernels": by_label}


_RESOLVED: dict[tuple[str, bool], KernelInfo] = {}
_RESOLVED_LOCK = threading.Lock()


def _local(label: str, key: str, time_travel: bool = False) -> KernelInfo:
    """This machine's build of kernel `label` (built if missing), which must be build `key`."""
    with _RESOLVED_LOCK:
        info = _RESOLVED.get((label, time_travel))
        if info is None:
            info = _RESOLVED[(label, time_travel)] = ensure_kernel(label, time_travel=time_travel)
    if info.key != key:
        raise FlashbedError(f"lab kernel {label} here is build {info.key}, the run's is {key}: run the same "
                            f"flashbed version on every worker")
    return info
