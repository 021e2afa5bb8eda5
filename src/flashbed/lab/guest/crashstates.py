"""Guest side of the `crashstates` study: the workload, run once with the device's
write log on, and the loop that checks every crash state of it in the same boot.
The host builds the commands (studies/crashstates.py); their JSON arguments are
the protocol's CrashWorkSpec and CrashCheckSpec.

  work WORK_SPEC    Mount (the real mount helper), run the workload: the powercut
                    study's (powercut.workload) or the B3-style sequences
                    (sequences.py), and unmount. Every record of its log (an
                    intent before an operation, an acknowledgement once its
                    persistence point returned) first puts a mark into the
                    device's write log (a host call) and carries its position
                    ("m"): a crash state that acknowledged the records before
                    position P acknowledged exactly the log lines with m < P.
  check CHECK_SPEC  For each listed state: ask the host to serve it, drop the
                    block device's buffers, recover as after a power cut (mount,
                    verify against the log as acknowledged at that state, unmount,
                    check, repair: powercut.recover_facts) and write one
                    StateFacts line. Stops at a hang (the kernel holds a stuck
                    filesystem; the host sees which states were left).
                    A state the cut damaged (a torn program's paired pages)
                    that did not survive gets its undamaged twin (ID+u)
                    checked right after it, the same way: whose loss it was
                    (twin(); the host attributes it). A state whose check
                    cannot run is recorded as such and the next one checked.

Standard library only: it runs as `/usr/bin/python3 -S -I crashstates.py ...`.
"""

from __future__ import annotations

import bisect
import fcntl
import json
import os
import re
import stat
import struct
import sys
import time

if __package__:  # on the host, as flashbed.lab.guest.crashstates
    from . import powercut, sequences, trees
    from .guestlib import ContentCache, call_host, now, plain_commands, push, read_log, run, run_shell, wall_limit
    from .protocol import (
        UNDAMAGED,
        Call,
        CrashCheckSpec,
        CrashWorkSpec,
        FsckResult,
        HostAnswer,
        HostCall,
        RecoverFacts,
        RecoverSpec,
        StateFacts,
        StepStatus,
        TwinPlace,
        Workload,
    )
else:  # in the guest: this directory is not on sys.path by itself (-S -I)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import powercut
    import sequences
    import trees
    from guestlib import ContentCache, call_host, now, plain_commands, push, read_log, run, run_shell, wall_limit
    from protocol import (
        UNDAMAGED,
        Call,
        CrashCheckSpec,
        CrashWorkSpec,
        FsckResult,
        HostAnswer,
        HostCall,
        RecoverFacts,
        RecoverSpec,
        StateFacts,
        StepStatus,
        TwinPlace,
        Workload,
    )

BLKFLSBUF = 0x1261  # ioctl: write back and drop a block device's buffers
CALL_TIMEOUT = 120.0
KEEP_OUT = 300  # characters kept of a command's output per state
KEEP_KMSG = 20  # kernel lines kept per command per state


def run_dir() -> str:
    return os.environ.get("FLASHBED_RUN", ".")


def host(name: str, call: Call, **args) -> dict:
    """A host call that must succeed (the workload cannot go on without it)."""
    a = call_host(run_dir(), name, HostCall(call, args), CALL_TIMEOUT, keep=False)
    if a is None:
        raise RuntimeError(f"host call {call}: no answer within {CALL_TIMEOUT:.0f} s")
    if not a.ok:
        raise RuntimeError(f"host call {call}: {a.error}")
    return a.data


_HOST_CHECKS = [0]  # host calls made for checks: each call's name once


def host_check(cmd: str, timeout: float) -> dict:
    """The recovery's check (`cmd` on ${FLASHBED_DEV}) run by the host on the state it serves
    (Call.CRASH_CHECK, statecheck.py): a record as run() gives."""
    _HOST_CHECKS[0] += 1
    t = now()
    # the lab's present: a checker that compares the filesystem's times with now (e2fsck) must
    # see the lab's, which in virtual time is not the host's
    args = {"cmd": cmd, "timeout": timeout, "now": int(time.time())}
    a = call_host(run_dir(), f"ck{_HOST_CHECKS[0]:06d}", HostCall(Call.CRASH_CHECK, args), timeout + CALL_TIMEOUT,
                  keep=False)
    seconds = round(now() - t, 6)
    if a is None:
        return {"cmd": cmd, "status": StepStatus.HANG, "rc": None, "seconds": seconds, "out": "the host did not answer"}
    if not a.ok:
        raise RuntimeError(f"host call {Call.CRASH_CHECK}: {a.error}")
    # "seconds" on the guest's clock, as every step's (in virtual time the host's work takes none
    # of it); the host's own wall-clock time beside it
    return {**a.data, "status": StepStatus(a.data["status"]), "seconds": seconds, "host_seconds": a.data["seconds"]}


def checker_of(c: CrashCheckSpec):
    """How a state's recovery runs its check: on the host where the spec says so, else in the lab."""
    return host_check if c.check_on_host and c.serve else None


class MarkedLog(powercut.Log):
    """The workload's log; each record first marks the device's write log."""

    def __init__(self, path: str):
        super().__init__(path)
        self.marks = 0
        self.seconds = 0.0  # spent in the mark calls

    def write(self, rec: dict) -> None:
        t = now()
        label = " ".join([rec["e"], *(f"{k}={rec[k]}" for k in ("n", "seq", "k") if k in rec)])
        pos = host(f"mark{self.marks:06d}", Call.LOG_MARK, label=label)["pos"]
        self.marks += 1
        self.seconds += now() - t
        super().write({**rec, "m": pos})


def sequence_list(w: CrashWorkSpec) -> list:
    return sequences.generate(w.exhaustive, w.sequences, w.max_len, w.seed, tuple(w.skip))


def start_durable(d: str) -> None:
    """What the workload starts from, on the device's media before the first mark: sync(2) writes it,
    but does not flush the device's cache on every filesystem (vfat has no sync_fs), so the device is
    flushed too (an fsync of the block device always issues one): a state without the starting
    directory is then a loss, not the harness's doing."""
    os.sync()
    for path in (d, os.path.expandvars(os.environ.get("FLASHBED_DEV", ""))):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)


def work(w: CrashWorkSpec) -> dict:
    out: dict = {}
    for c in w.mount:
        r = run(c, w.timeout)
        if not r["status"].ok:
            raise RuntimeError(f"mount failed: {r['out'].strip()[-300:]}")
    d = os.path.expandvars(w.dir)
    os.makedirs(os.path.dirname(d), exist_ok=True)
    log = MarkedLog(os.path.expandvars(w.log))
    t = now()
    if w.workload == Workload.USER:
        os.makedirs(d, exist_ok=True)
        start_durable(d)  # the empty starting state is durable before the first mark
        log.write({"e": "begin", "dir": d})
        out.update(user_work(w, d, log))
        log.write({"e": "end"})
    elif w.workload == Workload.POWERCUT:
        log.write({"e": "begin", "seed": w.seed, "dir": d})
        out["ops"], out["skipped_fsync"] = powercut.workload(
            d, log, w.seed, max_bytes=w.max_bytes, max_files=w.max_files, max_file=w.max_file, max_ops=w.ops,
            skip_fsync=w.skip_fsync)
    else:
        seqs = sequence_list(w)
        os.makedirs(d, exist_ok=True)
        sequences.lay_out(d, w.seed, len(seqs))
        start_durable(d)  # the starting state is durable before the first mark
        log.write({"e": "begin", "seed": w.seed, "dir": d, "sequences": len(seqs)})
        out["sequences"] = len(seqs)
        out["ops"] = sequences.run_all(d, w.seed, seqs, log)
        log.write({"e": "end", "ops": out["ops"]})
    out["seconds"] = round(now() - t, 6)
    out["marks"], out["mark_seconds"] = log.marks, round(log.seconds, 6)
    for c in w.umount:
        r = run(c, w.timeout)
        if not r["status"].ok:
            raise RuntimeError(f"umount failed: {r['out'].strip()[-300:]}")
    return out


ACK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ack.py")
WORK_OUT, ACKED = "workload.out", "acked.txt"


def user_env(d: str, **more: str) -> dict[str, str]:
    return {**os.environ, "FLASHBED_MNT": d, **more}


def user_work(w: CrashWorkSpec, d: str, log: MarkedLog) -> dict:
    """The user's workload in `d`; `$FLASHBED_ACK LABEL...` marks an acknowledgement (ack.py).
    Its output goes to the run directory; a workload that fails or overruns stops the cell."""
    ack = f"/usr/bin/python3 -S -I {ACK} {os.path.expandvars(w.log)}"
    with wall_limit(run_dir(), "uwork", "your workload", w.timeout):
        r = run_shell(w.command, w.timeout, cwd=d, env=user_env(d, FLASHBED_ACK=ack))
    status, rc, so, se, secs = r
    with open(os.path.join(run_dir(), WORK_OUT), "wb") as f:
        f.write(so + se)
    if not status.ok:
        tail = (so + se).decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(f"the workload {status} (rc {rc}): {tail[-1] if tail else ''}"[:300])
    acks = sum(1 for r in read_log(os.path.expandvars(w.log)) if r.get("e") == "ack")
    return {"workload_seconds": round(secs, 6), "acks": acks}


PACK = "tree.pack"  # the recovered directory handed to the host (trees.pack), in the run directory
# the guest's variables the check gets on the host too (besides the FLASHBED_ ones)
HOST_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TERM", "USER", "LOGNAME", "SHELL")
_USER_CHECKS = [0]


def host_user_check(w: CrashWorkSpec, d: str, fresh: bool = False) -> tuple[dict | None, str]:
    """The user's check run by the host on a copy of `d` (Call.USER_CHECK): (its record as run_shell's,
    with the host's own time, and `shared` where the host took a verdict it kept for what the check would
    see: crashhost/verdicts.py), or (None, why the lab runs it: what the copy cannot be, or the host's
    refusal). `fresh`: the check runs whatever the host kept. Called after the tree's key was taken
    cleanly: the pack reads what the walk read."""
    path = os.path.join(run_dir(), PACK)
    try:
        trees.pack(d, path)
        fd = os.open(path, os.O_RDONLY)
        try:
            push(fd)  # the host reads it whole once it is asked
        finally:
            os.close(fd)
    except trees.NotPortable as e:
        return None, str(e)
    except OSError as e:
        return None, f"its copy could not be made ({e.strerror})"
    env = {k: v for k, v in os.environ.items() if k.startswith("FLASHBED_") or k in HOST_ENV}
    args = {"cmd": w.check, "timeout": w.check_timeout, "dir": d, "pack": PACK, "acked": ACKED,
            "ro": trees._read_only(d) is True, "env": env, **({"fresh": True} if fresh else {})}
    _USER_CHECKS[0] += 1
    t = now()
    a = call_host(run_dir(), f"uc{_USER_CHECKS[0]:06d}", HostCall(Call.USER_CHECK, args),
                  w.check_timeout + CALL_TIMEOUT, keep=False)
    if a is None:
        return None, "the host did not answer"
    if not a.ok:
        return None, f"the host could not run it: {a.error}"[:300]
    if a.data.get("refused"):
        return None, str(a.data["refused"])[:300]
    # "seconds" on the guest's clock, as a check run here (in virtual time the host's work takes none of
    # it); the host's own wall-clock time beside it
    return {**a.data, "status": StepStatus(a.data["status"]), "seconds": now() - t,
            "host_seconds": a.data["seconds"]}, ""


def user_check(w: CrashWorkSpec, d: str, recs: list[dict], shared: "trees.SharedChecks | None" = None,
               state: str = "") -> dict:
    """The user's check on the recovered filesystem: exit 0 = consistent. It reads the labels
    the workload acknowledged before this state from $FLASHBED_ACKED (one a line). The workload's
    directory was made durable before the first state: a state without it lost it. With `shared`,
    a state whose recovered directory and labels match a checked one's takes its verdict (trees.py)."""
    if not os.path.isdir(d):
        return {"check": None, "n_garbage": 0, "garbage": [], "n_loss": 1,
                "loss": [f"the workload's directory {os.path.basename(d)} is missing (made durable before the "
                         f"workload began): your check was not run"]}
    labels = "".join(" ".join(r.get("labels", [])) + "\n" for r in recs if r.get("e") == "ack")
    acked = os.path.join(run_dir(), ACKED)
    with open(acked, "w") as f:
        f.write(labels)

    def run_check(fresh: bool = False) -> dict:
        # on the host only after a clean walk of the tree (shared): its copy is what the key covers
        ran, why = host_user_check(w, d, fresh) if shared is not None and not w.check_in_lab else (None, "")
        if ran is not None:
            status, rc, text, secs = ran["status"], ran["rc"], ran["out"], ran["seconds"]
            where = {"where": "host", "host_seconds": round(float(ran["host_seconds"]), 6),
                     **({"shared": ran["shared"]} if ran.get("shared") else {})}
        else:
            with wall_limit(run_dir(), "ucheck", "your check", w.check_timeout):
                status, rc, so, se, secs = run_shell(w.check, w.check_timeout, cwd=d,
                                                     env=user_env(d, FLASHBED_ACKED=acked))
            text = (so + se).decode("utf-8", "replace")
            where = {"where": "lab", **({"why": why} if why else {})}
        lines = text.strip().splitlines()
        last = lines[-1][:200] if lines else ""
        v: dict = {"check": {"status": str(status), "rc": rc, "out": last, "seconds": round(secs, 6), **where},
                   "n_garbage": 0, "garbage": []}
        if status.ok:
            return {**v, "n_loss": 0, "loss": []}
        if status.is_hang:
            return {**v, "n_loss": 1, "check_timeout": True,
                    "loss": [f"the check did not finish within {w.check_timeout:g} s"]}
        return {**v, "n_loss": 1, "loss": [f"the check failed (exit {rc}): {last}"]}

    return shared.check(state, d, labels.encode(), run_check, lambda: run_check(fresh=True)) \
        if shared is not None else run_check()


def verifier(w: CrashWorkSpec, shared: "trees.SharedChecks | None" = None, state=lambda: ""):
    """(workload directory, log records up to the crash) -> verdict; `state()` names the state
    being checked (for a shared check's verdict)."""
    if w.workload == Workload.USER:
        return lambda d, recs: user_check(w, d, recs, shared, state())
    if w.workload == Workload.POWERCUT:
        return powercut.verify_dir
    seqs = sequence_list(w)
    return lambda d, recs: sequences.verify_dir(d, recs, seqs, w.seed)


def trim(facts: RecoverFacts, keep: re.Pattern) -> dict:
    """The facts, small: each command's output tail and the filesystem's own kernel lines."""
    def cut(r: dict | None) -> None:
        if r:
            if "out" in r:
                r["out"] = r["out"][-KEEP_OUT:]
            if "kmsg" in r:
                r["kmsg"] = [ln for ln in r["kmsg"] if keep.search(ln)][-KEEP_KMSG:]
    for r in facts.runs.values():
        cut(r)
    cut(facts.verify)
    for k in ("check", "repair"):
        cut((facts.fsck or {}).get(k))
    if facts.verify:
        facts.verify.pop("ok", None)
        for k in ("loss", "garbage"):
            facts.verify[k] = facts.verify.get(k, [])[:5]
    return facts.to_json()


def damage_of(answer: dict) -> dict | None:
    """What the served state damaged, from the host's answer (None: nothing)."""
    if not answer.get("damaged_ranges"):
        return None
    return {"ranges": answer["damaged_ranges"], "flushed": answer.get("damaged_flushed_ranges") or []}


def drop_buffers(device: str) -> None:
    fd = os.open(device, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, BLKFLSBUF)
    finally:
        os.close(fd)


def split(facts: RecoverFacts) -> dict[str, float]:
    """Where a recovery's time went (s)."""
    def s(tag: str) -> float:
        return float(facts.run(tag).get("seconds") or 0.0)
    return {"mount": s("mount1") + s("mount2"), "verify": float((facts.verify or {}).get("seconds") or 0.0),
            "umount": s("umount1") + s("umount2"), "fsck": float((facts.fsck or {}).get("seconds") or 0.0)}


DUST = "csdust"


def dust(under: str, ranges: list[list[int]], timeout: float) -> None:
    """dm-dust over `under` with `ranges` bad, as /dev/mapper/csdust (the spec's device
    and commands name it already)."""
    blk = 4096 if all(o % 4096 == 0 and n % 4096 == 0 for o, n in ranges) else 512
    under = os.path.realpath(os.path.expandvars(under))  # the lab's device ($FLASHBED_DEV)
    with open(f"/sys/class/block/{os.path.basename(under)}/size") as f:
        sectors = int(f.read())
    # no udev in the lab: make the node if dmsetup did not (as the badblocks study does)
    cmds = [f"dmsetup --noudevsync create {DUST} --table '0 {sectors} dust {under} 0 {blk}' && "
            f"{{ [ -b /dev/mapper/{DUST} ] || dmsetup mknodes; }}"]
    cmds += [f"dmsetup message {DUST} 0 addbadblock {b}" for o, n in ranges for b in range(o // blk, (o + n) // blk)]
    cmds.append(f"dmsetup message {DUST} 0 enable")
    for cmd in cmds:
        r = run(cmd, timeout)
        if not r["status"].ok:
            raise RuntimeError(f"{cmd}: {r['out'].strip()[-300:]}")


def to_check(states: list[dict]) -> list[dict]:
    """The states this lab checks itself: the host marked those that share another state's
    verdict (`same`) or were left out of a sample (`out`; studies/crashplan.py)."""
    return [s for s in states if "same" not in s and not s.get("out")]


def served(c: CrashCheckSpec, states: list[dict]):
    """Each state this lab checks, once the host serves it: (its number in this lab, its listing
    entry, the host's answer to the switch (None: nobody serves it, a replay's image), when the
    switch began). The listing's states in order; or, with `claim`, those the host hands out
    (Call.CRASH_NEXT: other labs check the rest of the cell's) until none is left."""
    end = len(states) if not c.limit else min(len(states), c.limit)
    i = 0
    while c.claim or i < end:
        t0 = now()
        if c.claim:
            a = call_host(run_dir(), f"sw{i:06d}", HostCall(Call.CRASH_NEXT, {"watchdog": c.watchdog}),
                          CALL_TIMEOUT, keep=False)
            if a is None or not a.ok:
                raise RuntimeError(f"host call {Call.CRASH_NEXT}: {'no answer' if a is None else a.error}")
            if a.data.get("done"):
                return
            st = a.data["state"]
            if a.data.get("error"):  # taken, but the device could not serve it: recorded as such
                a = HostAnswer(ok=False, data=None, error=a.data["error"])
        else:
            st = states[i]
            a = call_host(run_dir(), f"sw{i:06d}", HostCall(Call.CRASH_SWITCH, {"state": st["id"],
                                                                                "watchdog": c.watchdog}),
                          CALL_TIMEOUT, keep=False) if c.serve else None
        yield i, st, a, t0
        i += 1


def survived(facts: RecoverFacts) -> bool:
    """What the host will class clean or recovered (studies/powercut.classify): recovered without
    help, every acknowledged operation there, writable."""
    v = facts.verify or {}
    used = facts.run(facts.verified_by or "mount1")
    return bool(facts.done and facts.mounted and not v.get("n_loss") and not v.get("n_garbage")
                and not used.get("ro") and not v.get("ro_after") and v.get("probe") != "EROFS"
                and facts.fsck_result not in (FsckResult.FAILED, FsckResult.FIXED) and facts.verified_by != "mount2")


FS_IOC_FIEMAP = 0xC020660B
FIEMAP_HEAD, FIEMAP_EXTENT = struct.Struct("=QQIIII"), struct.Struct("=QQQQQIIII")
FIEMAP_BATCH = 256
# extents whose physical address is not where their bytes are on the device
FIEMAP_NOT_PLACED = 0x2 | 0x4 | 0x8 | 0x200  # unknown, delalloc, encoded, inline
FIEMAP_LAST = 0x1
WALK_LIMIT = 20000  # paths mapped per twin at most


def extents(path: str) -> list[tuple[int, int]] | None:
    """(device offset, length) of each placed extent of `path` (FIEMAP); None when the
    filesystem does not report extents."""
    out: list[tuple[int, int]] = []
    start = 0
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        while True:
            buf = bytearray(FIEMAP_HEAD.size + FIEMAP_BATCH * FIEMAP_EXTENT.size)
            FIEMAP_HEAD.pack_into(buf, 0, start, (1 << 64) - 1 - start, 0, 0, FIEMAP_BATCH, 0)
            try:
                fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
            except OSError:
                return None
            n = FIEMAP_HEAD.unpack_from(buf, 0)[3]
            last = False
            for k in range(n):
                logical, phys, length, _r1, _r2, flags, *_ = FIEMAP_EXTENT.unpack_from(
                    buf, FIEMAP_HEAD.size + k * FIEMAP_EXTENT.size)
                if not flags & FIEMAP_NOT_PLACED:
                    out.append((phys, length))
                start = logical + length
                last = bool(flags & FIEMAP_LAST)
            if n < FIEMAP_BATCH or last:
                return out
    finally:
        os.close(fd)


def mounted(mnt: str) -> tuple[str, str]:
    """(source, fstype) of the filesystem mounted at `mnt`."""
    with open("/proc/self/mounts") as f:
        rows = [ln.split() for ln in f]
    for row in reversed(rows):
        if len(row) > 2 and row[1] == mnt:
            return row[0], row[2]
    return "", ""


def place(mnt: str, device: str, ranges: list[list[int]]) -> TwinPlace:
    """Which paths under `mnt` hold the byte ranges `ranges` of `device`, by their extents."""
    src, fstype = mounted(mnt)
    if not src or os.path.realpath(src) != os.path.realpath(device):
        return TwinPlace(why=f"{fstype or 'the filesystem'} is not directly on the device")
    if fstype == "btrfs":
        return TwinPlace(why="btrfs reports extents in its own address space, not device offsets")
    want = [(o, o + n) for o, n in ranges]
    where = TwinPlace()
    seen = mapped = 0
    for root, _dirs, names in os.walk(mnt):
        for p in [root, *(os.path.join(root, x) for x in names)]:
            seen += 1
            if seen > WALK_LIMIT:
                break
            try:
                if not stat.S_ISREG(os.lstat(p).st_mode) and not stat.S_ISDIR(os.lstat(p).st_mode):
                    continue  # a FIFO would block an open; links and nodes hold no data of their own
                ext = extents(p)
            except OSError:
                continue
            if ext is None:
                continue
            mapped += 1
            hit = sum(max(0, min(e, a + n) - max(s, a)) for a, n in ext for s, e in want)
            if hit:  # paths from the mount's root; a directory ends in "/", the root is "/"
                rel = os.path.relpath(p, mnt)
                where.files["/" if rel == "." else rel + ("/" if os.path.isdir(p) else "")] = hit
    if not mapped:
        return TwinPlace(why=f"{fstype} does not report extents (FIEMAP)")
    where.outside = max(0, sum(e - s for s, e in want) - sum(where.files.values()))
    return where


def twin(c: CrashCheckSpec, rspec: RecoverSpec, st: dict, i: int, verify, kmsg, keep: re.Pattern,
         flushed: list[list[int]]) -> StateFacts:
    """State `st`'s undamaged twin (ID+u: the same cut, no flash damage), served and recovered as
    the state was; while it is mounted, where the flushed bytes the damage hit live (place)."""
    rec = StateFacts(id=st["id"] + UNDAMAGED, kind=st["kind"], acked=st["acked"])
    t0 = now()
    a = call_host(run_dir(), f"tw{i:06d}", HostCall(Call.CRASH_SWITCH, {"state": rec.id, "watchdog": c.watchdog}),
                  CALL_TIMEOUT, keep=False)
    rec.switch = {"error": "no answer"} if a is None else {"ns": a.data.get("switch_ns")} if a.ok else \
        {"error": a.error}
    if rec.switch.get("error"):
        return rec
    found: list[TwinPlace] = []

    def verify_and_place(d: str) -> dict:
        v = verify(d)
        if flushed:
            found.append(place(rspec.mnt, os.path.expandvars(c.device), flushed))
        return v
    try:
        drop_buffers(os.path.expandvars(c.device))
        facts = powercut.recover_facts(rspec, verify=verify_and_place, kmsg=kmsg, checker=checker_of(c))
    except Exception as e:  # noqa: BLE001 - the twin's check could not run: no attribution, no stop
        rec.error = f"{type(e).__name__}: {e}"[:300]
        return rec
    rec.facts = trim(facts, keep)
    rec.seconds = {"total": round(now() - t0, 6)}
    if found:
        rec.damage = {"place": found[0].to_json()}
    return rec


def again(c: CrashCheckSpec, st: dict, i: int, rspec: RecoverSpec, verify, kmsg, why: str) -> RecoverFacts:
    """State `st` served afresh and recovered with the check alone: keying its tree may have
    changed it (trees.py: a read error, the filesystem turned read-only, a kernel message)."""
    a = call_host(run_dir(), f"ag{i:06d}", HostCall(Call.CRASH_SWITCH, {"state": st["id"], "again": True,
                                                                         "watchdog": c.watchdog}),
                  CALL_TIMEOUT, keep=False)
    if a is None or not a.ok:
        raise RuntimeError(f"serving state {st['id']} again: {'no answer' if a is None else a.error}")
    drop_buffers(os.path.expandvars(c.device))
    facts = powercut.recover_facts(rspec, verify=verify, kmsg=kmsg, checker=checker_of(c))
    if facts.verify is not None:
        facts.verify["tree_perturbed"] = True  # checked again without the walk: counted on the host
        check = facts.verify.get("check")
        if isinstance(check, dict) and check.get("where") == "lab":
            check.setdefault("why", why)  # the cell's line says why this run was not on the host
    return facts


def check(c: CrashCheckSpec) -> dict:
    w = CrashWorkSpec.from_json(c.work)
    rspec = RecoverSpec.from_json(c.recover)
    with open(os.path.expandvars(c.states)) as f:
        states = to_check(json.load(f)["states"])
    recs = read_log(os.path.expandvars(w.log))
    marks = [r["m"] for r in recs]  # in order: one workload, one log
    # the user's check runs once per recovered tree (trees.py); the built-in verifiers are cheap
    # (a state the walk may have changed is served again: not in a replay, which serves nothing)
    shared = trees.SharedChecks(powercut.Kmsg()) if w.workload == Workload.USER and w.share_trees and c.serve \
        else None
    current = {"id": ""}
    judge = verifier(w, shared, lambda: current["id"])
    plain = verifier(w)
    powercut.Content.source = ContentCache()  # the same versions, state after state
    keep = re.compile(c.kmsg_pattern or ".")
    if c.dust:
        dust(c.dust_under, c.dust, rspec.timeout)
    kmsg = powercut.Kmsg()
    out_fd = os.open(os.path.expandvars(c.out), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    checked, stopped = 0, ""
    try:
        for i, st, a, t0 in served(c, states):
            rec = StateFacts(id=st["id"], kind=st["kind"], acked=st["acked"], damaged=st.get("damaged", 0))
            current["id"] = st["id"]
            if c.serve:
                rec.switch = {"error": "no answer"} if a is None else \
                    {"ns": a.data.get("switch_ns")} if a.ok else {"error": a.error}
            t1 = now()
            if not (rec.switch or {}).get("error"):
                rec.damage = damage_of(a.data) if c.serve else None
                try:
                    drop_buffers(os.path.expandvars(c.device))
                    t2 = now()
                    upto = recs[:bisect.bisect_left(marks, st["acked"])]
                    facts = powercut.recover_facts(rspec, verify=lambda d: judge(d, upto), kmsg=kmsg,
                                                   checker=checker_of(c))
                    if (facts.verify or {}).get("tree_perturbed"):
                        facts = again(c, st, i, rspec, lambda d: plain(d, upto), kmsg,
                                      facts.verify.get("perturbed_why") or "keying its tree met trouble")
                except Exception as e:  # noqa: BLE001 - this state's check could not run: said, and the next one
                    rec.error = f"{type(e).__name__}: {e}"[:300]
                else:
                    rec.facts = trim(facts, keep)
                    parts = {"switch": t1 - t0, "drop": t2 - t1, **split(facts), "total": now() - t0}
                    rec.seconds = {k: round(v, 6) for k, v in parts.items()}
                    if facts.hang:
                        stopped = f"state {st['id']}: {facts.hang}"
                    elif rec.damage and not survived(facts):
                        current["id"] = st["id"] + UNDAMAGED
                        tw = twin(c, rspec, st, i, lambda d: judge(d, upto), kmsg, keep, rec.damage["flushed"])
                        rec.twin = tw.to_json()
                        if tw.facts and tw.facts.get("hang"):
                            stopped = f"state {tw.id}: {tw.facts['hang']}"
            os.write(out_fd, (json.dumps(rec.to_json(), separators=(",", ":")) + "\n").encode())
            push(out_fd)  # on the host before the next state: a stuck filesystem may end the lab
            checked += 1
            if stopped:
                break
    finally:
        os.close(out_fd)
    return {"listed": len(states), "checked": checked, "stopped": stopped,
            **({"check_runs": shared.runs, "perturbed": shared.perturbed} if shared is not None else {})}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in ("work", "check"):
        print("usage: crashstates.py work WORK_SPEC | check CHECK_SPEC", file=sys.stderr)
        return 2
    if argv[0] == "work":
        res = work(CrashWorkSpec.from_json(json.loads(argv[1])))
    else:
        with plain_commands():  # thousands of fscks: their verdicts count here, not their times
            res = check(CrashCheckSpec.from_json(json.loads(argv[1])))
    print(json.dumps(res))
    sys.stdout.flush()
    if res.get("stopped"):
        os._exit(3)  # a thread stuck in the kernel must not hold us
    return 0


if __name__ == "__main__":
    sys.exit(main())
