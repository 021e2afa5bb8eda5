"""On a board (flashbed run --target ssh://...): what the host needs to know before it
writes to the board's device, printed as one JSON object.

    python3 -S -I boardcheck.py NODE [LIMIT]

  sysfs      the device's sysfs files (and its disk's, partitions', holders', the
             devices holding / and /boot), by absolute path, with the symlinks among
             them: the host rebuilds the tree and applies the same checks as to a
             device of its own (devices/realdev.py)
  proc       mountinfo and swaps
  devno      the node's device number; exclusive: "" or why O_EXCL failed
  signatures wipefs --json's list (None: the board has no wipefs)
  zeroes     the device read from its start, up to LIMIT bytes, stopping at the first
             non-zero byte: {"first_data": offset or None, "read": bytes, "size": bytes}
  board      uname -a, the device tree's model, python, the filesystems its kernel
             has, which tools it lacks, the eMMC's ext_csd life time where readable

Standard library only: it runs on the board's python3.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import shutil
import stat
import subprocess
import sys

BOOT_MOUNTS = ("/", "/boot", "/boot/efi", "/efi")
TOOLS = ("fio", "mkfs.ext4", "mkfs.xfs", "mkfs.btrfs", "mkfs.f2fs", "wipefs", "blockdev", "tar", "unshare")
MAX_FILE = 8192
SUBDIRS = ("queue", "loop", "holders", "slaves", "dm", "md")


def read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_FILE).decode("utf-8", "replace")
    except OSError:
        return None


class Snapshot:
    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.links: dict[str, str] = {}
        self.seen: set[str] = set()

    def link(self, path: str) -> str:
        target = os.path.realpath(path)
        self.links[path] = target
        return target

    def dir(self, d: str, depth: int = 2) -> None:
        d = os.path.realpath(d)
        if d in self.seen or not os.path.isdir(d):
            return
        self.seen.add(d)
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if os.path.islink(p):
                target = self.link(p)
                if name == "device" or os.path.basename(d) in ("holders", "slaves"):
                    self.dir(target, 1)
            elif os.path.isdir(p):
                if depth > 0 and (name in SUBDIRS or os.path.exists(os.path.join(p, "partition"))):
                    self.dir(p, depth - 1)
            elif os.path.isfile(p) and name != "uevent":
                text = read(p)
                if text is not None:
                    self.files[p] = text

    def devno(self, major: int, minor: int) -> None:
        """The sysfs directory of device MAJOR:MINOR, its disk and what it is built on."""
        link = f"/sys/dev/block/{major}:{minor}"
        if not os.path.exists(link):
            return
        d = self.link(link)
        self.dir(d)
        if os.path.exists(os.path.join(d, "partition")):
            self.dir(os.path.dirname(d))


def mounted_devnos() -> list[tuple[int, int]]:
    out = []
    for line in (read("/proc/self/mountinfo") or "").splitlines():
        f = line.split()
        if len(f) > 4 and f[4] in BOOT_MOUNTS:
            major, _, minor = f[2].partition(":")
            out.append((int(major), int(minor)))
            src = line.partition(" - ")[2].split()
            if len(src) > 1 and src[1].startswith("/"):
                try:
                    st = os.stat(src[1])
                    if stat.S_ISBLK(st.st_mode):
                        out.append((os.major(st.st_rdev), os.minor(st.st_rdev)))
                except OSError:
                    pass
    return out


def signatures(node: str) -> list | None:
    if not shutil.which("wipefs"):
        return None
    r = subprocess.run(["wipefs", "--no-act", "--json", node], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return [{"type": "unreadable: " + (r.stderr or r.stdout).strip()[:200]}]
    return list(json.loads(r.stdout).get("signatures") or []) if r.stdout.strip() else []


def zeroes(node: str, limit: int, chunk: int = 4 << 20) -> dict:
    zero = bytes(chunk)
    done = 0
    try:
        with open(node, "rb", buffering=0) as f:
            size = os.lseek(f.fileno(), 0, os.SEEK_END)
            os.lseek(f.fileno(), 0, os.SEEK_SET)
            while done < min(size, limit):
                block = f.read(min(chunk, min(size, limit) - done))
                if not block:
                    break
                if block != zero[:len(block)]:
                    return {"first_data": done + len(block) - len(block.lstrip(b"\0")), "read": done, "size": size}
                done += len(block)
    except OSError as e:
        return {"error": os.strerror(e.errno or 0)}
    return {"first_data": None, "read": done, "size": size}


def exclusive(node: str) -> str:
    try:
        os.close(os.open(node, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC))
    except OSError as e:
        return "busy" if e.errno == errno.EBUSY else os.strerror(e.errno or 0)
    return ""


def life_time() -> dict[str, str]:
    """eMMC ext_csd life-time estimates (bytes 268, 269: type A, B; 267: pre-EOL) from debugfs."""
    out = {}
    base = "/sys/kernel/debug"
    for host in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        if not host.startswith("mmc"):
            continue
        for card in sorted(os.listdir(os.path.join(base, host))):
            text = (read(os.path.join(base, host, card, "ext_csd")) or "").strip()
            if len(text) >= 540:
                byte = lambda i: int(text[2 * i:2 * i + 2], 16)  # noqa: E731
                out[card] = {"life_time_est_a": byte(268), "life_time_est_b": byte(269), "pre_eol_info": byte(267)}
    return out


def board() -> dict:
    model = (read("/proc/device-tree/model") or read("/sys/firmware/devicetree/base/model") or "").strip("\0\n ")
    fss = sorted({line.split()[-1] for line in (read("/proc/filesystems") or "").splitlines() if line.strip()})
    mods = os.path.join("/lib/modules", platform.release(), "kernel", "fs")  # loaded when mounted
    fs_modules = sorted(os.listdir(mods)) if os.path.isdir(mods) else []
    return {"uname": " ".join(platform.uname()), "release": platform.release(), "model": model,
            "dmi": (read("/sys/class/dmi/id/product_name") or "").strip(),
            "python": platform.python_version(), "filesystems": fss, "fs_modules": fs_modules,
            "missing_tools": [t for t in TOOLS if not shutil.which(t, path="/usr/sbin:/usr/bin:/sbin:/bin")],
            "mmc_life_time": life_time()}


def main() -> int:
    node = sys.argv[1]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    try:
        st = os.stat(node)
    except OSError as e:
        print(json.dumps({"node": node, "error": f"{node}: {e.strerror} on the board"}))
        return 0
    if not stat.S_ISBLK(st.st_mode):
        print(json.dumps({"node": node, "error": f"{node} is not a block device on the board"}))
        return 0
    snap = Snapshot()
    snap.devno(os.major(st.st_rdev), os.minor(st.st_rdev))
    for major, minor in mounted_devnos():
        snap.devno(major, minor)
    print(json.dumps({"node": node, "devno": [os.major(st.st_rdev), os.minor(st.st_rdev)],
                      "sysfs": snap.files, "links": snap.links,
                      "proc": {"self/mountinfo": read("/proc/self/mountinfo") or "", "swaps": read("/proc/swaps") or ""},
                      "exclusive": exclusive(node), "signatures": signatures(node), "zeroes": zeroes(node, limit), "board": board()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
