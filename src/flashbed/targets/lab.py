"""The UML lab as a Target: its cells on the lab kernels the request names (or those an
existing run was made on), on presets the emulator, a plain file or nandsim serve and on
this machine's real block devices; virtual time on a kernel with a time-travel flavour.
Its lab factory (lab/labs.py: UmlLabs) travels to Dask workers."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

from .. import cpus, identity
from ..clock import Clock
from ..devices import presets, realdev
from ..devices.presets import Device
from ..errors import FlashbedError
from ..lab import kernel
from ..lab.kernel import KernelChoice, recorded_label
from ..probe.lab import ProbeSite
from .base import Target


@dataclass(frozen=True)
class KernelSlot:
    """A lab kernel as a place cells run (target.LabChoice): vCPUs the kernel and this host can give."""

    choice: KernelChoice

    @property
    def label(self) -> str:
        return self.choice.label

    @property
    def virtual(self) -> bool:
        return self.choice.spec.time_travel_ok

    def cpus_problem(self, n: int) -> str:
        why = self.choice.cpus_problem(n)
        if not why and n > cpus.available():
            why = f"{n} vCPUs need {n} host CPUs, this host has {cpus.available()}"
        return why


@dataclass
class LabTarget(Target):
    """The UML lab. `kernels`: those of a request that names none (default: the default kernel)."""

    kernels: tuple[str, ...] = field(default=())

    @classmethod
    def url(cls, text: str, options: Any) -> str:
        return ""

    @classmethod
    def open(cls, request, options: Any, store, executor) -> "LabTarget":
        """A run's lab: an existing run is finished on the kernels its manifest records."""
        kernels, note = identity.run_kernels(request.kernels, identity.recorded_kernels(store))
        return cls(executor=executor, notes=[note] if note else [], kernels=kernels)

    def check(self, request, destroy_data_on: tuple[str, ...]) -> None:
        for slot in self.choices(request):  # --cpus for every cell: refused where it cannot run
            slot.choice.check_cpus(request.cpus)
        cpus.check_count(request.cpus)

    def choices(self, request) -> list[KernelSlot]:
        return [KernelSlot(kernel.choose(k))
                for k in kernel.labels(request.kernels or self.kernels or (kernel.DEFAULT_KERNEL,))]

    def check_virtual(self, request, choices) -> None:
        for slot in choices:
            slot.choice.spec.time_travel_flavour()  # one line if a kernel has no virtual-time flavour
        if request.cpus > 1:
            raise FlashbedError(f"--clock virtual runs one vCPU (the time-travel kernel has no SMP): drop --cpus "
                                f"{request.cpus} or use --clock real")

    def load_devices(self, specs: tuple[str, ...], destroy_data_on: tuple[str, ...]) -> dict[str, Device]:
        return load_devices(specs, destroy_data_on)

    def check_plan(self, plan) -> None:
        from ..executors import DaskExecutor
        _check_fuse(plan.devices.values())
        if isinstance(self.executor, DaskExecutor) and any(d.backend == "real" for d in plan.devices.values()):
            raise FlashbedError("a real device is attached to this machine, not to Dask workers: run it with the "
                                "local executor")
        # a variant's own options made and mounted once on each kernel: a value mkfs or the kernel
        # refuses is one line now, not a failed cell later
        from .. import optiontrial
        for t in optiontrial.check({c.variant.spec: c.variant for c in plan.cells}.values(), plan.kernels):
            self.notes += [f"{t.spec} on lab kernel {t.kernel}: {w}" for w in t.warnings]
        for v in {c.variant.spec: c.variant for c in plan.cells}.values():
            self.notes += [f"{v.spec}: {o} can lose acknowledged data by design ({why})" for o, why in v.risks]

    def labs(self, plan, store, say: Callable[[str], None]):
        from ..lab.labs import UmlLabs
        # the builds: False the kernel as configured, True its time-travel build (virtual time, or a
        # real-time cell's flavour: time travel off)
        flavours = sorted({c.clock.time_travel or c.flavour == kernel.TIME_TRAVEL for c in plan.cells})
        infos = [kernel.ensure_kernel(k, time_travel=tt) for k in plan.kernels for tt in flavours]
        for mounting in {c.variant.base.mounting for c in plan.cells}:
            mounting.ensure()  # YAFFS2's daemon: built at setup; else now, once
        for line in _build_changes(store, infos):
            say(line)
        return UmlLabs(*infos)

    def probe_device(self, spec: str, destroy_data_on: tuple[str, ...]) -> Device:
        if destroy_data_on and not realdev.names_device(spec):
            raise FlashbedError(f"--destroy-data-on applies to a real device, and {spec} is a preset")
        (device,) = self.load_devices((spec,), destroy_data_on).values()  # refused as a run refuses it
        _check_fuse([device])
        return device

    def probe_site(self, device: Device, clock: Clock) -> ProbeSite:
        from ..lab.labs import UmlLab
        from ..probe.lab import lab_latency, tool_versions
        tools = tool_versions()
        kern = kernel.lab_kernel(time_travel=clock.time_travel)
        # the lab's own time per request, measured on a device that takes none
        return ProbeSite(lab=UmlLab(kern), flashbench="flashbench", tools=tools, clock=clock,
                         lab_latency=partial(lab_latency, kern, clock=clock))


def load_devices(specs: tuple[str, ...], destroy_data_on: tuple[str, ...] = ()) -> dict[str, Device]:
    """Every device of the request by label; real devices checked (one line per refusal), their
    data destroyed only where `destroy_data_on` names their node."""
    nodes = [realdev.node_of(s) for s in specs if realdev.names_device(s)]
    for path in destroy_data_on:  # a typo must not pass for permission
        if not any(realdev.same_node(path, n) for n in nodes):
            raise FlashbedError(f"--destroy-data-on {path} names no real device of this run ("
                                f"{', '.join(nodes) or 'it has none'}): repeat the --device path exactly")
    devices = [realdev.load(s, destroy_data_on) if realdev.names_device(s) else presets.load_spec(s) for s in specs]
    out: dict[str, Device] = {}
    for spec, d in zip(specs, devices):
        same = out.get(d.label)
        if same is not None and (same.path, same.capacity) != (d.path, d.capacity):
            first = specs[list(out).index(d.label)]
            raise FlashbedError(f"--device {first} and --device {spec} are both labelled {d.label}, so their cells "
                                f"would mix: rename one preset file")
        out[d.label] = d
    return out


def _build_changes(store, infos) -> list[str]:
    """One line per kernel of an existing run whose build (source, config or patches) is not
    the one its cells so far ran on: the rest of the run uses this flashbed's build."""
    if not store.exists():
        return []
    man = store.manifest()
    before = {(recorded_label(p), bool(p.get("flavour"))): p
              for p in (man.get("kernels") or {"": man.get("kernel") or {}}).values()}
    out = []
    for info in infos:
        old = before.get((info.label, info.time_travel)) or {}
        if old.get("key") and old["key"] != info.key:
            out.append(f"lab kernel {info.label}: this run's cells so far ran on build {old['key']} (patches "
                       f"{', '.join(p[:4] for p in old.get('patches') or []) or 'none'}); the rest run on build "
                       f"{info.key} (patches {', '.join(p[:4] for p in info.patches) or 'none'})")
    return out


def _check_fuse(devices) -> None:
    """No /dev/fuse or no right to mount it: one line before anything runs, not a failed cell each
    (the emulator serves its devices through FUSE on this machine)."""
    if any(d.backend == "emulator" for d in devices):
        from ..devices.emulator import check_fuse
        check_fuse()
