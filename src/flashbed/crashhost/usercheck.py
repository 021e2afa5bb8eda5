"""Where the user's check runs: on the host (sandbox.py, on a copy of the recovered directory) unless it
needs the mounted filesystem itself, and the host's answer to the lab's Call.USER_CHECK.

The copy holds what the tree key covers (lab/guest/trees.py): paths, types, modes, owners, link counts,
sizes, mtimes, xattrs, symlink targets, bytes, whether it was mounted read-only. A check that reads
anything else sees the host's copy, not the recovered filesystem, so it runs in the lab:
`--set appcheck.check_in_lab=true`, or detected from the words of the check (a script's text, an ELF
program's symbol names), one reason named:

- the filesystem's own state: statfs and free space (`df`, `stat -f`, statvfs), the mount table
  (`findmnt`, `mountpoint`, /proc/mounts), the filesystem's tools (fsck, debugfs, btrfs, xfs_io,
  filefrag, chattr, lsattr, fallocate, fstrim, mount, umount);
- its fsync behaviour: `sync`, `fsync`, `fdatasync`, `syncfs`, dd's `conv=fsync`/`oflag=sync|dsync|direct`;
- the device: $FLASHBED_DEV, a device node under /dev other than null, zero, full, random, urandom, tty
  and the standard streams, mknod, blockdev, losetup, dmsetup;
- writing the run directory ($FLASHBED_RUN: writable in the lab, read-only here);
- a fio workload's own verification (it writes its output into the run directory).

Writing the workload's directory itself is allowed: the copy is writable (read-only where the lab's
mount was), and what the check writes there is thrown away with it, as a verdict shared between
states already leaves it out of the states that took it. What the copy cannot be (a device node in
the tree, an owner the sandbox cannot map) sends that state's check to the lab, said per state.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from . import sandbox

OUT_KEPT = 4000  # characters of the check's output kept (as a guest command's)

_NEEDS = [  # (pattern over a script's text without its comments, what it needs of the lab)
    (re.compile(r"\bFLASHBED_DEV\b"), "it names $FLASHBED_DEV, the lab's device"),
    (re.compile(r"\bFLASHBED_RUN\b"), "it names $FLASHBED_RUN, which only the lab's check may write"),
    (re.compile(r"\b(df|statv?fs|findmnt|mountpoint)\b|\bstat\s+(-\w*f\b|--file-system)|/proc/(self/)?mount"),
     "it reads the filesystem's own state (statfs, free space, the mount table)"),
    (re.compile(r"\b(sync|syncfs|fsync|fdatasync)\b|\bconv=\S*f(data)?sync|\b[io]flag=\S*(d?sync|direct)"),
     "it depends on fsync behaviour or direct I/O"),
    (re.compile(r"(?<![\w.-])(e2fsck|fsck(\.\w+)?|debugfs|btrfs|xfs_\w+|filefrag|chattr|lsattr|fallocate|fstrim|"
                r"u?mount|mknod|blockdev|losetup|dmsetup)(?![\w.-])"),
     "it runs a tool of the filesystem or the device"),
    (re.compile(r"/dev/(?!(null|zero|full|u?random|tty|std(in|out|err)|fd)\b)\w[\w/.-]*"), "it opens a device node"),
]
_ELF_NEEDS = re.compile(rb"\x00(f?statv?fs(64)?|fsync|fdatasync|syncfs|sync_file_range|mknod(at)?|mount|umount2?)\x00")


def needs_lab(check: bytes) -> str:
    """Why the check `check` (its content) must run on the mounted filesystem in the lab ('' : it need not)."""
    if check.startswith(b"\x7fELF"):
        hit = _ELF_NEEDS.search(check)
        return f"it is a program that calls {hit.group(1).decode()}()" if hit else ""
    text = "\n".join(line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
                     for line in check.decode("utf-8", "replace").splitlines())
    for pattern, why in _NEEDS:
        hit = pattern.search(text)
        if hit:
            return f"{why} ('{hit.group(0).strip()}')"
    return ""


@lru_cache(maxsize=1)
def host_unavailable() -> str:
    """'' where the sandbox runs here, else why not (asked once per process)."""
    return sandbox.available()


def where(check: Path | None, in_lab: bool, share_trees: bool, fio: bool) -> str:
    """Why the user's check runs in the lab; '' : on the host."""
    if in_lab:
        return "appcheck.check_in_lab=true"
    if fio:
        return "fio's verification writes into the run directory"
    if not share_trees:
        return "appcheck.share_trees=false: the check may read what the host's copy does not keep"
    if check is not None:
        try:
            why = needs_lab(check.read_bytes())
        except OSError as e:
            return f"its file cannot be read ({e.strerror})"
        if why:
            return why
    if why := host_unavailable():
        return f"no sandbox on this host: {why}"
    return ""


def answer(args: dict, run_dir: Path) -> dict:
    """Call.USER_CHECK: the guest's check on the copy packed in the boot's run directory `run_dir`."""
    env = {str(k): str(v) for k, v in dict(args.get("env") or {}).items()}
    guest_run = env.get("FLASHBED_RUN", "")
    for k, v in env.items():  # the run directory is the host's own here
        if k.startswith("FLASHBED_") and guest_run and v.startswith(guest_run):
            env[k] = str(run_dir) + v[len(guest_run):]
    env.pop("FLASHBED_DEV", None)
    env.update(FLASHBED_RUN=str(run_dir), FLASHBED_MNT=str(args["dir"]),
               FLASHBED_ACKED=str(run_dir / Path(str(args["acked"])).name))
    ran = sandbox.run(str(args["cmd"]), str(args["dir"]), env, float(args["timeout"]),
                      pack=str(run_dir / Path(str(args["pack"])).name), read_only=bool(args.get("ro")),
                      visible=(str(run_dir),))
    if ran.refused:
        return {"refused": ran.refused}
    return {"status": ran.status, "rc": ran.rc, "seconds": round(ran.seconds, 6), "pids": ran.pids,
            "out": (ran.out + ran.err).decode("utf-8", "replace")[-OUT_KEPT:]}
