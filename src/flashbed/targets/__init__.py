"""Where cells run: one Target module per kind (base.py says what a Target is).

    lab.py     the UML lab and its kernels (no --target)
    board.py   a board over SSH (--target ssh://USER@HOST[:PORT])
    replay.py  recorded boots of real lab runs, served again (the tests')

A kind is chosen once, at the edge, by the scheme of the request's --target URL (KINDS); a
new kind (a second board type, a QEMU lab) is one more module and its entry here: the plan,
the run command and the cell ask a Target, never which kind it is.
"""

from __future__ import annotations

from typing import Any

from .base import ItsOwnLab, LabChoice, PlanParts, Target
from .board import BoardTarget
from .lab import LabTarget

__all__ = ["KINDS", "BoardTarget", "ItsOwnLab", "LabChoice", "LabTarget", "PlanParts", "Target", "kind", "open_run",
           "url"]

# --target's URL scheme -> the kind of target ("": no --target, the lab)
KINDS: dict[str, type] = {"": LabTarget, "ssh": BoardTarget}


def kind(url: str) -> type:
    """The kind of target a --target URL names (a URL of no other kind is the SSH form's to refuse)."""
    if not url:
        return KINDS[""]
    scheme = url.partition("://")[0] if "://" in url else ""
    return KINDS.get(scheme) if scheme and scheme in KINDS else KINDS["ssh"]


def url(text: str | None, options: Any) -> str:
    """--target as the request keeps it (its kind's one spelling), checked; '' for the lab."""
    return kind(text).url(text, options) if text else ""


def open_run(request: Any, options: Any, store: Any, executor: Any) -> Target:
    """The target of a run's request (enter it with `with`), its executor chosen."""
    return kind(request.target).open(request, options, store, executor)
