"""Run the probe in the lab: Debian's flashbench and fio on the lab's device, in a few
lab boots on one device session (the emulator keeps its state between them),
so the host can show progress and pick the next open-AU count to try.

Where it runs is a ProbeSite, which its target gives (targets/): the UML lab, or a board over SSH,
where flashbench and fio run natively on the board's device; there no lab sits between
them and the device, so the lab's own latency is not measured (and not taken out)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .. import fio
from ..clock import Clock
from ..devices.presets import Device
from ..devices.rates import RatePlan, figures_from, fill_job, random_job, seq_read_job
from ..devices.session import open_session
from ..errors import FlashbedError
from ..lab import cpuprofile
from ..lab.boundary import BootResult, BootSpec, CpuCosts, DeviceSession, DeviceStats, Lab, Step, session_has
from ..lab.kernel import KernelInfo
from ..lab.labs import UmlLab
from ..progress import format_duration
from ..shellwords import DEV
from ..sizes import format_size
from . import flashbench as fb

ALIGN_BLOCKSIZE = 1024  # as the flashbench README: small enough to see 4 KiB pages
ALIGN_TRIES = 32  # best of 32 per read (flashbench: 8): a loaded lab's jitter out of single reads
DEFAULT_EU = 4 << 20  # flashbench's default erase size, when -a shows none
FAT_NR = 6
MAX_OPEN_AU_NR = 8
# virtual time: requests per random job (a slow stick's one write a second is then
# hundreds of requests for the same wall-clock time, not a handful)
VIRTUAL_IOS = 1000
FB_OFFSET = 16 << 20  # flashbench -O starts 16 MiB in (past a FAT area)


@dataclass(frozen=True)
class ProbeSite:
    """Where `flashbed probe` measures a device (probe/lab.py): the lab its boots run in and the
    clock it runs, how it runs flashbench, the tools' versions, and the lab's own latency
    measured apart (None where no lab sits between fio and the device: natively on a board)."""

    lab: Lab
    flashbench: str
    tools: dict[str, str]
    clock: Clock
    lab_latency: Callable[[Path, float], dict[str, float]] | None = None
    kernel_of: str = "lab"  # whose kernel the probe runs on: the lab's, or the board's own


@dataclass
class ProbeResult:
    """Everything one probe found, with how it was obtained."""

    device: str
    capacity: int
    when: str  # UTC, ISO 8601
    kernel: str
    tools: dict[str, str]
    geometry: fb.Geometry
    open_aus: fb.OpenAus
    erase_unit_used: int  # for -O / -f / the one-AU jobs (flashbench's default if -a saw none)
    rates: dict[str, dict[str, float]]  # fio job -> figures
    fat: list[fb.RateRow]
    # the lab alone: median µs a random 4 KiB read / write spends outside the
    # device (see lab_latency); a fit and the closed loop take them out
    lab_us: dict[str, float] = field(default_factory=dict)
    # the same fio jobs as the emulator's model timed them (emulated devices)
    model: dict[str, dict[str, float]] = field(default_factory=dict)
    # the lab's clock: in virtual time no host load lengthens a request, so a job's mean is
    # the device's rate (an SLC buffer's fast median and slow folds are both the device's)
    clock: Clock = Clock.REAL
    raw: dict[str, str] = field(default_factory=dict)  # flashbench outputs, by test
    kernel_of: str = "lab"  # whose kernel `kernel` is: the lab's, or the board's own (a probe --target)

    def __post_init__(self) -> None:
        self.clock = Clock(self.clock)  # given as its word (probe.json, a test): the typed value

    @property
    def kernel_words(self) -> str:
        """'lab kernel 7.3.4', 'board kernel 6.1.0-50-arm64': a board's probe said 'lab kernel' of its own."""
        return f"{self.kernel_of} kernel {self.kernel}"

    def figures(self, spread: str = "spread") -> dict[str, float]:
        return figures_from(self.rates, spread)

    def device_figures(self, spread: str = "spread") -> dict[str, float]:
        """The four figures as the device itself delivers them, with the lab's
        own time per request (measured on a reference device) taken out of the
        random ones. From median request latencies (a loaded host lengthens
        the tail, not the median: 1 MiB / median for the sequential jobs),
        except where the device's own distribution is heavy-tailed (a log-block
        card's merges: mean over HEAVY_TAIL x median), where only the mean
        tells the rate, and in virtual time, where no host load lengthens a
        request and the mean is always the device's."""
        seq = {key: (1 << 20) / self.rates[job]["lat_p50"] if self.rates[job].get("lat_p50") else 0.0
               for key, job in (("seq_read_mb_s", "seq-read"), ("seq_write_mb_s", "seq-write"))}
        rnd = {}
        for key, job, kind in (("rand_read_4k_iops", f"randread-{spread}", "read"),
                               ("rand_write_4k_iops", f"randwrite-{spread}", "write")):
            r = self.rates[job]
            mean_us, median_us = 1e6 / r["iops"] if r.get("iops") else 0.0, r.get("lat_p50", 0.0)
            if self.clock is Clock.VIRTUAL or mean_us > HEAVY_TAIL * median_us:
                own_us = mean_us - self.lab_us.get(f"{kind}_mean", 0.0)
            else:
                own_us = median_us - self.lab_us.get(kind, 0.0)
            rnd[key] = 1e6 / own_us if own_us > 0 else float("inf")
        return seq | rnd

    def to_json(self) -> dict:
        d = asdict(self)
        d["open_aus"]["ratios"] = {str(k): v for k, v in self.open_aus.ratios.items()}
        return d


def tool_versions() -> dict[str, str]:
    """Debian package versions of the tools the guest runs (from the host's /)."""
    out = {}
    for pkg in ("flashbench", "fio"):
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True, text=True)
        out[pkg] = r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "not installed"
    if out["flashbench"] == "not installed":
        raise FlashbedError("flashbench is not installed: run `make setup` (Debian package flashbench)")
    return out


def run_fio(session: DeviceSession, lab: Lab, work: Path, jobs: dict[str, dict],
            timeout: float = 3600, model: dict[str, dict[str, float]] | None = None,
            walls: dict[str, float] | None = None, cpu: CpuCosts | None = None,
            guest: dict[str, dict[str, float]] | None = None) -> dict[str, dict[str, float]]:
    """fio jobs one after another on the raw device, in one boot of `lab` on `session`.

    With `model` (an emulated device), each job's figures as the device model
    itself timed them (no lab in them) go there too, from the emulator's
    statistics around the job: mean modelled latency per request, and bytes
    per second of the device's busy time. With `walls`, each job's wall-clock
    seconds (host side, between the host calls around it) go there. `cpu`: in
    virtual time, the guest CPU's cost per event; with `guest`, each job's guest
    seconds and the part charged to the CPU go there, with the device's busy
    seconds (`busy_seconds`)."""
    opts = {"ioengine": "libaio", "filename": DEV, "iodepth": 1, "direct": 1}
    work.mkdir(parents=True, exist_ok=True)
    steps = []
    stats: dict[str, dict] = {}

    started: dict[str, float] = {}
    at_reset: dict[str, dict] = {}

    def host(call: str, args: dict):
        if call == "reset-stats":
            started[args.get("job", "")] = time.monotonic()
            at_reset[args.get("job", "")] = args.get("guest") or {}
            return session.reset_stats() if session_has(session, DeviceStats) else None
        if walls is not None and args["job"] in started:
            walls[args["job"]] = time.monotonic() - started[args["job"]]
        emu = getattr(session, "emu", None)  # only an emulated device has the model's own figures
        stats[args["job"]] = emu.stats() if emu is not None else {}
        if guest is not None:
            g = cpuprofile.guest_cpu(at_reset.get(args["job"]), args.get("guest"))
            if stats[args["job"]].get("busy_ns") is not None:
                g["busy_seconds"] = stats[args["job"]]["busy_ns"] / 1e9
            guest[args["job"]] = g
        return {}

    for name, job in jobs.items():
        fio.job_file(work / f"{name}.fio", {name: job}, opts)
        steps += [Step(f"reset-{name}", host="reset-stats", args={"job": name}),
                  Step(name, f"fio --output-format=json --output={name}.json {name}.fio", timeout=timeout),
                  Step(f"stats-{name}", host="stats", args={"job": name})]
    _boot(session, lab, work, steps, host, cpu)
    out = {}
    for name, job in jobs.items():
        data = fio.load(work / f"{name}.json")
        if not data:
            raise FlashbedError(f"fio gave no result for {name} on {session.device.label} (see {work})")
        out[name] = fio.job_figures(data["jobs"][0])
        if model is not None and stats.get(name):
            model[name] = _modelled(stats[name], job["rw"])
    return out


def _modelled(st: dict, rw: str) -> dict[str, float]:
    """A job's rates as the emulator's model timed them."""
    kind = "write" if "write" in rw else "read"
    lat = st["latency_us"][kind]
    moved = st["host"][f"{kind}_bytes"]
    # the device's own background work (an SLC buffer folded while idle) is
    # busy time no request of the job waited for
    busy = (st["busy_ns"] - st.get("background_busy_ns", 0)) / 1e9
    return {"iops": 1e6 / lat["mean"] if lat["mean"] else 0.0,
            "bandwidth": moved / busy / 1e6 if busy else 0.0}


# The lab's own time per request is measured on a reference device: `ideal`
# with a fixed firmware time, so that its requests are paced (slept and woken)
# like a real device's; its modelled time is then taken out.
REFERENCE_US = 300
# a device's own latencies are heavy-tailed (merges, garbage collection) when
# their mean passes this many medians: then only the mean tells its rate
HEAVY_TAIL = 3.0


def lab_latency(kernel: KernelInfo, work: Path, runtime: float, clock: Clock = Clock.REAL) -> dict[str, float]:
    """The lab alone: the median (and mean) µs a random 4 KiB read and write at
    QD1 spend outside the device: a reference device's latency minus its
    modelled one."""
    from ..devices.presets import load_spec
    work.mkdir(parents=True, exist_ok=True)
    ref = work / "reference.toml"
    ref.write_text((load_spec("ideal").path.read_text()
                    .replace('name = "ideal"', 'name = "reference"')
                    .replace("host_mb_s = 0", f"host_mb_s = 0\nread_overhead_us = {REFERENCE_US}\n"
                                               f"write_overhead_us = {REFERENCE_US}")))
    dev = load_spec(f"{ref}@128M")
    plan = RatePlan(capacity=dev.capacity, erase_unit=dev.erase_block, span=dev.capacity, seq_bytes=dev.capacity,
                    runtime=runtime, ios=VIRTUAL_IOS if clock.time_travel else 0)
    model: dict[str, dict[str, float]] = {}
    with open_session(dev, work / "scratch", clock=clock) as session:
        figs = run_fio(session, UmlLab(kernel), work, {"randread": random_job(plan, "randread", "spread"),
                                               "randwrite": random_job(plan, "randwrite", "spread")}, model=model)
    out = {}
    for kind in ("read", "write"):
        modelled_us = 1e6 / model[f"rand{kind}"]["iops"]
        out[kind] = figs[f"rand{kind}"]["lat_p50"] - modelled_us
        out[f"{kind}_mean"] = 1e6 / figs[f"rand{kind}"]["iops"] - modelled_us
    return out


def _boot(session: DeviceSession, lab: Lab, work: Path, steps: list[Step], host=None,
          cpu: CpuCosts | None = None) -> BootResult:
    work.mkdir(parents=True, exist_ok=True)
    timeout = sum(s.timeout for s in steps) + 120
    res = lab.boot(BootSpec(run_dir=work, steps=tuple(steps), disks=session.disks(), timeout=timeout, cpu=cpu),
                   host=host)
    if not res.ok:
        raise FlashbedError(f"probe lab on {session.device.label} failed: {res.status} {res.error} "
                            f"({res.console_log})")
    return res


def _flashbench(session: DeviceSession, lab: Lab, work: Path, name: str, args: str,
                timeout: float = 3600, flashbench: str = "flashbench") -> str:
    # -o: Debian's flashbench 62 otherwise opens stdin's descriptor for its
    # report and fails; -a prints on stdout anyway, -O and -f into the file
    res = _boot(session, lab, work, [Step(name, f"{flashbench} {args} -o {name}.txt {DEV}", timeout=timeout)])
    step = res.step(name)
    return (step.stdout if step else "") + (work / f"{name}.txt").read_text()


class Phases:
    """Progress over the probe's phases (each a lab boot)."""

    def __init__(self, label: str, total: int, stream=None):
        self.label, self.total, self.done = label, total, 0
        self.started = time.monotonic()
        self.stream = stream or sys.stderr

    def __call__(self, what: str) -> None:
        elapsed = time.monotonic() - self.started
        eta = "?" if not self.done else format_duration(elapsed / self.done * (self.total - self.done))
        print(f"[probe {self.label} {self.done}/{self.total}] elapsed {format_duration(elapsed)} ETA {eta} | {what}",
              file=self.stream, flush=True)
        self.done += 1


def probe(device: Device, work: Path, site: ProbeSite, *, max_open: int = MAX_OPEN_AU_NR, runtime: float = 10.0,
          say: Callable[[str], None] | None = None) -> ProbeResult:
    """Probe a block device where `site` (its target's: targets/) says: in the UML lab, an
    emulated device, a plain file or a real one (which it overwrites); on a board, its own
    device, natively.

    In virtual time (an emulated device) every request's time is the model's, whatever the
    host's load, and the random jobs run VIRTUAL_IOS requests each (flashbench and fio
    read clock_gettime, which time travel drives: fio through the agent's wrapper)."""
    if device.kind != "block":
        raise FlashbedError(f"{device.label} is raw NAND: flashbench and fio probe block devices")
    tools, lab, flashbench, clock = site.tools, site.lab, site.flashbench, site.clock
    ios = VIRTUAL_IOS if clock.time_travel else 0
    when = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    cap = device.capacity
    nr_fit = max(1, (cap - FB_OFFSET) // (12 * DEFAULT_EU))
    phases = Phases(device.label, 5 + min(max_open, nr_fit) - (site.lab_latency is None), stream=None)
    say = say or phases
    raw: dict[str, str] = {}
    with lab.open_session(device, work / "scratch", clock=clock) as session:
        say("sequential write (fills the device), sequential and random reads, flashbench -a")
        plan0 = RatePlan(capacity=cap, erase_unit=DEFAULT_EU, span=cap, seq_bytes=cap, runtime=runtime, ios=ios)
        model: dict[str, dict[str, float]] = {}
        rates = run_fio(session, lab, work / "reads", {"seq-write": fill_job(plan0),
                                                          "seq-read": seq_read_job(plan0)}, model=model)
        raw["align"] = _flashbench(session, lab, work / "align", "align",
                                   f"-a --blocksize={ALIGN_BLOCKSIZE} --count={ALIGN_TRIES}", flashbench=flashbench)
        geometry = fb.analyse_align(fb.parse_align(raw["align"]))
        eu = geometry.erase_unit or DEFAULT_EU
        plan = RatePlan(capacity=cap, erase_unit=eu, span=cap, seq_bytes=cap, runtime=runtime, ios=ios)
        say(f"random 4 KiB reads in one {format_size(eu)} AU and spread over {format_size(cap)}")
        rates |= run_fio(session, lab, work / "randread", {"randread-au": random_job(plan, "randread", "au"),
                                                              "randread-spread": random_job(plan, "randread",
                                                                                            "spread")},
                         model=model)
        # open AUs: from one upwards until small writes collapse
        limit = max(1, min(max_open, (cap - FB_OFFSET) // (12 * eu)))
        bs = max(ALIGN_BLOCKSIZE, eu // 16)
        runs: dict[int, list[fb.RateRow]] = {}
        for nr in range(1, limit + 1):
            say(f"flashbench -O --open-au-nr={nr} (erase size {format_size(eu)}, blocks down to {format_size(bs)})")
            raw[f"open-au-{nr}"] = _flashbench(session, lab, work / f"open-au-{nr}", f"open-au-{nr}",
                                               f"-O --erasesize={eu} --blocksize={bs} --open-au-nr={nr}",
                                               flashbench=flashbench)
            runs[nr] = fb.parse_rates(raw[f"open-au-{nr}"])
            if nr > 1 and fb.collapsed(runs[nr], runs[1]):
                break
        open_aus = fb.analyse_open_aus(runs)
        say(f"flashbench -f (the first {FAT_NR} AUs)")
        raw["fat"] = _flashbench(session, lab, work / "fat", "fat",
                                 f"-f --erasesize={eu} --blocksize={bs} --fat-nr={FAT_NR}", flashbench=flashbench)
        fat = fb.parse_rates(raw["fat"])
        say(f"random 4 KiB writes in one AU and spread over {format_size(cap)}")
        rates |= run_fio(session, lab, work / "randwrite", {"randwrite-au": random_job(plan, "randwrite", "au"),
                                                               "randwrite-spread": random_job(plan, "randwrite",
                                                                                              "spread")},
                         model=model)
    lab_us: dict[str, float] = {}
    if site.lab_latency is not None:  # natively on a board, no lab sits between fio and the device
        say("the lab's own latency: random 4 KiB reads and writes on a device that takes no time")
        lab_us = site.lab_latency(work / "lab-latency", runtime)
    result = ProbeResult(device=device.label, capacity=cap, when=when, kernel=lab.release, tools=tools,
                         geometry=geometry, open_aus=open_aus, erase_unit_used=eu, rates=rates, fat=fat, raw=raw,
                         lab_us=lab_us, model=model, clock=clock, kernel_of=site.kernel_of)
    from .. import writeguard
    writeguard.write_into(work, "probe.json", json.dumps(result.to_json(), indent=1))
    return result
