"""Shell commands that run YAFFS2's FUSE daemon in the lab's guest.

The guest runs the host's cached binary (its root is the host's / through hostfs).
The daemon detaches once YAFFS2 and the FUSE mount are up, printing its
yaffs_mount time on stdout; `umount` only ends the FUSE connection, so an
unmount waits for the daemon to exit: YAFFS2 writes its checkpoint then.
What a kernel filesystem says in the kernel log, YAFFS2 here says in the
daemon's log (its trace lines and the NAND's faults, "yaffs: ..."), a file of
the run's.
"""

from __future__ import annotations

import json
import shlex

from ..mounting import Mounting
from .build import daemon_path, ensure_daemon

PID_DIR = "/tmp/yaffs2"
STATS = '"$FLASHBED_RUN/yaffs2.jsonl"'  # every mount's and unmount's JSON line
LOG = '"$FLASHBED_RUN/yaffs2.log"'  # every daemon's trace and fault lines, appended


def pidfile(mnt: str) -> str:
    return f"{PID_DIR}/{mnt.strip('/').replace('/', '_') or 'root'}.pid"


def mount_cmd(dev: str, mnt: str, checkpoint: bool = True) -> str:
    """Start the daemon on the MTD device `dev` (/dev/mtdN) at `mnt`; `checkpoint`
    False ignores the checkpoint on flash (the mount scans)."""
    args = [str(daemon_path()), "--mtd", dev, "--pidfile", pidfile(mnt), *([] if checkpoint else ["--no-checkpoint"])]
    return f"mkdir -p {PID_DIR} && {shlex.join(args)} --stats {STATS} --log {LOG} {shlex.quote(mnt)}"


def log_cmd() -> str:
    """Print the daemons' log (nothing if no daemon ran)."""
    return f"cat {LOG} 2>/dev/null; true"


def clear_log_cmd() -> str:
    return f": > {LOG}"


def _wait_exit(mnt: str) -> str:
    # a zombie has exited (the guest's init may reap it late)
    f = pidfile(mnt)
    return (f"p=$(cat {f}) && while [ -e /proc/$p ] && [ \"$(cut -d' ' -f3 /proc/$p/stat)\" != Z ]; "
            f"do sleep 0.02; done; rm -f {f}")


def umount_cmd(mnt: str) -> str:
    """Unmount and wait for the daemon to write the checkpoint and exit."""
    return f"umount {shlex.quote(mnt)} && {_wait_exit(mnt)}"


def kill_cmd(mnt: str) -> str:
    """The daemon killed between two NAND operations (no checkpoint, nothing more written),
    then its dead FUSE mount detached: YAFFS2's view of a power cut."""
    return f"kill -9 $(cat {pidfile(mnt)}) && {_wait_exit(mnt)}; umount -l {shlex.quote(mnt)}"


def mount_event(stdout: str) -> dict | None:
    """The daemon's mount line (yaffs_mount's time, whether it restored the checkpoint, the
    bad blocks it knows) in a mount command's output."""
    for line in stdout.splitlines():
        if line.startswith("{"):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("event") == "mount":
                return event
    return None


class DaemonMount(Mounting):
    """YAFFS2's mounting (filesystems.CATALOGUE's yaffs2): the daemon started on /dev/mtdN, an
    unmount that waits for its checkpoint, its own log, a cut that kills it, yaffs_mount's own
    time on its mount line."""

    in_kernel = False  # it takes no mount options; its own MTD driver takes MLC NAND

    def mount_cmd(self, fs, dev: str, mnt: str, extra: tuple[str, ...] = ()) -> str:
        return mount_cmd(dev, mnt)

    def umount_cmd(self, mnt: str) -> str:
        return umount_cmd(mnt)

    def log_cmd(self) -> str:
        return f"dmesg; {log_cmd()}"

    def clear_log_cmd(self) -> str:
        return f"dmesg -C; {clear_log_cmd()}"

    def raw_device(self, fs, mtd: int, ubi: int) -> str:
        return f"/dev/mtd{mtd}"

    def ensure(self) -> None:
        ensure_daemon()  # built at setup; else now, once (the guest runs the host's binary)

    def cut_cmd(self, mnt: str) -> str | None:
        return kill_cmd(mnt)

    def kill_pidfile(self, mnt: str) -> str:
        return pidfile(mnt)

    def cut_umount_cmd(self, mnt: str) -> str | None:
        return f"umount -l {shlex.quote(mnt)}"  # the dead daemon's FUSE mount

    def scan_mount_cmd(self, dev: str, mnt: str) -> str | None:
        return mount_cmd(dev, mnt, checkpoint=False)

    def mount_event(self, stdout: str) -> dict | None:
        return mount_event(stdout)
