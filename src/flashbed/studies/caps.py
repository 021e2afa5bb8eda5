"""`caps`: what the filesystem can hold, shown in the lab rather than typed in.

One boot: make and mount the filesystem, create one object per capability (an owner
and group, setuid permission bits, a symlink, a hard link, a character device node, a
FIFO, a Unix socket, a user and a security extended attribute, two names differing in
case, a byte at 5 GiB), unmount, mount again and read each back (lab/guest/caps.py).
A capability counts only when it reads back the same after the remount.

Metrics (case "probe"): `cap:<name>` 1 (shown) or 0 (not), in caps.PROBES' order;
the cell's extra says why each one failed. The recommendation's requirements
(weights.toml) read them. Facts no probe can show in one boot (online resize, the
recovery model) are the catalogue's (filesystems.py), with their source.
"""

from __future__ import annotations

from pathlib import Path

from ..lab.boundary import BootResult, Step
from ..lab.guest.caps import PROBES
from ..shellwords import TOOLS
from ..status import CellStatus
from .base import MNT, PY, CellSpec, Outcome, Study, first_failure, m, make_and_mount, mount, step_json, umount

CAPS = f"{PY} {TOOLS}/caps.py"
DIR = f"{MNT}/caps"
CASE = "probe"
PREFIX = "cap:"


class Caps(Study):
    name = "caps"
    title = "Capabilities: what the filesystem holds after a remount"
    description = ("owners, modes, symlinks, hard links, device nodes, FIFOs, sockets, xattrs, case, >4 GiB files: "
                   "each made, remounted and read back")
    order = 95
    primary_metric = "cap:owners"
    device_stats = False
    timing_free = True  # what a filesystem can hold does not depend on the device's speed
    device_free = True  # nor on anything else of the device model

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        v = spec.variant
        return [[
            *make_and_mount(v),
            Step("caps-make", f"{CAPS} make {DIR}", timeout=600),
            *umount(v),
            *mount(v, "remount"),
            Step("caps-check", f"{CAPS} check {DIR}", timeout=600),
            *umount(v, "umount-end"),
        ]]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        got = (step_json(boots[0], "caps-check") or {}).get("caps") if boots else None
        err = first_failure(boots)
        if not isinstance(got, dict):
            return Outcome([], "incomplete", status=CellStatus.FAILED, error=err or "the probe printed no verdicts")
        out = []
        for name in PROBES:
            v = got.get(name) or {}
            out += m(CASE, PREFIX + name, 1 if v.get("ok") else 0, "count")
        missing = [n for n in PROBES if not (got.get(n) or {}).get("ok")]
        head = "every capability" if not missing else f"{len(PROBES) - len(missing)} of {len(PROBES)}; not: " + \
            ", ".join(missing)
        why = {n: (got.get(n) or {}).get("why", "") for n in PROBES if (got.get(n) or {}).get("why")}
        return Outcome(out, head, extra={"why": why}, status=CellStatus.FAILED if err else CellStatus.OK,
                       error=err)
