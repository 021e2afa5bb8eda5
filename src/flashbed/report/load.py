"""Read a run directory (manifest.json + cells/*.json only) into aggregated, ordered data.

Nothing else in the run directory is read: logs and images may be deleted and the
report regenerates identically. Values are aggregated over repeats of ok cells; cells
that failed (failed, hang, crash, error) are kept as failures and shown as such.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..clock import Clock, Pace, recorded
from ..errors import FlashbedError, no_traceback
from ..lab.kernel import recorded_label
from ..results import READ_ONLY, CellResult
from ..sizes import size_text
from ..status import CellStatus, DeviceVerdict
from ..store import RunStore
from ..studies.base import Reproducer
from ..studies.claims import claims_of
from . import catalog, devcheck, units
from .devcheck import DeviceCheck
from .weights import Weights, load_weights

MANIFEST_SCHEMA = 1
# what the report says of the flash emulator's statistics (write amplification, erase
# counts, NAND programs, GC, busy time) on a real device, which reports none of them
NOT_OBSERVABLE = "not observable on a real device"
EMULATOR_FIGURES = "write amplification, erase-count spread, NAND programs, GC and device busy time"
OUTCOME_PREFIXES = ("class:", "outcome:")
# studies whose failed crash states say whose loss they are (studies/crashstates.attribute)
ATTRIBUTED = ("crashstates", "appcheck")


@dataclass(frozen=True)
class Stat:
    """One quantity over repeats (values in stored units)."""

    values: tuple[float, ...]
    unit: str

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return math.fsum(self.values) / len(self.values)

    @property
    def sd(self) -> float:
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0

    @property
    def lo(self) -> float:
        return min(self.values)

    @property
    def hi(self) -> float:
        return max(self.values)


@dataclass(frozen=True)
class Busy:
    """How much of a timed figure's own duration the flash device was busy (emulator busy time
    over the figure's duration), per repeat. Low: the device sat idle waiting for the lab."""

    util: Stat  # percent
    basis: str  # what the duration is: fio's run time, the measured time, the phase's wall time
    # virtual time: the lab's own CPU costs no guest time, so a figure is never lab-bound; it is
    # CPU-bound when the guest time charged to the CPU profile (cpu, % of the phase) dominates
    virtual: bool = False
    cpu: Stat | None = None

    @property
    def mark(self) -> str:
        """What a figure this bounds is called: lab-bound (real time), CPU-bound (virtual time)."""
        return "CPU-bound" if self.virtual else "lab-bound"

    def text(self) -> str:
        u = self.util
        lo, hi = min(u.lo, 100.0), min(u.hi, 100.0)
        dev = f"device busy {lo:.0f} %" if round(lo) == round(hi) else f"device busy {lo:.0f}–{hi:.0f} %"
        if self.cpu is None:
            return dev
        c = self.cpu
        cpu = f"CPU {c.lo:.0f} %" if round(c.lo) == round(c.hi) else f"CPU {c.lo:.0f}–{c.hi:.0f} %"
        return f"{cpu}, {dev}"


def target_label(device: str, kernel: str, clock: str = "", cpu: str = "") -> str:
    """What the report shows results per: a device, or in a run of several lab kernels, a
    device on one kernel (the cell key's kernel); in a run of both clocks, in one of them;
    in a run of several CPU profiles (virtual time), with one of them."""
    return (f"{device} · kernel {kernel}" if kernel else device) + (f" · {clock} time" if clock else "") \
        + (f" · CPU {cpu}" if cpu else "")


@dataclass(frozen=True)
class Failure:
    id: str
    device: str  # the target: the device, with its kernel in a run of several (target_label)
    fs: str
    study: str
    case: str  # the cell key's case ("" = the whole study)
    repeat: int
    status: CellStatus
    error: str
    # the study's other key cases on this target: a failed "" cell (a study's main cell beside
    # named ones, as mixed's mix beside its scaling cells) covers no case of theirs
    others: tuple[str, ...] = ()

    def covers(self, case: str) -> bool:
        if not self.case:
            return not any(case == o or case.startswith(o + " ") for o in self.others)
        return case == self.case or case.startswith(self.case + " ")


@dataclass
class RunData:
    root: Path
    manifest: dict[str, Any]
    weights: Weights
    values: dict[tuple[str, str, str, str, str], Stat] = field(default_factory=dict)
    # (device, fs, study, key case) -> stat -> Stat over repeats; key case "*" = whole study
    dstats: dict[tuple[str, str, str, str], dict[str, Stat]] = field(default_factory=dict)
    # (device, fs, study, phase) -> stat -> Stat over repeats: a cell's named statistics phases
    pstats: dict[tuple[str, str, str, str], dict[str, Stat]] = field(default_factory=dict)
    # (device, fs, study, measurement case) -> how busy the device was during that case's figures
    busy: dict[tuple[str, str, str, str], Busy] = field(default_factory=dict)
    # (device, fs, study, measurement case) -> the device check of a figure whose workload promised the
    # device had its writes (direct, synchronous): served, or cached (report/devcheck.py)
    checks: dict[tuple[str, str, str, str], DeviceCheck] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    reproducers: list[Reproducer] = field(default_factory=list)  # failures inside cells, with their commands
    cell_status: dict[tuple[str, str, str], Counter] = field(default_factory=dict)
    # target -> (device label, kernel label; "" in a run of one kernel)
    targets: dict[str, tuple[str, str]] = field(default_factory=dict)
    # target -> the clock and the CPU profile its timed figures come from ("real", "") or
    # ("virtual", profile name), from its cells' provenance
    timing: dict[str, tuple[Clock, str]] = field(default_factory=dict)
    # (target, fs, study) -> the extra of each ok cell (study-specific data: TopList views)
    extras: dict[tuple[str, str, str], list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    n_cells: int = 0
    # the cell results behind this data; and those of the twin variants of a robust pass, which
    # the rest of the report leaves out (report/footing.py reads them)
    cells: list[CellResult] = field(default_factory=list, repr=False)
    variant_cells: list[CellResult] = field(default_factory=list, repr=False)
    # and those of a tuning pass (--tune): option sets of the plain variants, which the plain ranking
    # leaves out (report/tuning.py ranks them)
    tuned_cells: list[CellResult] = field(default_factory=list, repr=False)

    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def _cached(self, key: tuple, make):
        """Structure queries are asked thousands of times while rendering; the data never changes."""
        if key not in self._memo:
            self._memo[key] = make()
        return list(self._memo[key]) if isinstance(self._memo[key], list) else self._memo[key]

    # ---- provenance ----------------------------------------------------------
    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.root.name)

    @property
    def profile(self) -> str:
        return str(self.manifest.get("profile", "?"))

    @property
    def kernel(self) -> str:
        k = self.manifest.get("kernel") or {}
        return str(k.get("release") or k.get("source_version") or "?")

    @property
    def kernel_text(self) -> str:
        """'6.12.117 (6.12 kernel, from linux-source 6.12.117-1~deb12u1)': release, name, source;
        with several kernels, each."""
        if len(self.kernels) > 1:
            return "; ".join(_kernel_text(k) for k in self.kernels.values())
        return _kernel_text(self.manifest.get("kernel") or {})

    @property
    def kernels(self) -> dict[str, dict[str, Any]]:
        """The run's lab kernels by label (7.3, 6.12, 7.3:ptrace), as its manifest records them."""
        def make():
            ks = self.manifest.get("kernels")
            if isinstance(ks, dict) and ks:
                return {str(k): v for k, v in ks.items() if isinstance(v, dict)}
            one = self.manifest.get("kernel") or {}
            return {recorded_label(one) or "?": one}
        return self._cached(("kernels",), make)

    def kernel_of(self, target: str) -> str:
        """The kernel label of a target ('' in a run of one kernel)."""
        return self.targets.get(target, (target, ""))[1]

    def kernel_for(self, target: str) -> str:
        """The release of the kernel a target's figures come from ('7.3.4', '6.12.117 (6.12:ptrace)')."""
        label = self.kernel_of(target)
        if not label:
            return self.kernel
        k = self.kernels.get(label) or {}
        return f"{k.get('release') or '?'} ({label})"

    def timing_for(self, target: str) -> str:
        """Which clock and CPU profile a target's timed figures come from ('' if its cells do
        not say: runs from before the clock axis are real time)."""
        clock, cpu = self.timing.get(target, (None, ""))
        if clock is not Clock.VIRTUAL:
            return "real time" if clock else ""
        prof = (self.manifest.get("cpu_profiles") or {}).get(cpu) or {}
        what = f"CPU profile {cpu}" + (f" ({prof['title']}" + ("; estimate" if prof.get("estimate") else "") + ")"
                                       if prof.get("title") else "")
        return f"virtual time, {what}" if cpu else "virtual time"

    def device_of(self, target: str) -> str:
        """The device label of a target."""
        return self.targets.get(target, (target, ""))[0]

    @property
    def cpus(self) -> int:
        """Guest vCPUs of the run's cells (--cpus; a scaling case sets its own)."""
        return int(self.manifest.get("cpus") or 1)

    def skipped(self, target: str, study: str) -> list[dict[str, Any]]:
        """Cells the plan left out on this target (a case's vCPUs on a kernel without SMP)."""
        dev, kern = self.targets.get(target, (target, ""))
        several = len(self.kernels) > 1
        return [s for s in self.manifest.get("skipped") or () if isinstance(s, dict) and s.get("device") == dev
                and s.get("study") == study and (not several or s.get("kernel") == kern)]

    @property
    def tools(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in sorted((self.manifest.get("tools") or {}).items())}

    def device_info(self, device: str) -> dict[str, Any]:
        return (self.manifest.get("devices") or {}).get(self.device_of(device)) or {}

    def is_real(self, device: str) -> bool:
        """A real block device (here, or a board's): the flash emulator's statistics are not observable on it."""
        return self.device_info(device).get("kind") in ("real", "board")

    def device_text(self, device: str) -> str:
        """'emmc-8g (preset emmc-8g: emmc, page-mapped FTL, 8 GiB)'; 'loop0 (real device /dev/loop0: ...)'."""
        info = self.device_info(device)
        if self.is_real(device):
            return f"{device} ({info.get('description') or 'real device'})"
        bits = [str(info[k]) for k in ("kind",) if info.get(k)]
        ftl = str(info.get("ftl") or "")
        if ftl.lower() in ("none", "raw", "no"):
            bits.append("raw flash, no FTL")
        elif ftl:
            bits.append(ftl if "ftl" in ftl.lower() else f"{ftl} FTL")
        cap = info.get("capacity_bytes")
        if isinstance(cap, (int, float)) and cap > 0:
            bits.append(size_text(cap))
        if self.real_part(device):
            bits.append(f"models {self.real_part(device)}")
        preset = info.get("name") or self.device_of(device)
        return f"{device} (preset {preset}" + (f": {', '.join(bits)})" if bits else ")")

    def real_part(self, device: str) -> str:
        """The real part the preset reproduces ('model / part'), '' when the preset names none."""
        info = self.device_info(device)
        part = info.get("part")
        if isinstance(part, dict):  # a twin's [part] table: its model names it
            return str(part.get("model") or "")
        return " / ".join(dict.fromkeys(str(info[k]) for k in ("model", "part") if info.get(k)))

    def device_part(self, device: str) -> str:
        """The preset's description and the sources of its figures, as far as the manifest's
        device information names them ('' when it names none)."""
        info = self.device_info(device)
        bits = []
        if info.get("description"):
            bits.append(str(info["description"]))
        src = self.sources(device)
        if src:
            bits.append(f"sources: {src}")
        return "; ".join(bits)

    def sources(self, device: str) -> str:
        return _sources_text(self.device_info(device).get("sources"))

    # ---- structure -------------------------------------------------------------
    def devices(self) -> list[str]:
        """The targets: devices in the manifest's order, each on its kernels in theirs."""
        seen = {k[0] for k in self.cell_status}
        kernels = list(self.kernels) if len(self.kernels) > 1 else [""]
        listed = [t for d in (self.manifest.get("devices") or {}) for k in kernels if (t := target_label(d, k)) in seen]
        return listed + sorted(seen - set(listed), key=units.natural_key)

    def studies(self, device: str | None = None) -> list[str]:
        def make():
            s = {k[2] for k in self.cell_status if device is None or k[0] == device}
            return sorted(s, key=units.study_sort_key)
        return self._cached(("studies", device), make)

    def requested_studies(self) -> list[str]:
        req = self.manifest.get("request") or {}
        s = req.get("studies") if isinstance(req, dict) else None
        return [str(x) for x in s] if isinstance(s, list) else []

    def expected_studies(self) -> list[str]:
        """The studies the run was asked for; every known study when its manifest does not say."""
        return self.requested_studies() or catalog.known()

    def missing_studies(self) -> list[str]:
        """Expected studies with no cell at all in this run (and not left out as n/a by the plan)."""
        present = set(self.studies()) | {st for (_d, _f, st) in self.na}
        return sorted(set(self.expected_studies()) - present, key=units.study_sort_key)

    def filesystems(self, device: str, study: str | None = None) -> list[str]:
        """The filesystems with cells on the device (in the study; and those the plan left
        the study out for, which show n/a there)."""
        def make():
            s = {k[1] for k in self.cell_status if k[0] == device and (study is None or k[2] == study)}
            s |= {fs for (d, fs, st) in self.na if d == device and st == study}
            return sorted(s, key=units.natural_key)
        return self._cached(("filesystems", device, study), make)

    @property
    def read_only(self) -> frozenset[str]:
        """The run's read-only filesystems (images: nothing writes to them)."""
        return frozenset(str(f) for f in self.manifest.get("read_only") or ())

    @property
    def na(self) -> dict[tuple[str, str, str], str]:
        """(device, fs, study) -> why the plan left the study out ('read-only')."""
        return self._cached(("na",), lambda: {
            (str(n.get("device")), str(n.get("fs")), str(n.get("study"))): str(n.get("why"))
            for n in self.manifest.get("not_applicable") or () if isinstance(n, dict)})

    def not_applicable(self, device: str, fs: str, study: str, case: str | None = None) -> str:
        """Why `fs` has no figure for the study (or its case) by design ('read-only'), '' when it
        should have one: a study the plan left out for it, or a case a read-only filesystem's
        cell does not run (writes) while it has no failure to explain the gap."""
        why = self.na.get((device, fs, study), "")
        if why or fs not in self.read_only or self.failures_for(device, fs, study, case):
            return why
        has = any(k[0] == device and k[1] == fs and k[2] == study and (case is None or k[3] == case)
                  for k in self.values)
        return "" if has else READ_ONLY

    def cases(self, device: str, study: str) -> list[str]:
        def make():
            meas = {k[3] for k in self.values if k[0] == device and k[2] == study}
            failed = {f.case for f in self.failures if f.device == device and f.study == study and f.case
                      and not any(c == f.case or c.startswith(f.case + " ") for c in meas)}
            if not meas and any(f.device == device and f.study == study and not f.case for f in self.failures):
                failed.add("")  # every cell of the study failed as a whole: one row that says so
            return sorted(meas | failed, key=lambda c: units.case_sort_key(study, c))
        return self._cached(("cases", device, study), make)

    def metrics(self, device: str, study: str) -> list[str]:
        def make():
            s = {k[4] for k in self.values if k[0] == device and k[2] == study}
            return sorted(s, key=units.metric_sort_key)
        return self._cached(("metrics", device, study), make)

    def unit(self, device: str, study: str, metric: str) -> str:
        def make():
            for k, st in self.values.items():
                if k[0] == device and k[2] == study and k[4] == metric:
                    return st.unit
            return ""
        return self._cached(("unit", device, study, metric), make)

    def get(self, device: str, fs: str, study: str, case: str, metric: str) -> Stat | None:
        return self.values.get((device, fs, study, case, metric))

    def top_values(self, device: str, fs: str, study: str, key: str) -> dict[str, Stat]:
        """A named figure list the study keeps in its cells' extra under `key` ({name: value}), mean over
        the repeats that have the key (a name missing from one counts 0), largest first."""
        lists = [e[key] for e in self.extras.get((device, fs, study), []) if isinstance(e.get(key), dict)]
        names = {n for d in lists for n, v in d.items() if _num(v) is not None}
        out = {n: Stat(tuple(_num(d.get(n)) or 0.0 for d in lists), "") for n in names}
        return dict(sorted(out.items(), key=lambda kv: (-kv[1].mean, kv[0])))

    def failures_for(self, device: str, fs: str, study: str, case: str | None = None) -> list[Failure]:
        return [f for f in self.failures if f.device == device and f.fs == fs and f.study == study
                and (case is None or f.covers(case))]

    def device_stat(self, device: str, fs: str, study: str, key_case: str = "*") -> dict[str, Stat]:
        return self.dstats.get((device, fs, study, key_case), {})

    def phase_stat(self, device: str, fs: str, study: str, phase: str) -> dict[str, Stat]:
        return self.pstats.get((device, fs, study, phase), {})

    def busy_for(self, device: str, fs: str, study: str, case: str) -> Busy | None:
        return self.busy.get((device, fs, study, case))

    def lab_bound_case(self, device: str, fs: str, study: str, case: str) -> Busy | None:
        """The case's device utilisation when it is below the threshold: the lab, not the device,
        set its timed figures. In virtual time (the lab's CPU costs no guest time) it is when the
        share of guest time charged to the CPU profile is above the CPU-bound threshold: the
        modelled CPU, not the device, set them (Busy.mark). None when device-bound or unknown."""
        b = self.busy.get((device, fs, study, case))
        if b is None:
            return None
        if b.virtual:
            return b if b.cpu is not None and b.cpu.mean > self.weights.cpu_bound_above else None
        return b if b.util.mean < self.weights.lab_bound_below else None

    def timed(self, device: str, study: str, case: str, metric: str) -> bool:
        """Whether a figure is set by how fast something ran: the known timed metrics, and those a
        cell declares timed (your workload's metrics in time or rate units, a lifetime at its
        measured rate: studies/workload.py's extra["ranked"])."""
        if metric in units.TIMED_METRICS:
            return True

        def make():
            return frozenset((d, s, f.get("case"), f.get("metric")) for (d, _fs, s), es in self.extras.items()
                             for e in es for f in (e.get("ranked") or []) if isinstance(f, dict) and f.get("timed"))
        return (device, study, case, metric) in self._cached(("timed",), make)

    def lab_bound(self, device: str, fs: str, study: str, case: str, metric: str) -> Busy | None:
        """lab_bound_case for a timed metric (rates, latencies, times); None for any other metric."""
        return self.lab_bound_case(device, fs, study, case) if self.timed(device, study, case, metric) else None

    def device_check(self, device: str, fs: str, study: str, case: str) -> DeviceCheck | None:
        return self.checks.get((device, fs, study, case))

    def cached(self, device: str, fs: str, study: str, case: str, metric: str) -> DeviceCheck | None:
        """The device check of a timed figure the device could not have served (its writes were
        acknowledged before the device received them); None otherwise."""
        c = self.checks.get((device, fs, study, case))
        return c if c is not None and c.verdict is DeviceVerdict.CACHED and self.timed(device, study, case, metric) \
            else None

    def ignores_direct(self, device: str) -> dict[str, list[DeviceCheck]]:
        """fs -> its direct-write figures the device check found cached: the filesystems that serve
        O_DIRECT writes from the page cache, as measured."""
        out: dict[str, list[DeviceCheck]] = {}
        for (d, fs, _s, _c), chk in sorted(self.checks.items()):
            if d == device and chk.claim.direct and chk.verdict is DeviceVerdict.CACHED:
                out.setdefault(fs, []).append(chk)
        return out

    @property
    def paced(self) -> bool:
        """Whether the emulator ran its timed studies in real time (--pace none skips the device's
        delays; auto skips them only for the timing-free studies)."""
        req = self.manifest.get("request") or {}
        return (req.get("pace") if isinstance(req, dict) else None) in (None, "real", "auto")

    def device_stat_keys(self, device: str) -> list[str]:
        s = {k for (d, _f, _s, c), st in self.dstats.items() if d == device and c == "*" for k in st}
        order = units.DEVICE_STAT_ORDER
        return sorted(s, key=lambda k: (order.index(k) if k in order else len(order), k))

    def repeats_text(self, ns: list[int] | None = None) -> str:
        if ns:
            lo, hi = min(ns), max(ns)
            return f"{lo}" if lo == hi else f"{lo}–{hi}"
        return str(self.manifest.get("repeats", "?"))


def _kernel_text(k: dict[str, Any]) -> str:
    release = str(k.get("release") or k.get("source_version") or "?")
    extra = []
    if k.get("name"):
        # the time-travel flavour beside the SMP one of a virtual-time run: same release, other kernel
        extra.append(f"{k['name']} kernel" + (f", {k['flavour']} flavour" if k.get("flavour") else ""))
    if k.get("source_version") and str(k["source_version"]) != release:
        extra.append(f"from linux-source {k['source_version']}")
    return release + (f" ({', '.join(extra)})" if extra else "")


def _sources_text(src: Any) -> str:
    """Sources as a preset may give them: text, a list, or a table of figure -> source."""
    if isinstance(src, dict):
        return "; ".join(f"{k}: {_sources_text(v)}" for k, v in src.items() if v)
    if isinstance(src, (list, tuple)):
        return "; ".join(t for t in (_sources_text(x) for x in src) if t)
    return str(src) if src else ""




def load_run(run_dir: Path, weights: Weights | None = None) -> RunData:
    run_dir = Path(run_dir)
    store = RunStore(run_dir)
    if not run_dir.is_dir():
        raise FlashbedError(f"{run_dir}: no such run directory")
    manifest = store.manifest()
    if not isinstance(manifest, dict):
        raise FlashbedError(f"{store.manifest_path}: not a flashbed manifest")
    if manifest.get("schema") != MANIFEST_SCHEMA:
        raise FlashbedError(f"{store.manifest_path}: manifest schema {manifest.get('schema')!r} is not "
                            f"{MANIFEST_SCHEMA}; use the flashbed version that made this run")
    results = list(store.results())
    if not results:
        raise FlashbedError(f"{run_dir}: the run has no cell results yet (cells/*.json); "
                            f"run or resume it with `flashbed run` first")
    variants = {label for label, info in (manifest.get("devices") or {}).items()
                if isinstance(info, dict) and info.get("variant")}
    request = manifest.get("request") if isinstance(manifest.get("request"), dict) else {}
    # a tuning pass's cells: a variant the request did not name (the plain run's are its fs)
    plain = set(request.get("fs") or ()) if request.get("tune") else None
    tuned = [r for r in results if plain is not None and r.key.fs not in plain and r.key.device not in variants]
    own = [r for r in results if r.key.device not in variants and not (plain is not None and r.key.fs not in plain)]
    data = aggregate(run_dir, manifest, own, weights or load_weights())
    data.cells, data.variant_cells, data.tuned_cells = own, [r for r in results if r.key.device in variants], tuned
    return data


def aggregate(root: Path, manifest: dict[str, Any], results: list[CellResult], weights: Weights) -> RunData:
    data = RunData(root=root, manifest=manifest, weights=weights, n_cells=len(results))
    vals: dict[tuple[str, str, str, str, str], list[float]] = defaultdict(list)
    val_units: dict[tuple[str, str, str, str, str], str] = {}
    # (device, fs, study, key case) -> repeat -> stat dict of that cell
    cell_ds: dict[tuple[str, str, str, str], dict[int, dict[str, float]]] = defaultdict(dict)
    # (device, fs, study, phase) -> repeat -> that phase's stat dicts (one per cell that has it)
    phase_ds: dict[tuple[str, str, str, str], dict[int, list[dict[str, float]]]] = defaultdict(lambda: defaultdict(list))
    utils: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    cpu_shares: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    virtual: set[tuple[str, str, str, str]] = set()
    basis: dict[tuple[str, str, str, str], str] = {}
    run_pace = (manifest.get("request") or {}).get("pace")
    status: dict[tuple[str, str, str], Counter] = defaultdict(Counter)
    unclassified: dict[str, set[str]] = defaultdict(set)
    unattributed: set[str] = set()
    # (device, fs, study, case) -> each repeat's claim and the statistics phase of its job
    claimed: dict[tuple[str, str, str, str], list[devcheck.Repeat]] = defaultdict(list)

    key_cases: dict[tuple[str, str], set[str]] = defaultdict(set)  # (target, study) -> its cells' cases
    for r in results:
        key_cases[(target_label(r.key.device, r.key.kernel, r.key.clock, r.key.cpu), r.key.study)].add(r.key.case)
    for r in sorted(results, key=lambda r: r.key.id):
        # from here on a cell's "device" is its target: with several kernels, the device on its kernel
        k = replace(r.key, device=target_label(r.key.device, r.key.kernel, r.key.clock, r.key.cpu))
        data.targets[k.device] = (r.key.device, r.key.kernel)
        prov = r.provenance or {}
        clk = recorded(prov.get("clock"))
        # a target's timed figures are in virtual time if any of its cells are (auto runs the cpu
        # study and a case of several vCPUs in real time beside them)
        if clk is not None and (k.device not in data.timing or
                                (clk is Clock.VIRTUAL and data.timing[k.device][0] is not Clock.VIRTUAL)):
            data.timing[k.device] = (clk, str((prov.get("cpu_profile") or {}).get("name") or ""))
        status[(k.device, k.fs, k.study)][r.status] += 1
        data.reproducers += catalog.reproducers(data.run_id, r)
        if not r.ok:
            data.failures.append(Failure(id=r.key.id, device=k.device, fs=k.fs, study=k.study, case=k.case,
                                         repeat=k.repeat, status=r.status,
                                         error=_one_line(r.error or r.headline or r.status),
                                         others=tuple(sorted(key_cases[(k.device, k.study)] - {k.case}))))
            continue
        if r.extra:
            data.extras.setdefault((k.device, k.fs, k.study), []).append(r.extra)
        per_case: dict[str, dict[str, tuple[float, str]]] = defaultdict(dict)
        for m in r.measurements:
            v = _num(m.value)
            if v is None:
                continue
            per_case[m.case][m.metric] = (v, m.unit)
        for case, metrics in per_case.items():
            derived = _survived(k.study, metrics, weights, unclassified)
            if derived is not None:
                metrics = {**metrics, "survived": (derived, "%")}
            if k.study in ATTRIBUTED and "failures" in metrics and "fs_failures" not in metrics:
                metrics = {**metrics, **_unattributed(metrics)}
                unattributed.add(k.study)
            for metric, (v, unit) in metrics.items():
                key = (k.device, k.fs, k.study, case, metric)
                vals[key].append(v)
                val_units.setdefault(key, unit)
        paced = (r.provenance or {}).get("pace", run_pace) in (None, Pace.REAL)
        for claim in claims_of(r.extra):
            claimed[(k.device, k.fs, k.study, claim.case)].append(
                devcheck.Repeat(claim, devcheck.phase_of((r.device_stats or {}).get(claim.case)), paced))
        ds = _cell_device_stats(r.device_stats)
        if ds:
            cell_ds[(k.device, k.fs, k.study, k.case)][k.repeat] = ds
        for phase, raw in (r.device_stats or {}).items():
            if phase != "workload" and (flat := _phase_numbers(raw)):
                phase_ds[(k.device, k.fs, k.study, phase)][k.repeat].append(flat)
        # at pace none the device's time is modelled, not spent: no utilisation; in virtual
        # time it is guest time, with the share charged to the CPU profile beside it
        cell_pace = (r.provenance or {}).get("pace", run_pace)
        if clk is Clock.VIRTUAL or cell_pace in (None, Pace.REAL):
            for case in per_case:
                u = _utilisation(r.device_stats, case, per_case)
                if u is not None:
                    key4 = (k.device, k.fs, k.study, case)
                    utils[key4].append(u[0])
                    basis[key4] = u[1]
                    if clk is Clock.VIRTUAL:
                        virtual.add(key4)
                        if (c := cpu_share(r.device_stats, case, per_case)) is not None:
                            cpu_shares[key4].append(c)

    data.cell_status = dict(status)
    data.values = {k: Stat(tuple(v), val_units[k]) for k, v in sorted(vals.items())}

    # device statistics: per key case, and for the whole study (cells of one repeat combined)
    study_rep: dict[tuple[str, str, str], dict[int, list[dict[str, float]]]] = defaultdict(lambda: defaultdict(list))
    for (dev, fs, study, case), reps in sorted(cell_ds.items()):
        data.dstats[(dev, fs, study, case)] = _stats_over(list(reps.values()))
        for rep, ds in reps.items():
            study_rep[(dev, fs, study)][rep].append(ds)
    for (dev, fs, study), reps in sorted(study_rep.items()):
        data.dstats[(dev, fs, study, "*")] = _stats_over([_combine(cells) for _r, cells in sorted(reps.items())])
    for key, reps in sorted(phase_ds.items()):
        data.pstats[key] = _stats_over([_combine(cells) for _r, cells in sorted(reps.items())])
    data.busy = {key: Busy(Stat(tuple(v), "%"), basis[key], virtual=key in virtual,
                           cpu=Stat(tuple(cpu_shares[key]), "%") if cpu_shares.get(key) else None)
                 for key, v in sorted(utils.items())}
    for key, repeats in sorted(claimed.items()):
        dev, fs, study, case = key
        iops = data.values.get((dev, fs, study, case, "iops"))
        info = data.device_info(dev)
        rate = _num((info.get("declared") or {}).get("rand_write_4k_iops"))
        data.checks[key] = devcheck.check(repeats, iops.mean if iops else None, rate,
                                          _num(info.get("host_bytes_per_s")))

    for study in sorted(unattributed):
        data.notes.append(f"{study}: cells made before flashbed attributed crash states (whose loss: the "
                          f"filesystem's or the device's) count every failed state as the filesystem's; run the "
                          f"study again for the two apart")
    for study, names in sorted(unclassified.items()):
        data.notes.append(f"{study}: outcome name(s) {', '.join(sorted(names))} are in neither the good nor the "
                          f"bad list of [outcomes.{study}] in {weights.path.name}, so '{study} survived' is "
                          f"not computed; add them there")
    return data


def _one_line(s: str) -> str:
    s = " ".join(no_traceback(str(s)).split())
    return s if len(s) <= 300 else s[:297] + "..."


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _unattributed(metrics: dict[str, tuple[float, str]]) -> dict[str, tuple[float, str]]:
    """A crash-state cell from before attribution (studies/crashstates.attribute): every failed
    state is taken as the filesystem's, as the report held it then."""
    out = {"fs_failures": metrics["failures"], "cause:filesystem": metrics["failures"]}
    if "class:data-loss" in metrics:
        out["fs_data_loss"] = metrics["class:data-loss"]
    if "survived" in metrics:
        out["undamaged_survived"] = metrics["survived"]
    return out


def _survived(study: str, metrics: dict[str, tuple[float, str]], weights: Weights,
              unclassified: dict[str, set[str]]) -> float | None:
    """Percent of outcomes in the study's good list; None when not computable."""
    spec = weights.outcomes.get(study)
    outs = {m.split(":", 1)[1]: v for m, (v, _u) in metrics.items() if m.startswith(OUTCOME_PREFIXES)}
    if spec is None:
        return None
    outs = {n: v for n, v in outs.items() if n not in spec.get("ignore", ())}
    if not outs:
        return None
    unknown = {n for n in outs if n not in spec["good"] and n not in spec["bad"]}
    if unknown:
        unclassified[study] |= unknown
        return None
    total = math.fsum(outs.values())
    if total <= 0:
        return None
    return 100.0 * math.fsum(v for n, v in outs.items() if n in spec["good"]) / total


def _phase_numbers(raw: Any) -> dict[str, float]:
    if not isinstance(raw, dict):
        return {}
    out = {k: v for k, v in ((k, _num(v)) for k, v in raw.items()) if v is not None}
    if "erase_count_max" in out and "erase_count_min" in out:
        out["erase_spread"] = out["erase_count_max"] - out["erase_count_min"]
    return out


def _cell_device_stats(device_stats: dict[str, dict[str, Any]]) -> dict[str, float]:
    """One cell's emulator statistics: phase 'workload' if present, else all its phases combined
    (a study that samples the device per case, like bandwidth, has one phase per case)."""
    if not isinstance(device_stats, dict) or not device_stats:
        return {}
    if "workload" in device_stats:
        return _phase_numbers(device_stats["workload"])
    phases = [p for p in (_phase_numbers(raw) for raw in device_stats.values()) if p]
    return _combine(phases) if len(phases) > 1 else (phases[0] if phases else {})


def _case_phase(device_stats: Any, case: str, per_case: dict[str, dict[str, tuple[float, str]]]) -> dict | None:
    """The statistics phase that covers one measurement case alone (or its jobs, run at once)."""
    if not isinstance(device_stats, dict):
        return None
    if isinstance(device_stats.get(case), dict):
        return device_stats[case]
    if isinstance(device_stats.get("workload"), dict) and \
            (len(per_case) == 1 or any("runtime" in m for m in per_case.values())):
        return device_stats["workload"]
    return None


def cpu_share(device_stats: Any, case: str, per_case: dict[str, dict[str, tuple[float, str]]]) -> float | None:
    """In virtual time: the share (%) of a case's statistics phase's guest time charged to the
    CPU profile (lab patch 0008, the guest's counts at the phase's start and end); None when
    the phase has no such counts."""
    phase = _phase_numbers(_case_phase(device_stats, case, per_case))
    guest, cpu = phase.get("guest_seconds"), phase.get("cpu_seconds")
    if guest is None or cpu is None or guest <= 0:
        return None
    return 100.0 * cpu / guest


def _utilisation(device_stats: dict[str, Any], case: str,
                 per_case: dict[str, dict[str, tuple[float, str]]]) -> tuple[float, str] | None:
    """(device busy % of the figure's duration, what the duration is) for one measurement case of
    a cell, or None when no statistics phase covers that case alone (or its jobs, run at once)."""
    if not isinstance(device_stats, dict):
        return None
    if isinstance(device_stats.get(case), dict):
        phase = _phase_numbers(device_stats[case])
        own = per_case.get(case, {})
        if "runtime" in own:
            dur, why = own["runtime"][0], "fio's run time"
        elif "seconds" in own:
            dur, why = own["seconds"][0], "the measured time"
        else:
            dur, why = phase.get("wall_seconds"), "the statistics phase's wall time"
    elif isinstance(device_stats.get("workload"), dict):
        phase = _phase_numbers(device_stats["workload"])
        runtimes = [m["runtime"][0] for m in per_case.values() if "runtime" in m]
        waited = [m["io_seconds"][0] for m in per_case.values() if "io_seconds" in m]
        if runtimes and waited:  # rate-limited jobs idle the device by design: their requests' own time
            dur, why = min(max(runtimes), math.fsum(waited)), "the time its rate-limited fio jobs had requests " \
                "outstanding"
        elif runtimes:  # fio jobs that ran at once (mixed): the longest job spans the phase
            dur, why = max(runtimes), "the longest fio job's run time (jobs ran at once)"
        elif len(per_case) == 1:
            dur, why = phase.get("wall_seconds"), "the statistics phase's wall time"
        else:  # several figures one after another in one phase: none of them has its own share
            return None
    else:
        return None
    busy = phase.get("busy_seconds")
    if busy is None or not dur or dur <= 0:
        return None
    return 100.0 * busy / dur, why


_SUMMED = frozenset({"host_write_bytes", "host_read_bytes", "nand_program_pages", "nand_read_pages", "nand_erases",
                     "busy_seconds", "wall_seconds", "gc_count", "host_writes", "host_flushes",
                     "write_pattern_sequential_write_bytes"})


def _combine(cells: list[dict[str, float]]) -> dict[str, float]:
    """Several cells of one study and repeat as one: sums, extremes, write-weighted WA."""
    out: dict[str, float] = {}
    keys = sorted({k for c in cells for k in c})
    for k in keys:
        xs = [c[k] for c in cells if k in c]
        if k in ("erase_count_max",):
            out[k] = max(xs)
        elif k in ("erase_count_min",):
            out[k] = min(xs)
        elif k in _SUMMED:
            out[k] = math.fsum(xs)
        elif k == "write_amplification":
            pairs = [(c[k], c.get("host_write_bytes")) for c in cells if k in c]
            if all(h is not None for _w, h in pairs) and any(h > 0 for _w, h in pairs):
                # weighted by host bytes: a phase that wrote nothing (a read) adds nothing
                out[k] = math.fsum(w * h for w, h in pairs) / math.fsum(h for _w, h in pairs)
            else:
                out[k] = math.fsum(xs) / len(xs)
        else:
            out[k] = math.fsum(xs) / len(xs)
    if "erase_count_max" in out and "erase_count_min" in out:
        out["erase_spread"] = out["erase_count_max"] - out["erase_count_min"]
    return out


def _stats_over(reps: list[dict[str, float]]) -> dict[str, Stat]:
    keys = sorted({k for r in reps for k in r})
    return {k: Stat(tuple(r[k] for r in reps if k in r), units.device_stat_unit(k)) for k in keys}


def variants_done(run: RunData) -> tuple[int, int]:
    """A robust pass's variants with every cell in, and those planned (not dropped), over the run's
    devices: what an unfinished run counts against its plan ((0, 0) without a robust pass)."""
    done = planned = 0
    for label in {c.key.device for c in run.cells} | set(run.manifest.get("devices") or {}):
        info = run.device_info(label).get("robust")
        if not info:
            continue
        mine = defaultdict(set)
        for c in run.variant_cells:
            if (run.device_info(c.key.device).get("variant") or {}).get("of") == label:
                mine[c.key.device].add((c.key.fs, c.key.study, c.key.case, c.key.repeat))
        studies = {s for cells in mine.values() for (_f, s, _c, _r) in cells}
        wanted = {(c.key.fs, c.key.study, c.key.case, c.key.repeat) for c in run.cells
                  if c.key.device == label and c.key.study in studies}
        for v in info.get("variants", []):
            if v.get("dropped"):
                continue
            planned += 1
            have = mine.get(f"{label}~{v['name']}", set())
            done += bool(have) and wanted <= have
    return done, planned
