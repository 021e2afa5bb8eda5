"""A recovered workload directory's identity, for sharing the user's check between crash states.

Two crash states whose device images differ can recover to the same files: a cut right after
an fsync and one a few writes later that the journal drops again, a lost-cache subset of
blocks the recovery rewrites anyway. The user's check (appcheck) reads the workload's
directory and the acknowledged labels; when both are the same, its verdict is too, and the
check runs once for all of them. Recovery itself (mount, fsck, repair, whether the mount is
read-only) still runs for every distinct image: only the check's run is shared.

What the key covers, per entry under the directory, in name order: its path, type, permission
bits, owner, group, link count, size, modification time (ns), extended attributes, a symlink's
target and a file's bytes (SHA-256; a read error is part of the key as its errno, so a file
that reads EIO is not the same as one that reads); with the directory: whether it is mounted
read-only, and the acknowledged labels ($FLASHBED_ACKED) as the check reads them. What it
leaves out, and a check must not depend on when it shares verdicts: access and change times
(a recovery stamps them), inode numbers, free space, anything outside the directory, the
kernel log. A check that reads those runs with `--set appcheck.share_trees=false`.

Computing the key must not change the state it keys: the walk reads with O_NOATIME (no
inode is dirtied), and a walk that met anything (a read error, the filesystem turning
read-only, a kernel message while it read: a damaged FAT that remounts read-only on a read
the check alone would not have made) is `perturbed`: the check loop then serves the state
again and checks it without the walk, as a lab without sharing would have.

Standard library only (it runs in the guest).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat

CHUNK = 1 << 20
NOATIME = getattr(os, "O_NOATIME", 0)


class _Walk:
    """One key's walk: whether it met an error (then it may have changed the filesystem)."""

    def __init__(self) -> None:
        self.troubled = False

    def err(self, what: str, e: OSError) -> str:
        self.troubled = True
        return f"{what}-errno-{errno.errorcode.get(e.errno or 0, e.errno)}"


def _open(path: str, flags: int) -> int:
    try:
        return os.open(path, flags | NOATIME)
    except PermissionError:  # O_NOATIME needs the file's owner (or root, as in the lab)
        return os.open(path, flags)


def _file_digest(path: str, walk: _Walk) -> str:
    h = hashlib.sha256()
    try:
        fd = _open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        return walk.err("open", e)
    try:
        while chunk := os.read(fd, CHUNK):
            h.update(chunk)
    except OSError as e:  # part read, then an error: both are what the check would see
        return f"{h.hexdigest()}:" + walk.err("read", e)
    finally:
        os.close(fd)
    return h.hexdigest()


def _xattrs(path: str, walk: _Walk) -> list[tuple[str, str]]:
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):  # a filesystem without them (FAT): none
            return []
        return [("", walk.err("listxattr", e))]
    out = []
    for n in sorted(names):
        try:
            out.append((n, os.getxattr(path, n, follow_symlinks=False).hex()))
        except OSError as e:
            out.append((n, walk.err("getxattr", e)))
    return out


def _entry(root: str, rel: str, walk: _Walk) -> tuple[str, bool]:
    """The entry's line, and whether it is a directory to descend into."""
    path = os.path.join(root, rel) if rel else root
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"{rel!r} " + walk.err("lstat", e), False
    kind = stat.S_IFMT(st.st_mode)
    fields = [repr(rel), oct(kind), oct(stat.S_IMODE(st.st_mode)), str(st.st_uid), str(st.st_gid),
              str(st.st_nlink), str(st.st_size), str(st.st_mtime_ns), repr(_xattrs(path, walk))]
    if stat.S_ISLNK(st.st_mode):
        try:
            fields.append(repr(os.readlink(path)))
        except OSError as e:
            fields.append(walk.err("readlink", e))
    elif stat.S_ISREG(st.st_mode):
        fields.append(_file_digest(path, walk))
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        fields.append(str(st.st_rdev))
    return " ".join(fields), stat.S_ISDIR(st.st_mode)


def _names(path: str, walk: _Walk) -> list[str] | None:
    """A directory's entries, read without touching its access time."""
    try:
        fd = _open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        walk.err("opendir", e)
        return None
    try:
        return sorted(os.listdir(fd))
    except OSError as e:
        walk.err("readdir", e)
        return None
    finally:
        os.close(fd)


def _read_only(d: str) -> bool | str:
    try:
        return bool(os.statvfs(d).f_flag & os.ST_RDONLY)
    except OSError as e:
        return f"statvfs-errno-{e.errno}"


def tree_key(d: str, acked: bytes, walk: _Walk | None = None) -> str:
    """The key of directory `d` as the check sees it, with the acknowledged labels `acked`."""
    walk = walk or _Walk()
    h = hashlib.sha256()
    h.update(f"ro={_read_only(d)}\nacked={hashlib.sha256(acked).hexdigest()}\n".encode())
    line, _ = _entry(d, "", walk)
    h.update((line + "\n").encode())
    todo = [""]
    while todo:
        top = todo.pop()
        names = _names(os.path.join(d, top) if top else d, walk)
        if names is None:
            h.update(f"{top!r} unreadable\n".encode())
            continue
        subdirs = []
        for name in names:
            rel = os.path.join(top, name) if top else name
            line, is_dir = _entry(d, rel, walk)
            h.update((line + "\n").encode())
            if is_dir:
                subdirs.append(rel)
        todo.extend(reversed(subdirs))  # depth first, in name order
    return h.hexdigest()


def passed(verdict: dict) -> bool:
    """The check's verdict as a pass or a fail (what must agree between two runs on one tree)."""
    return not verdict.get("n_loss") and not verdict.get("n_garbage")


class SharedChecks:
    """The check's verdict per tree key, in one lab: a state whose recovered directory and
    acknowledged labels match a checked one's takes its verdict (marked `tree_same`, the state
    whose check ran). A check that overran its limit is not shared: it runs again. A walk that
    may have changed the state (`perturbed`) runs no check: the loop checks the state again
    without the walk.

    Sharing trusts the check to be a function of the tree. The first time a tree recurs, the
    check runs on it again: a check that passes one run and fails the other on the same tree
    (it reads a clock, a random number, something outside the directory) gives that tree no
    verdict (`check_unstable`, the state whose run disagreed), and no state takes one from it.
    That costs one run more per tree that recurs, never more."""

    def __init__(self, kmsg=None) -> None:
        """`kmsg`: a kernel-log reader of this object's own (powercut.Kmsg: `take()` gives the lines
        since its last take; the recovery's reader keeps its lines); None: no kernel log watched."""
        self.kmsg = kmsg
        self.seen: dict[str, tuple[str, dict]] = {}
        self.confirmed: set[str] = set()  # keys whose check ran twice and agreed
        self.runs = 0
        self.perturbed = 0
        self.unstable = 0

    def check(self, state: str, d: str, acked: bytes, run_check, rerun=None) -> dict:
        """`run_check()`: the check's verdict; `rerun()` (default run_check): its verdict run afresh, for
        the first recurrence of a tree (never a verdict the host kept from another run: verdicts.py)."""
        if not os.path.isdir(d):
            self.runs += 1
            return run_check()
        if self.kmsg is not None:
            self.kmsg.take()  # what came before the walk is not the walk's
        walk, ro = _Walk(), _read_only(d)
        key = tree_key(d, acked, walk)
        said = bool(self.kmsg.take()) if self.kmsg is not None else False
        if walk.troubled or said or _read_only(d) != ro:
            self.perturbed += 1
            why = ("a read error" if walk.troubled else "a kernel message" if said else "the mount turning read-only")
            return {"tree_perturbed": True, "perturbed_why": f"keying its tree met {why}: served again, checked here",
                    "n_loss": 0, "n_garbage": 0, "loss": [], "garbage": []}
        if key in self.seen:
            first, verdict = self.seen[key]
            if key not in self.confirmed and not verdict.get("check_unstable"):
                self.runs += 1
                again = (rerun or run_check)()
                if again.get("check_timeout"):
                    return {**again, "tree": key[:16]}
                if passed(again) == passed(verdict):
                    self.confirmed.add(key)
                    return {**verdict, "tree": key[:16], "tree_same": first, "tree_rerun": True}
                else:
                    self.unstable += 1
                    verdict = {**verdict, "check_unstable": first}
                    self.seen[key] = (first, verdict)
                    return {**again, "tree": key[:16], "check_unstable": first}
            return {**verdict, "tree": key[:16], "tree_same": first}
        self.runs += 1
        verdict = run_check()
        if not verdict.get("check_timeout"):
            self.seen[key] = (state, verdict)
        return {**verdict, "tree": key[:16]}


# --- the recovered tree handed to the host (its copy for a check run there) -------------------

PACK_MAGIC = b"flashbed-tree 1\n"


class NotPortable(Exception):
    """The tree holds what a copy on the host cannot be: its check runs in the lab (the reason)."""


def pack(d: str, out: str) -> int:
    """Everything of directory `d` the key covers but its filesystem's own figures, into the file `out`:
    after PACK_MAGIC, one JSON line per entry (parents before children: path, type, mode, owner, group,
    mtime in ns, xattrs, a symlink's target, a hard link's first path, a file's size) and a file's bytes
    after its line. NotPortable for what the host's copy could not be: a device node or socket, a file
    with links outside `d`, an entry that cannot be read (the key's walk would have said so first).
    The bytes written."""
    import json
    paths: dict[tuple[int, int], tuple[str, int]] = {}  # (dev, ino) of a linked file -> its first path, links seen
    with open(out, "wb") as f:
        f.write(PACK_MAGIC)
        todo = [""]
        while todo:
            top = todo.pop()
            here = os.path.join(d, top) if top else d
            if not top:
                f.write((json.dumps(_pack_head("", here, os.lstat(here))) + "\n").encode())
            subdirs = []
            for name in sorted(os.listdir(here)):
                rel = os.path.join(top, name) if top else name
                path = os.path.join(d, rel)
                st = os.lstat(path)
                head = _pack_head(rel, path, st)
                if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                    first = paths.get((st.st_dev, st.st_ino))
                    if first is not None:
                        paths[(st.st_dev, st.st_ino)] = (first[0], first[1] + 1)
                        f.write((json.dumps({"p": rel, "t": "h", "to": first[0]}) + "\n").encode())
                        continue
                    paths[(st.st_dev, st.st_ino)] = (rel, 1)
                if stat.S_ISREG(st.st_mode):
                    fd = _open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                    try:
                        data = b"".join(iter(lambda: os.read(fd, CHUNK), b""))
                    finally:
                        os.close(fd)
                    head["n"] = len(data)
                    f.write((json.dumps(head) + "\n").encode())
                    f.write(data)
                    continue
                f.write((json.dumps(head) + "\n").encode())
                if stat.S_ISDIR(st.st_mode):
                    subdirs.append(rel)
            todo.extend(reversed(subdirs))  # depth first, in name order (as the key's walk)
        for (_dev, _ino), (first, seen) in paths.items():
            if seen != os.lstat(os.path.join(d, first)).st_nlink:
                raise NotPortable(f"{first} has hard links outside the directory")
        return f.tell()


# what a pack's entry holds that only metadata calls show a check on the host's copy (stat's permission
# bits, owners and times, getxattr): left out of the CONTENT key, for a check that provably makes no such
# call (crashhost/checkwords.py). Permission bits too: the check is root of its own namespace over a copy
# its root owns, so they decide none of its reads, writes or searches (sandbox.py)
METADATA_FIELDS = ("m", "u", "g", "mt", "x")


def pack_keys(src: str) -> tuple[str, str]:
    """(content key, tree key) of the tree packed in `src`, as the host's copy of it shows it to a check.
    The tree key is the pack's own digest: every attribute the copy is made with (paths, types, modes,
    owners, times, xattrs, symlink targets, hard links, bytes). The content key leaves out
    METADATA_FIELDS (permission bits, owners, times, xattrs) and keeps paths, types, sizes, bytes, symlink
    targets and which paths are one file (a check that writes one reads it through the other). Standard
    library only."""
    import json
    whole, content = hashlib.sha256(), hashlib.sha256()
    with open(src, "rb") as f:
        magic = f.read(len(PACK_MAGIC))
        whole.update(magic)
        content.update(magic)
        for line in iter(f.readline, b""):
            whole.update(line)
            head = json.loads(line)
            kept = {k: v for k, v in head.items() if k not in METADATA_FIELDS}
            content.update((json.dumps(kept, sort_keys=True) + "\n").encode())
            left = head.get("n", 0) if head.get("t") == "f" else 0
            while left:
                chunk = f.read(min(left, CHUNK))
                if not chunk:
                    raise NotPortable(f"{src} ends inside {head['p']}")
                whole.update(chunk)
                content.update(chunk)
                left -= len(chunk)
    return content.hexdigest(), whole.hexdigest()


def _pack_head(rel: str, path: str, st: os.stat_result) -> dict:
    kinds = {stat.S_IFDIR: "d", stat.S_IFREG: "f", stat.S_IFLNK: "l", stat.S_IFIFO: "p"}
    kind = kinds.get(stat.S_IFMT(st.st_mode))
    if kind is None:
        what = "device node" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "socket"
        raise NotPortable(f"{rel or '.'} is a {what}")
    head = {"p": rel, "t": kind, "m": stat.S_IMODE(st.st_mode), "u": st.st_uid, "g": st.st_gid, "mt": st.st_mtime_ns}
    walk = _Walk()
    xattrs = _xattrs(path, walk)
    if walk.troubled:
        raise NotPortable(f"the extended attributes of {rel or '.'} cannot be read")
    if xattrs:
        head["x"] = xattrs
    if kind == "l":
        head["to"] = os.readlink(path)
    return head


def unpack(src: str, d: str) -> int:
    """The tree packed in `src` made again in the empty directory `d` (its entries' attributes set last,
    children before their directory, so each keeps its time); NotPortable naming the attribute this
    place cannot give (an owner its user namespace does not map, an xattr it does not take). Entries."""
    import json
    heads = []
    with open(src, "rb") as f:
        if f.read(len(PACK_MAGIC)) != PACK_MAGIC:
            raise NotPortable(f"{src} is not a packed tree")
        for line in iter(f.readline, b""):
            head = json.loads(line)
            path = os.path.join(d, head["p"]) if head["p"] else d
            kind = head["t"]
            if kind == "f":
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                try:
                    left = head["n"]
                    while left:
                        chunk = f.read(min(left, CHUNK))
                        if not chunk:
                            raise NotPortable(f"{src} ends inside {head['p']}")
                        os.write(fd, chunk)
                        left -= len(chunk)
                finally:
                    os.close(fd)
            elif kind == "d" and head["p"]:
                os.mkdir(path, 0o700)
            elif kind == "l":
                os.symlink(head["to"], path)
            elif kind == "p":
                os.mkfifo(path, 0o600)
            elif kind == "h":
                os.link(os.path.join(d, head["to"]), path)
                continue
            heads.append((path, head))
    for path, head in reversed(heads):
        link = head["t"] == "l"
        try:
            os.chown(path, head["u"], head["g"], follow_symlinks=False)
        except OSError as e:
            raise NotPortable(f"owner {head['u']}:{head['g']} of {head['p'] or '.'} cannot be set here "
                              f"({os.strerror(e.errno or 0)})") from None
        for name, value in head.get("x", []):
            try:
                os.setxattr(path, name, bytes.fromhex(value), follow_symlinks=False)
            except OSError as e:
                raise NotPortable(f"extended attribute {name} of {head['p'] or '.'} cannot be set here "
                                  f"({os.strerror(e.errno or 0)})") from None
        if not link:
            os.chmod(path, head["m"])
        os.utime(path, ns=(head["mt"], head["mt"]), follow_symlinks=False)
    return len(heads)
