"""A Target: where a run's cells run (or a probe measures), chosen once at the edge.

As a target in labgrid owns its resources and the drivers that work them, a Target owns
what the plan and the run need to know of one place: its devices (loaded and checked
there), its lab choices (the lab kernels; a board, itself), its refusals (one line each),
the clocks it can give a cell, the session class of each of its devices, the lab factory
an executor hands each cell, and what it is for the report (the factory's `describe`).
make_plan asks it, never which kind it is; so does the run command, and the probe.

A target is a context manager: a board connects on entry and goes on exit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol

from ..errors import FlashbedError

if TYPE_CHECKING:
    from ..clock import Clock
    from ..devices.presets import Device
    from ..executors import Executor
    from ..identity import PlanRequest
    from ..lab.boundary import LabFactory
    from ..probe.lab import ProbeSite
    from ..store import RunStore
    from ..studies.base import CellSpec
    from ..variants import FsVariant


class LabChoice(Protocol):
    """One place of a target a cell can run on: a lab kernel, or the board itself."""

    @property
    def label(self) -> str:
        """Its name in a cell's spec and key (CellSpec.kernel)."""
        ...

    @property
    def virtual(self) -> bool:
        """Whether it can run a cell in virtual time (a lab kernel's time-travel flavour)."""
        ...

    def cpus_problem(self, n: int) -> str:
        """Why a cell of `n` vCPUs cannot run here ('' if it can)."""
        ...


@dataclass(frozen=True)
class ItsOwnLab:
    """The one choice of a target that runs every cell on its own machine (a board): its own
    kernel, its own CPUs, its own time."""

    label: str
    no_vcpus: str  # why it gives a cell no vCPUs
    virtual: bool = False

    def cpus_problem(self, n: int) -> str:
        return "" if n == 1 else self.no_vcpus


class PlanParts(Protocol):
    """What a target reads of a plan (plan.Plan has them): its devices, its cells, the lab kernels
    they run on. Typed on these, not on Plan: the plan asks the target, not the other way."""

    devices: dict[str, "Device"]
    cells: list["CellSpec"]
    kernels: tuple[str, ...]


@dataclass
class Target:
    """What every target shares; a kind of target overrides what is its own."""

    executor: "Executor | None" = None  # the executor its cells run on (`open`)
    notes: list[str] = field(default_factory=list)  # lines said before the run (one each)

    def __enter__(self) -> "Target":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        pass

    # -- what the plan asks (make_plan) --
    def check(self, request: "PlanRequest", destroy_data_on: tuple[str, ...]) -> None:
        """What this target refuses of a (resolved) request, one line each."""

    def choices(self, request: "PlanRequest") -> list[LabChoice]:
        """Where the request's cells can run here, each a cell axis when there are several."""
        raise NotImplementedError

    def check_virtual(self, request: "PlanRequest", choices: list[LabChoice]) -> None:
        """--clock virtual by name: one line where it cannot be had (auto asks each cell instead)."""
        raise FlashbedError("--clock virtual is the lab's: this target keeps its own time: drop --clock")

    def load_devices(self, specs: tuple[str, ...], destroy_data_on: tuple[str, ...]) -> dict[str, "Device"]:
        """Every device of the request by label, checked here (one line per refusal)."""
        raise NotImplementedError

    def check_variant(self, spec: str, variant: "FsVariant") -> None:
        """One line for a filesystem this target cannot run (before any cell is planned)."""

    def session_class(self, device: "Device") -> type:
        """The class of `device`'s session here: its capabilities are the plan's to check."""
        from ..devices.session import session_class
        return session_class(device)

    def no_power_switch(self, study: str, device: "Device") -> str:
        """The line for a study that cuts the power of a device without a power switch."""
        return (f"study {study} cannot run on {device.label} ({device.path}): it cuts the device's power, which "
                f"flashbed can do only to an emulated device (killing the lab is a kernel crash a real device "
                f"rides out): run {study} on a preset, or drop it for this device")

    # -- what the run asks (commands/run.py) --
    def check_plan(self, plan: PlanParts) -> None:
        """What this target refuses of a plan before the run directory is made."""

    def labs(self, plan: PlanParts, store: "RunStore", say: Callable[[str], None]) -> "LabFactory":
        """The plan's lab factory (kernels built, or a board reached), saying what the run should know."""
        raise NotImplementedError

    # -- what the probe asks (commands/probe.py) --
    def probe_device(self, spec: str, destroy_data_on: tuple[str, ...]) -> "Device":
        """The device `flashbed probe` measures, checked as a run checks it."""
        raise FlashbedError("flashbed probe does not run on this target")

    def probe_site(self, device: "Device", clock: "Clock") -> "ProbeSite":
        raise FlashbedError("flashbed probe does not run on this target")
