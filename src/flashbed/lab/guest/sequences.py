"""Short B3-style workloads for crash states: sequences of at most a few file-system
operations, each followed by the persistence point that makes it durable, their
generator, and the verifier that checks a crashed filesystem against them.

B3 (CrashMonkey, OSDI 2018) found most known crash-consistency bugs with one to
three core operations on a few files, each followed by a persistence operation.
Here every sequence runs in its own directory `sNNNN/` laid out the same way
(`A/foo` 9000 bytes, `A/bar` 5000 bytes, `B/` empty: made and synced before the
workload's first mark), and each step is an operation with the persistence point
that promises it:

  data operations (on the file)      write (O_TRUNC, 8 KiB), pwrite (3000 bytes at
                                     4608), append (6000 bytes), truncate (to 2500),
                                     fallocate (8 KiB past the end, size grows)
      then fsync, fdatasync or sync of that file: its data and size are durable
  namespace operations               creat A/new, mkdir A/C, link A/foo B/foo,
                                     rename A/bar B/bar, rename A/foo A/bar (over),
                                     unlink A/foo
      then fsync of every directory it changed, or sync: the names are durable

That is an alphabet of 27 (operation, persistence) steps (25 without link, on
FAT and exFAT). generate() takes every valid sequence of up to `exhaustive` steps
(27 of one step; 668 of up to two; there are 13 959 valid three-step ones), then
`samples` more, distinct, drawn with a seed among the valid ones of
exhaustive+1 .. max_len steps. A step is valid when its files are there (nothing
writes a file an earlier step removed).

What a crash state must show, per sequence (the log says which steps were
acknowledged when the device lost power): every acknowledged step exactly (names,
hard links as one inode, file contents and sizes); the step under way either not
done or done, or for data the states the operation passes through, sector by
sector (a rewrite or append: a prefix of the new bytes, any sector still zero; a
pwrite: each sector old or new; a truncate: the tail old or zeroed); a rename
under way may leave both names (never neither). Anything else is a loss of
acknowledged data, or garbage (bytes or names that were never there). Standard
library only (it runs in the lab).
"""

from __future__ import annotations

import errno
import itertools
import os
import random
import sys
from dataclasses import dataclass, field

if __package__:  # on the host, as flashbed.lab.guest.sequences
    from .guestlib import LIST_LIMIT, SECTOR, content, fsync_dir, partial_ok
else:  # in the guest: this directory is not on sys.path by itself (-S -I)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from guestlib import LIST_LIMIT, SECTOR, content, fsync_dir, partial_ok

BASE = {"A/foo": 9000, "A/bar": 5000}
DIRS = ("A", "B")


@dataclass(frozen=True)
class Op:
    name: str
    kind: str  # "data" (on `path`) or "names"
    path: str
    to: str = ""  # link / rename target
    size: int = 0  # bytes written, or the new size (truncate)
    offset: int = 0

    @property
    def dirs(self) -> tuple[str, ...]:
        """The directories a namespace operation changes (what its fsync covers)."""
        return tuple(dict.fromkeys(os.path.dirname(p) for p in (self.path, self.to) if p))


OPS = (
    Op("write", "data", "A/foo", size=8192),  # open(O_TRUNC) and write: a rewrite in place
    Op("pwrite", "data", "A/foo", size=3000, offset=4608),
    Op("append", "data", "A/bar", size=6000),
    Op("truncate", "data", "A/foo", size=2500),
    Op("fallocate", "data", "A/bar", size=8192),
    Op("creat", "names", "A/new"),
    Op("mkdir", "names", "A/C"),
    Op("link", "names", "A/foo", to="B/foo"),
    Op("rename", "names", "A/bar", to="B/bar"),
    Op("rename-over", "names", "A/foo", to="A/bar"),
    Op("unlink", "names", "A/foo"),
)
BY_NAME = {o.name: o for o in OPS}
PERSIST = {"data": ("fsync", "fdatasync", "sync"), "names": ("fsync", "sync")}
STEPS = tuple((o.name, p) for o in OPS for p in PERSIST[o.kind])  # the alphabet


# --- the model -------------------------------------------------------------------------

@dataclass
class Model:
    """A sequence directory as the operations left it: names -> inodes, inodes -> bytes."""

    dirs: set[str] = field(default_factory=set)
    names: dict[str, int] = field(default_factory=dict)
    data: dict[int, bytes] = field(default_factory=dict)
    next_ino: int = 0

    def copy(self) -> "Model":
        return Model(set(self.dirs), dict(self.names), dict(self.data), self.next_ino)

    def new_inode(self, data: bytes) -> int:
        self.next_ino += 1
        self.data[self.next_ino] = data
        return self.next_ino

    def file(self, path: str) -> bytes | None:
        ino = self.names.get(path)
        return None if ino is None else self.data[ino]


def base_model(seed: int, seq: int) -> Model:
    m = Model(dirs=set(DIRS))
    for path, size in BASE.items():
        m.names[path] = m.new_inode(content(seed, f"s{seq}/{path}", 0, size))
    return m


def valid(m: Model, op: Op) -> bool:
    if op.name in ("creat", "mkdir"):
        return op.path not in m.names and op.path not in m.dirs
    if op.path not in m.names:
        return False
    if op.name in ("link", "rename"):
        return op.to not in m.names and op.to not in m.dirs
    return True


def step_bytes(seed: int, seq: int, k: int, op: Op) -> bytes:
    """The bytes step k (op) of sequence seq writes (write, pwrite, append)."""
    return content(seed, f"s{seq}/{op.path}", k + 1, op.size)


def apply(m: Model, op: Op, seed: int, seq: int, k: int) -> Model:
    """The model after step k (op) of sequence seq; `m` is left as it was."""
    m = m.copy()
    if op.kind == "data":
        ino = m.names[op.path]
        old = m.data[ino]
        if op.name == "write":
            data = step_bytes(seed, seq, k, op)
        elif op.name == "pwrite":
            data = old[:op.offset].ljust(op.offset, b"\0") + step_bytes(seed, seq, k, op) + old[op.offset + op.size:]
        elif op.name == "append":
            data = old + step_bytes(seed, seq, k, op)
        elif op.name == "truncate":
            data = old[:op.size].ljust(op.size, b"\0")
        else:  # fallocate past the end, mode 0: the size grows, the new range reads as zeros
            data = old + bytes(op.size)
        m.data[ino] = data
    elif op.name == "creat":
        m.names[op.path] = m.new_inode(b"")
    elif op.name == "mkdir":
        m.dirs.add(op.path)
    elif op.name == "link":
        m.names[op.to] = m.names[op.path]
    elif op.name in ("rename", "rename-over"):
        m.names[op.to] = m.names.pop(op.path)
    elif op.name == "unlink":
        del m.names[op.path]
    live = set(m.names.values())
    m.data = {i: d for i, d in m.data.items() if i in live}
    return m


# --- the generator -----------------------------------------------------------------------

Seq = tuple[tuple[str, str], ...]  # ((operation, persistence), ...)


def alphabet(skip: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    """The steps, without the operations in `skip` (those the filesystem has not: link on FAT)."""
    return tuple(s for s in STEPS if s[0] not in skip)


def _valid_seq(steps: Seq) -> bool:
    m = base_model(0, 0)
    for k, (name, _) in enumerate(steps):
        op = BY_NAME[name]
        if not valid(m, op):
            return False
        m = apply(m, op, 0, 0, k)
    return True


def generate(exhaustive: int, samples: int, max_len: int, seed: int, skip: tuple[str, ...] = ()) -> list[Seq]:
    """Every valid sequence of 1..exhaustive steps (in alphabet order), then up to
    `samples` distinct valid ones of exhaustive+1..max_len steps drawn with `seed`
    (fewer only when there are fewer); none uses an operation in `skip`."""
    alpha = alphabet(tuple(skip))
    out: list[Seq] = []
    for n in range(1, exhaustive + 1):
        out += [s for s in itertools.product(alpha, repeat=n) if _valid_seq(s)]
    longer = range(exhaustive + 1, max_len + 1)
    if not samples or not longer:
        return out
    rng = random.Random(f"sequences/{seed}")
    seen: set[Seq] = set()
    tries = 0
    while len(seen) < samples and tries < samples * 50:
        tries += 1
        n = rng.choice(longer)
        m, steps = base_model(0, 0), []
        for k in range(n):
            choices = [s for s in alpha if valid(m, BY_NAME[s[0]])]
            if not choices:
                break
            s = rng.choice(choices)
            steps.append(s)
            m = apply(m, BY_NAME[s[0]], 0, 0, k)
        if len(steps) == n and tuple(steps) not in seen:
            seen.add(tuple(steps))
            out.append(tuple(steps))
    return out


# --- running them ------------------------------------------------------------------------

def lay_out(root: str, seed: int, count: int) -> None:
    """Every sequence's directory in its starting state (the caller syncs)."""
    for i in range(count):
        d = os.path.join(root, f"s{i:04d}")
        for sub in DIRS:
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        for path, size in BASE.items():
            with open(os.path.join(d, path), "wb") as f:
                f.write(content(seed, f"s{i}/{path}", 0, size))


def run_step(d: str, op: Op, persist: str, data: bytes) -> None:
    """One operation in sequence directory `d`, then its persistence point."""
    p = os.path.join(d, op.path)
    fd = None
    try:
        if op.kind == "data":
            flags = os.O_WRONLY | (os.O_TRUNC if op.name == "write" else 0) | \
                (os.O_APPEND if op.name == "append" else 0)
            fd = os.open(p, flags)
            if op.name in ("write", "append"):
                os.write(fd, data)
            elif op.name == "pwrite":
                os.pwrite(fd, data, op.offset)
            elif op.name == "truncate":
                os.ftruncate(fd, op.size)
            else:
                os.posix_fallocate(fd, os.fstat(fd).st_size, op.size)
        elif op.name == "creat":
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        elif op.name == "mkdir":
            os.mkdir(p)
        elif op.name == "link":
            os.link(p, os.path.join(d, op.to))
        elif op.name in ("rename", "rename-over"):
            os.rename(p, os.path.join(d, op.to))
        else:
            os.unlink(p)
        if persist == "sync":
            os.sync()
        elif op.kind == "data":
            (os.fsync if persist == "fsync" else os.fdatasync)(fd)
        else:
            for sub in op.dirs:
                fsync_dir(os.path.join(d, sub))
    finally:
        if fd is not None:
            os.close(fd)


def run_all(root: str, seed: int, seqs: list[Seq], log) -> int:
    """Every sequence in its directory, each step's intent and acknowledgement in
    `log` (records as the verifier reads them). Returns the steps run."""
    n = 0
    for i, steps in enumerate(seqs):
        d = os.path.join(root, f"s{i:04d}")
        for k, (name, persist) in enumerate(steps):
            op = BY_NAME[name]
            log.write({"e": "intent", "seq": i, "k": k, "op": name, "persist": persist})
            run_step(d, op, persist, step_bytes(seed, i, k, op) if op.name in ("write", "pwrite", "append") else b"")
            log.write({"e": "ack", "seq": i, "k": k})
            n += 1
    return n


# --- the verifier --------------------------------------------------------------------------

def scan(d: str) -> tuple[dict[str, tuple], str]:
    """Everything under `d`: path -> ("dir",) | ("file", bytes, inode) | ("error", errno name);
    and "" or why `d` itself could not be read."""
    out: dict[str, tuple] = {}

    def walk(rel: str) -> str:
        try:
            with os.scandir(os.path.join(d, rel) if rel else d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except FileNotFoundError:
            return "missing"
        except OSError as e:
            return "unreadable: " + errno.errorcode.get(e.errno, str(e.errno))
        for e in entries:
            path = f"{rel}/{e.name}" if rel else e.name
            try:
                if e.is_dir(follow_symlinks=False):
                    why = walk(path)
                    out[path] = ("error", why) if why else ("dir",)
                    continue
                with open(e.path, "rb") as f:
                    out[path] = ("file", f.read(), e.inode())
            except OSError as err:
                out[path] = ("error", errno.errorcode.get(err.errno, str(err.errno)))
        return ""

    return out, walk("")


def _pieces(actual: bytes, start: int):
    """(offset, bytes) of actual from `start` on, cut at sector boundaries."""
    for off in range(start - start % SECTOR, len(actual), SECTOR):
        lo = max(off, start)
        yield lo, actual[lo:off + SECTOR]


def _data_between(op: Op, actual: bytes, old: bytes, new: bytes) -> bool:
    """A data operation caught under way: the states it passes through, sector by
    sector (a crash keeps any mix of the sectors of writes under way)."""
    if op.name == "write":  # truncated to nothing, then written
        return partial_ok(actual, new, 0)
    if op.name == "append":
        return actual[:len(old)] == old and partial_ok(actual, new, len(old))
    if len(actual) not in (len(old), len(new)):
        return False
    if op.name == "pwrite":  # each sector old or new; past the old end, still zero
        return all(a == old[o:o + len(a)] or a == new[o:o + len(a)] or (o >= len(old) and not a.strip(b"\0"))
                   for o, a in _pieces(actual, 0))
    if op.name == "truncate":  # the new size's bytes kept; the rest old or zeroed
        return actual[:len(new)] == new[:len(actual)] and all(
            a == old[o:o + len(a)] or not a.strip(b"\0") for o, a in _pieces(actual, len(new)))
    return False  # fallocate: one size or the other


def judge_seq(d: str, acked: Model, pending: tuple[Op, Model] | None, history: dict[str, set[bytes]]) -> dict:
    """One sequence directory against its model: a verdict as powercut's verify_dir gives."""
    actual, why = scan(d)
    seq = os.path.basename(d)
    out: dict = {"checked": 0, "loss": [], "garbage": [], "ok": {}}

    def ok(how: str) -> None:
        out["ok"][how] = out["ok"].get(how, 0) + 1

    if why:
        out["loss"].append(f"{seq}: directory {why}")
        return out
    op, new_m = pending if pending else (None, acked)
    changed: dict[str, str] = {}  # paths the step under way changes: "old" / "new"
    for path in sorted(set(actual) | acked.dirs | set(acked.names) | new_m.dirs | set(new_m.names)):
        out["checked"] += 1
        got = actual.get(path)
        where = f"{seq}/{path}"
        olds, news = _expect(acked, path), _expect(new_m, path)
        if got is not None and got[0] == "error":
            (out["loss"] if olds is not None else out["garbage"]).append(f"{where}: read error: {got[1]}")
            continue
        have = None if got is None else got[:2]
        if olds == news:
            if have == olds:
                ok("intact" if have else "absent")
            elif olds is None:
                if have[0] == "file" and have[1] in history.get(path, ()):
                    out["loss"].append(f"{where}: acked delete undone")
                else:
                    out["garbage"].append(f"{where}: never written here")
            elif have is None:
                out["loss"].append(f"{where}: acked {'directory' if olds[0] == 'dir' else 'file'} missing")
            elif olds[0] == have[0] == "file" and len(have[1]) < len(olds[1]) and olds[1].startswith(have[1]):
                out["loss"].append(f"{where}: acked file truncated to {len(have[1])} of {len(olds[1])} bytes")
            else:
                out["loss"].append(f"{where}: acked content differs")
            continue
        if have == olds:
            changed[path] = "old"
            ok("old")
        elif have == news:
            changed[path] = "new"
            ok("new")
        elif op is not None and op.kind == "data" and olds and news and have and have[0] == "file" \
                and _data_between(op, have[1], olds[1], news[1]):
            changed[path] = "new"
            ok("partial")
        elif op is not None and op.name == "append" and olds and have and have[0] == "file" \
                and have[1][:len(olds[1])] == olds[1]:
            out["garbage"].append(f"{where}: appended bytes never written here")
        elif olds is not None:
            out["loss"].append(f"{where}: neither the acked nor the new state")
        else:
            out["garbage"].append(f"{where}: content never written here")
    # hard links: the names of one inode are one inode on disk
    for ino in set(acked.names.values()):
        names = sorted(p for p, i in acked.names.items() if i == ino and p not in changed)
        if len({actual[p][2] for p in names if actual.get(p, ("",))[0] == "file"}) > 1:
            out["loss"].append(f"{seq}: {' and '.join(names)} are no longer one file")
    if op is not None and op.name == "link" and changed.get(op.to) == "new":
        src, dst = actual.get(op.path), actual.get(op.to)
        if src is not None and src[0] == dst[0] == "file" and src[2] != dst[2]:
            out["garbage"].append(f"{seq}/{op.to}: a copy, not a link of {op.path}")
    # a rename under way may leave both names (not atomic, nothing lost), never neither
    if op is not None and op.name in ("rename", "rename-over"):
        moved = ("file", acked.file(op.path))
        if all((actual.get(p) or ("",))[:2] != moved for p in (op.path, op.to)):
            out["loss"].append(f"{seq}/{op.path}: renamed file under neither name")
    return out


def _expect(m: Model, path: str) -> tuple | None:
    if path in m.dirs:
        return ("dir",)
    data = m.file(path)
    return None if data is None else ("file", data)


def models(seed: int, seqs: list[Seq], recs: list[dict]) -> list[tuple[Model, tuple[Op, Model] | None,
                                                                        dict[str, set[bytes]]]]:
    """Per sequence: the model as acknowledged, the step under way (op, the model
    after it) if any, and every content each path ever had (to tell an undone delete)."""
    progress: dict[int, tuple[int, bool]] = {}  # seq -> (steps begun, the last one acked)
    for r in recs:
        if r.get("e") in ("intent", "ack"):
            progress[r["seq"]] = (r["k"] + 1, r["e"] == "ack")
    out = []
    for i, steps in enumerate(seqs):
        begun, last_acked = progress.get(i, (0, True))
        key = (seed, i, steps, begun, last_acked)
        if key not in _MODELS:  # the same few per sequence, state after state
            done = begun if last_acked else begun - 1
            m = base_model(seed, i)
            history: dict[str, set[bytes]] = {}
            for k in range(done + 1):
                for path, ino in m.names.items():
                    history.setdefault(path, set()).add(m.data[ino])
                if k < done:
                    m = apply(m, BY_NAME[steps[k][0]], seed, i, k)
            pending = None
            if not last_acked:
                op = BY_NAME[steps[done][0]]
                pending = (op, apply(m, op, seed, i, done))
            _MODELS[key] = (m, pending, history)
        out.append(_MODELS[key])
    return out


_MODELS: dict[tuple, tuple] = {}


def verify_dir(root: str, recs: list[dict], seqs: list[Seq], seed: int) -> dict:
    """Every sequence directory under `root` against the log as acknowledged
    (`recs`: the records up to the crash): powercut.verify_dir's verdict shape."""
    out = {"begun": bool(recs), "ops": sum(r.get("e") == "intent" for r in recs),
           "acks": sum(r.get("e") == "ack" for r in recs), "checked": 0, "acked_files": 0, "loss": [],
           "garbage": [], "ok": {}, "dir": "present"}
    try:
        present = set(os.listdir(root))
    except OSError as e:
        out["dir"] = "missing" if e.errno == errno.ENOENT else "unreadable: " + errno.errorcode.get(e.errno, "?")
        out["loss"].append(f"directory {out['dir']}")
        present = set()
    for name in sorted(present - {f"s{i:04d}" for i in range(len(seqs))}):
        out["garbage"].append(f"{name}: unknown entry")
    for i, (acked, pending, history) in enumerate(models(seed, seqs, recs)):
        if out["dir"] != "present":
            break
        v = judge_seq(os.path.join(root, f"s{i:04d}"), acked, pending, history)
        out["checked"] += v["checked"]
        out["acked_files"] += len(acked.names)
        out["loss"] += v["loss"]
        out["garbage"] += v["garbage"]
        for k, n in v["ok"].items():
            out["ok"][k] = out["ok"].get(k, 0) + n
    out["n_loss"], out["n_garbage"] = len(out["loss"]), len(out["garbage"])
    out["loss"], out["garbage"] = out["loss"][:LIST_LIMIT], out["garbage"][:LIST_LIMIT]
    return out
