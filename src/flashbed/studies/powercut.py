"""`powercut`: write and fsync files, cut power at a seeded random moment,
recover, and check every file against the log of what was acknowledged.

Block devices, n iterations in n + 1 lab boots; boot k:
  recover   : (k > 0) iteration k-1's recovery: mount (timed: journal/log
              recovery happens here), verify every file against that workload's
              log, probe a write, unmount, run the checker (read-only check,
              repair when it is not clean), and when the first mount failed,
              mount and verify again after the repair.
  work      : (k < n) mount the filesystem the recovery left (or make a new one
              when it was left unusable, or too full), run the workload (guest
              powercut.py work), which asks the host to cut power cut_at[k] s
              after its own start, until the cut.
              The emulator drops what was not durable (cache, torn programs,
              per its preset); a plain file only loses the lab's page cache.
In virtual time (--clock virtual) the cut lands at an exact guest instant:
the emulator cuts at cut_at[k] s of guest time from the device's present when
the workload asks (the guest waits for the cut to be armed, at no guest
time), and holds the lab there (no request after the instant is served, no
completion after it seen) until the host kills it; the same seed then gives
the same iteration on every run, and each iteration that did not end well is
listed with the command that repeats it (repeat_command).
Iteration k's cut ends boot k and its recovery begins boot k + 1: one boot per
cut instead of two (a recovery that hangs costs the next iteration its cut,
which then counts as error).
A real device is refused (power_switch): flashbed cannot cut its power, and
a lab kill alone would count kernel crashes as cuts.
Raw NAND (UBIFS, JFFS2): nandsim's flash lives in the lab's memory, so every
iteration runs in one boot: UBI's power-cut emulation stops all writes after
the Nth UBI header write (N seeded), then the volume is unmounted, detached,
re-attached and mounted (attach and mount timed apart) and verified. JFFS2
has no cut switch below it: at the seeded moment every writer is stopped (the
workload and JFFS2's GC thread; a write in progress completes, none starts),
the flash is dumped (data pages), the filesystem is unmounted, the flash is
erased and the dump written back (erased pages stay erased; blocks lose
their clean markers, which JFFS2 handles by erasing them again), and the
mount (JFFS2's scan) is timed.

The workload's log lives in the cell's log directory (the run directory the
lab shares), outside the device under test; the host copies it into the
recovery boot's run directory (before_boot).

Classes (every iteration is in exactly one; checked in this order):
  error        the iteration did not run as planned: no cut happened (workload
               failed or ended first) or the recovery left no facts
  hang         a mount, unmount, check or the verifier did not return in time
  crash        the lab kernel died during the recovery
  unmountable  the filesystem did not mount, even after its repair tool ran
  data-loss    acknowledged (fsynced) data missing, truncated or different, or
               an acknowledged delete undone
  garbage      data that was never written to that file at that place (not old,
               not new, not absent, not an unwritten zero block)
  read-only    mounted read-only, or turned read-only (a probe write failed EROFS)
  fsck-failed  data intact, but the checker found damage its repair did not fix
  fsck-fixed   data intact after the checker found and fixed damage (or the
               first mount failed and the repair made it mountable)
  recovered    data intact; the kernel replayed its journal/log at mount
  clean        data intact; no recovery was reported
Metrics per case (sync / async): iterations, class:<name> (the first eight
classes always, error/crash/fsck-failed when they occur), mount:<state>
(ok / recovery / read-only / warning / failed / hang), fsck:<result> (clean /
fixed / failed / n/a), recovery (s, median of mount + check (+ repair, + second
mount) after a cut; raw NAND: attach + mount), and for raw NAND attach and
mount (s, medians). extra holds cut_at (the seeded cut delays in seconds, or
for UBIFS the UBI header write after which the power is cut) and one record
per iteration.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import shlex
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import filesystems as fscat
from ..clock import Clock, recorded
from ..lab.boundary import BootResult, Step
from ..lab.guest import guestlib
from ..lab.guest.protocol import PrepareSpec, RecoverFacts, RecoverSpec, SnapcutSpec
from ..shellwords import TOOLS
from ..status import BootStatus, CellStatus, PowerCutClass, StepStatus
from ..variants import FsVariant
from .base import MNT, PY, RUN, Case, CellSpec, Outcome, OutcomeTable, Reproducer, Study, boot_dir, m, step_json
from .failures import (
    CLASSES,
    EXTRA_CLASSES,
    FSCK_RESULTS,
    MOUNT_STATES,
    case_variant,
    classify,
    mount_state,
    recover_spec,
    recover_timeout,
    shell_arg,
    work_seed,
)
from .params import param

PCW = f"{PY} {TOOLS}/powercut.py"  # this study's guest side
WORKDIR = f"{MNT}/pc"
UBI_DBG = "/sys/kernel/debug/ubi/ubi0"
MODES = ("sync", "async")
# block devices, in each boot's run directory: the workload's log, the previous boot's (the
# one its recovery checks), and the recovery's verdict (which the workload's set-up reads)
LOG, PREV_LOG, VERDICT = "pclog.jsonl", "prev-pclog.jsonl", "pc-recover.json"


def cut_points(seed: int, n: int, lo: float, hi: float) -> list[float]:
    """The seeded cut delays: the same seed gives the same cuts."""
    rng = random.Random(f"powercut/{seed}")
    return [round(rng.uniform(lo, hi), 3) for _ in range(n)]


def nand_cut_points(seed: int, n: int, lo: int, hi: int) -> list[int]:
    rng = random.Random(f"powercut-nand/{seed}")
    return [rng.randint(lo, hi) for _ in range(n)]


def repeat_command(spec: CellSpec, k: int) -> str:
    """The command that runs iteration k of a virtual-time cell again, exactly: the same
    cell with k + 1 iterations (each iteration starts from the device the one before
    it left, and the seed draws the same first k + 1 cuts), its last being k."""
    p = spec.params
    sets: dict[str, Any] = {"modes": p.mode, "iterations": k + 1}
    defaults = type(p)()
    for f in dataclasses.fields(p):
        v = getattr(p, f.name)
        if f.name not in ("modes", "mode", "iterations") and v != getattr(defaults, f.name):
            sets[f.name] = ",".join(map(str, v)) if isinstance(v, tuple) else \
                ("true" if v else "false") if isinstance(v, bool) else v
    args = ["flashbed", "run", "--study", "powercut", "--device", spec.device.label, "--fs", spec.variant.spec,
            "--clock", "virtual", "--seed", str(spec.seed)]
    if spec.kernel:
        args += ["--kernel", spec.kernel]
    for name, v in sets.items():
        args += ["--set", f"powercut.{name}={v}"]
    return shlex.join(args)


# --- classification (host side, pure: unit-tested with fake facts) ------------------------

def cut_hit_workload(w: BootResult) -> bool:
    """The emulator cuts power before the lab is killed: in between, the workload
    can meet the vanished device (EIO, or EROFS once the filesystem gives up) and
    the lab end on its own. That is the cut too."""
    s = w.step("work")
    return bool(s is not None and s.status is StepStatus.FAILED and re.search(r"Errno (5|30)\]", s.stderr))


def recovery_seconds(facts: RecoverFacts | dict | None) -> float | None:
    """Mount (and attach) + check (+ repair, + second mount) after a cut; None if it never mounted."""
    facts = RecoverFacts.from_json(facts)
    if not facts or not facts.mounted:
        return None
    total = 0.0
    for tag in ("mount1-attach", "mount1", "mount2-attach", "mount2"):
        total += float(facts.run(tag).get("seconds") or 0.0)
    total += float((facts.fsck or {}).get("seconds") or 0.0)
    return total


def ack_timing(work_dir: Path) -> dict:
    """How the last acknowledgement stood to the cut: `last_ack_ms` before the
    host cut the power (negative: after it), and `acks_after_cut`, which must be
    0: an fsync that returned after the power was gone promised what no device
    could keep. A board's power switch (--power-cmd) cuts by the time its command returned
    (the device's reply's off_wall), not when it was started. Empty when either side is
    missing (an older run), and in virtual time, where the device holds the lab at the
    cut's instant."""
    try:
        said = json.loads((work_dir / "cut.json").read_text())
        cut = float((said.get("emulator") or {}).get("off_wall") or said["host_wall"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if recorded(said.get("clock")) is Clock.VIRTUAL:
        # the device held the lab at the cut: nothing after it was acknowledged (and the
        # guest's clock is not the host's, to set the acknowledgements against)
        return {}
    acks = [float(r["t"]) for r in guestlib.read_log(str(work_dir / "pclog.jsonl"))
            if r.get("e") == "ack" and "t" in r]
    if not acks:
        return {}
    return {"last_ack_ms": round((cut - max(acks)) * 1000, 3), "acks_after_cut": sum(t > cut for t in acks)}


def summarize(case: str, records: list[dict]) -> list:
    """Measurements of one case from its per-iteration records."""
    out = m(case, "iterations", len(records), "count")
    classes = [r["class"] for r in records]
    for c in CLASSES:
        out += m(case, f"class:{c}", classes.count(c), "count")
    for c in EXTRA_CLASSES:
        if classes.count(c):
            out += m(case, f"class:{c}", classes.count(c), "count")
    for s in MOUNT_STATES:
        n = sum(r.get("mount") == s for r in records)
        if n:
            out += m(case, f"mount:{s}", n, "count")
    for s in FSCK_RESULTS:
        n = sum(r.get("fsck") == s for r in records)
        if n:
            out += m(case, f"fsck:{s}", n, "count")
    rec = [r["recovery"] for r in records if r.get("recovery") is not None]
    out += m(case, "recovery", statistics.median(rec) if rec else None, "s")
    return out


def headline(per_case: dict[str, list[dict]]) -> str:
    parts = []
    for case, recs in per_case.items():
        counts: dict[str, int] = {}
        for r in recs:
            counts[r["class"]] = counts.get(r["class"], 0) + 1
        text = ", ".join(f"{n} {c}" for c, n in sorted(counts.items(), key=lambda x: -x[1]))
        parts.append(f"{case}: {text}")
    return "; ".join(parts)


# --- the study ------------------------------------------------------------------------

class PowerCut(Study):
    name = "powercut"
    title = "Power cuts"
    description = "power cuts at seeded random moments: recovery, fsck, data vs fsync log"
    order = 110
    primary_metric = "survived"
    good_outcomes = frozenset(c for c in PowerCutClass if c.good)
    device_stats = False
    power_switch = True
    timing_free = True
    continue_after_failure = True
    outcome_tables = (
        OutcomeTable("iterations by class", "class:", CLASSES + EXTRA_CLASSES, per_iteration=True),
        OutcomeTable("mount after the cut", "mount:", MOUNT_STATES),
        OutcomeTable("checker after the cut", "fsck:", FSCK_RESULTS),
    )

    @dataclass(frozen=True)
    class Params:
        modes: tuple[str, ...] = param(MODES, choices=MODES, help="mount modes, one cell each")
        cut_min: float = param(0.5, unit="s", low=0, help="earliest cut after the workload starts")
        cut_max: float = param(3.0, unit="s", above=0, help="latest cut")
        max_file: int = param(1 << 20, unit="bytes", low=1, help="largest file the workload writes")
        max_files: int = param(64, low=1, help="files the workload keeps")
        nand_cut_min: int = param(4, low=0, help="raw NAND (UBIFS): earliest cut, in UBI header writes")
        nand_cut_max: int = param(120, low=1, help="raw NAND (UBIFS): latest cut")
        iterations: int = param(226, low=1, help="power cuts per case (the reference study ran 226)")
        mode: str = param("async", choices=MODES, per_case="modes")
        max_bytes: int | None = param(None, unit="bytes", low=1, help="live data the workload keeps "
                                                                "(default: an eighth of the device)")
        step_timeout: float = param(120.0, unit="s", above=0, help="limit of a mount, unmount or check")
        fsck_timeout: float = param(300.0, unit="s", above=0)
        sabotage: bool = param(False, help="corrupt one acknowledged file on purpose (tests the verifier)")

    def cases(self, params, device):
        return [Case(mode, dataclasses.replace(params, mode=mode)) for mode in params.modes]

    # -- plan ----------------------------------------------------------------------
    def _n(self, spec: CellSpec) -> int:
        return spec.params.iterations

    def cuts(self, spec: CellSpec) -> list:
        p = spec.params
        if spec.variant.base.fstype == "ubifs":
            return nand_cut_points(spec.seed, self._n(spec), p.nand_cut_min, p.nand_cut_max)
        return cut_points(spec.seed, self._n(spec), float(p.cut_min), float(p.cut_max))

    def _work(self, spec: CellSpec, k: int, log: str, stop_after: float, cut_in: float | None = None,
              prepare: PrepareSpec | None = None) -> str:
        p = spec.params
        return (f"{PCW} work {WORKDIR}/{k} {log} --seed {work_seed(spec.seed, k)} "
                f"--max-bytes {self._max_bytes(spec)} "
                f"--max-files {p.max_files} --max-file {p.max_file} "
                f"--stop-after {stop_after}" + (f" --cut-in {cut_in}" if cut_in is not None else "")
                + (f" --prepare {shell_arg(prepare)}" if prepare else ""))

    def _max_bytes(self, spec: CellSpec) -> int:
        mb = spec.params.max_bytes
        return spec.device.capacity // 8 if mb is None else mb

    def _prepare(self, spec: CellSpec, v: FsVariant, previous: str | None, mkfs: list[str]) -> PrepareSpec:
        """Mount the filesystem again, or make it; a reused filesystem with less free
        space than twice the workload's live data is made afresh (the workload must
        never meet ENOSPC)."""
        return PrepareSpec(previous=previous, mkfs=mkfs, mount=v.mount_cmds(MNT),
                           timeout=max(float(spec.params.step_timeout), 600.0), mnt=MNT, umount=v.umount_cmds(MNT),
                           min_free=2 * self._max_bytes(spec))

    def _recover_spec(self, spec: CellSpec, v: FsVariant, k: int, log: str, out: str) -> RecoverSpec:
        return recover_spec(v, f"{WORKDIR}/{k}", log, out, float(spec.params.step_timeout),
                            float(spec.params.fsck_timeout), sabotage=spec.params.sabotage)

    def _recover_timeout(self, rs: RecoverSpec) -> float:
        return recover_timeout(rs)

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        if spec.variant.media == "mtd":
            return [self._nand_boot(spec)]
        v = case_variant(spec.variant, spec.params.mode)
        t = float(spec.params.step_timeout)
        cuts = self.cuts(spec)
        boots: list[list[Step]] = [[] for _ in range(len(cuts) + 1)]
        for k, cut in enumerate(cuts):
            # the previous cut's recovery first (its verdict says whether to reuse the filesystem);
            # then one step: mount (or make) the filesystem, then the workload, which asks for the
            # cut itself ("cut-power-in" host call) once it has started, so the cut lands
            # cut_at[k] s into it whatever the start-up took
            prep = self._prepare(spec, v, f"{RUN}/{VERDICT}" if k else None, v.make_cmds())
            boots[k].append(Step("work", self._work(spec, k, f"{RUN}/{LOG}", cut + 30, cut_in=cut, prepare=prep),
                                 timeout=2 * max(t, 600.0) + cut + 120))
            rs = self._recover_spec(spec, v, k, f"{RUN}/{PREV_LOG}", f"{RUN}/{VERDICT}")
            boots[k + 1].insert(0, Step("recover", f"{PCW} recover {shell_arg(rs)}", timeout=self._recover_timeout(rs),
                                        may_fail=True))
        return boots

    def before_boot(self, spec: CellSpec, index: int, run_dir: Path) -> None:
        """Hand the previous boot's workload log to this boot's recovery, through its run directory."""
        if spec.variant.media == "mtd" or index == 0:
            return
        here, prev = boot_dir(run_dir, index), boot_dir(run_dir, index - 1)
        here.mkdir(parents=True, exist_ok=True)
        (here / PREV_LOG).unlink(missing_ok=True)
        if (prev / LOG).exists():
            shutil.copyfile(prev / LOG, here / PREV_LOG)

    def _nand_boot(self, spec: CellSpec) -> list[Step]:
        v = case_variant(spec.variant, spec.params.mode)
        fs = v.base
        t = float(spec.params.step_timeout)
        steps: list[Step] = []
        if fs.fstype == "ubifs":
            make = [fscat.ubi_detach_cmd() + " 2>/dev/null || true", *v.make_cmds()]
        else:
            make = v.make_cmds()
        for k, n in enumerate(self.cuts(spec)):
            log, out = f"{RUN}/pclog{k}.jsonl", f"{RUN}/pc-recover{k}.json"
            prep = self._prepare(spec, v, f"{RUN}/pc-recover{k - 1}.json" if k else None, make)
            steps.append(Step(f"prepare{k}", f"{PCW} prepare {shell_arg(prep)}", timeout=2 * max(t, 600.0) + 60,
                              may_fail=True))
            if fs.fstype != "ubifs":
                # no cut switch below JFFS2: freeze every writer at the cut, snapshot the flash, restore it
                # a filesystem in user space: the cut is its daemon's SIGKILL, the dead FUSE mount
                # then detached
                detach = fs.mounting.cut_umount_cmd(MNT)
                snap = SnapcutSpec(work=self._work(spec, k, log, n + 60), work_log=f"{RUN}/work{k}.log", cut=n,
                                   mtd=v.device_path(), snapshot="/tmp/flash.snap",
                                   umount=[detach] if detach else v.umount_cmds(MNT), timeout=t,
                                   kill_pidfile=fs.mounting.kill_pidfile(MNT))
                steps.append(Step(f"work{k}", f"{PCW} snapcut {shell_arg(snap)}", timeout=n + 3 * t + 60, may_fail=True))
                rs = dataclasses.replace(self._recover_spec(spec, v, k, log, out), check=None, repair=None)
                steps.append(Step(f"recover{k}", f"{PCW} recover {shell_arg(rs)}", timeout=self._recover_timeout(rs),
                                  may_fail=True))
                continue
            # UBI stops every write after the (n+1)th EC/VID header write from here
            steps.append(Step(f"arm{k}", f"echo {n} > {UBI_DBG}/tst_emulate_power_cut_min && "
                                          f"echo {n} > {UBI_DBG}/tst_emulate_power_cut_max && "
                                          f"echo 3 > {UBI_DBG}/tst_emulate_power_cut", timeout=60, may_fail=True))
            steps.append(Step(f"work{k}", self._work(spec, k, log, 60), timeout=120, may_fail=True))
            rs = dataclasses.replace(self._recover_spec(spec, v, k, log, out),
                                     teardown=[f"umount {MNT}", fscat.ubi_detach_cmd()], attach=[v.ubi_attach_cmd()],
                                     check=None, repair=None)
            steps.append(Step(f"recover{k}", f"{PCW} recover {shell_arg(rs)}", timeout=self._recover_timeout(rs),
                              may_fail=True))
        return steps

    def reproducers(self, run_id: str, result: Any) -> list[Reproducer]:
        """Virtual time: every iteration that did not end well, with the command that runs it again."""
        k = result.key
        return [Reproducer(k.id, k.device, k.fs, k.study, k.case, f"iteration {r['k']}", r["class"], r.get("why", ""),
                           r["repeat"])
                for r in result.extra.get("iterations", [])
                if r.get("repeat") and PowerCutClass(r["class"]) not in self.good_outcomes]

    # -- reading ---------------------------------------------------------------------
    def _facts(self, res: BootResult | None, step: str, path: Path) -> tuple[RecoverFacts | None, StepStatus | None]:
        """The recovery's facts (its step's stdout, else the file it kept writing) and
        its step's status (None: the step never ran)."""
        if res is None:
            return None, None
        s = res.step(step)
        facts = step_json(res, step) if s is not None else None
        if facts is None and s is not None and s.stdout.strip():
            try:
                facts = json.loads(s.stdout.strip().splitlines()[-1])
            except ValueError:
                facts = None
        if facts is None and path.exists():
            try:
                facts = json.loads(path.read_text())
            except ValueError:
                facts = None
        status = s.status if s is not None else (StepStatus.HANG if res.status.is_hang else None)
        return RecoverFacts.from_json(facts), status

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        cuts = self.cuts(spec)
        fstype = spec.variant.base.fstype
        raw = spec.variant.media == "mtd"
        records = []
        w = None
        for k, cut_at in enumerate(cuts):
            if raw:
                res = boots[0] if boots else None
                work = res.step(f"work{k}") if res else None
                facts, rstatus = self._facts(res, f"recover{k}", run_dir / f"pc-recover{k}.json")
                if fstype == "ubifs":
                    # the cut: UBI went read-only under the workload (it fails with EROFS or EIO)
                    cut = bool(work is not None and work.status is StepStatus.FAILED
                               and re.search(r"Errno (30|5)\]", work.stderr))
                else:
                    cut = bool((step_json(res, f"work{k}") or {}).get("cut")) if res else False
                if res is not None and res.status.is_hang and work is not None and work.status.is_hang:
                    cut, rstatus = True, StepStatus.HANG
                bstatus = res.status if res and res.step(f"recover{k}") is None else BootStatus.DONE
            else:
                # the workload in boot k, its recovery at the start of boot k + 1
                w = boots[k] if k < len(boots) else None
                res = boots[k + 1] if k + 1 < len(boots) else None
                # killed: by the cut, in the middle of the workload (whose step is then never reported)
                cut = w is not None and (w.status is BootStatus.KILLED or cut_hit_workload(w))
                facts, rstatus = self._facts(res, "recover", boot_dir(run_dir, k + 1) / VERDICT)
                # the boot's fate is the recovery's only while the recovery ran (then the next workload)
                rstep = res.step("recover") if res else None
                bstatus = BootStatus.DONE if rstep is not None and not rstep.status.is_hang else \
                    (res.status if res else None)
            cls, why = classify(facts, cut=cut, recover_status=rstatus, boot_status=bstatus, fstype=fstype)
            if not cls.ran and not raw and w is not None and not cut:
                ws = w.step("work")
                detail = (ws.stderr or ws.stdout).strip().splitlines()[-1:] if ws else [w.error]
                why += f": {w.status} {' '.join(detail)}"[:300]
            f = facts or RecoverFacts()
            v = f.verify or {}
            rec = {"k": k, "cut_at": cut_at, "class": cls, "why": why[:300],
                   "mount": mount_state(f, fstype) if cut and facts else None,
                   "fsck": (f.fsck or {}).get("result"),
                   "recovery": recovery_seconds(facts) if cls is not PowerCutClass.HANG else None,
                   "acks": v.get("acks"), "ops": v.get("ops"), "ok": v.get("ok")}
            if raw:
                rec["attach"] = f.run("mount1-attach").get("seconds") if f.mounted else None
                rec["mount_seconds"] = f.run("mount1").get("seconds") if f.mounted else None
            if not raw and cut:
                rec.update(ack_timing(boot_dir(run_dir, k)))
            if cls.keeps_console and res is not None:
                rec["console"] = res.console_log  # the kernel's own account of the hang
            if f.sabotaged is not None:
                rec["sabotaged"] = f.sabotaged
            if spec.clock is Clock.VIRTUAL and not raw:
                # the cut landed at a seeded guest instant: the iteration replays exactly
                rec["repeat"] = repeat_command(spec, k)
            records.append(rec)
        case = spec.params.mode
        meas = summarize(case, records)
        if raw:
            for key, field in (("attach", "attach"), ("mount", "mount_seconds")):
                vals = [r[field] for r in records if r.get(field) is not None]
                meas += m(case, key, statistics.median(vals) if vals else None, "s")
        errors = [r for r in records if not PowerCutClass(r["class"]).ran]
        status = CellStatus.FAILED if records and len(errors) == len(records) else CellStatus.OK
        err = f"{len(errors)} of {len(records)} iterations did not run: {errors[0]['why']}" if errors else ""
        return Outcome(meas, f"{len(records)} cuts: {headline({case: records}).split(': ', 1)[1]}",
                       extra={"cut_at": cuts, "iterations": records}, status=status, error=err[:400])
