"""The user's check's verdicts, kept for the whole run: a check run on the host on one cell's copy of
a recovered tree answers for every later copy, in any cell of the run, that the check cannot tell
from it.

A lab shares a verdict between the states of its own cell whose recovered trees have one tree key
(lab/guest/trees.py). The four filesystems of a run recover the same logs too, but never to one tree
key: each stamps its own times and owners, and vfat keeps neither permission bits nor owners of its own. On
the host, though, the check runs on a copy (sandbox.py) made from the tree's pack, and sees nothing
but what the pack holds, the acknowledged labels, its own words and environment. So a verdict is
keyed here by exactly those:

  the check's words (the command and the staged file it names), the acknowledged labels' bytes,
  whether the directory was mounted read-only, the environment and working directory the check
  gets, its time limit, this host, and the tree: its CONTENT key where the check provably reads no
  metadata (checkwords.py), else its full tree key (trees.pack_keys).

Every cell's check sees the run directory at the lab's path with the same files in it (the staged
check and the labels, sandbox.Spec.view), so nothing of the cell it came from reaches it.

The store is a directory of the run (`verdicts/`), one file per key, written whole under a name of
its own and linked into place (the first verdict of a key stays; link(2) is atomic on one machine
and on a shared filesystem): the cells' labs, their helpers and a resumed run read and add to it at
once. Only a check that ended (passed or failed) is kept: a hang or a timeout runs again.

A lab runs the check afresh on the first recurrence of a tree (trees.SharedChecks: a check that is not a
function of its input gives that tree no verdict). Asked afresh, the host runs it unless the key's verdict
was confirmed already: two runs of it on the same input agreed (pass or fail). The first such agreement
is kept (`<key>.confirmed`); after it a lab's recurrence takes the kept verdict too. So a key's check
runs twice in the whole run, not twice in every lab that meets it, and every recurrence still rests on
two runs that agreed.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checkwords import VerdictKey

VERDICTS = "verdicts"  # the store's directory in a run directory
FORMAT = 1
_SEQ = [0]
_SEQ_LOCK = threading.Lock()


@dataclass(frozen=True)
class Seen:
    """Everything of a host check's run the verdict can depend on (its key's parts)."""

    cmd: str
    check: bytes  # the staged files the command names, in order
    acked: bytes
    read_only: bool
    env: dict[str, str]
    workdir: str
    timeout: float
    key: VerdictKey
    tree: str  # the tree's content key or tree key, per `key`

    def digest(self) -> str:
        h = hashlib.sha256()
        h.update(json.dumps({"format": FORMAT, "cmd": self.cmd, "ro": self.read_only, "env": sorted(self.env.items()),
                             "workdir": self.workdir, "timeout": self.timeout, "key": str(self.key),
                             "tree": self.tree, "host": os.uname().nodename,
                             "check": hashlib.sha256(self.check).hexdigest(),
                             "acked": hashlib.sha256(self.acked).hexdigest()}, sort_keys=True).encode())
        return h.hexdigest()


class VerdictStore:
    """A run's verdicts by key (Seen.digest): `get` one, `put` one (the first put of a key stays)."""

    def __init__(self, root: Path):
        self.root = root

    def _path(self, digest: str) -> Path:
        return self.root / f"{digest}.json"

    def get(self, digest: str) -> dict[str, Any] | None:
        try:
            got = json.loads(self._path(digest).read_text())
        except (OSError, ValueError):
            return None
        return got if isinstance(got, dict) and got.get("format") == FORMAT else None

    def put(self, digest: str, verdict: dict[str, Any]) -> bool:
        """Keeps `verdict` under `digest` unless one is kept already; True if this one was kept."""
        return self._link(self._path(digest), {"format": FORMAT, **verdict})

    def confirmed(self, digest: str) -> bool:
        """Two runs of the check on this key agreed (confirm)."""
        return (self.root / f"{digest}.confirmed").is_file()

    def confirm(self, digest: str, who: dict[str, Any]) -> bool:
        """A second run on this key agreed with the kept verdict (`who` ran it); True if it is the first to."""
        return self._link(self.root / f"{digest}.confirmed", {"format": FORMAT, "by": who})

    def _link(self, path: Path, what: dict[str, Any]) -> bool:
        """`what` written whole under a name of its own, then linked to `path` unless it exists."""
        self.root.mkdir(parents=True, exist_ok=True)
        with _SEQ_LOCK:
            _SEQ[0] += 1
            seq = _SEQ[0]
        tmp = self.root / f".{path.name}.{os.getpid()}.{threading.get_ident()}.{seq}"
        tmp.write_text(json.dumps(what))
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)


def shared_from(kept: dict[str, Any]) -> str:
    """How a state's record says where its verdict came from."""
    f = kept.get("from") or {}
    return f"shared from the tree of {f.get('cell') or 'a cell'} state {f.get('state') or '?'} ({f.get('key')} key)"
