"""Guest side of the failure studies: a power-cut workload with a durable log
of what it was told was durable, the verifier that checks a filesystem against
that log after the cut, and the recovery sequence (mount, verify, unmount,
check, repair) timed step by step.

Standard library only: it runs as `/usr/bin/python3 -S -I pcwork.py ...`
inside the lab, and the host's unit tests import it for the verifier.

  work DIR LOG --seed S [--max-bytes B] [--max-files N] [--max-file B] [--stop-after T] [--cut-in X]
       [--prepare SPEC_JSON]
      Write, append, replace and delete files in DIR until killed (a power
      cut), logging every operation to LOG (on the shared run directory, i.e.
      outside the device under test): an intent before it, an ack once fsync
      of the file and of its directory returned. Each log line reaches the
      host before the operation it announces starts.
  verify DIR LOG          Check DIR against LOG; print the verdict as JSON.
  sabotage DIR LOG        Corrupt one acknowledged file on purpose (tests the verifier).
  prepare SPEC_JSON       Mount the filesystem again, or make a new one when the
                          previous recovery says it cannot be reused.
  recover SPEC_JSON       After a cut: mount, verify, unmount, check/repair, and if
                          the first mount failed, mount and verify again. Prints
                          the facts as JSON (the host classifies them).
  snapcut SPEC_JSON       Raw NAND without a cut switch (JFFS2): run the workload, stop
                          every writer at the cut moment, dump the flash, unmount,
                          erase and write the dump back.
  cwork DIR STATE --count N --size B --seed S --duration T --round R
                          Corruption study: rewrite N files of B bytes, then sync, in
                          rounds for T seconds; STATE says what each file should hold.
  dust DIR TARGET --sectors N --seed S [--file-blocks K] [--random-blocks R]
                          Badblocks study: add seeded bad blocks (some under DIR's files,
                          found with FIEMAP) to dm-dust TARGET.
  inspect DIR STATE --count N --size B --seed S
                          Per file: intact / zeroed / truncated / io-error / stale /
                          silently-corrupted / missing.

Durability rules the verifier applies (a file is checked as a whole):
  * acknowledged data must be intact: an acked file has exactly its acked
    content (or, while a later operation on it was in flight, that operation's
    allowed results); an acked delete stays deleted;
  * anything not acknowledged may be old, new (complete or in part: a prefix
    of the new content, any 4 KiB block of it possibly still zero, i.e. never
    written), or absent, but never other data ("garbage": bytes that were
    never written to that file at that place).
"""

from __future__ import annotations

import argparse
import ctypes
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

# run as `python3 -S -I`: this directory is not on sys.path by itself
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guestlib  # noqa: E402
from guestlib import now, read_log, write_json_atomic  # noqa: E402
from protocol import FileState, FsckResult, Phase, StepStatus, Verdict  # noqa: E402

BLOCK = 4096
CHUNK = 64 * 1024
DELETED = "deleted"
LIST_LIMIT = 20  # problems listed per kind in a verdict


def content(seed: int, name: str, ver: int, size: int) -> bytes:
    """The bytes version `ver` of `name` adds (deterministic: the verifier regenerates them)."""
    return random.Random(f"{seed}/{name}/{ver}").randbytes(size)


# --- the durable log ------------------------------------------------------------------

class Log:
    """JSON lines on the shared run directory; each line reaches the host before return.

    The lab's page cache dies with it, so a line must be written back to the
    host file at once: sync_file_range (write-back without a host fsync, which
    the host does not need: only the lab is killed), else fsync.
    """

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._sfr = None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            self._sfr = libc.sync_file_range
            self._sfr.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)
        except (OSError, AttributeError):
            self._sfr = None

    def write(self, rec: dict) -> None:
        if rec.get("e") == "ack":
            # the guest's wall clock (UML keeps the host's): the host compares
            # it with the moment it cut the power
            rec = {**rec, "t": round(time.time(), 6)}
        os.write(self.fd, (json.dumps(rec, separators=(",", ":")) + "\n").encode())
        # SYNC_FILE_RANGE_WAIT_BEFORE | WRITE | WAIT_AFTER
        if self._sfr is None or self._sfr(self.fd, 0, 0, 7) != 0:
            os.fsync(self.fd)


# --- the workload ---------------------------------------------------------------------

def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(path: str, data: bytes, flags: int, do_fsync: bool) -> None:
    fd = os.open(path, flags, 0o644)
    try:
        for off in range(0, len(data), CHUNK):
            os.write(fd, data[off:off + CHUNK])
        if do_fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def request_cut(seconds: float) -> None:
    """Ask the host to cut power `seconds` from now: a host call like the agent's
    (a request file in the shared run directory's host-calls/), made here so the
    cut is timed from the workload's own start, whatever the lab's start-up took."""
    calls = os.path.join(os.environ.get("FLASHBED_RUN", "."), "host-calls")
    os.makedirs(calls, exist_ok=True)
    req = os.path.join(calls, "9000-cut.req")
    write_json_atomic(req + ".new", {"call": "cut-power-in", "args": {"seconds": seconds}})
    os.replace(req + ".new", req)


def work(args: argparse.Namespace) -> int:
    if args.prepare:  # mount (or make) the filesystem first, in the same process: one start-up less
        rec = prepare_fs(json.loads(args.prepare))
        print(json.dumps({"prepare": rec}), flush=True)
        if rec.get("failed"):
            print(f"prepare failed: {rec['failed']}", file=sys.stderr)
            return 1
    rng = random.Random(args.seed)
    d = os.path.abspath(args.dir)
    parent = os.path.dirname(d)
    os.makedirs(parent, exist_ok=True)
    log = Log(args.log)
    log.write({"e": "begin", "seed": args.seed, "dir": d, "t": now()})
    if args.cut_in is not None:
        request_cut(args.cut_in)
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
    deadline = now() + args.stop_after
    lo, hi = math.log(512), math.log(args.max_file)
    n = 0
    while now() < deadline:
        n += 1
        live = sum(acked.values()) + loose
        r = rng.random()
        if acked and (live > args.max_bytes or len(acked) >= args.max_files):
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
            op = "create-nofsync" if loose < args.max_bytes // 4 else "create"
        size = int(math.exp(rng.uniform(lo, hi)))
        if op in ("create", "create-nofsync"):
            name = f"f{n:05d}"
            ver[name] = 1
            sync = op == "create"
            log.write({"e": "intent", "n": n, "op": "create", "name": name, "ver": 1, "size": size, "fsync": sync})
            write_all(os.path.join(d, name), content(args.seed, name, 1, size),
                      os.O_WRONLY | os.O_CREAT | os.O_EXCL, sync)
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
            write_all(os.path.join(d, name), content(args.seed, name, ver[name], add), os.O_WRONLY | os.O_APPEND,
                      True)
            log.write({"e": "ack", "n": n})
            acked[name] += add
        elif op == "replace":
            ver[name] += 1
            tmp = name + ".tmp"
            log.write({"e": "intent", "n": n, "op": "replace", "name": name, "ver": ver[name], "size": size,
                       "tmp": tmp})
            write_all(os.path.join(d, tmp), content(args.seed, name, ver[name], size),
                      os.O_WRONLY | os.O_CREAT | os.O_TRUNC, True)
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
    print(json.dumps({"ops": n, "ended": "stop-after"}))
    return 0


# --- the verifier ---------------------------------------------------------------------

class Content:
    """A version's bytes, made only when a check needs them (most versions are
    deleted or superseded and never read)."""

    def __init__(self, seed: int, segs: tuple):
        self.seed, self.segs = seed, segs  # ((name, ver, size), ...) concatenated
        self._data: bytes | None = None

    def then(self, name: str, ver: int, size: int) -> Content:
        return Content(self.seed, self.segs + ((name, ver, size),))

    @property
    def data(self) -> bytes:
        if self._data is None:
            self._data = b"".join(content(self.seed, n, v, z) for n, v, z in self.segs)
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


def _partial_ok(actual: bytes, new: bytes, start: int = 0) -> bool:
    """actual[start:] is new[start:] in part: not longer, each 4 KiB block the new
    bytes or zeros (never written)."""
    if len(actual) > len(new):
        return False
    for off in range(start - start % BLOCK, len(actual), BLOCK):
        lo = max(off, start)
        a = actual[lo:off + BLOCK]
        if a != new[lo:lo + len(a)] and a.count(0) != len(a):
            return False
    return True


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
        if _partial_ok(actual, new):
            return Verdict.OK, ("empty" if not actual else "partial" if actual.count(0) != len(actual) else "zeros")
        return Verdict.GARBAGE, "content never written here"
    if op == "append":
        base = acked if has_acked_data else b""
        if actual is None:
            return (Verdict.LOSS, "acked file missing") if has_acked_data else (Verdict.OK, "absent")
        if actual[:len(base)] != base:
            return Verdict.LOSS, "acked prefix differs or truncated"
        if _partial_ok(actual, new, len(base)):
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


def read_file(path: str) -> tuple[bytes | None, str]:
    try:
        with open(path, "rb") as f:
            return f.read(), ""
    except FileNotFoundError:
        return None, ""
    except OSError as e:
        return None, errno.errorcode.get(e.errno, str(e.errno))


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


# --- commands with limits, kernel messages --------------------------------------------

class Hang(Exception):
    pass


def run(cmd: str, timeout: float) -> dict:
    """A shell command with a limit; a command that cannot be killed is a hang."""
    status, rc, out, err, seconds = guestlib.run_shell(cmd, timeout)
    return {"cmd": cmd, "status": status, "rc": rc, "seconds": round(seconds, 6),
            "out": (out + err).decode("utf-8", "replace")[-4000:]}


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


def mount_options(mnt: str) -> list[str] | None:
    """The options /mnt is mounted with now (the last mount on it), None if not mounted."""
    opts = None
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 3 and parts[1] == mnt:
                    opts = parts[3].split(",")
    except OSError:
        pass
    return opts


def probe_write(mnt: str) -> str:
    """'ok', or the errno name a small synced write gets (EROFS: read-only)."""
    path = os.path.join(mnt, ".pcprobe")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"probe")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.unlink(path)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


# --- recovery after a cut --------------------------------------------------------------

def _save(path: str | None, facts: dict) -> None:
    if not path:
        return
    path = os.path.expandvars(path)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(facts, f)
        f.flush()
        os.fsync(f.fileno())  # the lab may be killed next (a hang): the host must have it
    os.replace(tmp, path)


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


def mount_and_verify(spec: dict, facts: dict, tag: str, kmsg: Kmsg) -> bool:
    """Mount, note read-only and kernel messages, verify; True if it was mounted."""
    mnt = spec["mnt"]
    kmsg.take()
    if spec.get("attach"):  # raw NAND: UBI attach, timed apart from the mount
        a = run_all(spec["attach"], spec["timeout"])
        a["kmsg"] = kmsg.take()
        facts[tag + "-attach"] = a
        _save(spec.get("out"), facts)
        if a["status"].is_hang:
            raise Hang(f"{tag}: attach did not return")
        if not a["status"].ok:
            facts[tag] = {"status": StepStatus.FAILED, "rc": None, "seconds": 0.0, "out": "attach failed",
                          "kmsg": []}
            return False
    m = run_all(spec["mount"], spec["timeout"])
    m["kmsg"] = kmsg.take()
    facts[tag] = m
    _save(spec.get("out"), facts)
    if m["status"].is_hang:
        raise Hang(f"{tag}: mount did not return")
    if not m["status"].ok:
        return False
    opts = mount_options(mnt) or []
    m["ro"] = "ro" in opts
    if spec.get("sabotage"):
        facts["sabotaged"] = sabotage_dir(spec["dir"], read_log(spec["log"]))
    facts["phase"] = Phase.verifying(tag)
    _save(spec.get("out"), facts)
    t = now()
    v = verify_dir(spec["dir"], read_log(spec["log"]))
    v["seconds"] = round(now() - t, 6)
    v["probe"] = probe_write(mnt) if not m["ro"] else "EROFS"
    v["kmsg"] = kmsg.take()
    opts = mount_options(mnt) or []
    v["ro_after"] = "ro" in opts
    facts["verify"] = v
    facts["verified_by"] = tag
    _save(spec.get("out"), facts)
    u = run_all(spec["umount"], spec["timeout"])
    u["kmsg"] = kmsg.take()
    facts["u" + tag] = u
    _save(spec.get("out"), facts)
    if u["status"].is_hang:
        raise Hang(f"u{tag}: umount did not return")
    return True


def recover_facts(spec: dict) -> dict:
    facts: dict = {"phase": Phase.START}
    for key in ("log", "dir", "out"):
        if spec.get(key):
            spec[key] = os.path.expandvars(spec[key])
    kmsg = Kmsg()
    try:
        if spec.get("teardown"):  # raw NAND: what is left of the cut-off stack goes first
            facts["teardown"] = [run(c, spec["timeout"]) for c in spec["teardown"]]
            if any(r["status"].is_hang for r in facts["teardown"]):
                raise Hang("teardown after the cut did not return")
        mounted = mount_and_verify(spec, facts, "mount1", kmsg)
        if spec.get("check"):
            facts["phase"] = Phase.FSCK
            _save(spec.get("out"), facts)
            c = run(spec["check"], spec["fsck_timeout"])
            fsck = {"check": c, "seconds": c["seconds"]}
            if c["status"].is_hang:
                facts["fsck"] = fsck
                raise Hang("fsck did not return")
            if c["rc"] in spec["clean"] and c["status"].returned:
                fsck["result"] = FsckResult.CLEAN
            elif spec.get("repair"):
                r = run(spec["repair"], spec["fsck_timeout"])
                fsck["repair"] = r
                fsck["seconds"] = round(c["seconds"] + r["seconds"], 6)
                if r["status"].is_hang:
                    facts["fsck"] = fsck
                    raise Hang("repair did not return")
                fsck["result"] = (FsckResult.FIXED if r["rc"] in spec["fixed"] or r["rc"] in spec["clean"]
                                  else FsckResult.FAILED)
            else:
                fsck["result"] = FsckResult.FAILED
            facts["fsck"] = fsck
            _save(spec.get("out"), facts)
            if not mounted:
                mounted = mount_and_verify(spec, facts, "mount2", kmsg)
        else:
            facts["fsck"] = {"result": FsckResult.NA, "seconds": 0.0}
        facts["mounted"] = mounted
        facts["phase"] = Phase.DONE
    except Hang as e:
        facts["hang"] = str(e)
        facts["phase"] = Phase.HANG
    facts["reusable"] = bool(facts.get("phase") == Phase.DONE and facts.get("mounted")
                             and facts.get("fsck", {}).get("result") != FsckResult.FAILED
                             and not facts.get("verify", {}).get("n_loss")
                             and not facts.get("verify", {}).get("n_garbage"))
    _save(spec.get("out"), facts)
    return facts


def recover(args: argparse.Namespace) -> int:
    spec = json.loads(args.spec)
    facts = recover_facts(spec)
    print(json.dumps(facts))
    sys.stdout.flush()
    if facts.get("hang"):
        os._exit(3)  # a child stuck in the kernel must not hold us
    return 0


def prepare(args: argparse.Namespace) -> int:
    rec = prepare_fs(json.loads(args.spec))
    print(json.dumps(rec))
    return 1 if rec.get("failed") else 0


def prepare_fs(spec: dict) -> dict:
    """Mount the filesystem the previous recovery left, or make a new one."""
    fresh = True
    reason = "first iteration"
    prev = os.path.expandvars(spec["previous"]) if spec.get("previous") else None
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
        m = run_all(spec["mount"], spec["timeout"])
        rec["mount"] = m
        if not m["status"].ok:
            fresh, rec["fresh"], rec["reason"] = True, True, "remount failed"
        elif spec.get("min_free"):
            # a filesystem that ages across iterations must not run the workload out of
            # space (nilfs2 keeps its recent checkpoints): start afresh before it does
            st = os.statvfs(spec["mnt"])
            free = st.f_bavail * st.f_frsize
            rec["free"] = free
            if free < spec["min_free"]:
                fresh, rec["fresh"], rec["reason"] = True, True, f"only {free >> 20} MiB free"
                rec["umount"] = run_all(spec["umount"], spec["timeout"])
    if fresh:
        for key in ("mkfs", "mount"):
            r = run_all(spec[key], spec["timeout"])
            rec[key] = r
            if not r["status"].ok:
                rec["failed"] = f"{key}: {r['out'].strip()[-200:]}"
                break
    return rec


# --- corruption study: files rewritten in rounds, inspected afterwards ---------------------

def cwork(args: argparse.Namespace) -> int:
    """Rewrite COUNT files of SIZE bytes, then sync, round after round, for DURATION
    seconds (a round starts at most every ROUND seconds); each round's content
    differs, so an old round's bytes are told apart from the last one's."""
    os.makedirs(args.dir, exist_ok=True)
    state = {"rounds": 0, "last": {}, "attempted": {}, "errors": [], "ro": False, "sync_seconds": []}
    t0 = now()
    r = 0
    while not state["errors"]:
        r += 1
        start = now()
        for i in range(args.count):
            name = f"c{i:04d}"
            state["attempted"][name] = r
            try:
                write_all(os.path.join(args.dir, name), content(args.seed, name, r, args.size),
                          os.O_WRONLY | os.O_CREAT | os.O_TRUNC, False)
                state["last"][name] = r
            except OSError as e:
                state["errors"].append(f"round {r} {name}: {errno.errorcode.get(e.errno, e.errno)}")
                state["ro"] = e.errno == errno.EROFS
                break
        t = now()
        os.sync()
        state["sync_seconds"].append(round(now() - t, 6))
        state["rounds"] = r
        write_json_atomic(args.state, state)
        if now() - t0 >= args.duration:
            break
        time.sleep(max(0.0, start + args.round - now()))
    state["seconds"] = round(now() - t0, 6)
    write_json_atomic(args.state, state)
    print(json.dumps({k: v for k, v in state.items() if k not in ("last", "attempted", "sync_seconds")}))
    return 0


def classify_file(actual: bytes | None, err: str, want: bytes, older: tuple = ()) -> FileState:
    """intact / io-error / missing / truncated / zeroed / stale (an older round's
    bytes) / silently-corrupted (other bytes, and no error said so)."""
    if err:
        return FileState.IO_ERROR
    if actual is None:
        return FileState.MISSING
    if actual == want:
        return FileState.INTACT
    if len(actual) < len(want):
        return FileState.TRUNCATED
    if any(actual == o for o in older):
        return FileState.STALE
    for o in range(0, len(actual), BLOCK):
        a = actual[o:o + BLOCK]
        if a != want[o:o + BLOCK] and a.count(0) == len(a):
            return FileState.ZEROED
    return FileState.SILENTLY_CORRUPTED


def inspect(args: argparse.Namespace) -> int:
    try:
        with open(args.state) as f:
            state = json.load(f)
    except (OSError, ValueError):
        state = {"attempted": {}}
    counts: dict[str, int] = {}
    detail = []
    for i in range(args.count):
        name = f"c{i:04d}"
        r = state["attempted"].get(name)
        if r is None:
            continue  # never written: nothing to expect
        actual, err = read_file(os.path.join(args.dir, name))
        older = ()
        if actual is not None and len(actual) == args.size:
            older = tuple(content(args.seed, name, k, args.size) for k in range(max(1, r - 3), r))
        c = classify_file(actual, err, content(args.seed, name, r, args.size), older)
        counts[c] = counts.get(c, 0) + 1
        if c is not FileState.INTACT and len(detail) < LIST_LIMIT:
            detail.append(f"{name}: {c}{' ' + err if err else ''}")
    opts = mount_options(args.mnt) or []
    ro = "ro" in opts
    print(json.dumps({"counts": counts, "detail": detail, "ro": ro,
                      "probe": "EROFS" if ro else probe_write(args.mnt)}))
    return 0


# --- badblocks study: where files live, bad blocks under them -----------------------------

FS_IOC_FIEMAP = 0xC020660B


def extents(path: str, max_extents: int = 256) -> list[tuple[int, int]]:
    """(physical byte offset, length) of a file's data: FIEMAP, else FIBMAP; [] if neither works."""
    import fcntl
    import struct
    head = struct.pack("=QQIIII", 0, 2 ** 64 - 1, 1, 0, max_extents, 0)  # FIEMAP_FLAG_SYNC
    buf = bytearray(head + b"\0" * (56 * max_extents))
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
        finally:
            os.close(fd)
    except OSError:
        return fibmap_extents(path)
    n = struct.unpack_from("=I", buf, 20)[0]
    out = []
    for i in range(n):
        _logical, phys, length = struct.unpack_from("=QQQ", buf, 32 + 56 * i)
        out.append((phys, length))
    return out or fibmap_extents(path)


FIBMAP, FIGETBSZ = 1, 2


def fibmap_extents(path: str) -> list[tuple[int, int]]:
    """Block by block with FIBMAP, for filesystems without FIEMAP (FAT)."""
    import fcntl
    import struct
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return []
    try:
        bsz = struct.unpack("i", fcntl.ioctl(fd, FIGETBSZ, struct.pack("i", 0)))[0]
        nblocks = (os.fstat(fd).st_size + bsz - 1) // bsz
        out = []
        for i in range(nblocks):
            b = struct.unpack("i", fcntl.ioctl(fd, FIBMAP, struct.pack("i", i)))[0]
            if b:
                out.append((b * bsz, bsz))
        return out
    except OSError:
        return []
    finally:
        os.close(fd)


def dust(args: argparse.Namespace) -> int:
    """Pick bad blocks (seeded): some under the files' data, some anywhere in the
    used part of the device; hand them to dm-dust (enabling it is the caller's)."""
    rng = random.Random(args.seed)
    data_blocks = set()
    for name in sorted(os.listdir(args.dir)):
        for phys, length in extents(os.path.join(args.dir, name)):
            data_blocks.update(range(phys // BLOCK, (phys + length + BLOCK - 1) // BLOCK))
    total = args.sectors * 512 // BLOCK
    top = max(data_blocks) + 1 if data_blocks else total
    picked = set(rng.sample(sorted(data_blocks), min(args.file_blocks, len(data_blocks))))
    picked |= {rng.randrange(0, min(top, total)) for _ in range(args.random_blocks)}
    for b in sorted(picked):
        r = run(f"dmsetup message {args.target} 0 addbadblock {b}", 30)
        if not r["status"].ok:
            print(json.dumps({"error": r["out"][-300:], "block": b}))
            return 1
    print(json.dumps({"blocks": sorted(picked), "under_files": len(picked & data_blocks),
                      "file_blocks_known": len(data_blocks)}))
    return 0


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
    spec = json.loads(args.spec)
    out: dict = {"cut": False}
    with open(os.path.expandvars(spec["work_log"]), "wb") as log:
        w = subprocess.Popen(["/bin/sh", "-c", spec["work"]], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True)
    try:
        w.wait(timeout=spec["cut"])
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
                    if f.read().startswith(spec.get("gc_prefix", "jffs2_gcd_mtd")):
                        gcs.append(int(entry))
            except OSError:
                pass
    out["gc"] = {str(pid): _stop(pid, 2.0) for pid in gcs}
    snap = spec["snapshot"]
    # data pages only: JFFS2 keeps nothing but clean markers in the OOB, and a block
    # without one is erased again at mount (part of its recovery)
    d = run(f"nanddump -q -f {snap} {spec['mtd']}", spec["timeout"])
    out["dump"] = {k: d[k] for k in ("status", "rc", "seconds")}
    out["cut"] = d["status"].ok
    os.killpg(w.pid, signal.SIGKILL)
    for pid in gcs:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    w.wait()
    for c in spec["umount"]:
        r = run(c, spec["timeout"])
        out.setdefault("umount", []).append(r["status"])
        if r["status"].is_hang:
            out["cut"] = False
            out["error"] = "unmount after the cut did not return"
            print(json.dumps(out))
            sys.stdout.flush()
            os._exit(3)
    if out["cut"]:
        for c in (f"flash_erase -q {spec['mtd']} 0 0", f"nandwrite -q -k {spec['mtd']} {snap}"):
            r = run(c, spec["timeout"])
            out.setdefault("restore", []).append({k: r[k] for k in ("cmd", "status", "rc", "out")})
            if not r["status"].ok:
                out["cut"] = False
                out["error"] = f"restoring the flash failed: {r['out'][-200:]}"
                break
    os.unlink(snap) if os.path.exists(snap) else None
    print(json.dumps(out))
    return 0 if out["cut"] else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pcwork")
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
    w.add_argument("--prepare", help="a prepare SPEC_JSON to run first")
    for name in ("verify", "sabotage"):
        s = sub.add_parser(name)
        s.add_argument("dir")
        s.add_argument("log")
    for name in ("prepare", "recover"):
        sub.add_parser(name).add_argument("spec")
    for name in ("cwork", "inspect"):
        s = sub.add_parser(name)
        s.add_argument("dir")
        s.add_argument("state")
        s.add_argument("--count", type=int, required=True)
        s.add_argument("--size", type=int, required=True)
        s.add_argument("--seed", type=int, required=True)
        if name == "cwork":
            s.add_argument("--duration", type=float, default=10.0)
            s.add_argument("--round", type=float, default=1.0)
        else:
            s.add_argument("--mnt", default="/mnt")
    sub.add_parser("snapcut").add_argument("spec")
    s = sub.add_parser("dust")
    s.add_argument("dir")
    s.add_argument("target")
    s.add_argument("--sectors", type=int, required=True)
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--file-blocks", type=int, default=8)
    s.add_argument("--random-blocks", type=int, default=32)
    args = p.parse_args(argv)
    return {"work": work, "verify": verify, "sabotage": sabotage, "prepare": prepare, "recover": recover,
            "cwork": cwork, "inspect": inspect, "dust": dust,
            "snapcut": snapcut}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
