"""Real block devices: a card in a reader, a USB stick, a loop device.

`--device /dev/sdX` (any path with a '/' that is not a preset file) names one.
The lab's block driver (ubd) opens the device node itself, with O_DIRECT (lab
patch 0005), so every read and write reaches the device, not the host's page
cache.

Safety first, at the edge (before the run's banner, before anything is
written), one line per refusal:
  - never overridable: no medium; holds the host's root or boot filesystem; it
    or a partition of it is mounted, swap, or held by device-mapper/md/LVM
    (sysfs holders/); read-only; a logical block size other than 512 bytes
    (ubd's O_DIRECT requests are 512-byte aligned);
  - data is refused unless `--destroy-data-on PATH` names the same device node:
    a filesystem or partition-table signature (wipefs), or any non-zero byte (a
    raw backup, plain dm-crypt, a zeroed first sector hide from wipefs). Only a
    device read whole and found all zeroes is blank without it, and the plan says
    so; one larger than BLANK_READ is not read whole: it needs the option.
A cell re-checks when it takes the device (`claimed`): the node must still be
the same device, and it is opened O_EXCL (the kernel refuses that while it is
mounted or held) and flock'ed (cells of one device run one at a time; udev
does not probe a device locked so).

Identity and label: the device's identity (model, vendor, serial, size, block
sizes, rotational, removable, transport) comes from sysfs. Its label (the
cell keys' device) is model and serial when the device has a serial, so the
run id follows the device, not the node (/dev/sdb today, /dev/sdc tomorrow);
without a serial (loop devices, some readers) it is the node's name. A run's
request stores the label as `real:LABEL`, found again by scanning sysfs. A
USB card reader reports its own serial, not the card's: two cards of one size
in one reader share a label (give --out for a new run).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import FlashbedError
from ..sizes import size_text
from ..stopping import Stopping
from .presets import Device

REF = "real:"  # a request's reference to a real device by label
SECTOR = 512
BOOT_MOUNTS = ("/", "/boot", "/boot/efi", "/efi")
# libblkid's partition-table names (wipefs's "type")
BLANK_READ = 256 << 20  # the most read to prove a device blank (a slow card reads it in seconds)
BLANK_CHUNK = 4 << 20
PARTITION_TABLES = ("dos", "gpt", "PMBR", "atari", "bsd", "mac", "sgi", "solaris", "sun", "unixware", "minix")


@dataclass(frozen=True)
class Host:
    """Where the host's facts are read (tests point it at a fake tree)."""

    sysfs: Path = Path("/sys")
    proc: Path = Path("/proc")
    dev: Path = Path("/dev")


HOST = Host()


def names_device(spec: str) -> bool:
    """A block device path (a '/' and not a preset file) or a request's `real:LABEL`."""
    name = spec.partition("@")[0]
    return name.startswith(REF) or ("/" in name and not name.endswith(".toml"))


# --- the node and its sysfs ----------------------------------------------------------

def node_devno(path: str) -> int:
    """The block device number of `path`; one line if it is missing or not a block device."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FlashbedError(f"{path}: no such device: give a block device node such as /dev/sdb or "
                            f"/dev/mmcblk0 (`lsblk` lists them)") from None
    except OSError as e:
        raise FlashbedError(f"{path}: cannot look at it: {e.strerror}") from None
    if not stat.S_ISBLK(st.st_mode):
        raise FlashbedError(f"{path} is not a block device: give a block device node such as /dev/sdb or "
                            f"/dev/mmcblk0 (`lsblk` lists them), or a preset name (`flashbed devices`)")
    return st.st_rdev


def sys_dir(devno: int, host: Host = HOST) -> Path:
    return (host.sysfs / "dev" / "block" / f"{os.major(devno)}:{os.minor(devno)}").resolve()


def _read(p: Path, default: str = "") -> str:
    try:
        return p.read_text(errors="replace").strip()
    except OSError:
        return default


def _int(p: Path, default: int = 0) -> int:
    try:
        return int(_read(p))
    except ValueError:
        return default


def _devno(p: Path) -> int | None:
    """A sysfs `dev` file ("8:16") as a device number."""
    m = re.fullmatch(r"(\d+):(\d+)", _read(p / "dev"))
    return os.makedev(int(m.group(1)), int(m.group(2))) if m else None


def whole_disk(sd: Path) -> Path:
    """A partition's disk (its parent directory in sysfs); a disk is its own."""
    return sd.parent if (sd / "partition").exists() else sd


def partitions(sd: Path) -> list[Path]:
    if (sd / "partition").exists():
        return []
    return sorted(p for p in sd.iterdir() if (p / "partition").exists())


# --- identity --------------------------------------------------------------------------

def transport(disk: Path) -> str:
    path = str(disk)
    for key, name in (("/usb", "usb"), ("/mmc_host/", "mmc"), ("/nvme", "nvme"), ("/virtio", "virtio"),
                      ("/ata", "ata"), ("/virtual/", "virtual")):
        if key in path:
            return name
    return "unknown"


def _usb_serial(disk: Path) -> str:
    """A USB device's serial: the first parent of the disk's device with idVendor and serial."""
    d = (disk / "device").resolve() if (disk / "device").exists() else None
    while d is not None and d != d.parent and d.name != "devices":
        if (d / "idVendor").exists() and (d / "serial").exists():
            return _read(d / "serial")
        d = d.parent
    return ""


def identity(sd: Path) -> dict[str, Any]:
    """What sysfs says the device is (a partition: its disk's facts and its number)."""
    disk = whole_disk(sd)
    dev = disk / "device"
    q = disk / "queue"
    tran = transport(disk)
    ident: dict[str, Any] = {
        "name": sd.name,
        "transport": tran,
        "vendor": _read(dev / "vendor"),
        "model": _read(dev / "model") or _read(dev / "name"),  # SCSI/NVMe model; an SD/MMC card's product name
        "serial": _read(disk / "serial") or _read(dev / "serial") or (_usb_serial(disk) if tran == "usb" else ""),
        "size_bytes": _int(sd / "size") * SECTOR,
        "logical_block_size": _int(q / "logical_block_size", SECTOR),
        "physical_block_size": _int(q / "physical_block_size", SECTOR),
        "rotational": _read(q / "rotational") == "1",
        "removable": _read(disk / "removable") == "1",
        "read_only": _read(sd / "ro") == "1",
        "discard_max_bytes": _int(q / "discard_max_bytes"),
        "write_zeroes_max_bytes": _int(q / "write_zeroes_max_bytes"),
    }
    if sd != disk:
        ident["disk"] = disk.name
        ident["partition"] = _int(sd / "partition")
    if (dev / "cid").exists():  # an SD/MMC card read natively: its card registers
        ident.update({f"mmc_{k}": _read(dev / k) for k in ("type", "manfid", "oemid", "date", "cid")})
    if (disk / "loop").is_dir():
        ident.update({"loop_backing_file": _read(disk / "loop" / "backing_file"),
                      "loop_direct_io": _read(disk / "loop" / "dio") == "1"})
    return {k: v for k, v in ident.items() if v not in ("", None)}


def label(ident: dict[str, Any]) -> str:
    """Stable and filesystem-safe: model and serial when there is a serial, else the node's name."""
    if ident.get("serial"):
        base = f"{ident.get('model') or ident.get('vendor') or 'disk'}-{ident['serial']}"
        if "partition" in ident:
            base += f"-part{ident['partition']}"
    else:
        base = ident["name"]
    return re.sub(r"[^A-Za-z0-9.-]+", "_", base).strip("_.") or ident["name"]


def describe(ident: dict[str, Any], node: str) -> str:
    what = " ".join(x for x in (ident.get("vendor"), ident.get("model")) if x)
    if "loop_backing_file" in ident:  # every figure of it is the host's storage, and says so
        what = f"loop device on {ident['loop_backing_file']}, the host's storage (not flash) limits its figures"
    bits = [what or "block device", f"serial {ident['serial']}" if ident.get("serial") else "no serial",
            f"{ident['size_bytes'] / 1e9:.3g} GB", ident["transport"]]
    return f"real device {node}: " + ", ".join(bits)


# --- what holds the device -------------------------------------------------------------

def _unescape(s: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def mounts(host: Host = HOST) -> list[tuple[int | None, str, str]]:
    """(device number, mount point, source) of every mount (mountinfo): btrfs shows an
    anonymous number, so the source's device number is given too when it is a node."""
    out = []
    for line in _read(host.proc / "self" / "mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if len(f) < 5 or len(r) < 2:
            continue
        maj, _, mnr = f[2].partition(":")
        source = _unescape(r[1])
        num = os.makedev(int(maj), int(mnr)) if maj != "0" else None
        out.append((num, _unescape(f[4]), source))
        if source.startswith("/"):
            with contextlib.suppress(OSError):
                st = os.stat(source)
                if stat.S_ISBLK(st.st_mode) and st.st_rdev != num:
                    out.append((st.st_rdev, _unescape(f[4]), source))
    return out


def swaps(host: Host = HOST) -> list[int]:
    out = []
    for line in _read(host.proc / "swaps").splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[1] == "partition":
            with contextlib.suppress(OSError):
                out.append(os.stat(_unescape(parts[0])).st_rdev)
    return out


def holders(sd: Path) -> list[str]:
    """Who holds the device (sysfs holders/): 'dm-0 (device-mapper vg-root)', 'md127 (md RAID)'."""
    out = []
    hd = sd / "holders"
    for h in sorted(hd.iterdir()) if hd.is_dir() else []:
        real = h.resolve()
        if (real / "dm" / "name").exists():
            out.append(f"{h.name} (device-mapper/LVM {_read(real / 'dm' / 'name')})")
        elif (real / "md").is_dir():
            out.append(f"{h.name} (md RAID)")
        else:
            out.append(h.name)
    return out


def _below(sd: Path) -> set[int]:
    """The device numbers under a device: itself, what it is built on (slaves/), their disks."""
    seen: set[int] = set()
    todo = [sd]
    while todo:
        d = todo.pop()
        num = _devno(d)
        if num is None or num in seen:
            continue
        seen.add(num)
        todo.append(whole_disk(d))
        sl = d / "slaves"
        todo += [s.resolve() for s in sl.iterdir()] if sl.is_dir() else []
    return seen


@dataclass(frozen=True)
class Facts:
    """What the host says about one block device node, gathered once."""

    node: str
    size: int
    read_only: bool
    logical_block: int
    # the device and its partitions, as (name, device number)
    parts: tuple[tuple[str, int], ...]
    mounted: tuple[tuple[str, str], ...] = ()  # (name, mount point)
    swap: tuple[str, ...] = ()
    held: tuple[tuple[str, str], ...] = ()  # (name, holder)
    host_roles: tuple[tuple[str, str], ...] = ()  # (mount point "/" or "/boot", name holding it)


def gather(node: str, devno: int, sd: Path, ident: dict[str, Any], host: Host = HOST) -> Facts:
    parts = [(sd.name, devno)] + [(p.name, n) for p in partitions(sd) if (n := _devno(p)) is not None]
    by_num = {n: name for name, n in parts}
    mnt = mounts(host)
    roles = []
    for num, point, _src in mnt:
        if point in BOOT_MOUNTS and num is not None:
            sd_num = sys_dir(num, host)
            under = _below(sd_num) if sd_num.exists() else {num}
            roles += [(point, by_num[n]) for n in under if n in by_num]
    return Facts(
        node=node, size=ident["size_bytes"], read_only=ident.get("read_only", False),
        logical_block=ident["logical_block_size"], parts=tuple(parts),
        mounted=tuple(dict.fromkeys((by_num[n], p) for n, p, _s in mnt if n in by_num)),
        swap=tuple(by_num[n] for n in swaps(host) if n in by_num),
        held=tuple((name, h) for name, _n in parts for h in holders(sd if name == sd.name else sd / name)),
        host_roles=tuple(dict.fromkeys(roles)))


def refusal(f: Facts) -> str | None:
    """Why flashbed must never write to this device (no flag overrides these); None: it may."""
    def which(name: str) -> str:
        return f.node if name == f.parts[0][0] else f"/dev/{name} (a partition of {f.node})"

    if f.host_roles:
        point, name = f.host_roles[0]
        what = "root filesystem (/)" if point == "/" else f"boot filesystem ({point})"
        return (f"{which(name)} holds the host's {what}: flashbed never writes to it; give the card's or "
                f"stick's own device (`lsblk` lists them)")
    if f.mounted:
        name, point = f.mounted[0]
        return f"{which(name)} is mounted at {point}: unmount it first (umount {point})"
    if f.swap:
        return f"{which(f.swap[0])} is in use as swap: swapoff /dev/{f.swap[0]} first"
    if f.held:
        name, h = f.held[0]
        return (f"{which(name)} is in use by {h}: remove that first (dmsetup remove, vgchange -an, "
                f"mdadm --stop), then try again")
    if f.size == 0:
        return f"{f.node} has no medium (size 0): insert the card"
    if f.read_only:
        return (f"{f.node} is read-only (a write-protect switch on the card or its adapter?): flashbed writes "
                f"to the device; make it writable (`blockdev --setrw {f.node}`) or use another")
    if f.logical_block != SECTOR:
        return (f"{f.node} has {f.logical_block}-byte logical blocks; the lab's block driver reads and writes "
                f"it directly in 512-byte-aligned units: use a device with 512-byte logical blocks")
    return None


def signatures(node: str) -> list[dict[str, str]]:
    """Filesystem, RAID and partition-table signatures on the device itself (wipefs, which only reads)."""
    try:
        r = subprocess.run(["wipefs", "--no-act", "--json", node], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise FlashbedError("wipefs (util-linux) is missing: apt-get install util-linux") from None
    if r.returncode != 0:
        raise FlashbedError(f"{node}: wipefs could not read it: {(r.stderr or r.stdout).strip()[:200]}")
    if not r.stdout.strip():
        return []
    return list(json.loads(r.stdout).get("signatures") or [])


def signature_refusal(node: str, sigs: list[dict[str, str]], parts: int) -> str | None:
    """The line refusing a device that carries data, naming what is on it."""
    if not sigs:
        return None
    found = []
    for s in sigs:
        kind = s.get("type") or "unknown"
        if kind in PARTITION_TABLES:
            found.append(f"{kind} partition table" + (f", {parts} partition(s)" if parts else ""))
        else:
            found.append(kind + (f" labelled '{s['label']}'" if s.get("label") else ""))
    return (f"{node} carries data ({'; '.join(dict.fromkeys(found))}), which the run would destroy: if that "
            f"is what you want, add --destroy-data-on {node}")


@dataclass(frozen=True)
class Zeroes:
    """What a read of the device from its start found: the first non-zero byte's offset
    (None: none in the bytes read), and how many bytes were read of its size."""

    first_data: int | None
    read: int
    size: int

    @property
    def blank(self) -> bool:
        return self.first_data is None and self.read >= self.size


def first_data(node: str, size: int, limit: int | None = None) -> Zeroes:
    """The device read from its start up to `limit` bytes (BLANK_READ), stopping at the first
    non-zero byte."""
    limit = BLANK_READ if limit is None else limit
    zero = bytes(BLANK_CHUNK)
    done = 0
    try:
        with open(node, "rb", buffering=0) as f:
            while done < min(size, limit):
                chunk = f.read(min(BLANK_CHUNK, min(size, limit) - done))
                if not chunk:
                    break
                if chunk != zero[:len(chunk)]:
                    return Zeroes(done + len(chunk) - len(chunk.lstrip(b"\0")), done, size)
                done += len(chunk)
    except OSError as e:
        raise FlashbedError(f"{node}: cannot read it to see whether it holds data: {e.strerror}") from None
    return Zeroes(None, done, size)


def data_refusal(node: str, z: Zeroes) -> str | None:
    """The line refusing a device without a signature that is not shown blank (None: it is)."""
    if z.blank:
        return None
    if z.first_data is not None:
        found = f"no filesystem or partition-table signature, but non-zero data at offset {z.first_data}"
    else:
        found = (f"no signature, and its first {size_text(z.read)} read zero, but it holds {size_text(z.size)}, "
                 f"more than flashbed reads to prove a device blank")
    return (f"{node} may carry data ({found}), which the run would destroy: if that is what you want, add "
            f"--destroy-data-on {node}")


def blank_note(node: str, z: Zeroes) -> str:
    """The plan's line for a device written without --destroy-data-on: why it may be."""
    return f"{node} judged blank: no signature, all {size_text(z.size)} read zero (nothing on it to destroy)"


# --- loading ---------------------------------------------------------------------------

def find(ref: str, host: Host = HOST) -> str:
    """The node of the device whose label is `ref` (`real:LABEL`) now."""
    want = ref.removeprefix(REF)
    found = []
    for sd in sorted((host.sysfs / "class" / "block").iterdir()):
        sd = sd.resolve()
        with contextlib.suppress(OSError, KeyError):
            if label(identity(sd)) == want:
                found.append(str(host.dev / sd.name))
    if len(found) != 1:
        why = "no block device" if not found else f"{len(found)} block devices ({', '.join(found)})"
        raise FlashbedError(f"device {ref}: {why} attached now has that identity: attach it, or run with "
                            f"--device /dev/... for its node")
    return found[0]


def canonical(spec: str) -> str:
    """A request's reference to the device (`real:LABEL`), so its run id follows the device."""
    node = node_of(spec)  # one line for '@SIZE', a missing label, ...
    return spec if spec.startswith(REF) else REF + label(identity(sys_dir(node_devno(node))))


def node_of(spec: str, host: Host = HOST) -> str:
    """The node path `spec` names: itself, or the node of the device labelled so (`real:LABEL`)."""
    path, at, size = spec.partition("@")
    if at:
        raise FlashbedError(f"{spec}: a real device's size is its own; drop '@{size}'")
    return find(path, host) if path.startswith(REF) else path


def load(spec: str, destroy: tuple[str, ...] = (), host: Host = HOST) -> Device:
    """The real device `spec` names (a node, or `real:LABEL`), checked: one line per refusal."""
    node = node_of(spec, host)
    devno = node_devno(node)
    sd = sys_dir(devno, host)
    ident = identity(sd)
    facts = gather(node, devno, sd, ident, host)
    why = refusal(facts)
    if why is None and not os.access(node, os.R_OK | os.W_OK):
        # an ordinary user (issue 27): the lab opens the node itself, for reading and writing
        why = (f"{node}: uid {os.geteuid()} cannot read and write it: a real device needs its node's access, "
               f"which root has: run flashbed as root (or as a member of its group: ls -l {node})")
    if why is None:
        why = _exclusive(node)
    blank = None
    if why is None and not any(same_node(node, d) for d in destroy):
        why = signature_refusal(node, signatures(node), len(facts.parts) - 1)
        if why is None:
            blank = first_data(node, ident["size_bytes"])
            why = data_refusal(node, blank)
    if why:
        raise FlashbedError(why)
    ident["node"] = node
    name = label(ident)
    info = {"name": name, "kind": "real", "node": node, "capacity_bytes": ident["size_bytes"],
            "description": describe(ident, node), "identity": ident,
            "discard": ("passed on as write-zeroes (unmap allowed)" if ident.get("write_zeroes_max_bytes")
                        else "not supported by the device: off"),
            "power_cut": "none: a real device has no power switch here; killing the lab is a kernel crash"}
    if blank is not None:
        info["judged_blank"] = blank_note(node, blank)
    return Device(name=name, path=Path(node), kind="block", capacity=ident["size_bytes"],
                  page_size=max(SECTOR, ident["physical_block_size"]), erase_block=0,
                  preset_capacity=ident["size_bytes"], info=info)


def same_node(a: str, b: str) -> bool:
    """Two paths of one device (/dev/disk/by-id/... and /dev/sdb; two nodes of one block device,
    e.g. one made with mknod: the same device number)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return stat.S_ISBLK(sa.st_mode) and stat.S_ISBLK(sb.st_mode) and sa.st_rdev == sb.st_rdev


def _exclusive(node: str) -> str | None:
    """The kernel's own word: an exclusive open fails while anything mounts or holds the device."""
    try:
        os.close(os.open(node, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC))
    except OSError as e:
        if e.errno == errno.EBUSY:
            return (f"{node} is in use (mounted, swap, RAID or device-mapper, perhaps under another name, or "
                    f"another flashbed run): release it first")
        return f"{node}: cannot open it: {e.strerror}"
    return None


@contextlib.contextmanager
def claimed(device: Device, stopping: Callable[[], bool], poll: float = 0.2) -> Iterator[None]:
    """Hold the device for one cell: waits for other cells on it (flock), checks the node is
    still the planned device and writable, and keeps it open O_EXCL so nothing mounts it."""
    node = str(device.path)
    try:
        fd = os.open(node, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:  # unplugged, or the card pulled out, since the run was planned
        raise FlashbedError(f"{node}: cannot open it: {e.strerror}") from None
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if stopping():
                    raise Stopping("flashbed is stopping: no new lab") from None
                time.sleep(poll)
        ident = identity(sys_dir(node_devno(node)))
        if label(ident) != device.label:
            raise FlashbedError(f"{node} is now {label(ident)}, not the planned {device.label}: reattach it "
                                f"and run again")
        if ident.get("read_only"):
            raise FlashbedError(f"{node} has become read-only")
        try:
            excl = os.open(node, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
        except OSError:
            raise FlashbedError(_exclusive(node) or f"{node}: cannot open it exclusively") from None
        try:
            yield
        finally:
            os.close(excl)
    finally:
        os.close(fd)
