"""The words a lab step's shell command leaves to the guest: where the device under test and
the guest programs are is the lab's business (lab/boundary.py's GuestLayout), so steps name
them by variables the agent sets, and commands are joined leaving those words unquoted.
On the ground floor: the filesystem catalogue, its variants and the studies write steps
without needing the lab boundary for it."""

from __future__ import annotations

import shlex

# what steps call the device under test and the guest programs' directory; the
# agent sets them from the lab's GuestLayout (steps.json "env"). Braced: the
# shell, fio job files and os.path.expandvars all expand this form
DEV = "${FLASHBED_DEV}"
TOOLS = "${FLASHBED_TOOLS}"


def shell_join(args: list[str] | tuple[str, ...]) -> str:
    """shlex.join, leaving DEV and TOOLS-relative words for the guest's shell to expand."""
    return " ".join(a if a == DEV or a.startswith(TOOLS + "/") and "'" not in a and " " not in a
                    else shlex.quote(a) for a in args)
