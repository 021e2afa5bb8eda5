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
import time
from functools import lru_cache
from pathlib import Path

from ..lab.guest import trees
from . import checkwords, sandbox, verdicts

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


_STAGED = re.compile(r"\$\{?FLASHBED_RUN\}?/([\w.-]+)")


def _key_choice(cmd: str, staged: dict[str, bytes]) -> checkwords.KeyChoice:
    """The key the check's verdicts may be shared by: decided from its one staged file's words."""
    if len(staged) != 1 or _STAGED.sub("", cmd).strip():
        return checkwords.KeyChoice(checkwords.VerdictKey.TREE, "its command is not one staged file")
    return checkwords.choose(next(iter(staged.values())))


def answer(args: dict, run_dir: Path, store: verdicts.VerdictStore | None = None, cell: str = "",
           state: str = "") -> dict:
    """Call.USER_CHECK: the guest's check on the copy packed in the boot's run directory `run_dir`. It sees
    the run directory at the lab's path ($FLASHBED_RUN as the lab's), holding the files its command names
    there and the acknowledged labels; with `store`, a verdict kept for what it would see is taken
    (`shared`: whose it was) and a new one kept (verdicts.py); `cell` and `state` name this run of it."""
    cmd = str(args["cmd"])
    env = {str(k): str(v) for k, v in dict(args.get("env") or {}).items()}
    env.pop("FLASHBED_DEV", None)
    view_at = env.get("FLASHBED_RUN") or str(run_dir)
    if not env.get("FLASHBED_RUN"):  # a guest that did not say its path: nothing to share by
        store = None
    acked = Path(str(args["acked"])).name
    names = [n for n in dict.fromkeys(_STAGED.findall(cmd)) if (run_dir / n).is_file() and n != acked]
    view = {n: str(run_dir / n) for n in names} | {acked: str(run_dir / acked)}
    env.update(FLASHBED_RUN=view_at, FLASHBED_MNT=str(args["dir"]), FLASHBED_ACKED=f"{view_at}/{acked}")
    pack = str(run_dir / Path(str(args["pack"])).name)
    ro, timeout = bool(args.get("ro")), float(args["timeout"])
    digest, choice = "", None
    if store is not None:
        try:
            staged = {n: (run_dir / n).read_bytes() for n in names}
            choice = _key_choice(cmd, staged)
            content, tree = trees.pack_keys(pack)
            seen = verdicts.Seen(cmd=cmd, check=b"".join(n.encode() + b"\0" + b + b"\0" for n, b in staged.items()),
                                 acked=(run_dir / acked).read_bytes(), read_only=ro, env=env, workdir=str(args["dir"]),
                                 timeout=timeout, key=choice.key,
                                 tree=content if choice.key is checkwords.VerdictKey.CONTENT else tree)
            digest = seen.digest()
        except (OSError, ValueError, trees.NotPortable):
            digest = ""
    kept = None
    if digest and store is not None:
        t = time.monotonic()
        kept = store.get(digest)
        # asked afresh (a lab's stability check): the kept verdict only once two runs of it agreed
        if kept is not None and (not args.get("fresh") or store.confirmed(digest)):
            return {"status": kept["status"], "rc": kept["rc"], "seconds": round(time.monotonic() - t, 6),
                    "pids": kept.get("pids", ""), "out": kept.get("out", ""),
                    "shared": {**(kept.get("from") or {}), "said": verdicts.shared_from(kept)}}
    ran = sandbox.run(cmd, str(args["dir"]), env, timeout, pack=pack, read_only=ro, view=view, view_at=view_at)
    if ran.refused:
        return {"refused": ran.refused}
    out = {"status": ran.status, "rc": ran.rc, "seconds": round(ran.seconds, 6), "pids": ran.pids,
           "out": (ran.out + ran.err).decode("utf-8", "replace")[-OUT_KEPT:]}
    if digest and store is not None and choice is not None and ran.status in ("ok", "failed"):
        who = {"cell": cell, "state": state, "key": str(choice.key)}
        if kept is None:
            store.put(digest, {**out, "from": who})
        elif kept["status"] == ran.status:  # a second run agreed (a disagreement is the lab's to judge)
            store.confirm(digest, who)
    return out
