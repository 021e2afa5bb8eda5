"""What a lab's guest sees of this machine's paths: the same names wherever the checkout, the run
directory and the device's files are.

In virtual time a figure is the device model's time plus the guest CPU's charged events (lab patch
0008: a fixed guest time per system call, page fault and context switch). A host path the guest can
read (on the kernel's command line, in /proc/mounts, in a step's environment or command) changes the
length of the strings its programs handle, so which pages they touch: a run directory a few
characters longer made mkfs fault once more (1.82 us on cortex-a8) and moved every later instant of
the boot, and a figure by a microsecond; a twin's variant (a longer device label, so a longer log
directory) gave the nominal's figure but for that. So the guest never sees one:

- the lab kernel runs in a directory of its own (the boot's UML directory), holding links to what it
  needs: `run` (the boot's run directory), `guest` (the guest programs), `diskN` (a disk's file; for
  a disk in virtual time or a copy-on-write overlay, the directory that holds it, as ubd opens the
  model's clock, or makes the overlay, beside it);
- the kernel's command line names them relative to that directory (ubd and uml_dir open them on the
  host), or where hostfs takes a host path, as `/proc/self/cwd/NAME`: the kernel process's own
  directory, resolved on the host by the process that makes hostfs's host calls (and, before the
  guest mounts its own /proc, by the guest's path walk through the host's: the init script is
  found that way);
- in the guest, the run directory is mounted at RUN and the programs at TOOLS (init.sh): lab/guest's
  files with their bytecode compiled for the guest, under TOOLS's names (guestcode.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import guestcode
from .boundary import BlockDevice

HERE = "/proc/self/cwd"  # the lab kernel's directory as a host path it resolves itself
RUN = "/run/flashbed"  # where the guest mounts the run directory
TOOLS = "/run/flashbed-tools"  # where the guest mounts the guest programs
RUN_LINK = "run"
TOOLS_LINK = "guest"
INIT = f"{HERE}/{TOOLS_LINK}/init.sh"


@dataclass(frozen=True)
class LabView:
    """A boot's links (name in the lab's directory -> host path) and each disk's ubd argument."""

    links: dict[str, Path]
    disks: tuple[str, ...]

    def make(self, lab_dir: Path) -> None:
        """The links, in the lab's directory (a new one per boot)."""
        for name, target in self.links.items():
            os.symlink(target, lab_dir / name)

    def describe(self) -> str:
        """One line for the console log: where each name leads on this machine."""
        return ", ".join(f"{n} -> {t}" for n, t in self.links.items())


def _disk(i: int, d: BlockDevice, links: dict[str, Path]) -> str:
    path = d.path.resolve()
    if d.overlay is not None:
        # ubd makes the overlay (O_EXCL: never through a dangling link): its directory is linked
        links[f"cow{i}"] = d.overlay.resolve().parent
        links[f"disk{i}"] = path
        return f"cow{i}/{d.overlay.name},disk{i}"
    if d.model_clock:  # ubd opens the model's `clock` beside the device file
        links[f"disk{i}"] = path.parent
        return f"disk{i}/{path.name}"
    links[f"disk{i}"] = path
    return f"disk{i}"


def view(run_dir: Path, disks: tuple[BlockDevice, ...]) -> LabView:
    links = {RUN_LINK: run_dir.resolve(), TOOLS_LINK: guestcode.tools_dir(TOOLS)}
    args = tuple(_disk(i, d, links) for i, d in enumerate(disks))
    return LabView(links, args)
