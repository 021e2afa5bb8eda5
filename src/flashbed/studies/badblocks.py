"""`badblocks`: unreadable blocks, failing erases and programs, bit flips:
which filesystems notice, which return errors, which lose data silently.

Block devices, case `dust` (one lab boot per iteration): the filesystem is
made on dm-dust (passing everything through), files are written and synced,
the filesystem is unmounted; then seeded bad blocks are added (some under the
files' data, found with FIEMAP, some anywhere in the used part of the device)
and dm-dust is enabled: reading a bad block fails with EIO, writing it
"remaps" it (as a drive would). Mount, read every file, probe a write,
unmount; then remove dm-dust, mount the bare device and read every file again
(did the filesystem damage anything while the blocks were bad?), and run the
read-only checker. A read-only image (squashfs, erofs) is built from the same
files and written to dm-dust before it is mounted; it has no write to probe.

Block devices, case `flips` (with --set badblocks.block_cases=dust,flips): the
same, with dm-flakey instead of dm-dust once the files are written: every read
request, with chance `read_corrupt` %, returns one random byte changed and no
error, as a card whose controller hands on a read beyond its ECC without
flagging it would (the kernel's random draw: not seeded). Who notices (a checksum, a
decompressor), who hands the damage to the reader?

Raw NAND, cases `badblocks` (factory-marked bad blocks), `weakblocks` (blocks
whose erase fails after a few erases: grown bad blocks), `weakpages` (pages
whose program fails after a few writes) and `bitflips` (random bit flips on
reads, beyond what ECC corrects at times), all nandsim module parameters on
the lab's kernel command line, seeded per iteration: make the filesystem,
write and sync the files, unmount (and detach UBI), re-attach, mount, read
every file; the kernel log says whether the stack noticed (for YAFFS2, in user
space, its daemon's log: YAFFS2's bad-block lines and the ECC verdicts,
failed programs and erases its MTD driver met).

Outcomes (metric "outcome:<name>", counts), per case:
  per iteration: mounts / read-only / unmountable / hang / error (set-up
  failed, e.g. mkfs refused the device); noticed (the filesystem, or UBI
  under it, logged the fault: an error, corruption, checksum, ECC, bad block,
  scrub or torture message of its own; the block layer's generic I/O error
  lines do not count), needs-fsck (block:
  the checker found damage after the bad blocks were gone)
  per file while the fault is present: intact / io-error / zeroed / truncated /
  silently-corrupted / missing; per file afterwards (block only):
  after:intact / after:damaged (damage that outlived the bad blocks).
"""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass
from pathlib import Path

from .. import filesystems as fscat
from ..lab.boundary import BootResult, Nandsim, Step
from ..results import Measurement
from ..shellwords import DEV, TOOLS
from ..status import AfterFault, BadBlocksFlag, FileState, IterationOutcome
from .base import MNT, PY, RUN, Case, CellSpec, MiB, Outcome, OutcomeTable, Study, m, step_json
from .failures import CW, DMSETUP, FILE_OUTCOMES, SECTORS, inspected, missing_or_hung, on_dm, setup_failures
from .params import param

BB = f"{PY} {TOOLS}/badblocks.py"  # this study's own guest side (dust)

DUST_NAME = "fbdust"
DM = f"/dev/mapper/{DUST_NAME}"
RAW_CASES = ("badblocks", "weakblocks", "weakpages", "bitflips")
DUST = "dust"  # the block devices' cases: bad blocks (dm-dust), bit flips on reads (dm-flakey)
FLIPS = "flips"
BLOCK_CASES = (DUST, FLIPS)
FLIPS_NAME = "fbflips"
IMAGE_TREE = "/tmp/bbtree"  # a read-only image's files (bb/ in it, as on a writable filesystem)
ITER_OUTCOMES = (IterationOutcome.MOUNTS, IterationOutcome.READ_ONLY, IterationOutcome.UNMOUNTABLE,
                 IterationOutcome.HANG)
# kernel lines in which the filesystem (or UBI under it: its catalogue log_prefix)
# says it met the fault
FAULT_WORDS = r"error|corrupt|bad|fail|crc|checksum|ecc|bit-?flip|scrub|tortur|i/o|uncorrectable"
# statistics lines that name those words without reporting a fault
BENIGN = r"PEBs: \d|I/O unit sizes|bad PEB handling|errors=|error_remount|Quota mode"


def noticed(kmsg: str, fstype: str) -> bool:
    fs = fscat.by_fstype(fstype)
    prefix = fs.log_prefix if fs is not None and fs.log_prefix else fstype
    return any(re.search(prefix, line) and re.search(FAULT_WORDS, line, re.IGNORECASE) and not re.search(BENIGN, line)
               for line in kmsg.splitlines())


def nand_faults(case: str, seed: int, blocks: int, pages_per_block: int, bad: int = 8,
                bitflips: int = 4) -> dict[str, str]:
    """nandsim parameters for one iteration (seeded): `bad` blocks or pages, or bit flips."""
    rng = random.Random(f"badblocks/{case}/{seed}")
    lo = 2  # keep the first blocks good: UBI/JFFS2 need somewhere to start
    n = bad
    pick = sorted(rng.sample(range(lo, blocks), min(n, blocks - lo)))
    if case == "badblocks":
        return {"badblocks": ",".join(map(str, pick))}
    if case == "weakblocks":
        return {"weakblocks": ",".join(f"{b}:{rng.randint(0, 3)}" for b in pick)}
    if case == "weakpages":
        pages = sorted(rng.sample(range(lo * pages_per_block, blocks * pages_per_block), n))
        return {"weakpages": ",".join(f"{pg}:{rng.randint(0, 3)}" for pg in pages)}
    if case == "bitflips":
        return {"bitflips": str(bitflips)}
    raise ValueError(f"unknown badblocks case {case}")


class BadBlocks(Study):
    name = "badblocks"
    title = "Bad blocks and bit flips (dm-dust, nandsim)"
    description = "bad/weak blocks and bit flips (dm-dust, nandsim): noticed, errors, silent loss"
    order = 130
    primary_metric = "survived"
    good_outcomes = frozenset({FileState.INTACT, AfterFault.INTACT})
    device_stats = False
    runs_read_only = True  # an image of its files
    timing_free = True
    continue_after_failure = True
    outcome_tables = (
        OutcomeTable("iterations", "outcome:", ITER_OUTCOMES + (IterationOutcome.ERROR,), per_iteration=True),
        OutcomeTable("iterations in which", "outcome:", tuple(BadBlocksFlag)),
        OutcomeTable("files with the faults present", "outcome:", FILE_OUTCOMES + (FileState.MISSING,)),
        OutcomeTable("files after the faults are gone", "outcome:", tuple(AfterFault)),
    )

    @dataclass(frozen=True)
    class Params:
        iterations: int = param(5, low=1, help="runs per case, each with its own seeded faults")
        files: int = param(8, low=1, help="files written before the faults")
        file_size: int = param(1 * MiB, unit="bytes", low=1)
        file_blocks: int = param(8, low=0, help="block devices: bad blocks under the files' data")
        random_blocks: int = param(32, low=0, help="block devices: bad blocks anywhere in the used part")
        raw_cases: tuple[str, ...] = param(RAW_CASES, choices=RAW_CASES, help="raw NAND: fault kinds, one cell each")
        block_cases: tuple[str, ...] = param((DUST,), choices=BLOCK_CASES,
                                             help="block devices: fault kinds, one cell each")
        read_corrupt: float = param(1.0, unit="%", low=0, high=100,
                                    help="block devices, flips: read requests with a byte changed")
        # nandsim takes them on the lab kernel's command line, where 200 weak pages left
        # the init's own argument out (a lab that never started): 64 leave room
        nand_bad: int = param(8, low=0, high=64, help="raw NAND: bad or weak blocks (pages)")
        nand_bitflips: int = param(4, low=0, help="raw NAND: nandsim's bit-flip rate parameter")
        fault: str = param(DUST, choices=(*BLOCK_CASES, *RAW_CASES), per_case="raw_cases")
        step_timeout: float = param(120.0, unit="s", above=0, help="limit of a mount, unmount or inspection")
        fsck_timeout: float = param(300.0, unit="s", above=0)

    def cases(self, params, device):
        if device.kind == "nandsim":
            return [Case(c, dataclasses.replace(params, fault=c)) for c in params.raw_cases]
        return [Case(c, dataclasses.replace(params, fault=c)) for c in params.block_cases]

    def _files(self, spec: CellSpec, i: int) -> str:
        p = spec.params
        count = p.files
        size = p.file_size
        if spec.variant.media == "mtd":
            size = min(size, spec.device.capacity // (4 * count))
        return f"--count {count} --size {size} --seed {spec.seed * 1000 + i}"

    def _n(self, spec: CellSpec) -> int:
        return spec.params.iterations

    def nandsim(self, spec: CellSpec, nand: Nandsim | None) -> Nandsim | None:
        if nand is None:
            return None
        i = getattr(self, "_boot_index", {}).get(spec.key, 0)
        blocks = spec.device.capacity // spec.device.erase_block
        ppb = spec.device.erase_block // spec.device.page_size
        faults = nand_faults(spec.params.fault, spec.seed * 1000 + i, blocks, ppb, spec.params.nand_bad,
                             spec.params.nand_bitflips)
        return dataclasses.replace(nand, extra={**nand.extra, **faults})

    def before_boot(self, spec: CellSpec, index: int, run_dir: Path) -> None:
        # the nandsim faults differ per iteration; nandsim() is asked right after this
        if not hasattr(self, "_boot_index"):
            self._boot_index = {}
        self._boot_index[spec.key] = index

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        return [self._raw(spec, i) if spec.variant.media == "mtd" else self._block(spec, i)
                for i in range(self._n(spec))]

    def _block(self, spec: CellSpec, i: int) -> list[Step]:
        v = spec.variant
        p = spec.params
        t = float(p.step_timeout)
        files = self._files(spec, i)
        flips = p.fault == FLIPS
        name, dm = (FLIPS_NAME, f"/dev/mapper/{FLIPS_NAME}") if flips else (DUST_NAME, DM)
        if v.read_only:  # the files in the guest's memory, then an image of them on dm-dust
            make = [Step("write", f"{CW} cwork {IMAGE_TREE}/bb {RUN}/bb.json {files} --duration 0", timeout=600),
                    *[Step(f"mkfs{j}" if j else "mkfs", c, timeout=600)
                      for j, c in enumerate(on_dm(v.image_cmds(IMAGE_TREE), dm))],
                    *[Step(f"mount{j}" if j else "mount", c, timeout=t) for j, c in enumerate(on_dm(v.mount_cmds(MNT), dm))]]
        else:
            make = [*[Step(f"mkfs{j}" if j else "mkfs", c, timeout=600) for j, c in enumerate(on_dm(v.make_cmds(), dm))],
                    *[Step(f"mount{j}" if j else "mount", c, timeout=t) for j, c in enumerate(on_dm(v.mount_cmds(MNT), dm))],
                    Step("write", f"{CW} cwork {MNT}/bb {RUN}/bb.json {files} --duration 0", timeout=600)]
        if flips:
            # a plain mapping while the files are written; flakey (always "down") under the reads
            flakey = (f"0 {SECTORS} flakey {DEV} 0 0 1 2 random_read_corrupt "
                      f"{round(float(p.read_corrupt) * 10_000_000)}")
            create = f"{DMSETUP} create {name} --table \"0 {SECTORS} linear {DEV} 0\" && " \
                     f"{{ [ -b {dm} ] || dmsetup mknodes; }}"
            place: list[Step] = []
            enable = f"{DMSETUP} reload {name} --table \"{flakey}\" && {DMSETUP} resume {name}"
        else:
            create = f"{DMSETUP} create {name} --table \"0 {SECTORS} dust {DEV} 0 4096\" && " \
                     f"{{ [ -b {dm} ] || dmsetup mknodes; }} && dmsetup message {name} 0 quiet"
            place = [Step("place", f"{BB} dust {MNT}/bb {name} --sectors {SECTORS} --seed {spec.seed * 1000 + i} "
                                   f"--file-blocks {p.file_blocks} "
                                   f"--random-blocks {p.random_blocks} > {RUN}/dust.json; "
                                   f"rc=$?; cat {RUN}/dust.json; exit $rc", timeout=120)]
            enable = f"dmsetup message {name} 0 enable"
        steps = [
            Step("dm-create", create, timeout=60),
            *make,
            *place,
            *[Step(f"umount{j}" if j else "umount", c, timeout=t) for j, c in enumerate(v.umount_cmds(MNT))],
            Step("enable", f"sync; echo 3 > /proc/sys/vm/drop_caches; {enable}", timeout=60),
            Step("kmsg-clear", "dmesg -C", timeout=30, may_fail=True),
            *[Step(f"mount-bad{j}" if j else "mount-bad", c, timeout=t, may_fail=True)
              for j, c in enumerate(on_dm(v.mount_cmds(MNT), dm))],
            Step("inspect", f"mountpoint -q {MNT} && {CW} inspect {MNT}/bb {RUN}/bb.json {files}", timeout=t,
                 may_fail=True),
            Step("umount-bad", f"! mountpoint -q {MNT} || {' && '.join(v.umount_cmds(MNT))}", timeout=t,
                 may_fail=True),
            Step("kmsg", "dmesg", timeout=30, may_fail=True),
            Step("dm-remove", f"{DMSETUP} remove {name}", timeout=60, may_fail=True),
            *[Step(f"remount{j}" if j else "remount", c, timeout=t, may_fail=True)
              for j, c in enumerate(v.mount_cmds(MNT))],
            Step("inspect-after", f"mountpoint -q {MNT} && {CW} inspect {MNT}/bb {RUN}/bb.json {files}",
                 timeout=t, may_fail=True),
            Step("umount2", f"! mountpoint -q {MNT} || {' && '.join(v.umount_cmds(MNT))}", timeout=t,
                 may_fail=True),
        ]
        if v.check_cmd():
            steps.append(Step("fsck", v.check_cmd(), timeout=float(p.fsck_timeout), may_fail=True))
        return steps

    def _raw(self, spec: CellSpec, i: int) -> list[Step]:
        v = spec.variant
        fs = v.base
        t = float(spec.params.step_timeout)
        files = self._files(spec, i)
        mount = v.mount_cmds(MNT)
        # the unmount waits for a daemon's checkpoint (YAFFS2) and takes a lower filesystem along
        umount = " && ".join(v.umount_cmds(MNT))
        remount = ([fscat.ubi_detach_cmd(), fs.clear_log_cmd(), v.ubi_attach_cmd()] if fs.fstype == "ubifs"
                   else [fs.clear_log_cmd()])
        return [
            *[Step(f"mkfs{j}" if j else "mkfs", c, timeout=600) for j, c in enumerate(v.make_cmds())],
            *[Step(f"mount{j}" if j else "mount", c, timeout=t) for j, c in enumerate(mount)],
            Step("write", f"{CW} cwork {MNT}/bb {RUN}/bb.json {files} --duration 0", timeout=600, may_fail=True),
            Step("umount", umount, timeout=t, may_fail=True),
            *[Step(f"reattach{j}", c, timeout=t, may_fail=True) for j, c in enumerate(remount)],
            *[Step(f"mount-bad{j}" if j else "mount-bad", c, timeout=t, may_fail=True) for j, c in enumerate(mount)],
            Step("inspect", f"mountpoint -q {MNT} && {CW} inspect {MNT}/bb {RUN}/bb.json {files}", timeout=t,
                 may_fail=True),
            Step("umount-bad", f"! mountpoint -q {MNT} || {{ {umount}; }}", timeout=t, may_fail=True),
            Step("kmsg", fs.log_cmd(), timeout=30, may_fail=True),
        ]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        case = spec.key.case
        n = self._n(spec)
        counts: dict[str, int] = {o: 0 for o in (*ITER_OUTCOMES, BadBlocksFlag.NOTICED, *FILE_OUTCOMES)}
        records = []
        for i in range(n):
            res = boots[i] if i < len(boots) else None
            outcome, why = self._classify(res, spec)
            counts[outcome] = counts.get(outcome, 0) + 1
            rec = {"i": i, "outcome": outcome, "why": why}
            if outcome is IterationOutcome.HANG and res is not None:
                rec["console"] = res.console_log
            if res is not None and outcome.ran:
                kmsg = res.step("kmsg")
                seen = noticed(kmsg.stdout if kmsg else "", spec.variant.base.fstype)
                rec["noticed"] = seen
                counts[BadBlocksFlag.NOTICED] += seen
                for k, c in inspected(res, "inspect").items():
                    counts[k] = counts.get(k, 0) + c
                for k, c in inspected(res, "inspect-after").items():
                    counts[AfterFault.of(k)] = counts.get(AfterFault.of(k), 0) + c
                rec["files"] = (step_json(res, "inspect") or {}).get("counts", {})
                rec["after:files"] = (step_json(res, "inspect-after") or {}).get("counts", {})
                fsck = res.step("fsck")
                if fsck is not None and not fsck.status.is_hang and fsck.rc not in spec.variant.base.check_clean:
                    counts[BadBlocksFlag.NEEDS_FSCK] = counts.get(BadBlocksFlag.NEEDS_FSCK, 0) + 1
                    rec["needs_fsck"] = True
                rec["dust"] = step_json(res, "place")
                if not spec.variant.base.mounting.in_kernel:
                    rec["daemon"] = self._daemon_facts(res, spec.variant.base.mounting)
            records.append(rec)
        meas: list[Measurement] = m(case, "iterations", n, "count")
        for k, c in counts.items():
            meas += m(case, f"outcome:{k}", c, "count")
        status, error = setup_failures(records, n)
        head = ", ".join(f"{c} {k}" for k, c in counts.items() if c)
        return Outcome(meas, f"{n} runs: {head}", extra={"iterations": records}, status=status, error=error)

    @staticmethod
    def _daemon_facts(res: BootResult, mounting) -> dict[str, int | None]:
        """What YAFFS2's daemon knew of bad blocks at its first mount (a scan of blank flash:
        the NAND's marks) and at the mount with the faults present."""
        def bad(name: str) -> int | None:
            step = res.step(name)
            event = mounting.mount_event(step.stdout) if step is not None else None
            return event.get("bad_blocks") if event else None
        return {"bad_blocks_first_mount": bad("mount"), "bad_blocks_mount_bad": bad("mount-bad")}

    def _classify(self, res: BootResult | None, spec: CellSpec) -> tuple[IterationOutcome, str]:
        early = missing_or_hung(res)
        if early is not None:
            return early
        failed = next((s for s in res.steps if not s.status.ok), None)
        if (spec.variant.media == "mtd" and failed is not None and failed.name.startswith("mount")
                and not failed.name.startswith("mount-bad")):
            # raw NAND carries its faults from power-on: the first mount meets them too
            return (IterationOutcome.UNMOUNTABLE,
                    f"mount with the faults present failed: {(failed.stderr or '').strip()[-200:]}")
        if not res.status.ok and not any(s.name.startswith("mount-bad") for s in res.steps):
            return IterationOutcome.ERROR, (f"step '{failed.name}': {(failed.stderr or failed.stdout).strip()[-200:]}"
                                            if failed else f"lab {res.status}: {res.error}")
        mb = [s for s in res.steps if s.name.startswith(("mount-bad", "reattach"))]
        if not mb or any(not s.status.ok for s in mb):
            return IterationOutcome.UNMOUNTABLE, "mount with the faults present failed"
        insp = step_json(res, "inspect") or {}
        # a read-only image is read-only by design: only a writable filesystem turns read-only
        if not spec.variant.read_only and (insp.get("ro") or insp.get("probe") == "EROFS"):
            return IterationOutcome.READ_ONLY, "read-only with the faults present"
        return IterationOutcome.MOUNTS, ""
