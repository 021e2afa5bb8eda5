"""`flashbed bench cpu`: what each guest CPU cost profile does in virtual time (issue 17).

Per profile (lab/cpuprofiles.toml), in the time-travel lab kernel: a null-syscall
loop (N getppid calls, lmbench's null call) timed by the guest, its guest time per
call beside the profile's syscall cost; and fio's 4 KiB QD1 random read on an
emulated device in virtual time, with the device's busy share and the CPU's share
of the job's guest time. Virtual time is deterministic: one run per profile says
all a run can say (a second run is a check, not a sample).
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..clock import Clock
from ..devices import presets
from ..devices.session import open_session
from ..errors import FlashbedError
from ..lab import cpuprofile
from ..lab.boundary import BootSpec, CpuCosts, Step
from ..lab.kernel import ensure_kernel
from ..lab.labs import UmlLab
from ..lab.uml import boot
from ..probe.lab import run_fio
from .clock import jobs

DEFAULT_PRESET = "emmc-8g@512M"
# N getppid calls between two reads of the guest's clock and CPU charge, as JSON
NULL_LOOP = ("python3 -S -c 'import json,os,time\n"
             "def c():\n"
             "    return dict(l.split() for l in open(\"/proc/flashbed_cpu\"))\n"
             "n={n}; a=c(); t=time.monotonic_ns()\n"
             "for _ in range(n): os.getppid()\n"
             "t=time.monotonic_ns()-t; b=c()\n"
             "print(json.dumps({{\"n\": n, \"guest_ns\": t, \"syscalls\": int(b[\"syscalls\"])-int(a[\"syscalls\"]), "
             "\"faults\": int(b[\"faults\"])-int(a[\"faults\"]), \"switches\": int(b[\"switches\"])-int(a[\"switches\"]), "
             "\"charged_ns\": int(b[\"charged_ns\"])-int(a[\"charged_ns\"])}}))'")


@dataclass
class NullLoop:
    n: int
    guest_ns: int  # guest time of the loop
    syscalls: int
    faults: int
    switches: int
    charged_ns: int

    @property
    def per_call_ns(self) -> float:
        return self.guest_ns / self.n


def null_loop(cpu: CpuCosts | None, work: Path, n: int = 100_000) -> NullLoop:
    """N getppid calls in one virtual-time lab boot with `cpu`'s costs, as the guest timed them."""
    kernel = ensure_kernel(time_travel=True)
    work.mkdir(parents=True, exist_ok=True)
    res = boot(BootSpec(run_dir=work, steps=(Step("null", NULL_LOOP.format(n=n), timeout=600),), cpu=cpu,
                        timeout=900), kernel)
    step = res.step("null")
    if not res.ok or step is None or step.rc != 0:
        raise FlashbedError(f"null-syscall loop failed: {res.status} {res.error} ({res.console_log})")
    return NullLoop(**json.loads(step.stdout.strip().splitlines()[-1]))


@dataclass
class RandRead:
    iops: float
    busy_pct: float  # the device's busy time over the job's guest time
    cpu_pct: float  # the guest time charged to the CPU profile over the job's guest time


def randread(preset: str, cpu: CpuCosts | None, work: Path, runtime: float) -> RandRead:
    """fio 4 KiB QD1 random read on a fresh `preset` in virtual time with `cpu`'s costs."""
    dev = presets.load_spec(preset)
    kernel = ensure_kernel(time_travel=True)
    js = {"randread": jobs(dev.capacity, runtime)["randread"]}
    guest: dict[str, dict[str, float]] = {}
    with open_session(dev, work / "scratch", clock=Clock.VIRTUAL) as session:
        figs = run_fio(session, UmlLab(kernel), work, js, cpu=cpu, guest=guest)
    g = guest.get("randread") or {}
    secs = g.get("guest_seconds") or float("nan")
    return RandRead(figs["randread"]["iops"], 100 * g.get("busy_seconds", float("nan")) / secs,
                    100 * g.get("cpu_seconds", float("nan")) / secs)


def bench(preset: str = DEFAULT_PRESET, profiles: tuple[str, ...] = (), runtime: float = 5.0,
          calls: int = 100_000, stream=sys.stdout) -> dict[str, tuple[NullLoop, RandRead]]:
    names = profiles or tuple(cpuprofile.names())
    out: dict[str, tuple[NullLoop, RandRead]] = {}
    with tempfile.TemporaryDirectory(prefix="flashbed-bench-cpu-") as tmp:
        for name in names:
            prof = cpuprofile.get(name)
            loop = null_loop(prof.costs, Path(tmp) / f"null-{name}", calls)
            rr = randread(preset, prof.costs, Path(tmp) / f"rr-{name}", runtime)
            out[name] = (loop, rr)
            print(f"{name}: null call {loop.per_call_ns:.0f} ns, randread {rr.iops:.0f} IO/s", file=sys.stderr,
                  flush=True)
    print(f"bench cpu: virtual time, {calls} getppid calls; fio 4 KiB QD1 random read on {preset} ({runtime:g} s)",
          file=stream)
    print(f"{'profile':11} {'syscall ns':>10} {'null call ns':>12} {'faults':>6} {'switches':>8} "
          f"{'randread IO/s':>13} {'device busy':>11} {'CPU share':>9}", file=stream)
    for name, (loop, rr) in out.items():
        c = cpuprofile.get(name).costs
        print(f"{name:11} {c.syscall_ns:10d} {loop.per_call_ns:12.1f} {loop.faults:6d} {loop.switches:8d} "
              f"{rr.iops:13.1f} {rr.busy_pct:10.1f}% {rr.cpu_pct:8.1f}%", file=stream)
    print("null call ns: the loop's guest time per getppid (guest clock reads cost 256 ns each in time travel); "
          "device busy, CPU share: of the fio job's guest time (between the host calls around it)", file=stream)
    return out
