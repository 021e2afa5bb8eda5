"""Capability probe: what a mounted filesystem can hold, shown by doing it.

  caps.py make DIR     create one object per capability under DIR (prints what failed)
  caps.py check DIR    after an unmount and a mount: read each back (prints the verdicts)

Each capability is kept only if it was made *and* reads back the same after the remount
(a FAT mount accepts a chmod it cannot store, and shows the mount's own mode again).
The host imports PROBES from here (one list for both sides). Standard library only (it
runs in the lab).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import struct
import sys

# name -> what it shows; the order the report lists them in
PROBES: dict[str, str] = {
    "owners": "chown to another user and group",
    "modes": "permission bits with setuid (chmod 4751)",
    "symlinks": "a symbolic link",
    "hard_links": "a second name for one inode (link)",
    "device_nodes": "a character device node (mknod c 1 3)",
    "fifos": "a named pipe (mkfifo)",
    "sockets": "a Unix socket's name (bind)",
    "xattrs": "a user extended attribute (user.*)",
    "security_xattrs": "a file capability (security.capability, as setcap writes it)",
    "case_sensitive": "Name and NAME are two files",
    "large_files": "a file larger than 4 GiB (a sparse write at 5 GiB, or the size limit where the device is "
                   "too small for a file without holes)",
}
UID, GID = 4321, 8765
MODE = 0o4751
DEV = os.makedev(1, 3)
XATTR_USER = ("user.flashbed", b"probe")
# vfs_cap_data, revision 2, effective: CAP_NET_BIND_SERVICE (10) permitted
CAPS_VALUE = struct.pack("<IIIII", 0x02000000 | 1, 1 << 10, 0, 0, 0)
BIG = 5 << 30  # past 4 GiB - 1, FAT's limit
SPARSE_TEST = 16 << 20


def _err(e: OSError) -> str:
    return f"{errno.errorcode.get(e.errno, e.errno)}: {e.strerror}"


def make(d: str) -> dict:
    """One object per probe; the errors of those that could not be made."""
    os.makedirs(d, exist_ok=True)
    p = lambda n: os.path.join(d, n)  # noqa: E731
    made: dict[str, str] = {}

    def attempt(name, fn):
        try:
            fn()
            made[name] = ""
        except OSError as e:
            made[name] = _err(e)

    for n in ("own", "mode", "target", "xattr", "fcaps"):
        with open(p(n), "w") as f:
            f.write(n)
    attempt("owners", lambda: os.chown(p("own"), UID, GID))
    attempt("modes", lambda: os.chmod(p("mode"), MODE))
    attempt("symlinks", lambda: os.symlink("target", p("symlink")))
    attempt("hard_links", lambda: os.link(p("target"), p("hardlink")))
    attempt("device_nodes", lambda: os.mknod(p("chardev"), stat.S_IFCHR | 0o600, DEV))
    attempt("fifos", lambda: os.mkfifo(p("fifo")))

    def sock():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(p("socket"))
        finally:
            s.close()
    attempt("sockets", sock)
    attempt("xattrs", lambda: os.setxattr(p("xattr"), *XATTR_USER))
    attempt("security_xattrs", lambda: os.setxattr(p("fcaps"), "security.capability", CAPS_VALUE))

    def case():
        with open(p("CaseProbe"), "w") as f:
            f.write("upper")
        with open(p("caseprobe"), "x") as f:  # FileExistsError where the names are one
            f.write("lower")
    attempt("case_sensitive", case)
    made["large_files"] = large(p("big"), p("sparse"))
    os.sync()
    return made


def large(path: str, probe: str) -> str:
    """'' when a byte at 5 GiB was written; 'limit' when the device has no room for a file without
    holes but the filesystem's size limit allows 5 GiB (fallocate says EFBIG past it, before any
    write); else the error."""
    with open(probe, "wb") as f:
        f.truncate(SPARSE_TEST)
    sparse = os.stat(probe).st_blocks * 512 < SPARSE_TEST // 2
    os.unlink(probe)
    st = os.statvfs(os.path.dirname(path))
    if sparse or st.f_bavail * st.f_frsize > BIG + (64 << 20):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, b"x", BIG)
            finally:
                os.close(fd)
            return ""
        except OSError as e:
            return _err(e)
    # no holes and no room: ask the limit alone (vfs_fallocate checks s_maxbytes before the
    # filesystem, so EFBIG is the limit and anything else means it is above 5 GiB)
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        rc = libc.fallocate(fd, 1, BIG, 4096)  # FALLOC_FL_KEEP_SIZE
        err = ctypes.get_errno() if rc else 0
    finally:
        os.close(fd)
        os.unlink(path)
    if err == errno.EFBIG:
        return _err(OSError(err, os.strerror(err)))
    return "limit"


def check(d: str, made: dict) -> dict:
    """Per probe: {"ok": bool, "why": str} after the remount."""
    p = lambda n: os.path.join(d, n)  # noqa: E731
    out: dict[str, dict] = {}

    def verdict(name, fn):
        if made.get(name) not in ("", "limit"):
            out[name] = {"ok": False, "why": f"not made: {made.get(name, 'not tried')}"}
            return
        try:
            why = fn()
        except OSError as e:
            why = f"after the remount: {_err(e)}"
        out[name] = {"ok": not why, "why": why}

    def owners():
        s = os.stat(p("own"))
        return "" if (s.st_uid, s.st_gid) == (UID, GID) else f"reads back {s.st_uid}:{s.st_gid}, not {UID}:{GID}"

    def modes():
        m = stat.S_IMODE(os.stat(p("mode")).st_mode)
        return "" if m == MODE else f"reads back {m:o}, not {MODE:o}"

    def symlink():
        t = os.readlink(p("symlink"))
        return "" if t == "target" else f"points to {t!r}"

    def hardlink():
        a, b = os.stat(p("target")), os.stat(p("hardlink"))
        return "" if a.st_ino == b.st_ino and a.st_nlink == 2 else "two inodes, or a link count other than 2"

    def node(kind, test, rdev=None):
        def f():
            s = os.lstat(p(kind))
            if not test(s.st_mode):
                return f"is not a {kind} after the remount"
            return "" if rdev is None or s.st_rdev == rdev else "device numbers changed"
        return f

    def xattr(name, key, value):
        def f():
            v = os.getxattr(p(name), key)
            return "" if v == value else "reads back other bytes"
        return f

    def case():
        names = set(os.listdir(d))
        return "" if {"CaseProbe", "caseprobe"} <= names else "one name"

    def big():
        if made["large_files"] == "limit":
            return ""
        size = os.stat(p("big")).st_size
        return "" if size == BIG + 1 else f"size {size} after the remount"

    verdict("owners", owners)
    verdict("modes", modes)
    verdict("symlinks", symlink)
    verdict("hard_links", hardlink)
    verdict("device_nodes", node("chardev", stat.S_ISCHR, DEV))
    verdict("fifos", node("fifo", stat.S_ISFIFO))
    verdict("sockets", node("socket", stat.S_ISSOCK))
    verdict("xattrs", xattr("xattr", *XATTR_USER))
    verdict("security_xattrs", xattr("fcaps", "security.capability", CAPS_VALUE))
    verdict("case_sensitive", case)
    verdict("large_files", big)
    if made.get("large_files") == "limit" and out["large_files"]["ok"]:
        out["large_files"]["why"] = "not written (no room for a file without holes): fallocate at 5 GiB passed " \
                                    "the size limit"
    return out


def main(argv: list[str]) -> int:
    cmd, d = argv[1], argv[2]
    state = os.path.join(d, ".made.json")
    if cmd == "make":
        made = make(d)
        with open(state, "w") as f:
            json.dump(made, f)
        os.sync()
        print(json.dumps({"made": made}))
        return 0
    if cmd == "check":
        with open(state) as f:
            made = json.load(f)
        print(json.dumps({"caps": check(d, made)}))
        return 0
    print(f"usage: {argv[0]} make|check DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
