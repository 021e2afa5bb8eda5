"""`flashbed lab exec`: shell commands in one lab boot, their output printed.

With --device the lab gets a device served as a run serves it (the emulator
through FUSE, a plain file, or nandsim); the emulator's request counts and
request-size histogram are printed at the end. --clock virtual boots the
time-travel flavour of the kernel with the emulator in virtual time.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from .. import writeguard
from ..clock import Clock, Pace, effective
from ..errors import FlashbedError
from .boundary import BlockDevice, BootSpec, CpuCosts, Step
from .kernel import lab_kernel
from .uml import boot


def check_disks(disks: list[Path], destroy: tuple[str, ...]) -> list[writeguard.Allowed]:
    """--disk, each decided by writeguard before anything boots: a block device only when
    --destroy-data-on names it and it passes the real-device checks; a file is written in place
    only when --destroy-data-on names it (else the lab's writes go to an overlay)."""
    other = writeguard.unused_destroy(destroy, [str(d) for d in disks])
    if other is not None:  # a typo must not pass for permission
        raise FlashbedError(f"--destroy-data-on {other} names no --disk: repeat the --disk path exactly")
    allowed = [writeguard.check(d, "--disk", writeguard.Output.DISK, devices=True, destroy=destroy,
                                noun="the lab's writes") for d in disks]
    seen: dict[tuple[int, int], str] = {}
    for a in allowed:  # one file as two disks: two writers of one image, each unaware of the other
        try:
            st = os.stat(a.path)
        except OSError:
            continue  # writeguard said what it allows of a path that is not there yet
        ident = (st.st_dev, st.st_ino) if not a.device else (st.st_rdev, -1)
        if ident in seen:
            raise FlashbedError(f"--disk {a.given} and --disk {seen[ident]} are the same "
                                f"{'device' if a.device else 'file'}: give it once (the lab would see one image "
                                f"as two disks)")
        seen[ident] = str(a.given)
    return allowed


# what `lab exec` exits with when a step timed out (as timeout(1) does)
TIMED_OUT = 124


def exit_code(cmds: list[str], steps) -> tuple[int, str]:
    """`lab exec`'s exit code from its steps, as a shell script's with `set -e` would be: the first
    step that did not succeed gives its own exit code (124 when it ran past --timeout, 1 when it
    never ran); 0 when every step ran and exited 0. With the line that says which step it was."""
    by_name = {s.name: s for s in steps}
    for i, cmd in enumerate(cmds):
        s = by_name.get(f"s{i}")
        if s is None:
            return 1, f"step {i + 1} ({cmd!r}) did not run"
        if s.status.is_hang:
            return TIMED_OUT, f"step {i + 1} ({cmd!r}) ran past its limit of --timeout ({s.status})"
        if not s.status.ok:
            rc = s.rc if isinstance(s.rc, int) and 0 < s.rc < 256 else 1
            return rc, f"step {i + 1} ({cmd!r}) exited {s.rc}"
    return 0, ""


@contextlib.contextmanager
def _lab_disks(allowed: list[writeguard.Allowed], run_dir: Path, err) -> Iterator[tuple[BlockDevice, ...]]:
    """The lab's disks: a device held exclusively while the lab runs (nothing mounts it meanwhile)
    and opened O_DIRECT, a file named by --destroy-data-on written in place, any other file
    behind a copy-on-write overlay in the boot's own directory."""
    held = []
    try:
        out = []
        for i, a in enumerate(allowed):
            if a.device:
                held.append(os.open(a.path, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC))
                out.append(BlockDevice(a.path, direct=True))
            elif a.in_place:
                out.append(BlockDevice(a.path))
            else:
                print(f"flashbed: --disk {a.given}: the lab's writes go to an overlay, the file stays as it is (add "
                      f"--destroy-data-on {a.given} to let the lab write it)", file=err)
                out.append(BlockDevice(a.path, overlay=run_dir / f"disk{i}.cow"))
        yield tuple(out)
    except OSError as e:
        raise FlashbedError(f"--disk: cannot hold the device exclusively: {e.strerror} (mounted or in use?)") \
            from None
    finally:
        for fd in held:
            os.close(fd)


def run(cmds: list[str], kernel: str, cpus: int = 1, device: str | None = None,
        disks: list[writeguard.Allowed] | None = None, timeout: float = 300, pace: Pace = Pace.REAL, out=sys.stdout,
        err=sys.stderr, clock: Clock = Clock.REAL, cpu: CpuCosts | None = None) -> int:
    """`disks`: as check_disks allowed them. `cpu`: in virtual time, the guest CPU's cost per
    event (ignored in real time)."""
    if device is not None:
        from ..devices import presets
        backend = presets.load_spec(device).backend
        if backend == "emulator":
            from ..devices.emulator import check_fuse
            check_fuse()
        clock, note = effective(clock, backend)
        if note:
            print(f"note: {note}", file=err)
    kern = lab_kernel(kernel, time_travel=clock.time_travel, cpus=cpus)  # SMP only for several vCPUs
    cpu = cpu if clock.time_travel else None
    steps = tuple(Step(f"s{i}", c, timeout=timeout, may_fail=True) for i, c in enumerate(cmds))
    with tempfile.TemporaryDirectory(prefix="flashbed-exec-") as tmp, \
            _lab_disks(list(disks or ()), Path(tmp), err) as extra:
        run_dir = Path(tmp)
        budget = timeout * len(steps) + 60
        if device is None:
            r = boot(BootSpec(run_dir=run_dir, steps=steps, disks=extra, timeout=budget, cpus=cpus, cpu=cpu), kern)
            stats = None
        else:
            r, stats = _with_device(device, run_dir, steps, extra, budget, cpus, Pace(pace), clock, kern, cpu)
        for s in r.steps:
            # s.seconds: guest time (device time in virtual time)
            # and in virtual time the part of it charged to the CPU profile (the time-travel build
            # reports a charge, 0, with time travel off too: not shown there)
            cpu_s = f", cpu {s.cpu_seconds:.6f}s" if s.cpu_seconds is not None and clock.time_travel else ""
            print(f"$ {s.cmd}  [{s.status}, rc {s.rc}, {s.seconds:.6f}s{cpu_s}]", file=out)
            out.write(s.stdout)
            err.write(s.stderr)
        if stats is not None:
            print(f"device {device}: " + json.dumps(stats), file=err)
        print(f"clock {clock.value}: lab wall-clock {r.total_seconds:.2f}s", file=err)
        rc, why = exit_code(cmds, r.steps)
        if not r.ok:
            print(Path(r.console_log).read_text()[-4000:], file=err)
            raise FlashbedError(f"lab: {r.status}: {r.error}" + (f" ({why})" if why else ""))
        if rc:
            print(f"flashbed: lab exec: {why}: exit {rc}", file=err)
    return rc


def _with_device(spec: str, run_dir: Path, steps: tuple[Step, ...], extra: tuple[BlockDevice, ...], budget: float,
                 cpus: int, pace: Pace, clock: Clock, kern, cpu: CpuCosts | None = None) -> tuple[Any, dict | None]:
    from ..devices import presets
    from ..devices.session import open_session
    dev = presets.load_spec(spec)
    with open_session(dev, run_dir / "scratch", pace=pace, clock=clock) as session:
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
