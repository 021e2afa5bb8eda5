"""`crashstates`: run a workload once with the emulated device's write log on, then
check every crash state of it in the same lab boot, as CrashMonkey/B3 and fstests'
dm-log-writes tests check every flush, but at flash level: besides "everything
acknowledged by flush k", the states between flushes the flash model allows (any
subset of the writes still in the volatile cache lost, a program torn with its
paired pages damaged).

One cell per workload (case), one lab boot:
  log-start   (host) the device's write log starts, on the blank device
  mkfs
  work        (guest crashstates.py work) mount, the workload, unmount; every
              record of the workload's log (an intent before an operation, an
              acknowledgement once its persistence point returned) puts a mark in
              the write log first, so each state's expected contents are exact
  states      (host) the log stops; its crash states after the workload's first
              mark are listed (emulator: per interval between flushes the plain
              cut, up to `subsets` subset states, up to `tears` torn programs;
              with `at_marks`, the plain cut right after each intent and
              acknowledgement that holds something the last flush did not)
  check       (guest crashstates.py check) per state: the host serves it, the
              guest drops the block device's buffers and recovers exactly as a
              power-cut recovery does (mount, verify against the log as
              acknowledged at that state, unmount, check, repair, and mount
              again if the first mount failed), with the mount done by mount(2)
              (starting `mount` costs more in the lab than mounting)
Workloads: `powercut` (the powercut study's workload, bounded by operations) and
`sequences` (B3-style sequences: lab/guest/sequences.py says the alphabet, the
generator's bounds and what each crash state must show).

Each state is classified as a power cut's iteration is (powercut.classify: the
same classes, checked in the same order). A state that is not clean or
recovered is a failure: stored as (workload, seed, state id = log position and
damage choice), and the cell keeps the write log (crashlog/ in its log
directory, only then) so `flashbed crashstate replay RUN STATE --image FILE`
rebuilds that device image.

Each distinct state is checked once (crashhost/plan.py says when two states are the same,
and why one verdict then answers for both): the host marks the others with the state
whose verdict they share, and the parse gives them that verdict under their own id.
With `max_states` the distinct states are a seeded stratified sample, every flush kept;
the cell's `coverage` says what was checked and what a clean result then bounds.

Whose loss each failure is (attribute): a state without flash damage is the
filesystem's (the device kept everything it had made durable); a state whose cut
damaged durable data (a torn program's paired pages, on a part without
paired-page protection) had its undamaged twin (ID+u) checked in the same boot:
if the twin survived, the device caused the loss; if it failed too, both did,
and the filesystem would have lost data anyway: its promise counts as broken.
The damage is said as the write log knows it: the bytes damaged, those that held
flushed data, and where the twin's filesystem keeps them (FIEMAP: files, else
its metadata or free space). A state that shares another's verdict shares its
cause too: two states share one only when their damaged images are identical,
so their twins differ at most in the damaged units' lost content, and only the
checked state's twin is checked.

Metrics per case (the workload): states (listed), iterations (states with a
verdict), distinct and checked (when the host planned the checks), class:<name>,
kind:<flush|cut|subset|tear>, mount:<state>, fsck:<result>, failures,
cause:<filesystem|device|both|unknown> (failed states by cause), fs_failures and
fs_data_loss (failed states, and those that lost acknowledged data, the
filesystem caused: alone or both), damaged_states and damaged_flushed_states
(states whose cut damaged durable, and flushed, data), damage_survived (% of the
damaged states that survived), undamaged_survived (% of the others), the rate
(states checked in the lab per hour of the check, and of the whole cell;
verdicts_per_hour: every state's, shared ones included) and the median time
per state of each part (switch, drop, mount, verify, umount, fsck).
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import re
import shlex
import shutil
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import variants
from ..crashhost.plan import CheckPlan, VerifierInput, shared_verdicts
from ..crashhost.share import read_end_records, wall_limit_why
from ..crashhost.share import records as lab_records
from ..errors import last_line
from ..lab.boundary import BootResult, Step
from ..lab.guest import sequences
from ..lab.guest.crashstates import to_check
from ..lab.guest.guestlib import read_log
from ..lab.guest.protocol import Call, CrashCheckSpec, CrashWorkSpec, DirectMount, RecoverFacts, StateFacts, Workload
from ..shellwords import TOOLS
from ..sizes import size_text
from ..status import BootStatus, CellStatus, LossCause, PowerCutClass
from ..variants import FsVariant
from .base import CRASHLOG, MNT, PY, RUN, Case, CellSpec, Outcome, OutcomeTable, Reproducer, Study, m, step_json
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

CSW = f"{PY} {TOOLS}/crashstates.py"  # this study's guest side
WORKLOADS = (Workload.POWERCUT, Workload.SEQUENCES)  # its own; USER is the appcheck study's
KINDS = ("flush", "cut", "subset", "tear")
PARTS = ("switch", "drop", "mount", "verify", "umount", "fsck")
STATES_FILE, CHECKED_FILE, LOG_FILE = "states.json", "checked.jsonl", "cslog.jsonl"
FSCK_ON_HOST = ("run the filesystem's check (not its repair) on the host, on the state the emulator serves: the "
                "same program on the same bytes, without the lab kernel's cost of starting it (crashhost/check.py); "
                "false: in the lab")
FAILURES_KEPT = 200  # failures listed in a cell's result (all are counted)


def state_ref(cell_id: str, state: str) -> str:
    """How `flashbed crashstate replay` names one state of a run: its cell and its id."""
    return f"{cell_id}:{state}"


def replay_command(run: str, cell_id: str, fs: str, state: str) -> str:
    image = re.sub(r"[^A-Za-z0-9_.+@=,:-]", "_", f"{fs}-{state}.img")  # a variant's mkfs flags have spaces
    return f"flashbed crashstate replay {shlex.quote(run)} {shlex.quote(state_ref(cell_id, state))} --image {image}"


class CrashStates(Study):
    name = "crashstates"
    title = "Crash states"
    description = ("every crash state of a workload at flash level (each flush, lost cache subsets, torn programs), "
                   "checked in one boot against the acknowledged operations")
    order = 115
    primary_metric = "survived"
    good_outcomes = frozenset(c for c in PowerCutClass if c.good)
    media = ("block",)
    device_stats = False
    continue_after_failure = True  # a hung state is a result
    needs_write_log = True
    # which states exist and what each holds come from the write log, not the clock
    timing_free = True
    outcome_tables = (
        OutcomeTable("states by class", "class:", CLASSES + EXTRA_CLASSES, per_iteration=True),
        OutcomeTable("states by kind", "kind:", KINDS),
        OutcomeTable("mount after the crash", "mount:", MOUNT_STATES),
        OutcomeTable("checker after the crash", "fsck:", FSCK_RESULTS),
        OutcomeTable("failed states by cause", "cause:", tuple(LossCause)),
    )
    case_order = WORKLOADS

    @dataclass(frozen=True)
    class Params:
        workloads: tuple[str, ...] = param(WORKLOADS, choices=WORKLOADS, help="workloads, one cell each")
        workload: str = param(Workload.POWERCUT, choices=WORKLOADS, per_case="workloads")
        mode: str = param("async", choices=("sync", "async"), help="mount mode of the workload")
        ops: int = param(150, low=1, help="powercut workload: operations")
        max_file: int = param(1 << 20, unit="bytes", low=1, help="powercut workload: largest file")
        max_files: int = param(32, low=1, help="powercut workload: files it keeps")
        max_bytes: int = param(4 << 20, unit="bytes", low=1,
                               help="powercut workload: live data (verified at every state)")
        exhaustive: int = param(1, low=0, help="sequences: every valid sequence up to this many steps (27 of one, "
                                        "668 up to two)")
        sequences: int = param(50, low=0, help="sequences: this many more, seeded, longer up to max_len")
        max_len: int = param(3, low=1, help="sequences: longest sequence")
        subsets: int = param(4, low=0, help="subset states per interval between flushes")
        tears: int = param(2, low=0, help="torn-program states per interval (presets without paired-page protection)")
        at_marks: bool = param(True, help="also the plain cut right after each intent and acknowledgement that "
                                          "holds something the last flush did not")
        max_states: int = param(0, low=0, help="check a seeded sample of about this many distinct states: every flush "
                                               "state (even beyond it), the other kinds sampled in proportion "
                                               "(0: all)")
        dedup: bool = param(True, help="check each distinct state once (the same device image and verifier input) "
                                       "and record its verdict for every state that shares them")
        step_timeout: float = param(60.0, unit="s", above=0, help="limit of a mount, unmount or the verifier")
        fsck_timeout: float = param(300.0, unit="s", above=0)
        fsck_on_host: bool = param(True, help=FSCK_ON_HOST)
        check_timeout: float = param(6 * 3600.0, unit="s", above=0, help="limit of checking all states of a cell")
        sabotage: bool = param(False, help="skip an fsync the workload logs as made (tests the checks)")

    def cases(self, params, device):
        return [Case(w, dataclasses.replace(params, workload=w)) for w in params.workloads]

    # -- plan ------------------------------------------------------------------------
    def work_spec(self, spec: CellSpec, v: FsVariant) -> CrashWorkSpec:
        p = spec.params
        return CrashWorkSpec(workload=p.workload, mnt=MNT, dir=f"{MNT}/cs", log=f"{RUN}/{LOG_FILE}",
                             seed=work_seed(spec.seed, 0), mount=v.mount_cmds(MNT), umount=v.umount_cmds(MNT),
                             timeout=float(p.step_timeout), ops=p.ops, max_bytes=p.max_bytes,
                             max_files=p.max_files, max_file=p.max_file,
                             skip_fsync=max(1, p.ops // 3) if p.sabotage else 0,
                             sequences=p.sequences, exhaustive=p.exhaustive, max_len=p.max_len,
                             skip=[] if v.fs.hard_links else ["link"])

    def check_spec(self, spec: CellSpec, v: FsVariant, work: CrashWorkSpec) -> CrashCheckSpec:
        p = spec.params
        rs = recover_spec(v, work.dir, work.log, "", float(p.step_timeout), float(p.fsck_timeout))
        if not v.lower:  # a plain block filesystem: mount(2) directly
            rs = dataclasses.replace(rs, direct=DirectMount(v.device_path(), v.fs.fstype,
                                                            [*v.fs.mount_opts, *v.mount_extra]).to_json())
        return CrashCheckSpec(work=work.to_json(), states=f"{RUN}/{STATES_FILE}", device=v.device_path(),
                              recover=rs.to_json(), out=f"{RUN}/{CHECKED_FILE}",
                              kmsg_pattern=v.base.log_prefix or v.base.fstype,
                              watchdog=recover_timeout(rs) + 60, claim=True,
                              # a plain block filesystem on the emulated device: the host reads the state
                              check_on_host=bool(p.fsck_on_host) and not v.lower and rs.check is not None)

    def run_variant(self, spec: CellSpec) -> FsVariant:
        """The variant the workload and every recovery mount: the case's, with no background work
        at a random instant on any clock (variants.quiet): the states are the workload's, and a
        nobarrier cell's had a flush or not as ext4's lazyinit thread fell inside the workload."""
        return variants.quiet(case_variant(spec.variant, spec.params.mode))

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        p = spec.params
        v = self.run_variant(spec)
        work = self.work_spec(spec, v)
        check = self.check_spec(spec, v, work)
        return [[
            Step("log-start", host=Call.LOG_START),
            *[Step(f"mkfs{i}" if i else "mkfs", c, timeout=600) for i, c in enumerate(v.make_cmds())],
            Step("work", f"{CSW} work {shell_arg(work)}", timeout=3600),
            Step("states", host=Call.CRASH_STATES, timeout=600,
                 args={"subsets": p.subsets, "tears": p.tears, "seed": spec.seed, "marks": p.at_marks,
                       "out": STATES_FILE, **self.plan_args(spec), "checked": CHECKED_FILE,
                       "watchdog": check.watchdog}),
            Step("check", f"{CSW} check {shell_arg(check)}", timeout=p.check_timeout, may_fail=True),
        ]]

    verifier_input = VerifierInput.RECORDS  # what this study's verifier reads besides the device (crashhost/plan.py)
    states_file, checked_file = STATES_FILE, CHECKED_FILE
    check_inputs: tuple[str, ...] = (LOG_FILE, STATES_FILE)  # what another lab's check reads (crashhost/share.py)

    def plan_args(self, spec: CellSpec) -> dict[str, Any]:
        """How the host picks the states the lab checks (crashhost.plan.plan_checks): the listing's
        image classes, the workload log the verifier reads, the sample's bound and seed."""
        p = spec.params
        return {"images": bool(p.dedup), "dedup": bool(p.dedup), "verifier": str(self.verifier_input),
                "log": LOG_FILE, "max_states": p.max_states}

    def check_runs(self, records: list[dict]) -> int | None:
        """How many times the verifier itself ran, when it shares its verdict between states that
        recover alike (appcheck's share_trees); None: once per checked state."""
        return None

    def check_where(self, spec: CellSpec, records: list[dict]) -> tuple[str, dict | None]:
        """Where the verifier ran (appcheck: the host or the lab), as the cell's head says it and as its
        result keeps it; ('', None) where it always runs in the lab."""
        return "", None

    def sequence_count(self, spec: CellSpec) -> int:
        w = self.work_spec(spec, spec.variant)
        return len(sequences.generate(w.exhaustive, w.sequences, w.max_len, w.seed, tuple(w.skip)))

    # -- reading -----------------------------------------------------------------------
    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        p = spec.params
        case = p.workload
        fstype = spec.variant.base.fstype
        res = boots[0] if boots else None
        work = step_json(res, "work") if res else None
        listing = _read_json(run_dir / STATES_FILE) or {}
        checked = [StateFacts.from_json(r) for r in lab_records(run_dir, CHECKED_FILE)]  # every lab's
        if not work or not listing:
            why = _first_problem(res)
            return Outcome([], f"error: {why}"[:200], status=CellStatus.FAILED, error=why)
        records = [self.record(s, fstype) for s in checked]
        states = listing.get("states", [])
        plan = CheckPlan.from_json(listing.get("plan"))
        planned = to_check(states)  # the states the lab checks itself, in order
        want = len(planned)
        stopped = _last_json(res.step("check")).get("stopped", "")  # it exits 3 after a hang
        ends = read_end_records(run_dir)  # how each lab that took the cell's states ended (crashhost/share.py)
        if ends is not None:
            done = {r["state"] for r in records}
            for e in ends:
                st = e.get("state")
                if e.get("in_flight") and st and st["id"] not in done:
                    records.append(_died_on(st, e.get("boot") == BootStatus.CRASH, e.get("console", ""),
                                            why=e.get("why", "")))
                    stopped = stopped or f"state {st['id']}: {records[-1]['why']}"
                stopped = stopped or e.get("stopped") or ""
        elif len(records) < want and not stopped and res.status in (BootStatus.KILLED, BootStatus.HANG,
                                                                     BootStatus.CRASH):
            # the lab itself stuck (killed by the host's watchdog, or out of time) or died on this state
            records.append(_died_on(planned[len(records)], res.status is BootStatus.CRASH, res.console_log,
                                    why=wall_limit_why(res, run_dir)))
            stopped = f"state {records[-1]['state']}: {records[-1]['why']}"
        unchecked = want - len(records)
        records = with_shared(states, records)
        mark_verdictless(records)
        lab_nv = Counter(r["no_verdict"] for r in records if r.get("no_verdict") and "same" not in r)
        if unchecked:
            lab_nv[f"not checked ({stopped.split(': ', 1)[0]} stopped the check)" if stopped
                   else "not checked"] += unchecked
        failures = [r for r in records if not PowerCutClass(r["class"]).good]
        seed = work_seed(spec.seed, 0)
        recs = read_log(str(run_dir / LOG_FILE))
        lost = {s.id: ((s.facts or {}).get("verify") or {}).get("loss", []) for s in checked}
        for r in failures:
            r.update(workload=case, seed=seed)
            if r["class"] == PowerCutClass.DATA_LOSS:
                r["evidence"] = loss_evidence(lost.get(r.get("same", r["state"]), []), r["acked"], recs,
                                              listing.get("flush_pos", []))
        # the labs' checking on the host's wall clock (share.json; a recording made before has only
        # the check step's own time, which in virtual time is the guest's)
        walls = [e["wall"] for e in ends or [] if e.get("wall")]
        meas = self._measure(case, listing, records, failures, res, sum(walls) if walls else None)
        # states without a verdict are no evidence either way (report/eligibility.py): counted
        meas += m(case, "no_verdict", sum(lab_nv.values()), "count")
        meas += m(case, "to_judge", want, "count")
        log = run_dir / CRASHLOG
        if not failures and log.is_dir():
            shutil.rmtree(log)  # kept for failed cells only: they replay from it
        check = res.step("check")
        error = ""
        if unchecked and not stopped:  # flashbed's own failure, not the filesystem's: the cell runs again
            error = f"{unchecked} of {len(states)} states were not checked: " + \
                (f"check step {check.status}: {last_line(check.stderr or check.stdout)[-200:]}" if check else
                 f"the check did not run ({res.status}: {last_line(res.error)})")
            error += "".join(f"; {e['lab']}: {e['error']}" for e in ends or [] if e.get("error"))
        counts = Counter(r["class"] for r in records)
        runs = self.check_runs(records)
        head = f"{plan.found if plan else len(records)} states"
        if plan and (plan.distinct, plan.checked, len(records)) != (plan.found,) * 3:
            # a sample leaves states without a verdict: what was found, then what was judged
            verdicts = sum(1 for r in records if not r.get("no_verdict"))
            judged = f"; {verdicts} with a verdict" if verdicts != plan.found else ""
            head += f" ({plan.distinct} distinct, {plan.checked} checked{judged})"
        if lab_nv:
            # said before where the check ran and the classes: the terminal's line is cut at 200
            # characters, and a state without a verdict is what decides whether the cell counts
            head += f", {sum(lab_nv.values())} of {want} without a verdict (no evidence either way)"
        where, where_counts = self.check_where(spec, records)
        head += ": " + ", ".join(f"{n} {c}" for c, n in counts.most_common())
        causes = Counter(r["cause"] for r in records if r.get("cause"))
        if causes:
            head += "; by cause: " + ", ".join(f"{n} {c}" for c, n in causes.most_common())
        if runs is not None:
            # after the classes: where the check ran is long (kept verdicts, the lab's reasons), and the
            # headline is cut at 200 characters, which cut the classes themselves
            head += f" (the check ran on {runs} distinct recovered trees{where})"
        if failures:
            head += f"; {len(failures)} to replay (write log kept: {(listing.get('log_bytes') or 0) / 1e6:.1f} MB)"
        extra = {
            "workload": case, "seed": seed, "work": work,
            "listing": {k: v for k, v in listing.items() if k not in ("states", "log_bytes", "flush_pos")}
            | {"states": len(states)},
            "failures": failures[:FAILURES_KEPT], "log": CRASHLOG if failures else None,
            "log_bytes": listing.get("log_bytes"),
            "stopped": stopped, "sequences": self.sequence_count(spec) if case == Workload.SEQUENCES else None,
            **({"check_where": where_counts} if where_counts else {}),
        }
        if lab_nv:
            extra["no_verdict"] = {"states": sum(lab_nv.values()), "of": want, "why": dict(lab_nv.most_common())}
        if plan:
            extra["coverage"] = plan.coverage(judged=want - sum(lab_nv.values())) + (
                f"; your check ran once per distinct recovered tree and acknowledged labels: {runs} runs"
                if runs is not None else "")
        if stopped and unchecked:
            head += f"; {unchecked} states after it not checked"
        status = CellStatus.FAILED if not records else CellStatus.ERROR if error else CellStatus.OK
        return Outcome(meas, head, extra=extra, status=status, error=error[:400])

    def reproducers(self, run_id: str, result: Any) -> list[Reproducer]:
        k = result.key
        return [Reproducer(k.id, k.device, k.fs, k.study, k.case, f["state"], f["class"],
                           "; ".join(x for x in (f.get("why", ""), evidence_text(f), cause_text(f)) if x),
                           replay_command(run_id, k.id, k.fs, f["state"]), cause=f.get("cause") or "")
                for f in result.extra.get("failures", [])]

    def record(self, s: StateFacts, fstype: str) -> dict:
        """A checked state's record (_record) with whose loss it is, if it failed (attribute)."""
        r = self._record(s, fstype)
        tw = self._record(StateFacts.from_json(s.twin), fstype) if s.twin else None
        r["cause"] = attribute(r, tw)
        r["damage"] = damage_summary(s)
        if tw is not None:
            r["twin"] = {"state": tw["state"], "class": tw["class"], "why": tw["why"]}
        r["fs_class"] = r["class"] if r["cause"] is LossCause.FILESYSTEM else \
            tw["class"] if r["cause"] is LossCause.BOTH and tw is not None else None
        return r

    def _record(self, s: StateFacts, fstype: str) -> dict:
        facts = RecoverFacts.from_json(s.facts) if s.facts else None
        if s.switch and s.switch.get("error"):
            cls, why = PowerCutClass.ERROR, f"the host could not serve the state: {s.switch['error']}"
        elif s.error:
            cls, why = PowerCutClass.ERROR, f"the state's check could not run: {s.error}"
        else:
            cls, why = classify(facts, cut=True, fstype=fstype)
        f = facts or RecoverFacts()
        return {"state": s.id, "kind": s.kind, "acked": s.acked, "damaged": s.damaged, "class": cls,
                "why": why[:300], "mount": mount_state(f, fstype) if facts else None,
                "fsck": (f.fsck or {}).get("result"), "seconds": s.seconds}

    def _measure(self, case: str, listing: dict, records: list[dict], failures: list[dict],
                 res: BootResult, lab_seconds: float | None = None) -> list:
        out = m(case, "states", len(listing.get("states", [])), "count")
        out += m(case, "iterations", len(records), "count")  # the per-state table's total
        classes = Counter(r["class"] for r in records)
        for c in CLASSES:
            out += m(case, f"class:{c}", classes[c], "count")
        for c in EXTRA_CLASSES:
            if classes[c]:
                out += m(case, f"class:{c}", classes[c], "count")
        kinds = Counter(r["kind"] for r in records)
        for k in KINDS:
            out += m(case, f"kind:{k}", kinds[k], "count")
        for s in MOUNT_STATES:
            if n := sum(r["mount"] == s for r in records):
                out += m(case, f"mount:{s}", n, "count")
        for s in FSCK_RESULTS:
            if n := sum(r["fsck"] == s for r in records):
                out += m(case, f"fsck:{s}", n, "count")
        out += m(case, "failures", len(failures), "count")
        plan = CheckPlan.from_json(listing.get("plan"))
        lab = [r for r in records if "same" not in r]  # checked in the lab, not shared verdicts
        if plan:
            out += m(case, "distinct", plan.distinct, "count")
            out += m(case, "checked", len(lab), "count")
        if (runs := self.check_runs(lab)) is not None:
            out += m(case, "check_runs", runs, "count")
        out += cause_measurements(case, records)
        check = res.step("check")
        secs = lab_seconds or (check.seconds if check is not None else None)  # per lab: per core
        if secs and lab:
            out += m(case, "states_per_hour", 3600 * len(lab) / secs, "1/h")
            if plan:  # every verdict, shared ones included: what the check loop gave per hour
                out += m(case, "verdicts_per_hour", 3600 * len(records) / secs, "1/h")
        if lab and res.total_seconds:
            out += m(case, "states_per_hour_cell", 3600 * len(lab) / res.total_seconds, "1/h")
        for part in PARTS:
            vals = [r["seconds"][part] for r in lab if part in (r.get("seconds") or {})]
            out += m(case, f"{part}_ms", 1000 * statistics.median(vals) if vals else None, "ms")
        return out


def mark_verdictless(records: list[dict]) -> int:
    """Marks each state that has no verdict (`no_verdict`, why) and takes its cause away: it is
    evidence neither for the filesystem nor against it. No verdict: the state could not be set up
    (class error), the lab stuck or died on it (no cause), its twin could not say whose loss it
    was (cause unknown), the check did not finish, or the check gave its recovered tree two
    verdicts (`unstable`: the state whose run it contradicted; every state of that tree). Returns
    how many records are marked."""
    unstable: dict[str, str] = {}  # the state whose run was contradicted: the first that contradicted it
    for r in records:
        if r.get("unstable") and not r.get("tree_same"):
            unstable.setdefault(r["unstable"], r["state"])
    for r in records:
        first = r.get("unstable") or next((u for u in (r["state"], r.get("same"), r.get("tree_same"))
                                           if u in unstable), None)
        cls = PowerCutClass(r["class"])
        if first:
            r["no_verdict"] = (f"your check gave different verdicts to one recovered tree (states {first} and "
                               f"{unstable.get(first, r['state'])}): it is not a function of the tree")
        elif r.get("no_verdict"):
            pass
        elif not cls.ran:
            r["no_verdict"] = "not checked: " + r.get("why", "")[:120]
        elif not cls.good and r.get("cause") in (None, LossCause.UNKNOWN):
            r["no_verdict"] = r.get("why", "")[:160] or str(cls)
        if r.get("no_verdict") and r.get("cause") is not LossCause.UNKNOWN:  # unknown: said as such
            r["cause"], r["fs_class"] = None, None
    return sum(1 for r in records if r.get("no_verdict"))


def _died_on(st: dict, crashed: bool, console: str, why: str = "") -> dict:
    """The record of a state a lab stuck on (killed by the host's watchdog, or out of time) or
    died on; `why` when the lab knows better (a program over its wall-clock limit)."""
    return {"state": st["id"], "kind": st["kind"], "acked": st["acked"], "damaged": st.get("damaged", 0),
            "mount": None, "fsck": None, "seconds": {},
            "class": PowerCutClass.CRASH if crashed else PowerCutClass.HANG,
            "why": why or ("the lab kernel died" if crashed else "the lab stopped answering") + " while checking it",
            "console": console}


def with_shared(states: list[dict], lab: list[dict]) -> list[dict]:
    """The lab's records and the verdicts other states share with them (crashhost/plan.py), in
    listing order."""
    order = {s["id"]: i for i, s in enumerate(states)}
    every = lab + shared_verdicts(states, {r["state"]: r for r in lab})
    return sorted(every, key=lambda r: order.get(r["state"], len(order)))


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def loss_evidence(losses: list[str], acked: int, recs: list[dict], flush_pos: list[int]) -> list[dict]:
    """Per lost name (the verifier's "name: how"): the last operation on it the state
    acknowledged, its intent and acknowledgement marks in the write log, and how many
    flushes the device acknowledged between them. None: the filesystem acknowledged it
    without flushing (durable by luck only); some, and no flash damage in the state: it
    wrote what it lost after its last flush."""
    ops: dict[tuple, tuple[str, int]] = {}  # operation -> (the name it changes, its intent mark)
    last: dict[str, tuple[int, int]] = {}  # name -> the last acknowledged operation's (intent, ack) marks
    for r in recs:
        if r.get("m", acked) >= acked:
            break
        key = (r.get("seq"), r.get("k"), r.get("n"))
        if r.get("e") == "intent":
            ops[key] = (r.get("name") or f"s{r['seq']:04d}", r["m"])
        elif r.get("e") == "ack" and key in ops:
            name, mi = ops[key]
            last[name] = (mi, r["m"])
    out = []
    for loss in losses:
        name = loss.split(":", 1)[0].split("/", 1)[0]
        mi, ma = last.get(name, (-1, -1))
        if ma < 0:
            continue
        flushes = bisect.bisect_left(flush_pos, ma) - bisect.bisect_right(flush_pos, mi)
        out.append({"name": name, "intent": mi, "ack": ma, "flushes": flushes})
    return out


def evidence_text(failure: dict) -> str:
    """What the write log says about a loss (loss_evidence), in a few words."""
    ev = failure.get("evidence") or []
    bare = [e["name"] for e in ev if not e["flushes"]]
    flushed = [e["name"] for e in ev if e["flushes"]]
    parts = []
    if bare:
        parts.append("acknowledged with no flush of the device: " + ", ".join(bare))
    if flushed:
        parts.append("flushed before it was acknowledged: " + ", ".join(flushed) + (
            f" (the state's torn program damaged {failure['damaged']} units)" if failure.get("damaged") else
            " (no flash damage: the filesystem wrote it after that flush)"))
    return "; ".join(parts)


def attribute(rec: dict, twin: dict | None) -> LossCause | None:
    """Whose loss a checked state is (None: it survived, or it was not checked). Without flash
    damage the device kept everything durable: the filesystem's. With it, its undamaged twin
    decides: survived, the device's; failed too, both (the filesystem would have lost data in
    the twin, a state a part with paired-page protection can be in); not checked, unknown."""
    cls = PowerCutClass(rec["class"])
    if cls.good or not cls.ran:
        return None
    if not rec.get("damaged"):
        return LossCause.FILESYSTEM
    if twin is None or not PowerCutClass(twin["class"]).ran:
        return LossCause.UNKNOWN
    return LossCause.DEVICE if PowerCutClass(twin["class"]).good else LossCause.BOTH


def damage_summary(s: StateFacts) -> dict | None:
    """What the state's cut damaged, as the host served it and its twin's filesystem placed it:
    units, bytes, the flushed bytes and where they lived (TwinPlace: files, metadata or free space)."""
    if not s.damaged:
        return None
    d = s.damage or {}
    out: dict = {"units": s.damaged, "bytes": sum(n for _o, n in d.get("ranges") or []),
                 "flushed_bytes": sum(n for _o, n in d.get("flushed") or [])}
    place = ((s.twin or {}).get("damage") or {}).get("place")
    if place is not None:
        out["place"] = place
    return out


def cause_measurements(case: str, records: list[dict]) -> list:
    """Failed states by cause; the filesystem's share (what rules it out); the damaged states
    and how many of them it survived (what the device's damage costs it: a scored criterion)."""
    causes = Counter(r.get("cause") for r in records)
    out = []
    for c in LossCause:
        out += m(case, f"cause:{c}", causes[c], "count")
    out += m(case, "fs_failures", sum(causes[c] for c in LossCause if c.filesystems), "count")
    out += m(case, "fs_data_loss", sum(r.get("fs_class") == PowerCutClass.DATA_LOSS for r in records), "count")
    damaged = [r for r in records if r.get("damaged") and PowerCutClass(r["class"]).ran]
    out += m(case, "damaged_states", len(damaged), "count")
    out += m(case, "damaged_flushed_states", sum(bool((r.get("damage") or {}).get("flushed_bytes")) for r in damaged),
             "count")
    good = sum(PowerCutClass(r["class"]).good for r in damaged)
    out += m(case, "damage_survived", 100.0 * good / len(damaged) if damaged else None, "%")
    # the filesystem's own recovery: the states the device did not damage
    kept = [r for r in records if not r.get("damaged") and PowerCutClass(r["class"]).ran]
    out += m(case, "undamaged_survived",
             100.0 * sum(PowerCutClass(r["class"]).good for r in kept) / len(kept) if kept else None, "%")
    return out


def place_text(place: dict | None, flushed: float) -> str:
    """Where the flushed bytes a cut damaged lived: 'cs/wal.log 4 KiB, metadata or free space 12 KiB'."""
    if not flushed:
        return ""
    if not place:
        return "where they lived was not mapped"
    if place.get("why"):
        return f"not mapped to files ({place['why']})"
    files = sorted((place.get("files") or {}).items(), key=lambda kv: -kv[1])
    bits = [f"{p} {size_text(n)}" for p, n in files[:4]] + ([f"{len(files) - 4} more files"] if len(files) > 4 else [])
    if place.get("outside"):
        bits.append(f"metadata or free space {size_text(place['outside'])}")
    return ", ".join(bits)


def cause_text(failure: dict) -> str:
    """Whose loss a failed state is, with the device's damage as the write log and the twin say it."""
    cause = failure.get("cause")
    if not cause:
        return ""
    d = failure.get("damage") or {}
    tw = failure.get("twin") or {}
    if cause == LossCause.FILESYSTEM:
        return "the filesystem's loss: no flash damage in this state (the device kept everything durable)"
    hit = f"the cut damaged {d.get('units', failure.get('damaged', 0))} units"
    if d.get("flushed_bytes"):
        where = place_text(d.get("place"), d["flushed_bytes"])
        hit += f", {size_text(d['flushed_bytes'])} of flushed data" + (f" ({where})" if where else "")
    elif "flushed_bytes" in d:
        hit += " (none of them flushed)"
    if cause == LossCause.DEVICE:
        return f"the device's loss: {hit}; its undamaged twin {tw.get('state', '')} {tw.get('class', '')}"
    if cause == LossCause.BOTH:
        return (f"the filesystem's loss too: {hit}, and its undamaged twin {tw.get('state', '')} failed as well "
                f"({tw.get('class', '')}: {tw.get('why', '')[:100]})")
    return f"whose loss is unknown: {hit}, and its undamaged twin was not checked"


def _last_json(step: Any) -> dict:
    """The JSON line a guest program printed last, whatever its exit code."""
    try:
        return json.loads(step.stdout.strip().splitlines()[-1]) if step is not None else {}
    except (ValueError, IndexError):
        return {}


def _first_problem(res: BootResult | None) -> str:
    if res is None:
        return "the lab did not boot"
    for s in res.steps:
        if not s.status.ok:
            lines = (s.stderr or s.stdout).strip().splitlines()
            return f"step '{s.name}' {s.status}: {lines[-1] if lines else ''}"[:400]
    return f"lab {res.status}: {res.error}"[:400] if not res.ok else "the workload left no log of its states"

