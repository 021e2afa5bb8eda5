"""Guest side of the `powercut` study: a workload with a durable log of what it
was told was durable, the verifier that checks a filesystem against that log
after the cut, and the recovery sequence (mount, verify, unmount, check,
repair) timed step by step. The host builds the commands (studies/powercut.py);
their JSON arguments are the protocol's PrepareSpec, RecoverSpec, SnapcutSpec,
and the recovery prints RecoverFacts.

Standard library only: it runs as `/usr/bin/python3 -S -I powercut.py ...`
inside the lab, and the host's unit tests import it for the verifier.

  work DIR LOG --seed S [--max-bytes B] [--max-files N] [--max-file B] [--stop-after T] [--cut-in X]
       [--prepare PREPARE_SPEC]
      Write, append, replace and delete files in DIR until killed (a power
      cut), logging every operation to LOG (on the shared run directory, i.e.
      outside the device under test): an intent before it, an ack once fsync
      of the file and of its directory returned. Each log line reaches the
      host before the operation it announces starts.
  verify DIR LOG          Check DIR against LOG; print the verdict as JSON.
  sabotage DIR LOG        Corrupt one acknowledged file on purpose (tests the verifier).
  prepare PREPARE_SPEC    Mount the filesystem again, or make a new one when the
                          previous recovery says it cannot be reused.
  recover RECOVER_SPEC    After a cut: mount, verify, unmount, check/repair, and if
                          the first mount failed, mount and verify again. Prints
                          the facts as JSON (the host classifies them).
  snapcut SNAPCUT_SPEC    Raw NAND without a cut switch (JFFS2): run the workload, stop
                          every writer at the cut moment, dump the flash, unmount,
                          erase and write the dump back.

Durability rules the verifier applies (a file is checked as a whole):
  * acknowledged data must be intact: an acked file has exactly its acked
    content (or, while a later operation on it was in flight, that operation's
    allowed results); an acked delete stays deleted;
  * anything not acknowledged may be old, new (complete or in part: a prefix
    of the new content, any 512-byte sector of it possibly still zero, i.e.
    never written), or absent, but never other data ("garbage": bytes that were
    never written to that file at that place).
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from typing import Callable

if __package__:  # on the host, as flashbed.lab.guest.powercut
    from .guestlib import (
        LIST_LIMIT,
        call_host,
        content,
        fsync_dir,
        mount_direct,
        mount_options,
        now,
        partial_ok,
        post_call,
        probe_write,
        push,
        read_file,
        read_log,
        run,
        umount_direct,
        virtual_time,
        write_all,
        write_json_atomic,
    )
    from .protocol import (
        Call,
        DirectMount,
        FsckResult,
        HostCall,
        Phase,
        PrepareSpec,
        RecoverFacts,
        RecoverSpec,
        SnapcutSpec,
        StepStatus,
        Verdict,
    )
else:  # in the guest: this directory is not on sys.path by itself (-S -I)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from guestlib import (
        LIST_LIMIT,
        call_host,
        content,
        fsync_dir,
        mount_direct,
        mount_options,
        now,
        partial_ok,
        post_call,
        probe_write,
        push,
        read_file,
        read_log,
        run,
        umount_direct,
        virtual_time,
        write_all,
        write_json_atomic,
    )
    from protocol import (
        Call,
        DirectMount,
        FsckResult,
        HostCall,
        Phase,
        PrepareSpec,
        RecoverFacts,
        RecoverSpec,
        SnapcutSpec,
        StepStatus,
        Verdict,
    )

DELETED = "deleted"


# --- the durable log ------------------------------------------------------------------

class Log:
    """JSON lines on the shared run directory; each line reaches the host before return.

    The lab's page cache dies with it, so a line must be written back to the
    host file at once (guestlib.push).
    """

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, rec: dict) -> None:
        if rec.get("e") == "ack":
            # the guest's wall clock (UML keeps the host's): the host compares
            # it with the moment it cut the power
            rec = {**rec, "t": round(time.time(), 6)}
        os.write(self.fd, (json.dumps(rec, separators=(",", ":")) + "\n").encode())
        push(self.fd)


# --- the workload ---------------------------------------------------------------------

def request_cut(seconds: float) -> None:
    """Ask the host to cut power `seconds` from now: a host call like the agent's,
    made here so the cut is timed from the workload's own start, whatever the
    lab's start-up took. Nobody waits for the answer: the power goes. In virtual
    time the device cuts at that instant of guest time and the workload waits for
    the cut to be armed (a wait that costs no guest time), so it replays exactly."""
    run = os.environ.get("FLASHBED_RUN", ".")
    call = HostCall(Call.CUT_POWER_IN, {"seconds": seconds})
    if virtual_time():
        call_host(run, "9000-cut", call, timeout=60)
    else:
        post_call(run, "9000-cut", call)


def work(args: argparse.Namespace) -> int:
    if args.prepare:  # mount (or make) the filesystem first, in the same process: one start-up less
        rec = prepare_fs(PrepareSpec.from_json(json.loads(args.prepare)))
        print(json.dumps({"prepare": rec}), flush=True)
        if rec.get("failed"):
            print(f"prepare failed: {rec['failed']}", file=sys.stderr)
            return 1
    d = os.path.abspath(args.dir)
    os.makedirs(os.path.dirname(d), exist_ok=True)
    log = Log(args.log)
    log.write({"e": "begin", "seed": args.seed, "dir": d, "t": now()})
    if args.cut_in is not None:
        request_cut(args.cut_in)
    n, _ = workload(d, log, args.seed, max_bytes=args.max_bytes, max_files=args.max_files, max_file=args.max_file,
                    stop_after=args.stop_after)
    print(json.dumps({"ops": n, "ended": "stop-after"}))
    return 0


def workload(d: str, log: Log, seed: int, *, max_bytes: int, max_files: int, max_file: int,
             stop_after: float = math.inf, max_ops: int = 0, skip_fsync: int = 0) -> tuple[int, int]:
    """Write, append, replace and delete files in `d` (after removing what earlier
    iterations left beside it) until `stop_after` s or `max_ops` operations, each
    logged in `log` (begun by the caller). From operation `skip_fsync` on (0: never),
    the first create, append or replace skips its fsync and is logged as acknowledged
    all the same (a sabotage the checks must catch). Returns (operations, the one
    whose fsync was skipped or 0)."""
    rng = random.Random(seed)
    parent = os.path.dirname(d)
    # earlier iterations' files go first (part of the workload: the cut may hit it)
    for entry in sorted(os.listdir(parent)):
        p = os.path.join(parent, entry)
        if p != d:
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else os.unlink(p)
    os.makedirs(d, exist_ok=True)
    fsync_dir(d)
    fsync_dir(parent)
    log.write({"e": "dir-ack"})
    acked: dict[str, int] = {}  # name -> size of its acked content
    ver: dict[str, int] = {}
    loose = 0  # bytes of files written without fsync (never acked, never touched again)
    deadline = now() + stop_after
    lo, hi = math.log(512), math.log(max_file)
    n = skipped = 0
    while now() < deadline and not (max_ops and n >= max_ops):
        n += 1
        live = sum(acked.values()) + loose
        r = rng.random()
        if acked and (live > max_bytes or len(acked) >= max_files):
            op = "delete"
        elif r < 0.40 or not acked:
            op = "create"
        elif r < 0.60:
            op = "append"
        elif r < 0.80:
            op = "replace"
        elif r < 0.90:
            op = "delete"
        else:
            op = "create-nofsync" if loose < max_bytes // 4 else "create"
        size = int(math.exp(rng.uniform(lo, hi)))
        fsync = True
        if skip_fsync and not skipped and n >= skip_fsync and op in ("create", "append", "replace"):
            skipped, fsync = n, False
        if op in ("create", "create-nofsync"):
            name = f"f{n:05d}"
            ver[name] = 1
            sync = op == "create"
            log.write({"e": "intent", "n": n, "op": "create", "name": name, "ver": 1, "size": size, "fsync": sync})
            write_all(os.path.join(d, name), content(seed, name, 1, size),
                      os.O_WRONLY | os.O_CREAT | os.O_EXCL, sync and fsync)
            if sync:
                fsync_dir(d)
                log.write({"e": "ack", "n": n})
                acked[name] = size
            else:
                loose += size
            continue
        name = rng.choice(sorted(acked))
        if op == "append":
            add = max(1, size // 4)
            ver[name] += 1
            log.write({"e": "intent", "n": n, "op": "append", "name": name, "ver": ver[name], "add": add})
            write_all(os.path.join(d, name), content(seed, name, ver[name], add), os.O_WRONLY | os.O_APPEND, fsync)
            log.write({"e": "ack", "n": n})
            acked[name] += add
        elif op == "replace":
            ver[name] += 1
            tmp = name + ".tmp"
            log.write({"e": "intent", "n": n, "op": "replace", "name": name, "ver": ver[name], "size": size,
                       "tmp": tmp})
            write_all(os.path.join(d, tmp), content(seed, name, ver[name], size),
                      os.O_WRONLY | os.O_CREAT | os.O_TRUNC, fsync)
            os.rename(os.path.join(d, tmp), os.path.join(d, name))
            fsync_dir(d)
            log.write({"e": "ack", "n": n})
            acked[name] = size
        else:
            log.write({"e": "intent", "n": n, "op": "delete", "name": name})
            os.unlink(os.path.join(d, name))
            fsync_dir(d)
            log.write({"e": "ack", "n": n})
            del acked[name]
    log.write({"e": "end", "ops": n})
    return n, skipped


# --- the verifier ---------------------------------------------------------------------

class Content:
    """A version's bytes, made only when a check needs them (most versions are
    deleted or superseded and never read)."""

    def __init__(self, seed: int, segs: tuple):
        self.seed, self.segs = seed, segs  # ((name, ver, size), ...) concatenated
        self._data: bytes | None = None

    def then(self, name: str, ver: int, size: int) -> Content:
        return Content(self.seed, self.segs + ((name, ver, size),))

    # where a version's bytes come from: content() (a crash-state checker puts a cache here)
    source = staticmethod(content)

    @property
    def data(self) -> bytes:
        if self._data is None:
            self._data = b"".join(Content.source(self.seed, n, v, z) for n, v, z in self.segs)
        return self._data


def _bytes(x):
    return x.data if isinstance(x, Content) else x


class FileModel:
    """What the log says about one name: its acked state and the operation in flight."""

    def __init__(self, name: str):
        self.name = name
        self.acked: bytes | str | None = None  # None: never acked; DELETED; or the bytes
        self.pending: dict | None = None  # last intent not acked (its "new" bytes computed)
        self.tmp_of: str | None = None  # set on "<name>.tmp" entries: the file it replaces


def build_model(recs: list[dict]) -> tuple[dict, dict[str, FileModel]]:
    """Replay the log: (header facts, name -> FileModel)."""
    head = {"begun": False, "dir_acked": False, "seed": None, "ops": 0, "acks": 0}
    files: dict[str, FileModel] = {}
    cur: dict[str, Content] = {}  # latest full content intended per name (acked or not)
    intents: dict[int, dict] = {}
    for rec in recs:
        e = rec.get("e")
        if e == "begin":
            head.update(begun=True, seed=rec["seed"])
        elif e == "dir-ack":
            head["dir_acked"] = True
        elif e == "intent":
            head["ops"] += 1
            seed, name, op = head["seed"], rec["name"], rec["op"]
            fm = files.setdefault(name, FileModel(name))
            if op == "create":
                new = Content(seed, ((name, rec["ver"], rec["size"]),))
            elif op == "append":
                new = cur.get(name, Content(seed, ())).then(name, rec["ver"], rec["add"])
            elif op == "replace":
                new = Content(seed, ((name, rec["ver"], rec["size"]),))
                t = files.setdefault(rec["tmp"], FileModel(rec["tmp"]))
                t.tmp_of = name
                t.pending = {"op": "create", "new": new}
            else:
                new = None
            fm.pending = {"op": op, "new": new, "fsync": rec.get("fsync", True), "n": rec["n"]}
            if new is not None:
                cur[name] = new
            intents[rec["n"]] = rec
        elif e == "ack":
            head["acks"] += 1
            rec_i = intents.get(rec["n"])
            if rec_i is None:
                continue
            fm = files[rec_i["name"]]
            fm.acked = DELETED if rec_i["op"] == "delete" else fm.pending["new"]
            fm.pending = None
            if rec_i["op"] == "replace":
                t = files[rec_i["tmp"]]
                t.acked, t.pending = DELETED, None  # renamed away: must be gone
    return head, files


def judge(fm: FileModel, actual: bytes | None, err: str = "") -> tuple[str, str]:
    """One name: (verdict, how). actual None = absent."""
    acked, p = _bytes(fm.acked), fm.pending
    has_acked_data = isinstance(acked, bytes)
    if err:
        return (Verdict.LOSS if has_acked_data else Verdict.GARBAGE), f"read error: {err}"
    if p is None:
        if has_acked_data:
            if actual is None:
                return Verdict.LOSS, "acked file missing"
            if actual == acked:
                return Verdict.OK, "intact"
            if len(actual) < len(acked) and acked.startswith(actual):
                return Verdict.LOSS, f"acked file truncated to {len(actual)} of {len(acked)} bytes"
            return Verdict.LOSS, "acked content differs"
        if acked == DELETED:
            if actual is None:
                return Verdict.OK, "deleted"
            if fm.tmp_of:
                return Verdict.GARBAGE, "temporary file left after an acked rename"
            return Verdict.LOSS, "acked delete undone"
        return Verdict.OK if actual is None else Verdict.GARBAGE, "unknown state"
    op, new = p["op"], _bytes(p["new"])
    if op == "create":
        if actual is None:
            return Verdict.OK, "absent (not acked)"
        if actual == new:
            return Verdict.OK, "new"
        if partial_ok(actual, new):
            return Verdict.OK, ("empty" if not actual else "partial" if actual.count(0) != len(actual) else "zeros")
        return Verdict.GARBAGE, "content never written here"
    if op == "append":
        base = acked if has_acked_data else b""
        if actual is None:
            return (Verdict.LOSS, "acked file missing") if has_acked_data else (Verdict.OK, "absent")
        if actual[:len(base)] != base:
            return Verdict.LOSS, "acked prefix differs or truncated"
        if partial_ok(actual, new, len(base)):
            return Verdict.OK, "old" if len(actual) == len(base) else "partial append"
        return Verdict.GARBAGE, "appended bytes never written here"
    if op == "replace":
        if actual is not None and actual == new:
            return Verdict.OK, "new"
        if has_acked_data:
            if actual == acked:
                return Verdict.OK, "old"
            return Verdict.LOSS, "neither the acked nor the new version" if actual is not None else "acked file missing"
        return (Verdict.OK, "absent") if actual is None else (Verdict.GARBAGE, "content never written here")
    if op == "delete":
        if actual is None:
            return Verdict.OK, "deleted"
        if has_acked_data and actual == acked:
            return Verdict.OK, "old"
        return Verdict.LOSS, "acked content differs"
    return Verdict.GARBAGE, f"unknown operation {op}"


def verify_dir(d: str, recs: list[dict]) -> dict:
    head, files = build_model(recs)
    out = {"begun": head["begun"], "ops": head["ops"], "acks": head["acks"], "checked": 0, "acked_files": 0,
           "loss": [], "garbage": [], "ok": {}, "dir": "present"}
    if not head["begun"]:
        out["dir"] = "never written"
        return out
    try:
        present = set(os.listdir(d))
    except FileNotFoundError:
        present = set()
        out["dir"] = "missing"
    except OSError as e:
        present = set()
        out["dir"] = "unreadable: " + errno.errorcode.get(e.errno, str(e.errno))
    if out["dir"] != "present" and head["dir_acked"] and any(
            isinstance(f.acked, (bytes, Content)) for f in files.values()):
        out["loss"].append(f"directory {out['dir']}")
    for name in sorted(set(files) | present):
        fm = files.get(name)
        if fm is None:
            out["garbage"].append(f"{name}: unknown file")
            continue
        if name in present:
            actual, err = read_file(os.path.join(d, name))
        else:
            actual, err = None, ""
        verdict, how = judge(fm, actual, err)
        out["checked"] += 1
        out["acked_files"] += isinstance(fm.acked, (bytes, Content))
        if verdict is Verdict.OK:
            out["ok"][how] = out["ok"].get(how, 0) + 1
        else:
            out[verdict].append(f"{name}: {how}")
    out["n_loss"], out["n_garbage"] = len(out["loss"]), len(out["garbage"])
    out["loss"], out["garbage"] = out["loss"][:LIST_LIMIT], out["garbage"][:LIST_LIMIT]
    return out


def verify(args: argparse.Namespace) -> int:
    print(json.dumps(verify_dir(args.dir, read_log(args.log))))
    return 0


def sabotage_dir(d: str, recs: list[dict]) -> str | None:
    """Flip the first byte of one acked file at rest (no operation in flight on it)."""
    _, files = build_model(recs)
    for name in sorted(files):
        fm = files[name]
        if isinstance(fm.acked, Content) and fm.acked.segs and fm.pending is None:
            path = os.path.join(d, name)
            fd = os.open(path, os.O_RDWR)
            try:
                first = os.pread(fd, 1, 0)
                if not first:
                    continue
                os.pwrite(fd, bytes([first[0] ^ 0xFF]), 0)
                os.fsync(fd)
            finally:
                os.close(fd)
            return name
    return None


def sabotage(args: argparse.Namespace) -> int:
    print(json.dumps({"sabotaged": sabotage_dir(args.dir, read_log(args.log))}))
    return 0


# --- recovery after a cut --------------------------------------------------------------

class Hang(Exception):
    pass


class Kmsg:
    """Kernel messages from now on (the ring buffer through /dev/kmsg)."""

    def __init__(self):
        try:
            self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)
        except OSError:
            self.fd = None

    def take(self) -> list[str]:
        lines = []
        while self.fd is not None:
            try:
                rec = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EPIPE:  # overrun: records were lost, go on
                    continue
                break
            if not rec:
                break
            _, _, msg = rec.decode("utf-8", "replace").partition(";")
            lines.append(msg.split("\n", 1)[0])
        return lines[-200:]


def _save(path: str | None, facts: RecoverFacts) -> None:
    # synced: the lab may be killed next (a hang), and the host must have what was found
    if path:
        write_json_atomic(os.path.expandvars(path), facts.to_json())


def run_all(cmds: list[str], timeout: float) -> dict:
    rec = {"status": StepStatus.OK, "rc": 0, "seconds": 0.0, "out": ""}
    for c in cmds:
        r = run(c, timeout)
        rec["seconds"] = round(rec["seconds"] + r["seconds"], 6)
        rec["out"] += r["out"]
        rec["status"], rec["rc"] = r["status"], r["rc"]
        if not r["status"].ok:
            break
    return rec


Verifier = Callable[[str], dict]  # the workload's directory -> the verdict (verify_dir's shape)


BTRFS_SUPER, BTRFS_MAGIC = 64 * 1024, b"_BHRfS_M"


def log_replay_due(dm: DirectMount) -> bool | None:
    """Whether the mount will replay a log, read from the filesystem itself where its kernel
    message cannot be relied on: btrfs rate-limits its info lines (a burst per 5 s), so a loop
    that mounts state after state lost "start tree-log replay" when it went fast, and the same
    state read clean in one run and recovered in another. btrfs replays its tree log when the
    superblock's log_root (offset 96 of the primary superblock) is not 0. None: not known here
    (the kernel's message decides)."""
    if dm.fstype != "btrfs":
        return None
    try:
        with open(os.path.expandvars(dm.device), "rb", buffering=0) as f:
            f.seek(BTRFS_SUPER)
            sb = f.read(104)
    except OSError:
        return None
    if len(sb) < 104 or sb[64:72] != BTRFS_MAGIC:
        return None
    return int.from_bytes(sb[96:104], "little") != 0


def mount_and_verify(spec: RecoverSpec, facts: RecoverFacts, tag: str, kmsg: Kmsg,
                     verify: Verifier | None = None) -> bool:
    """Mount, note read-only and kernel messages, verify (default: against the log
    of this workload, spec.log); True if it was mounted."""
    kmsg.take()
    if spec.attach:  # raw NAND: UBI attach, timed apart from the mount
        a = run_all(spec.attach, spec.timeout)
        a["kmsg"] = kmsg.take()
        facts.runs[tag + "-attach"] = a
        _save(spec.out, facts)
        if a["status"].is_hang:
            raise Hang(f"{tag}: attach did not return")
        if not a["status"].ok:
            facts.runs[tag] = {"status": StepStatus.FAILED, "rc": None, "seconds": 0.0, "out": "attach failed",
                               "kmsg": []}
            return False
    direct = DirectMount.from_json(spec.direct) if spec.direct else None
    replay = log_replay_due(direct) if direct else None
    m = mount_direct(direct, spec.mnt, spec.timeout) if direct else run_all(spec.mount, spec.timeout)
    m["kmsg"] = kmsg.take()
    if replay is not None:
        m["log_replay"] = replay
    facts.runs[tag] = m
    _save(spec.out, facts)
    if m["status"].is_hang:
        raise Hang(f"{tag}: mount did not return")
    if not m["status"].ok:
        return False
    m["ro"] = "ro" in (mount_options(spec.mnt) or [])
    if spec.sabotage:
        facts.sabotaged = sabotage_dir(spec.dir, read_log(spec.log)) or ""  # "": no file to sabotage
    facts.phase = Phase.verifying(tag)
    _save(spec.out, facts)
    t = now()
    v = verify(spec.dir) if verify is not None else verify_dir(spec.dir, read_log(spec.log))
    v["seconds"] = round(now() - t, 6)
    v["probe"] = probe_write(spec.mnt) if not m["ro"] else "EROFS"
    v["kmsg"] = kmsg.take()
    v["ro_after"] = "ro" in (mount_options(spec.mnt) or [])
    facts.verify = v
    facts.verified_by = tag
    _save(spec.out, facts)
    u = umount_direct(spec.mnt, spec.timeout) if spec.direct else run_all(spec.umount, spec.timeout)
    u["kmsg"] = kmsg.take()
    facts.runs["u" + tag] = u
    _save(spec.out, facts)
    if u["status"].is_hang:
        raise Hang(f"u{tag}: umount did not return")
    return True


def recover_facts(spec: RecoverSpec, verify: Verifier | None = None, kmsg: Kmsg | None = None,
                  checker: Callable[[str, float], dict] | None = None) -> RecoverFacts:
    """The recovery after a cut; `verify` replaces the check against spec.log (the
    crash-state loop's logs are cut at each state), `kmsg` a reader kept across
    recoveries, `checker` how spec.check runs (as run() does: the crash-state loop's
    runs it on the host). An empty spec.out keeps the facts in memory only."""
    facts = RecoverFacts()
    spec = dataclasses.replace(spec, **{k: os.path.expandvars(getattr(spec, k)) for k in ("log", "dir", "out")})
    kmsg = kmsg or Kmsg()
    try:
        if spec.teardown:  # raw NAND: what is left of the cut-off stack goes first
            facts.teardown = [run(c, spec.timeout) for c in spec.teardown]
            if any(r["status"].is_hang for r in facts.teardown):
                raise Hang("teardown after the cut did not return")
        mounted = mount_and_verify(spec, facts, "mount1", kmsg, verify)
        if spec.check:
            facts.phase = Phase.FSCK
            _save(spec.out, facts)
            c = (checker or run)(spec.check, spec.fsck_timeout)
            fsck = {"check": c, "seconds": c["seconds"]}
            if c["status"].is_hang:
                facts.fsck = fsck
                raise Hang("fsck did not return")
            if c["rc"] in spec.clean and c["status"].returned:
                fsck["result"] = FsckResult.CLEAN
            elif spec.repair:
                r = run(spec.repair, spec.fsck_timeout)
                fsck["repair"] = r
                fsck["seconds"] = round(c["seconds"] + r["seconds"], 6)
                if r["status"].is_hang:
                    facts.fsck = fsck
                    raise Hang("repair did not return")
                fsck["result"] = FsckResult.FIXED if r["rc"] in spec.fixed or r["rc"] in spec.clean \
                    else FsckResult.FAILED
            else:
                fsck["result"] = FsckResult.FAILED
            facts.fsck = fsck
            _save(spec.out, facts)
            if not mounted:
                mounted = mount_and_verify(spec, facts, "mount2", kmsg, verify)
        else:
            facts.fsck = {"result": FsckResult.NA, "seconds": 0.0}
        facts.mounted = mounted
        facts.phase = Phase.DONE
    except Hang as e:
        facts.hang = str(e)
        facts.phase = Phase.HANG
    v = facts.verify or {}
    facts.reusable = bool(facts.done and facts.mounted and facts.fsck_result is not FsckResult.FAILED
                          and not v.get("n_loss") and not v.get("n_garbage"))
    _save(spec.out, facts)
    return facts


def recover(args: argparse.Namespace) -> int:
    facts = recover_facts(RecoverSpec.from_json(json.loads(args.spec)))
    print(json.dumps(facts.to_json()))
    sys.stdout.flush()
    if facts.hang:
        os._exit(3)  # a child stuck in the kernel must not hold us
    return 0


def prepare(args: argparse.Namespace) -> int:
    rec = prepare_fs(PrepareSpec.from_json(json.loads(args.spec)))
    print(json.dumps(rec))
    return 1 if rec.get("failed") else 0


def prepare_fs(spec: PrepareSpec) -> dict:
    """Mount the filesystem the previous recovery left, or make a new one."""
    fresh = True
    reason = "first iteration"
    prev = os.path.expandvars(spec.previous) if spec.previous else None
    if prev:
        try:
            with open(prev) as f:
                facts = json.load(f)
            fresh = not facts.get("reusable")
            reason = "previous recovery left it unusable" if fresh else "reused"
        except (OSError, ValueError):
            reason = "previous recovery left no verdict"
    rec = {"fresh": fresh, "reason": reason}
    if not fresh:
        m = run_all(spec.mount, spec.timeout)
        rec["mount"] = m
        if not m["status"].ok:
            fresh, rec["fresh"], rec["reason"] = True, True, "remount failed"
        elif spec.min_free:
            # a filesystem that ages across iterations must not run the workload out of
            # space (nilfs2 keeps its recent checkpoints): start afresh before it does
            st = os.statvfs(spec.mnt)
            free = st.f_bavail * st.f_frsize
            rec["free"] = free
            if free < spec.min_free:
                fresh, rec["fresh"], rec["reason"] = True, True, f"only {free >> 20} MiB free"
                rec["umount"] = run_all(spec.umount, spec.timeout)
    if fresh:
        for key in ("mkfs", "mount"):
            r = run_all(getattr(spec, key), spec.timeout)
            rec[key] = r
            if not r["status"].ok:
                rec["failed"] = f"{key}: {r['out'].strip()[-200:]}"
                break
    return rec


# --- raw NAND without power-cut emulation (JFFS2): freeze, snapshot, restore ---------------

def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _stop(pid: int, timeout: float = 5.0) -> str:
    os.kill(pid, signal.SIGSTOP)
    deadline = now() + timeout
    while (st := _state(pid)) not in ("T", "t", "gone", "Z") and now() < deadline:
        time.sleep(0.002)
    return st


def _group(pgid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[2]) == pgid:
                        pids.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return pids


def snapcut(args: argparse.Namespace) -> int:
    """A power cut emulated for raw NAND without a cut switch below the filesystem:
    run the workload, at the cut moment stop every writer (the workload and the
    filesystem's GC threads: a write in progress completes, nothing after it
    starts), dump the flash, throw the filesystem away, erase the flash and write
    the dump back (erased pages left erased): the flash then holds the data it
    held at the cut."""
    spec = SnapcutSpec.from_json(json.loads(args.spec))
    out: dict = {"cut": False}
    with open(os.path.expandvars(spec.work_log), "wb") as log:
        w = subprocess.Popen(["/bin/sh", "-c", spec.work], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True)
    try:
        w.wait(timeout=spec.cut)
        out["error"] = f"the workload ended (exit {w.returncode}) before the cut"
        print(json.dumps(out))
        return 1
    except subprocess.TimeoutExpired:
        pass
    # the whole process group: the shell and the workload under it
    os.killpg(w.pid, signal.SIGSTOP)
    out["workload"] = {str(pid): _stop(pid) for pid in _group(w.pid)}
    gcs = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().startswith(spec.gc_prefix):
                        gcs.append(int(entry))
            except OSError:
                pass
    out["gc"] = {str(pid): _stop(pid, 2.0) for pid in gcs}
    if spec.kill_pidfile:
        return _kill_daemon(spec, w, out)
    snap = spec.snapshot
    # data pages only: JFFS2 keeps nothing but clean markers in the OOB, and a block
    # without one is erased again at mount (part of its recovery)
    d = run(f"nanddump -q -f {snap} {spec.mtd}", spec.timeout)
    out["dump"] = {k: d[k] for k in ("status", "rc", "seconds")}
    out["cut"] = d["status"].ok
    os.killpg(w.pid, signal.SIGKILL)
    for pid in gcs:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    w.wait()
    for c in spec.umount:
        r = run(c, spec.timeout)
        out.setdefault("umount", []).append(r["status"])
        if r["status"].is_hang:
            out["cut"] = False
            out["error"] = "unmount after the cut did not return"
            print(json.dumps(out))
            sys.stdout.flush()
            os._exit(3)
    if out["cut"]:
        for c in (f"flash_erase -q {spec.mtd} 0 0", f"nandwrite -q -k {spec.mtd} {snap}"):
            r = run(c, spec.timeout)
            out.setdefault("restore", []).append({k: r[k] for k in ("cmd", "status", "rc", "out")})
            if not r["status"].ok:
                out["cut"] = False
                out["error"] = f"restoring the flash failed: {r['out'][-200:]}"
                break
    os.unlink(snap) if os.path.exists(snap) else None
    print(json.dumps(out))
    return 0 if out["cut"] else 1



def _gone(pid: int, timeout: float) -> bool:
    """The process has exited (a zombie has: the guest's init may reap it late)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (OSError, IndexError):
            return True
        time.sleep(0.02)
    return False


def _kill_daemon(spec: SnapcutSpec, w: subprocess.Popen, out: dict) -> int:
    """snapcut's cut for a filesystem in user space: its daemon killed, the flash kept."""
    try:
        with open(spec.kill_pidfile) as f:
            pid = int(f.read().strip())
        os.kill(pid, signal.SIGKILL)
        out["cut"] = _gone(pid, spec.timeout)
        out["daemon"] = pid
    except (OSError, ValueError) as e:
        out["error"] = f"no daemon to kill ({spec.kill_pidfile}): {e}"
    os.killpg(w.pid, signal.SIGKILL)
    w.wait()
    for c in spec.umount:
        r = run(c, spec.timeout)
        out.setdefault("umount", []).append(r["status"])
    print(json.dumps(out))
    return 0 if out["cut"] else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="powercut")
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("work")
    w.add_argument("dir")
    w.add_argument("log")
    w.add_argument("--seed", type=int, required=True)
    w.add_argument("--max-bytes", type=int, default=8 << 20)
    w.add_argument("--max-files", type=int, default=64)
    w.add_argument("--max-file", type=int, default=1 << 20)
    w.add_argument("--stop-after", type=float, default=600.0)
    w.add_argument("--cut-in", type=float, help="ask the host to cut power this many seconds after the start")
    w.add_argument("--prepare", help="a PrepareSpec (JSON) to run first")
    for name in ("verify", "sabotage"):
        s = sub.add_parser(name)
        s.add_argument("dir")
        s.add_argument("log")
    for name in ("prepare", "recover", "snapcut"):
        sub.add_parser(name).add_argument("spec")
    args = p.parse_args(argv)
    return {"work": work, "verify": verify, "sabotage": sabotage, "prepare": prepare, "recover": recover,
            "snapcut": snapcut}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
