"""`flashbed lab exec`: shell commands in one lab boot, their output printed.

With --device the lab gets a device served as a run serves it (the emulator
through FUSE, a plain file, or nandsim); the emulator's request counts and
request-size histogram are printed at the end. --clock virtual boots the
time-travel flavour of the kernel with the emulator in virtual time.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import FlashbedError
from .clock import Clock, effective
from .clock import pace as clock_pace
from .kernel import ensure_kernel
from .target import BlockDevice, BootSpec, CpuCosts, Step
from .uml import boot


def run(cmds: list[str], kernel: str, cpus: int = 1, device: str | None = None, disks: list[Path] | None = None,
        timeout: float = 300, pace: str = "real", out=sys.stdout, err=sys.stderr,
        clock: Clock = Clock.REAL, cpu: CpuCosts | None = None) -> int:
    """`cpu`: in virtual time, the guest CPU's cost per event (ignored in real time)."""
    if device is not None:
        from ..devices import presets
        backend = presets.load_spec(device).backend
        if backend == "emulator":
            from ..devices.emulator import check_fuse
            check_fuse()
        clock, note = effective(clock, backend)
        if note:
            print(f"note: {note}", file=err)
    kern = ensure_kernel(kernel, time_travel=clock.time_travel)
    cpu = cpu if clock.time_travel else None
    pace = clock_pace(clock, pace)
    steps = tuple(Step(f"s{i}", c, timeout=timeout, may_fail=True) for i, c in enumerate(cmds))
    extra = tuple(BlockDevice(d) for d in disks or ())
    with tempfile.TemporaryDirectory(prefix="flashbed-exec-") as tmp:
        run_dir = Path(tmp)
        budget = timeout * len(steps) + 60
        if device is None:
            r = boot(BootSpec(run_dir=run_dir, steps=steps, disks=extra, timeout=budget, cpus=cpus, cpu=cpu), kern)
            stats = None
        else:
            r, stats = _with_device(device, run_dir, steps, extra, budget, cpus, pace, kern, cpu)
        for s in r.steps:
            # s.seconds: guest time (device time in virtual time)
            # and in virtual time the part of it charged to the CPU profile
            cpu_s = f", cpu {s.cpu_seconds:.6f}s" if s.cpu_seconds is not None else ""
            print(f"$ {s.cmd}  [{s.status}, rc {s.rc}, {s.seconds:.6f}s{cpu_s}]", file=out)
            out.write(s.stdout)
            err.write(s.stderr)
        if stats is not None:
            print(f"device {device}: " + json.dumps(stats), file=err)
        print(f"clock {clock.value}: lab wall-clock {r.total_seconds:.2f}s", file=err)
        if not r.ok:
            print(Path(r.console_log).read_text()[-4000:], file=err)
            raise FlashbedError(f"lab: {r.status}: {r.error}")
    return 0


def _with_device(spec: str, run_dir: Path, steps: tuple[Step, ...], extra: tuple[BlockDevice, ...], budget: float,
                 cpus: int, pace: str, kern, cpu: CpuCosts | None = None) -> tuple[Any, dict | None]:
    from ..devices import presets
    from ..devices.session import open_session
    dev = presets.load_spec(spec)
    with open_session(dev, run_dir / "scratch", pace=pace) as session:
        r = boot(BootSpec(run_dir=run_dir / "lab", steps=steps, disks=session.disks() + extra,
                          nandsim=session.nandsim(), mem_mb=session.mem_mb(), timeout=budget, cpus=cpus,
                          cpu=cpu),
                 kern)
        return r, request_summary(session.emu.stats()) if session.emu is not None else None


def request_summary(stats: dict) -> dict:
    """Host request counts and sizes from an emulator stats reply."""
    host = stats.get("host", {})
    sizes = stats.get("request_sizes", {})
    return {"reads": host.get("reads"), "writes": host.get("writes"), "flushes": host.get("flushes"),
            "discards": host.get("discards"), "request_sizes": sizes}
