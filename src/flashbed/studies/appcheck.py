"""`appcheck`: the user's own check (`--check FILE`) at every crash state of the user's own
workload (`--workload FILE`): the crashstates study's machinery over a workload it did not
write.

One cell, one lab boot, as crashstates: the device's write log on, mkfs, the workload run
once (in MNT/cs, $FLASHBED_MNT there), the crash states listed (each flush, lost cache
subsets, torn programs, and the plain cut at each acknowledgement), then per state: the
state served, the filesystem recovered as after a power cut (mount, the check, unmount,
fsck, repair) with the check run on the mounted filesystem, its working directory and
$FLASHBED_MNT the workload's directory. Exit 0: the application's data is consistent; any
other exit is a failure of that state (class data-loss, the check's last line as the
reason); a check over its limit is a recorded outcome (class hang, "the check did not
finish"), and the next state is checked.

What the workload counts on: right after an operation returns that it relies on (a COMMIT,
an fsync), it runs `$FLASHBED_ACK LABEL...` (e.g. `$FLASHBED_ACK committed=17`). That puts
a mark in the device's write log; every crash state at or after the mark acknowledged it,
and the check reads the labels acknowledged before its state from the file
$FLASHBED_ACKED (one acknowledgement a line, in order). The labels live in the run
directory, not on the device under test: a crash cannot take them away, so "no committed
row lost" is checked against what was acknowledged, not against what survived.

Failing states keep the write log and their replay command, as crash states do.

A fio job file gets fio's own power-fail verification, with or without --check: its recorded
run writes with verify headers (verify=crc32c unless the job chooses its own, do_verify=0:
no read-back in the recorded run) and saves fio's write state (verify_state_save) in the run
directory, off the device; then `sync` and the acknowledgement `fio=completed`. In each state
at or after that acknowledgement, `fio --verify_only --verify_state_load=1` reads back every
write fio saw completed (the job file without its rate limits and think times) and a failed
verification is a failure of the state; your --check, if given, runs after it. The limit:
fio saves its write state only when a job ends (at its end, or at a trigger, which ends it
too), so the state says what fio completed by its end. A state before the acknowledgement
may lawfully lack what fio completed after the last flush before it; fio's state cannot say
which writes those are, so there fio's verification is not run (the state's verdict says
so) and such a state is held to its recovery (and to your check) only.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..crashhost import checkwords, usercheck
from ..crashhost.plan import VerifierInput
from ..errors import FlashbedError
from ..lab.guest.protocol import CrashWorkSpec, StateFacts, Workload
from ..results import printable
from ..status import PowerCutClass
from ..userwork import Kind, UserFile, stage
from ..variants import FsVariant
from . import inputs
from .base import MNT, RUN, Case, CellSpec
from .crashstates import FSCK_ON_HOST, LOG_FILE, CrashStates
from .failures import work_seed
from .params import param, user_file
from .workload import STAGED

CHECK = "check.sh"
FIO_CHECK, FIO_VERIFY, FIO_STATE = "fio-check.sh", "verify.fio", "fio-state"
FIO_DONE = "fio=completed"  # the acknowledgement after fio's end and a sync
# what the recorded run adds to a job file (before it: the job's own [global] overrides it)
FIO_RECORD = "verify=crc32c\ndo_verify=0\nverify_state_save=1\n"
# options the read-back leaves out: they pace the job, they do not place its data
FIO_UNPACED = re.compile(r"^\s*(rate|rate_min|rate_iops|rate_iops_min|rate_process|rate_ignore_thinktime|thinktime"
                         r"\w*|do_verify|startdelay|ramp_time)\s*(=|$)", re.I)


class AppCheck(CrashStates):
    name = "appcheck"
    title = "Your check at every crash state"
    description = ("your own check (--check FILE) after recovery in every crash state of your workload "
                   "(each flush, lost cache subsets, torn programs)")
    order = 116
    case_order = (Workload.USER,)

    inputs = (inputs.WORKLOAD, inputs.CHECK)
    named_as = "--check (study appcheck)"

    @dataclass(frozen=True)
    class Params:
        file: UserFile | None = user_file("--workload FILE", help="your workload")
        check: UserFile | None = user_file("--check FILE", keys=("check", "check_digest", None), help="your check")
        workload: str = param(Workload.USER, choices=(Workload.USER,))
        mode: str = param("async", choices=("sync", "async"), help="mount mode of the workload")
        timeout: float = param(1800.0, unit="s", above=0, help="limit of the workload")
        check_limit: float = param(60.0, unit="s", above=0, help="limit of one run of the check (over it: a recorded "
                                                       "outcome, class hang)")
        subsets: int = param(4, low=0, help="subset states per interval between flushes")
        tears: int = param(2, low=0, help="torn-program states per interval (presets without paired-page protection)")
        at_marks: bool = param(True, help="also the plain cut right after each acknowledgement")
        max_states: int = param(0, low=0, help="check a seeded sample of about this many distinct states: every flush "
                                               "state (even beyond it), the other kinds sampled in proportion "
                                               "(0: all)")
        dedup: bool = param(True, help="check each distinct state once (the same device image and acknowledged "
                                       "labels) and record its verdict for every state that shares them")
        share_trees: bool = param(True, help="run your check once per recovered workload directory and acknowledged "
                                             "labels, its verdict shared by the states that recover to them (off "
                                             "for a check that reads times, inode numbers, free space or files "
                                             "outside the directory: docs/your-workload.md)")
        step_timeout: float = param(60.0, unit="s", above=0, help="limit of a mount or unmount")
        fsck_timeout: float = param(300.0, unit="s", above=0)
        fsck_on_host: bool = param(True, help=FSCK_ON_HOST)
        check_in_lab: bool = param(False, help="run your check in the lab on the mounted filesystem, not on the host "
                                               "on a copy of each recovered directory (a check that needs the "
                                               "filesystem itself is kept there without it: "
                                               "crashhost/usercheck.py)")
        check_timeout: float = param(6 * 3600.0, unit="s", above=0, help="limit of checking all states of a cell")

    def joins(self, sets) -> bool:
        """With your check, or a fio job's own verification."""
        return bool(sets.get("check")) or sets.get("kind") == Kind.FIO

    def cases(self, params, device):
        if params.file is None or not (params.check or params.file.kind is Kind.FIO):
            raise FlashbedError("study appcheck runs your check on your workload: give --workload FILE and "
                                "--check FILE (a fio job file needs no check: fio verifies its own writes)")
        return [Case(Workload.USER, params)]

    def before_boot(self, spec: CellSpec, index: int, run_dir: Path) -> None:
        p = spec.params
        staged = stage(p.file.path, p.file.digest, run_dir / STAGED[p.file.kind])
        if p.file.kind is Kind.FIO:
            job = staged.read_text()
            head = f"[global]\ndirectory={MNT}/cs\n"
            staged.write_text(head + (FIO_RECORD if not _has_verify(job) else "") + "\n" + job)
            (run_dir / FIO_VERIFY).write_text(head + ("verify=crc32c\n" if not _has_verify(job) else "") + "\n"
                                              + verify_job(job))
            check = run_dir / FIO_CHECK
            check.write_text(fio_check(f"{RUN}/{CHECK}" if p.check else ""))
            check.chmod(0o755)
        if p.check:
            stage(p.check.path, p.check.digest, run_dir / CHECK)

    def work_spec(self, spec: CellSpec, v: FsVariant) -> CrashWorkSpec:
        p = spec.params
        cmd = (f"mkdir -p {RUN}/{FIO_STATE} && fio --aux-path={RUN}/{FIO_STATE} --output-format=json "
               f"--output={RUN}/workload.json {RUN}/{STAGED[Kind.FIO]} && sync && $FLASHBED_ACK {FIO_DONE}"
               if p.file.kind is Kind.FIO else f"{RUN}/{STAGED[Kind.SCRIPT]}")
        check = f"{RUN}/{FIO_CHECK}" if p.file.kind is Kind.FIO else f"{RUN}/{CHECK}"
        # the step's own limit covers the workload; a mount or unmount gets step_timeout
        return CrashWorkSpec(workload=Workload.USER, mnt=MNT, dir=f"{MNT}/cs", log=f"{RUN}/{LOG_FILE}",
                             seed=work_seed(spec.seed, 0), mount=v.mount_cmds(MNT), umount=v.umount_cmds(MNT),
                             timeout=float(p.timeout), command=cmd, check=check,
                             check_timeout=float(p.check_limit), share_trees=bool(p.share_trees),
                             check_in_lab=self.check_place(spec))

    def check_place(self, spec: CellSpec) -> str:
        """Why the user's check runs in the lab ('' : on the host, on a copy of each recovered directory)."""
        p = spec.params
        return usercheck.where(Path(p.check.path) if p.check else None, bool(p.check_in_lab), bool(p.share_trees),
                               p.file.kind is Kind.FIO)

    verifier_input = VerifierInput.ACKS  # the check reads the acknowledged labels ($FLASHBED_ACKED)
    # another lab's check reads the user's check and fio's read-back as staged, and fio's write state
    check_inputs = (*CrashStates.check_inputs, CHECK, FIO_CHECK, FIO_VERIFY, FIO_STATE)

    def sequence_count(self, spec: CellSpec) -> int:
        return 0

    def check_runs(self, records: list[dict]) -> int | None:
        """The check's own runs: a state that took another's verdict (its recovered tree and labels
        were the same, `tree_same`, or the host kept a verdict for what the check would see there,
        `shared`) did not run it; None when no state was keyed (share_trees off)."""
        if not any(r.get("tree") or r.get("tree_perturbed") for r in records):
            return None
        return sum(1 for c in _own_checks(records) if not c.get("shared"))

    def verdict_key(self, spec: CellSpec) -> str:
        """Which key the host shares the check's verdicts by, and why (crashhost/checkwords.py)."""
        p = spec.params
        if not p.check or p.file.kind is Kind.FIO:
            return ""
        try:
            return checkwords.choose(Path(p.check.path).read_bytes()).said()
        except OSError as e:
            return f"tree key: its file cannot be read ({e.strerror})"

    def check_where(self, spec: CellSpec, records: list[dict]) -> tuple[str, dict | None]:
        """': 310 on the host, 2 in the lab (why); 40 taken from kept verdicts (30 of other cells)': the
        check's own runs by where they ran, the lab's reasons (the cell's, or what a state's copy could not
        be) with how many runs each, and the verdicts the host took from the run's kept ones
        (crashhost/verdicts.py), with which key."""
        ran = _own_checks(records)
        if not any("where" in c for c in ran):  # none ran, or recorded before the check could run on the host
            return "", None
        taken = [c["shared"] for c in ran if isinstance(c.get("shared"), dict)]
        own = spec.key.id if spec is not None else ""
        others = sum(1 for t in taken if t.get("cell") != own)
        ran = [c for c in ran if not c.get("shared")]
        host = sum(1 for c in ran if c.get("where") == "host")
        cell_why = self.check_place(spec)
        whys = Counter(c.get("why") or cell_why or "not said" for c in ran if c.get("where") != "host")
        lab = sum(whys.values())
        text = (f": {host} on the host" if host else "") + (", " if host and lab else ": " if lab else "")
        if lab:
            text += f"{lab} in the lab (" + "; ".join(f"{n}: {w}" if len(whys) > 1 or host else w
                                                      for w, n in whys.most_common(3)) + ")"
        key = self.verdict_key(spec) if spec is not None and (host or taken) else ""
        if taken:
            text += f"; {len(taken)} taken from kept verdicts ({others} of other cells, {key.split(':')[0]})"
        return text, {"host": host, "lab": lab, "why": dict(whys.most_common(5)),
                      **({"shared": len(taken), "shared_other_cells": others} if taken else {}),
                      **({"key": key} if key else {})}

    def _record(self, s: StateFacts, fstype: str) -> dict:
        r = super()._record(s, fstype)
        verify = (s.facts or {}).get("verify") or {}
        if verify.get("tree"):  # the recovered tree's key, and the state whose check run it took (trees.py)
            r["tree"] = verify["tree"]
            if verify.get("tree_same"):
                r["tree_same"] = verify["tree_same"]
            if verify.get("tree_rerun"):  # the first recurrence of a tree: the check ran again, and agreed
                r["tree_rerun"] = True
        if verify.get("tree_perturbed"):  # keying its tree met trouble: checked again without it
            r["tree_perturbed"] = True
        if verify.get("check_timeout") and r["class"] == PowerCutClass.DATA_LOSS:
            r["class"] = PowerCutClass.HANG  # a recorded outcome: the check, not the filesystem, stuck
            r["why"] = (verify.get("loss") or ["the check did not finish"])[0]
            r["no_verdict"] = "your check did not finish"
        if verify.get("check_unstable"):  # two runs of the check on one recovered tree disagreed
            r["unstable"] = verify["check_unstable"]
        r["why"] = printable(r["why"])  # the check's own words: never a terminal escape in the results
        check = verify.get("check")
        r["check"] = {**check, "out": printable(str(check.get("out", "")))} if isinstance(check, dict) else check
        return r


def _own_checks(records: list[dict]) -> list[dict]:
    """The check records of the states whose check was asked for (not those that took a tree's or a
    distinct state's verdict in the lab): its runs, and the verdicts the host took from kept ones."""
    return [r["check"] for r in records if isinstance(r.get("check"), dict)
            and (not r.get("tree_same") or r.get("tree_rerun")) and "same" not in r]


def _has_verify(job: str) -> bool:
    return any(re.match(r"^\s*verify\s*=", line, re.I) for line in job.splitlines())


def verify_job(job: str) -> str:
    """The job file as fio's read-back runs it: its data placement, not its pacing."""
    return "".join(line for line in job.splitlines(keepends=True) if not FIO_UNPACED.match(line))


def fio_check(user_check: str) -> str:
    """The check of a fio workload's state: fio's read-back of every write it saw completed, in a
    state that acknowledged fio's end (after it, a sync); then the user's check, if any."""
    verify = (f"fio --aux-path={RUN}/{FIO_STATE} --verify_only --verify_state_load=1 {RUN}/{FIO_VERIFY} "
              f"> {RUN}/fio-verify.out 2>&1")
    then = f'exec {user_check}\n' if user_check else "exit 0\n"
    return ("#!/bin/sh\n"
            "# fio's own power-fail verification (studies/appcheck.py), then your check if given\n"
            f'if grep -q "{FIO_DONE}" "${{FLASHBED_ACKED:-/dev/null}}"; then\n'
            f"  if ! {verify}; then\n"
            f"    out={RUN}/fio-verify.out\n"
            "    why=$(grep -m1 -i 'verify failed' $out || grep -m1 -iE 'err= *[1-9]' $out || tail -n 1 $out)\n"
            '    echo "fio verify failed: $why"\n'
            "    exit 1\n"
            "  fi\n"
            '  echo "fio verify: every write fio completed is there"\n'
            "else\n"
            '  echo "fio verify: not run (before fio\'s end was acknowledged, its write state does not apply)"\n'
            "fi\n" + then)
