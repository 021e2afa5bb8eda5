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

Standard library only (it runs in the guest).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat

CHUNK = 1 << 20


def _file_digest(path: str) -> str:
    h = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        return f"open-errno-{errno.errorcode.get(e.errno or 0, e.errno)}"
    try:
        while chunk := os.read(fd, CHUNK):
            h.update(chunk)
    except OSError as e:  # part read, then an error: both are what the check would see
        return f"{h.hexdigest()}:read-errno-{errno.errorcode.get(e.errno or 0, e.errno)}"
    finally:
        os.close(fd)
    return h.hexdigest()


def _xattrs(path: str) -> list[tuple[str, str]]:
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:  # a filesystem without them (FAT): none
        return []
    out = []
    for n in sorted(names):
        try:
            out.append((n, os.getxattr(path, n, follow_symlinks=False).hex()))
        except OSError as e:
            out.append((n, f"errno-{e.errno}"))
    return out


def _entry(root: str, rel: str) -> str:
    path = os.path.join(root, rel) if rel else root
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"{rel!r} lstat-errno-{e.errno}"
    kind = stat.S_IFMT(st.st_mode)
    fields = [repr(rel), oct(kind), oct(stat.S_IMODE(st.st_mode)), str(st.st_uid), str(st.st_gid),
              str(st.st_nlink), str(st.st_size), str(st.st_mtime_ns), repr(_xattrs(path))]
    if stat.S_ISLNK(st.st_mode):
        fields.append(repr(os.readlink(path)))
    elif stat.S_ISREG(st.st_mode):
        fields.append(_file_digest(path))
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        fields.append(str(st.st_rdev))
    return " ".join(fields)


def tree_key(d: str, acked: bytes) -> str:
    """The key of directory `d` as the check sees it, with the acknowledged labels `acked`."""
    h = hashlib.sha256()
    try:
        ro = bool(os.statvfs(d).f_flag & os.ST_RDONLY)
    except OSError as e:
        ro = f"statvfs-errno-{e.errno}"  # type: ignore[assignment]
    h.update(f"ro={ro}\nacked={hashlib.sha256(acked).hexdigest()}\n".encode())
    h.update((_entry(d, "") + "\n").encode())

    def walk_error(e: OSError) -> None:  # an unreadable directory is part of what the check sees
        h.update(f"walk-errno-{e.errno} {e.filename!r}\n".encode())

    for top, dirs, files in os.walk(d, onerror=walk_error):
        dirs.sort()
        for name in sorted(dirs + files):
            rel = os.path.relpath(os.path.join(top, name), d)
            h.update((_entry(d, rel) + "\n").encode())
    return h.hexdigest()


class SharedChecks:
    """The check's verdict per tree key, in one lab: a state whose recovered directory and
    acknowledged labels match a checked one's takes its verdict (marked `tree_same`, the state
    whose check ran). A check that overran its limit is not shared: it runs again."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, dict]] = {}
        self.runs = 0

    def check(self, state: str, d: str, acked: bytes, run_check) -> dict:
        key = tree_key(d, acked) if os.path.isdir(d) else None
        if key is not None and key in self.seen:
            first, verdict = self.seen[key]
            return {**verdict, "tree": key[:16], "tree_same": first}
        self.runs += 1
        verdict = run_check()
        if key is not None and not verdict.get("check_timeout"):
            self.seen[key] = (state, verdict)
        return {**verdict, "tree": key[:16]} if key is not None else verdict
