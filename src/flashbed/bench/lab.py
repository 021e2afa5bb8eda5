"""`flashbed bench lab`: the lab kernels side by side, so what the lab (rather
than the device) decides is visible.

  flashbed bench lab [--kernel 6.12 --kernel 7.3 ...] [--runs 3]
                     [--parts lab,device,powercut,starts] [--cycles 10]

Per kernel, interleaved run by run so drift hits all alike (medians printed):
- lab: boot to agent-ready; guest syscall cost (dd of 1-byte blocks: a read
  and a write per byte) beside the host's; a 4 KiB read loop over a cached
  file (tmpfs); `python3 -S -c pass` start-up; a small program's start (dd of one
  block, as a per-record check starts one) in the lab and on the host;
- device, on emmc-8g (paced in real time): fio 1 MiB sequential direct write
  and read of the raw device beside the preset's published rates; the
  requests the emulator saw for a 128 MiB sequential write (direct, and
  buffered through the page cache) with their sizes; a 4 KiB buffered
  sequential read of a 128 MiB file through ext4, cold cache;
- powercut: cut/recover/verify cycles per hour on one core (ext4 on
  emmc-8g@64M, flashbed.bench.powercut);
- starts (not in the default parts): where a program's start goes in the lab, one
  boot per kernel and run: a shell's fork (`x=$(:)`), a shell's fork and exec of a
  dd of one block (`x=$(dd ...)`: one record of a per-record check), the page
  faults of one dd start and a first-touch page fault; each with the kernel's
  fault-around window (the file pages one fault maps: debugfs fault_around_bytes)
  at 4 KiB (none), 64 KiB (Linux's default) and 2 MiB (its largest), the three
  interleaved within the boot.
Goals from issue 10 are printed beside the figures.
"""

from __future__ import annotations

import io
import json
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .. import fio
from ..devices import presets
from ..devices.session import open_session
from ..errors import FlashbedError
from ..lab import kernel as kernels
from ..lab.boundary import BootResult, BootSpec, Step
from ..lab.kernel import KernelInfo
from ..lab.labexec import request_summary
from ..lab.uml import boot
from ..status import StepStatus

PARTS = ("lab", "device", "powercut", "starts")
FAULT_AROUND = (4096, 65536, 2 << 20)  # bytes: none, Linux's default, the most it takes (PTRS_PER_PTE pages)
DEVICE = "emmc-8g@512M"
POWERCUT_DEVICE = "emmc-8g@64M"
SYSCALL_BYTES = 200_000  # dd bs=1: one read and one write per byte
MiB = 1 << 20
SIZE = 128 * MiB
MNT = "/mnt"


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    better: str  # "low" | "high"
    goal: Callable[[dict[str, Any]], str] | None = None


def _published(key: str) -> str:
    """The preset's published figure (a twin's [published] table), or '' when it names none."""
    v = presets.load_spec(DEVICE).published.get(key)
    return f"published {v:g}" if v else ""


def _device_read_goal(medians: dict[str, dict[str, float]]) -> str:
    """Within 20 % of the device's own sequential read, measured in the same run (the 1 MiB
    direct read): what the device gives, whatever its preset publishes."""
    own = [m["direct_read_mb_s"] for m in medians.values() if m.get("direct_read_mb_s")]
    return f">= {0.8 * min(own):.1f} (the device's 1 MiB read -20 %)" if own else ""


METRICS = (
    Metric("boot_s", "boot to agent-ready", "s", "low"),
    Metric("syscall_us", "guest syscall (dd bs=1)", "µs", "low", lambda c: "<= 10 µs"),
    Metric("host_syscall_us", "host syscall (same dd)", "µs", "low"),
    Metric("cached_read_mb_s", "4 KiB cached read (tmpfs)", "MB/s", "high"),
    Metric("python_ms", "python3 -S -c pass", "ms", "low"),
    Metric("dd_start_ms", "a program's start (dd of one block)", "ms", "low"),
    Metric("host_dd_start_ms", "host: the same dd's start", "ms", "low"),
    Metric("direct_write_mb_s", "emmc-8g 1 MiB direct write", "MB/s", "high",
           lambda c: _published("seq_write_mb_s")),
    Metric("direct_read_mb_s", "emmc-8g 1 MiB direct read", "MB/s", "high",
           lambda c: _published("seq_read_mb_s")),
    Metric("ext4_read_4k_mb_s", "emmc-8g ext4 4 KiB buffered read", "MB/s", "high",
           _device_read_goal),
    Metric("write_requests_buffered", "requests per 128 MiB write (buffered)", "", "low", lambda c: "<= 1000"),
    Metric("write_requests_direct", "requests per 128 MiB write (1 MiB direct)", "", "low"),
    Metric("powercut_per_hour", "power-cut cycles per hour per core", "/h", "high", lambda c: ">= 1500"),
    *(m for fa in FAULT_AROUND for m in (
        Metric(f"fork_ms_fa{fa >> 10}k", f"shell fork x=$(:), fault-around {fa >> 10} KiB", "ms", "low"),
        Metric(f"record_ms_fa{fa >> 10}k", f"shell x=$(dd ...), fault-around {fa >> 10} KiB", "ms", "low"),
        Metric(f"dd_start_ms_fa{fa >> 10}k", f"dd start, fault-around {fa >> 10} KiB", "ms", "low"),
        Metric(f"dd_faults_fa{fa >> 10}k", f"page faults per dd, fault-around {fa >> 10} KiB", "", "low"))),
    Metric("fault_us", "a first-touch page fault (anonymous)", "µs", "low"),
)


def bench(kernel_names: list[str], runs: int, parts: list[str], cycles: int, out=sys.stdout) -> dict[str, dict]:
    for p in parts:
        if p not in PARTS:
            raise FlashbedError(f"unknown bench lab part '{p}': choose from {', '.join(PARTS)}")
    if runs < 1:
        raise FlashbedError("--runs must be at least 1")
    if cycles < 1:
        raise FlashbedError("--cycles must be at least 1")
    choices = [kernels.choose(k) for k in kernel_names]  # every name checked before any build
    infos = {c.label: kernels.ensure_kernel(c.label) for c in choices}
    samples: dict[str, dict[str, list[float]]] = {k: {} for k in infos}
    examples: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="flashbed-bench-lab-") as tmp:
        for run in range(runs):
            for label, info in infos.items():  # interleaved: drift hits every kernel alike
                work = Path(tmp) / f"{label.replace(':', '-')}-{run}"
                figs: dict[str, float] = {}
                if "lab" in parts:
                    figs.update(_lab_figures(info, work / "lab"))
                    figs["host_syscall_us"] = host_syscall_us()
                    figs["host_dd_start_ms"] = host_dd_start_ms()
                if "starts" in parts:
                    figs.update(_start_figures(info, work / "starts"))
                if "device" in parts:
                    dev_figs, sizes = _device_figures(info, work / "device")
                    figs.update(dev_figs)
                    examples[label] = sizes
                for k, v in figs.items():
                    samples[label].setdefault(k, []).append(v)
                print(f"  run {run + 1}/{runs} {label}: " + ", ".join(f"{k} {v:.3g}" for k, v in figs.items()),
                      file=sys.stderr, flush=True)
        if "powercut" in parts:
            from . import powercut
            for label, info in infos.items():
                rows = powercut.bench(POWERCUT_DEVICE, ["ext4"], cycles, "none", "async", 1, out=io.StringIO(),
                                      kernel=info)
                samples[label]["powercut_per_hour"] = [rows[0]["per_hour"]]
                print(f"  power cuts {label}: {rows[0]['per_hour']:.0f} cycles/h ({rows[0]['classes']})",
                      file=sys.stderr, flush=True)
    medians = {label: {k: statistics.median(v) for k, v in s.items()} for label, s in samples.items()}
    _print_table(infos, medians, samples, runs, out)
    for label, sizes in examples.items():
        print(f"emulator request sizes, {label} (last run): " + json.dumps(sizes), file=out)
    print(json.dumps({"bench": "lab", "runs": runs, "kernels": {
        label: {"kernel": infos[label].provenance(), "medians": medians[label], "samples": samples[label]}
        for label in infos}}), file=out)
    return medians


def _print_table(infos: dict[str, KernelInfo], medians: dict[str, dict[str, float]],
                 samples: dict[str, dict[str, list[float]]], runs: int, out) -> None:
    labels = list(infos)
    head = f"{'figure (median)':44}" + "".join(f"{l:>14}" for l in labels) + "  goal"
    print(head, file=out)
    print(f"{'kernel release / boot mode':44}" + "".join(f"{infos[l].release + ' ' + infos[l].boot_mode[:7]:>14}"
                                                          for l in labels), file=out)
    for m in METRICS:
        if not any(m.key in medians[l] for l in labels):
            continue
        cells = "".join(f"{_fmt(medians[l].get(m.key)):>14}" for l in labels)
        goal = m.goal(medians) if m.goal else ""
        name = f"{m.label} ({m.unit})" if m.unit else m.label
        print(f"{name:44}{cells}  {goal}", file=out)
    cut = any("powercut_per_hour" in s for s in samples.values())
    print(f"medians of {runs} run(s) per kernel, interleaved" + ("; power cuts: one cell of the given cycles "
          "per kernel" if cut else ""), file=out)


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


# --- the lab's own speed ----------------------------------------------------------------

_DD_COPIED = re.compile(r"^(\d+) bytes .*copied, ([0-9.e+-]+) s", re.M)
# median of ten starts of `python3 -S -c pass`, in ms, timed without a shell in between
_PY_START = ("import subprocess, statistics, time\n"
             "t = []\n"
             "for _ in range(10):\n"
             "    s = time.monotonic(); subprocess.run(['/usr/bin/python3', '-S', '-c', 'pass'], check=True)\n"
             "    t.append(time.monotonic() - s)\n"
             "print(statistics.median(t) * 1000)\n")


# median of fifty starts of a small program (dd of one 512-byte block: what a check that reads each
# record with its own dd starts per record), in ms, timed without a shell in between
DD_ONE = ["/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=512", "count=1", "status=none"]
_DD_START = ("import subprocess, statistics, time\n"
             "t = []\n"
             "for _ in range(50):\n"
             f"    s = time.monotonic(); subprocess.run({DD_ONE!r}, check=True)\n"
             "    t.append(time.monotonic() - s)\n"
             "print(statistics.median(t) * 1000)\n")


def host_dd_start_ms() -> float:
    out = subprocess.run([sys.executable, "-S", "-c", _DD_START], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def dd_seconds(stderr: str) -> tuple[int, float]:
    """Bytes and seconds from dd's summary line."""
    m = _DD_COPIED.search(stderr)
    if not m:
        raise FlashbedError(f"no dd summary in: {stderr.strip()[-200:]}")
    return int(m.group(1)), float(m.group(2))


SYSCALL_CMD = f"dd if=/dev/zero of=/dev/null bs=1 count={SYSCALL_BYTES}"


def host_syscall_us() -> float:
    r = subprocess.run(SYSCALL_CMD.split(), capture_output=True, text=True, check=True)
    _, secs = dd_seconds(r.stderr)
    return secs / (2 * SYSCALL_BYTES) * 1e6


def _lab_figures(info: KernelInfo, work: Path) -> dict[str, float]:
    steps = (
        Step("syscall", SYSCALL_CMD, timeout=120),
        Step("fill", "dd if=/dev/zero of=/tmp/cached bs=1M count=64 status=none", timeout=60),
        Step("cached-read", "dd if=/tmp/cached of=/dev/null bs=4k", timeout=120),
        Step("python", f"/usr/bin/python3 -S -c \"{_PY_START}\"", timeout=120),
        Step("dd-start", f"/usr/bin/python3 -S -c \"{_DD_START}\"", timeout=120),
    )
    r = _boot_ok(BootSpec(run_dir=work, steps=steps, timeout=600), info)
    _, sys_s = dd_seconds(_out(r, "syscall").stderr)
    nbytes, read_s = dd_seconds(_out(r, "cached-read").stderr)
    assert r.boot_seconds is not None
    return {"boot_s": r.boot_seconds, "syscall_us": sys_s / (2 * SYSCALL_BYTES) * 1e6,
            "cached_read_mb_s": nbytes / read_s / 1e6, "python_ms": float(_out(r, "python").stdout.strip()),
            "dd_start_ms": float(_out(r, "dd-start").stdout.strip())}


# --- where a program's start goes in the lab ----------------------------------------------

# run in the guest (standard library only): each fault-around window in turn, ROUNDS times over, so drift
# hits each alike; prints one JSON object of medians
_STARTS = """\
import json, mmap, resource, statistics, subprocess, time
DD, WINDOWS, ROUNDS = {dd!r}, {windows!r}, {rounds}
FA = "/sys/kernel/debug/fault_around_bytes"


def faults():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_minflt + r.ru_majflt


def dd_starts(n=20):
    t, f0 = [], faults()
    for _ in range(n):
        s = time.monotonic()
        subprocess.run(DD, check=True)
        t.append(time.monotonic() - s)
    return statistics.median(t) * 1000, (faults() - f0) / n


def shell_ms(body, n=40):
    loop = "i=0; while [ $i -lt %d ]; do %s; i=$((i + 1)); done" % (n, body)
    s = time.monotonic()
    subprocess.run(["/bin/sh", "-c", loop], check=True)
    return (time.monotonic() - s) * 1000 / n


def fault_us(pages=2048):
    m = mmap.mmap(-1, pages * 4096)
    took = []
    for _ in range(2):  # the first pass faults each page in, the second costs the loop alone
        s = time.monotonic()
        for i in range(0, pages * 4096, 4096):
            m[i] = 1
        took.append(time.monotonic() - s)
    return (took[0] - took[1]) * 1e6 / pages


with open(FA) as f:
    was = f.read().strip()
got = {{}}
try:
    for _ in range(ROUNDS):
        for w in WINDOWS:
            with open(FA, "w") as f:
                f.write(str(w))
            k = "fa%dk" % (w >> 10)
            ms, nf = dd_starts()
            for key, v in (("dd_start_ms", ms), ("dd_faults", nf), ("fork_ms", shell_ms("x=$(:)")),
                           ("record_ms", shell_ms("x=$(" + " ".join(DD) + ")"))):
                got.setdefault(key + "_" + k, []).append(v)
        got.setdefault("fault_us", []).append(fault_us())
finally:
    with open(FA, "w") as f:
        f.write(was)
print(json.dumps({{k: statistics.median(v) for k, v in got.items()}}))
"""
START_ROUNDS = 5


def _start_figures(info: KernelInfo, work: Path) -> dict[str, float]:
    work.mkdir(parents=True, exist_ok=True)
    (work / "starts.py").write_text(_STARTS.format(dd=DD_ONE, windows=FAULT_AROUND, rounds=START_ROUNDS))
    r = _boot_ok(BootSpec(run_dir=work, steps=(Step("starts", "/usr/bin/python3 -S starts.py", timeout=900),),
                          timeout=1200), info)
    return {k: float(v) for k, v in json.loads(_out(r, "starts").stdout.strip().splitlines()[-1]).items()}


# --- the device through the lab ---------------------------------------------------------

def _device_figures(info: KernelInfo, work: Path) -> tuple[dict[str, float], dict]:
    work.mkdir(parents=True, exist_ok=True)
    raw = {"ioengine": "libaio", "filename": "/dev/ubda", "iodepth": 1, "size": SIZE}
    fio.job_file(work / "dwrite.fio", {"dwrite": {"rw": "write", "bs": "1M", "direct": 1}}, raw)
    fio.job_file(work / "dread.fio", {"dread": {"rw": "read", "bs": "1M", "direct": 1}}, raw)
    fio.job_file(work / "ext4read.fio", {"ext4read": {"rw": "read", "bs": "4k", "direct": 0}},
                 {"ioengine": "libaio", "filename": f"{MNT}/f", "iodepth": 1, "size": SIZE})
    run = "fio --output-format=json --output={0}.json {0}.fio"
    steps = (
        Step("reset-0", host="reset-stats"),
        Step("dwrite", run.format("dwrite"), timeout=300),
        Step("stats-direct", host="stats"),
        Step("dread", run.format("dread"), timeout=300),
        Step("reset-1", host="reset-stats"),
        Step("bwrite", f"dd if=/dev/zero of=/dev/ubda bs=1M count={SIZE // MiB} seek={SIZE // MiB} "
                       "conv=fsync status=none", timeout=300),
        Step("stats-buffered", host="stats"),
        Step("mkfs", "mkfs.ext4 -F -q /dev/ubda", timeout=300),
        Step("mount", f"mount -t ext4 /dev/ubda {MNT}", timeout=60),
        Step("file", f"dd if=/dev/zero of={MNT}/f bs=1M count={SIZE // MiB} conv=fsync status=none", timeout=300),
        Step("remount", f"umount {MNT} && mount -t ext4 /dev/ubda {MNT} && echo 3 > /proc/sys/vm/drop_caches",
             timeout=120),
        Step("ext4read", run.format("ext4read"), timeout=300),
        Step("umount", f"umount {MNT}", timeout=60),
    )
    dev = presets.load_spec(DEVICE)
    with open_session(dev, work / "scratch", pace="real") as session:
        def host(call: str, args: dict) -> Any:
            if call == "reset-stats":
                return session.reset_stats()
            if call == "stats":
                return session.emu.stats() if session.emu is not None else None
            raise FlashbedError(f"unknown host call '{call}'")

        r = _boot_ok(BootSpec(run_dir=work, steps=steps, disks=session.disks(), timeout=1800), info, host)
    direct = request_summary(json.loads(_out(r, "stats-direct").stdout))
    buffered = request_summary(json.loads(_out(r, "stats-buffered").stdout))
    figs = {name: _fio_mb_s(work, name) for name in ("dwrite", "dread", "ext4read")}
    return ({"direct_write_mb_s": figs["dwrite"], "direct_read_mb_s": figs["dread"],
             "ext4_read_4k_mb_s": figs["ext4read"], "write_requests_direct": float(direct["writes"]),
             "write_requests_buffered": float(buffered["writes"])},
            {"buffered_write": buffered["request_sizes"].get("write", {}),
             "direct_write": direct["request_sizes"].get("write", {})})


def _fio_mb_s(work: Path, name: str) -> float:
    data = fio.load(work / f"{name}.json")
    if not data or not data.get("jobs"):
        raise FlashbedError(f"bench lab: fio gave no result for {name} (see {work})")
    return fio.job_figures(data["jobs"][0])["bandwidth"]


def _boot_ok(spec: BootSpec, info: KernelInfo, host=None) -> BootResult:
    r = boot(spec, info, host=host)
    failed = next((s for s in r.steps if s.status is not StepStatus.OK), None)
    if not r.ok or failed:
        what = f"step '{failed.name}': {(failed.stderr or failed.stdout).strip()[-200:]}" if failed else r.error
        raise FlashbedError(f"bench lab on {info.name} ({info.boot_mode}) failed: {r.status}, {what} "
                            f"(console: {r.console_log})")
    return r


def _out(r: BootResult, name: str):
    s = r.step(name)
    assert s is not None
    return s
