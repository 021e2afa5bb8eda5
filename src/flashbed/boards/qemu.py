"""An emulated board made of stock Debian parts, for the board path's own tests:

    python -m flashbed.boards.qemu --dir DIR [--recipe debian|busybox] ACTION
    (scripts/qemu-board.sh ACTION ...: the same)

ACTION is build, on, off, cycle (the power switch: `--power-cmd 'scripts/qemu-board.sh --dir DIR
{action}'`), start, stop, restart (the same, start and restart waiting until SSH answers),
status, url.

The board: QEMU's arm64 `virt` machine under TCG (qemu-system-aarch64, Debian's qemu-system-arm),
Debian's own arm64 kernel (linux-image-arm64) and a userland made by mmdebstrap, its root on a
virtio disk, its data device an SD card behind an SDHCI controller (`sdhci-pci` + `sd-card`: the
board sees /dev/mmcblk0 with a CID), sshd with a key made for it, user-mode networking with
only its SSH port forwarded, on 127.0.0.1.

A power cut is a real one: `off` kills the QEMU process with SIGKILL, so the board's kernel,
its page cache and the controller's state are gone at once. The card's drive is raw with
cache=writeback: QEMU keeps no copy of its own (a raw drive has no cache in QEMU; each block the
card model writes is a pwrite into the card's file before the card acknowledges it), and the SD
card model has no write cache, so what the card acknowledged is in the card's file (this
machine's page cache, which the QEMU process's death does not touch) and nothing else is. Not
cache=none: its O_DIRECT made each of the card model's 512-byte block writes a synchronous
sub-block write on this machine's disk, about 1 MB/s, a 1 GB probe's fill taking a quarter of
an hour; the cut keeps the same data either way. The root disk is a qcow2
overlay on the built image (cache=writeback: a disk with a volatile cache, which its ext4
flushes as it would on a real disk): the board's /var/tmp survives a cut as far as it was
flushed, as on a board's eMMC.

A new Debian board's first power-on resumes a saved machine state instead of booting: its RAM and
devices (QEMU's migration stream) and its root overlay, saved once per configuration (QEMU's version,
the machine's command line less the board's own paths and port, the card's size, the image's files)
in the image's cache (states/KEY) when a new board of it first answered SSH; about 4 s of CPU, where a
cold boot takes 50. Only then: the state's kernel has the new board's root mounted and cached as it
was, so any later power-on, after a cut above all, is a real cold boot on what the card and root hold.
The state's kernel holds nothing of the card: QEMU 7.2's sdhci-pci does not migrate its PCI
configuration, so the board lets go of its SD controller before the save and finds it again after
each resume (_SD_OUT). A state that does not resume is removed, said in one line, and the board boots
cold.

The image is built once per recipe into flashbed's cache (board/NAME-SUITE-ARCH-KEY): mmdebstrap
extracts the packages (signature-checked by apt, the mirror taken from this machine's apt sources),
genext2fs makes the root file system, and a first boot under a busybox initramfs unpacks and
configures the packages on the board's own CPU (a foreign architecture: no binfmt here). That
first boot is long under TCG (tens of minutes); every later boot is the built image's. Packages a
recipe adds later (Recipe.added) go onto its built image in one short boot (build_added), not by that
first boot again.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Iterator

from ..errors import FlashbedError
from ..paths import build_lock, cache_dir

BUILD_VERSION = 1  # bump when the build below changes what an image holds
QEMU = "qemu-system-aarch64"
# TCG's translation cache: QEMU's default (1 GiB) would be most of the board's memory here
MACHINE = ["-M", "virt", "-cpu", "cortex-a57", "-accel", "tcg,tb-size=128"]
CONSOLE = "ttyAMA0"
MEM_MB = 512
CPUS = 2
CARD_BYTES = 512 << 20  # QEMU's SD card model takes only a power-of-two size
QMP_SOCKET = "qmp.sock"  # in the board's directory
SSH_WAIT = 600.0  # seconds a TCG boot may take to answer SSH
# a board resumed from a saved machine state answered SSH 2 s after QEMU started here: one that has
# not after this is counted broken, and the board boots cold instead
RESUME_WAIT = 120.0
SAVE_WAIT = 300.0  # seconds the machine state's migration into its file may take (2 s here)
# saved machine states kept per image (about 250 MB each), the most recently used: a QEMU upgrade or
# another card size makes a new one, and the old ones would stay for good
KEEP_STATES = 3
STAGE2_WAIT = 4 * 3600.0  # the first boot that configures every package
ADD_WAIT = 1800.0  # the boot that installs a recipe's added packages onto its built image
# modules the stage-2 initramfs and the busybox board load, in order (their dependencies first);
# ext4 asks the crypto API for crc32c at mount, which no insmod'ed module provides unless
# crc32c_generic is in (bookworm's 6.1.0-50 arm64: "EXT4-fs (vda): Cannot load crc32c driver")
INITRAMFS_MODULES = ("virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci", "failover", "net_failover",
                     "virtio_net", "virtio_blk", "sdhci", "cqhci", "sdhci-pci", "mmc_block", "jbd2", "mbcache",
                     "crc16", "crc32c_generic", "ext4")
# what a tool missing here is packaged in (Debian)
HOST_TOOLS = {"mmdebstrap": "mmdebstrap", "genext2fs": "genext2fs", "tune2fs": "e2fsprogs", "debugfs": "e2fsprogs",
              "ssh-keygen": "openssh-client", "ssh": "openssh-client", QEMU: "qemu-system-arm",
              "qemu-img": "qemu-utils", "cpio": "cpio"}


@dataclass(frozen=True)
class Recipe:
    """What a board's image is made of."""

    name: str
    suite: str
    arch: str
    packages: tuple[str, ...]
    # installed onto the built image of `packages` by one short boot (build_added), not by building
    # the whole image again: its first boot configures every package on the board's CPU, 43 minutes here
    added: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        fields = asdict(self)
        if not self.added:  # an image of `packages` alone keeps the key it was built under
            del fields["added"]
        text = json.dumps({**fields, "build": BUILD_VERSION}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def base(self) -> "Recipe":
        """The recipe whose image `added` goes onto."""
        return replace(self, added=())

    @property
    def full(self) -> bool:
        """A Debian userland on its own root disk (else: busybox in an initramfs, nothing kept)."""
        return self.name != "busybox"


RECIPES = {
    # the board flashbed supports: sshd, python3, fio, the mkfs tools, flashbench; sqlite3 for the sqlite study
    "debian": Recipe("debian", "bookworm", "arm64", (
        "systemd-sysv", "udev", "kmod", "openssh-server", "python3", "fio", "e2fsprogs", "f2fs-tools", "xfsprogs",
        "btrfs-progs", "util-linux", "dosfstools", "flashbench", "procps", "iproute2", "linux-image-arm64",
        "initramfs-tools", "busybox-static"), added=("sqlite3",)),
    # a poor userland: busybox's tools and dropbear, no python3, no fio, no mkfs.f2fs
    "busybox": Recipe("busybox", "bookworm", "arm64", ("busybox-static", "dropbear-bin", "linux-image-arm64")),
}


BUILD_TOOLS = ("mmdebstrap", "genext2fs", "tune2fs", "debugfs", "ssh-keygen", QEMU, "cpio", "qemu-img")


def _have(t: str) -> bool:
    return shutil.which(t) is not None or Path(f"/usr/sbin/{t}").exists()


def missing_tools() -> list[str]:
    """The host tools a board's build and boot need that this machine lacks, each with its package."""
    return [f"{t} ({HOST_TOOLS.get(t, t)})" for t in BUILD_TOOLS if not _have(t)]


def _need(*tools: str) -> None:
    for t in tools:
        if not _have(t):
            raise FlashbedError(f"the emulated board needs {t}: apt-get install {HOST_TOOLS.get(t, t)}")


def _tool(t: str) -> str:
    return shutil.which(t) or f"/usr/sbin/{t}"


@dataclass(frozen=True)
class Image:
    """A built board image in the cache."""

    dir: Path
    recipe: Recipe

    @property
    def ready(self) -> bool:
        return (self.dir / "image.json").is_file()

    @property
    def kernel(self) -> Path:
        return self.dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dir / "initrd"

    @property
    def root(self) -> Path:
        return self.dir / "root.img"

    @property
    def key_file(self) -> Path:
        return self.dir / "id_ed25519"

    @property
    def host_key(self) -> Path:
        return self.dir / "host_key.pub"


def image_for(recipe: Recipe) -> Image:
    return Image(cache_dir() / "board" / f"{recipe.name}-{recipe.suite}-{recipe.arch}-{recipe.key}", recipe)


# --- the build --------------------------------------------------------------------------------

class _Log:
    def __init__(self, path: Path):
        self.f = open(path, "a")

    def run(self, *cmd: str, timeout: float = 3600) -> None:
        self.f.write("$ " + " ".join(cmd) + "\n")
        self.f.flush()
        r = subprocess.run(cmd, stdout=self.f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout)
        if r.returncode != 0:
            raise FlashbedError(f"building the emulated board: {Path(cmd[0]).name} failed (exit {r.returncode}; "
                                f"log: {self.f.name})")


@contextmanager
def _building(img: Image, facts: dict[str, Any]) -> Iterator[tuple[Path, _Log] | None]:
    """An image's build under its lock: None where another process built it meanwhile; else an
    empty work directory and the build's log, and when the build ends without an error the work
    directory removed and image.json (what makes the image ready) written with `facts`, which
    the build fills, and its time."""
    with build_lock(img.dir, f"the emulated board '{img.recipe.name}'"):
        if img.ready:
            yield None
            return
        started = time.monotonic()
        work = img.dir / "work"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        yield work, _Log(img.dir / "build.log")
        shutil.rmtree(work, ignore_errors=True)
        (img.dir / "image.json").write_text(json.dumps(
            {"recipe": asdict(img.recipe), "key": img.recipe.key, **facts,
             "build_seconds": round(time.monotonic() - started, 1),
             "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1))


def build(recipe: Recipe, say=print) -> Image:
    """The recipe's image, built into the cache if it is not there yet."""
    img = image_for(recipe)
    if img.ready:
        return img
    if recipe.added:
        return build_added(recipe, build(recipe.base, say), say)
    _need("mmdebstrap", "genext2fs", "tune2fs", "debugfs", "ssh-keygen", QEMU, "cpio")
    from ..lab.debsource import debian_mirror, host_sources
    mirror = debian_mirror(host_sources())
    facts: dict[str, Any] = {}
    with _building(img, facts) as fresh:
        if fresh is None:
            return img
        work, log = fresh
        say(f"qemu-board: building the '{recipe.name}' board ({recipe.suite} {recipe.arch}; log: {log.f.name})")
        tar = work / "root.tar"
        include = ([f"--include=?essential", "--include=?priority(required)"] if recipe.full else []) + \
            [f"--include={','.join(recipe.packages)}"]
        log.run(_tool("mmdebstrap"), "--variant=extract", f"--architectures={recipe.arch}", "--skip=check/qemu",
                "--skip=cleanup/apt/cache", "--setup-hook=/usr/share/mmdebstrap/hooks/merged-usr/setup00.sh",
                *include, "--format=tar", recipe.suite, str(tar), mirror)
        # the busybox board makes its host key at each boot (dropbear -R): none to pin
        for name in ("id_ed25519", "host_key") if recipe.full else ("id_ed25519",):
            (work / name).unlink(missing_ok=True)
            (work / f"{name}.pub").unlink(missing_ok=True)
            log.run(_tool("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", f"flashbed-board-{recipe.name}",
                    "-f", str(work / name))
        kernel, release = _kernel_of(tar)
        (work / "vmlinuz").write_bytes(kernel)
        if recipe.full:
            _build_full(recipe, work, tar, log)
        else:
            _write_initramfs(work / "initrd", tar, release, _BUSYBOX_INIT, extra=_dropbear_files(tar, work))
        for name in ("vmlinuz", "initrd", "root.img", "id_ed25519", "id_ed25519.pub", "host_key.pub"):
            if (work / name).exists():
                os.replace(work / name, img.dir / name)
        facts["release"] = release
    return img


def _kernel_of(tar: Path) -> tuple[bytes, str]:
    with tarfile.open(tar) as t:
        for m in t.getmembers():
            name = m.name.lstrip("./")
            if name.startswith("boot/vmlinuz-") and m.isfile():
                f = t.extractfile(m)
                assert f is not None
                data = f.read()
                if data[:2] == b"\x1f\x8b":  # arm64's Image.gz: QEMU boots the Image
                    data = gzip.decompress(data)
                return data, name.removeprefix("boot/vmlinuz-")
    raise FlashbedError(f"building the emulated board: no kernel (boot/vmlinuz-*) in {tar.name}")


def _member(t: tarfile.TarFile, path: str) -> bytes | None:
    for prefix in ("./", "", "./usr/", "usr/"):
        try:
            f = t.extractfile(prefix + path)
        except KeyError:
            continue
        if f is not None:
            return f.read()
    return None


def _modules(t: tarfile.TarFile, release: str) -> list[tuple[str, bytes]]:
    """INITRAMFS_MODULES that are modules in this kernel (built-in ones are not), numbered in order."""
    names = {}
    for m in t.getmembers():
        if f"/modules/{release}/kernel/" in m.name and m.isfile() and ".ko" in m.name:
            base = Path(m.name).name.split(".ko")[0]
            names[base.replace("-", "_")] = m
    out = []
    for i, mod in enumerate(INITRAMFS_MODULES):
        m = names.get(mod.replace("-", "_"))
        if m is None:
            continue
        f = t.extractfile(m)
        assert f is not None
        data = f.read()
        if m.name.endswith(".xz"):
            import lzma
            data = lzma.decompress(data)
        elif m.name.endswith(".zst"):
            continue  # not in bookworm's kernels
        out.append((f"modules/{i:02d}-{mod}.ko", data))
    return out


_COMMON_INIT = """#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in /modules/*.ko; do insmod "$m" 2>/dev/null; done
"""

# the first boot of a full image: the packages unpacked and configured on the board's own CPU
_STAGE2_INIT = _COMMON_INIT + """mkdir -p /newroot
mount -t ext4 /dev/vda /newroot || { echo "FLASHBED-STAGE2 FAILED: no root"; poweroff -f; }
for d in proc sys dev; do mount --bind /$d /newroot/$d; done
if chroot /newroot /bin/sh /flashbed-stage2; then echo "FLASHBED-STAGE2 OK"; else echo "FLASHBED-STAGE2 FAILED"; fi
for d in proc sys dev; do umount /newroot/$d; done
sync; umount /newroot; sync
poweroff -f
"""

_STAGE2 = """#!/bin/sh
set -e
export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true LC_ALL=C PATH=/usr/sbin:/usr/bin:/sbin:/bin
printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d
dpkg --force-depends --force-confdef --force-confold --unpack /var/cache/apt/archives/*.deb
dpkg --force-confdef --force-confold --configure -a
rm -f /usr/sbin/policy-rc.d /var/cache/apt/archives/*.deb
systemctl enable systemd-networkd ssh
echo 'root:flashbed' | chpasswd
rm -f /flashbed-stage2
ls /boot/initrd.img-*
"""

# the busybox board: the whole userland in the initramfs; nothing survives a cut
_BUSYBOX_INIT = _COMMON_INIT + """mkdir -p /dev/pts; mount -t devpts devpts /dev/pts
hostname flashbed-busybox
ip link set lo up; ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0; ip route add default via 10.0.2.2
mkdir -p /var/tmp /tmp; chmod 1777 /var/tmp /tmp
echo "FLASHBED-BOARD busybox up"
dropbear -R -E -F -p 22 &
while true; do sleep 3600; done
"""


def _merged(name: str) -> str:
    """A path of the image's tar as the initramfs has it, whose /lib is /usr/lib: the tar is merged-/usr
    (bookworm's mmdebstrap, 1.3) or not (trixie's, 1.5.7: lib/ a directory of its own, with libc.so.6
    and the dynamic loader in it, so the board's dropbear had no loader: "dropbear: not found")."""
    return "usr/" + name if name.startswith("lib/") else name


def _dropbear_files(tar: Path, work: Path) -> list[tuple[str, bytes]]:
    """dropbear, its libraries, root's authorized key and a host key for the busybox board."""
    out: list[tuple[str, bytes]] = []
    with tarfile.open(tar) as t:
        for m in t.getmembers():
            n = _merged(m.name.lstrip("./"))
            if m.isfile() and (n in ("usr/sbin/dropbear", "usr/bin/dropbearkey", "usr/bin/dropbearconvert")
                               or (n.startswith("usr/lib/aarch64-linux-gnu/") and ".so" in n)
                               or n.startswith("usr/lib/ld-linux")):
                f = t.extractfile(m)
                assert f is not None
                out.append((n, f.read()))
        # symlinks of the libraries (libc.so.6 -> ...) as copies
        for m in t.getmembers():
            n = _merged(m.name.lstrip("./"))
            if m.issym() and n.startswith(("usr/lib/aarch64-linux-gnu/", "usr/lib/ld-linux")):
                target = _merged((Path(n).parent / m.linkname).as_posix() if not m.linkname.startswith("/")
                                 else m.linkname.lstrip("/"))
                data = dict(out).get(target)
                if data is not None:
                    out.append((n, data))
    out.append(("root/.ssh/authorized_keys", (work / "id_ed25519.pub").read_bytes()))
    # dropbear looks root up (its home, its shell): without these it lets no one in
    out += [("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"), ("etc/group", b"root:x:0:\n"),
            ("etc/shadow", b"root:*:19000:0:99999:7:::\n"), ("etc/shells", b"/bin/sh\n")]
    return out


def _write_initramfs(path: Path, tar: Path, release: str, init: str, extra: list[tuple[str, bytes]] = ()) -> None:
    """A gzip'ed newc cpio: busybox, the modules, `init` and `extra` files (made with cpio(1))."""
    with tarfile.open(tar) as t:
        busybox = _member(t, "bin/busybox")
        if busybox is None:
            raise FlashbedError("building the emulated board: no busybox in the image (package busybox-static)")
        mods = _modules(t, release)
    with tempfile.TemporaryDirectory(prefix="flashbed-initramfs-") as tmp:
        root = Path(tmp)
        for d in ("bin", "dev", "proc", "sys", "newroot", "modules", "tmp", "etc/dropbear", "root/.ssh", "run",
                  "var/log", "lib"):
            (root / d).mkdir(parents=True, exist_ok=True)
        files = [("bin/busybox", busybox), ("init", init.encode()), *mods, *extra]
        for name, data in files:
            p = root / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            p.chmod(0o755 if name in ("init", "bin/busybox") or name.startswith(("usr/sbin", "usr/bin"))
                    or ".so" in name or "ld-linux" in name else 0o644)
        if (root / "usr/lib").is_dir() and not (root / "lib/ld-linux-aarch64.so.1").exists():
            (root / "lib").rmdir()
            (root / "lib").symlink_to("usr/lib")
        (root / "root/.ssh").chmod(0o700)
        (root / "bin/sh").symlink_to("busybox")
        names = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
        cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=names, capture_output=True,
                              check=True).stdout
    path.write_bytes(gzip.compress(cpio, 6))


def _build_full(recipe: Recipe, work: Path, tar: Path, log: _Log) -> None:
    """A Debian userland: the root file system, configured by a first boot on the board's CPU."""
    key = (work / "id_ed25519.pub").read_bytes()
    host = (work / "host_key").read_bytes(), (work / "host_key.pub").read_bytes()
    files = {
        "etc/fstab": b"/dev/vda / ext4 rw,errors=remount-ro 0 1\n",
        "etc/hostname": b"flashbed-board\n",
        "etc/hosts": b"127.0.0.1 localhost\n127.0.1.1 flashbed-board\n",
        "etc/systemd/network/50-wired.network": b"[Match]\nName=e*\n\n[Network]\nDHCP=ipv4\n",
        "root/.ssh/authorized_keys": key,
        "etc/ssh/ssh_host_ed25519_key": host[0],
        "etc/ssh/ssh_host_ed25519_key.pub": host[1],
        "flashbed-stage2": _STAGE2.encode(),
    }
    with tarfile.open(tar, "a") as t:
        for d in ("root/.ssh", "etc/systemd/network"):
            info = tarfile.TarInfo("./" + d)
            info.type, info.mode = tarfile.DIRTYPE, 0o700 if d == "root/.ssh" else 0o755
            t.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            info.mode = 0o600 if name in ("etc/ssh/ssh_host_ed25519_key", "root/.ssh/authorized_keys") else 0o644
            t.addfile(info, io.BytesIO(data))
    root = work / "root.img"
    log.run(_tool("genext2fs"), "-B", "4096", "-b", str(786432), "-N", "131072", "-m", "1", "-z", "-a", str(tar),
            str(root))
    log.run(_tool("tune2fs"), "-O", "has_journal,extent,dir_index,uninit_bg", "-L", "board-root", str(root))
    # genext2fs (1.4.2 here) left /etc at 0644 from the files appended under it: no daemon that
    # drops root could open its configuration (systemd-networkd: "Permission denied", so no address
    # and no SSH); /etc's mode set as the tar's own is
    log.run(_tool("debugfs"), "-w", "-R", "sif /etc mode 040755", str(root))
    mode = subprocess.run([_tool("debugfs"), "-R", "stat /etc", str(root)], capture_output=True, text=True).stdout
    if "Mode:  0755" not in mode:
        raise FlashbedError(f"building the emulated board: its root's /etc is not mode 0755 ({log.f.name})")
    _, release = _kernel_of(tar)
    _write_initramfs(work / "stage2.initrd", tar, release, _STAGE2_INIT)
    _boot_once(work / "vmlinuz", work / "stage2.initrd", f"console={CONSOLE} panic=-1", root, log,
               "its first boot did not configure the packages")
    log.run(_tool("tune2fs"), "-c", "0", "-i", "0", str(root))
    initrd = subprocess.run([_tool("debugfs"), "-R", f"cat /boot/initrd.img-{release}", str(root)],
                            capture_output=True).stdout
    if not initrd:
        raise FlashbedError(f"building the emulated board: no /boot/initrd.img-{release} in its root")
    (work / "initrd").write_bytes(initrd)


def _boot_once(kernel: Path, initrd: Path, append: str, root: Path, log: _Log, failed: str,
               timeout: float = STAGE2_WAIT) -> None:
    """One boot of a root being built, to its end (it powers off); it must print FLASHBED-STAGE2 OK."""
    console = root.parent / "stage2.console"
    console.unlink(missing_ok=True)
    # -nic none: else QEMU adds a NIC of its own, whose boot ROM (efi-virtio.rom) this machine may lack
    log.run(QEMU, *MACHINE, "-smp", str(CPUS), "-m", "1024", "-display", "none", "-monitor", "none", "-no-reboot",
            "-nic", "none", "-kernel", str(kernel), "-initrd", str(initrd), "-append", append,
            "-drive", f"file={root},if=none,id=root,format=raw,cache=unsafe", "-device", "virtio-blk-pci,drive=root",
            "-serial", f"file:{console}", timeout=timeout)
    text = console.read_text(errors="replace")
    log.f.write(text)
    if "FLASHBED-STAGE2 OK" not in text:
        raise FlashbedError(f"building the emulated board: {failed} (log: {log.f.name})")


# the added packages' boot: the built image's own kernel and initramfs mount its root, and this runs
# as its first process (no systemd, no network), then powers the board off
_ADD_STAGE2 = """#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C
mount -t proc proc /proc 2>/dev/null; mount -t sysfs sys /sys 2>/dev/null
printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d
if dpkg --skip-same-version --force-confdef --force-confold -i /var/cache/flashbed-added/*.deb; then ok=OK; else ok=FAILED; fi
rm -rf /usr/sbin/policy-rc.d /var/cache/flashbed-added /flashbed-stage2
sync; mount -o remount,ro / 2>/dev/null; sync
echo "FLASHBED-STAGE2 $ok"
busybox poweroff -f
echo o > /proc/sysrq-trigger
"""


def build_added(recipe: Recipe, base: Image, say=print) -> Image:
    """`recipe.added` installed onto a copy of `base`'s root by one short boot: the packages (with
    their dependencies, which the base mostly has) fetched as the base's were (mmdebstrap: apt's
    signatures), put into the copy with debugfs, `dpkg -i` run on the board's own CPU by the base's
    own kernel and initramfs. The base's keys and kernel are the new image's."""
    _need("mmdebstrap", "debugfs", QEMU)
    from ..lab.debsource import debian_mirror, host_sources
    mirror = debian_mirror(host_sources())
    img = image_for(recipe)
    facts: dict[str, Any] = {"base": base.dir.name}
    with _building(img, facts) as fresh:
        if fresh is None:
            return img
        work, log = fresh
        (work / "debs").mkdir()
        say(f"qemu-board: adding {', '.join(recipe.added)} to the '{recipe.name}' board's built image "
            f"(log: {log.f.name})")
        tar = work / "added.tar"
        log.run(_tool("mmdebstrap"), "--variant=extract", f"--architectures={recipe.arch}", "--skip=check/qemu",
                "--skip=cleanup/apt/cache", f"--include={','.join(recipe.added)}", "--format=tar", recipe.suite,
                str(tar), mirror)
        debs = []
        with tarfile.open(tar) as t:
            for m in t.getmembers():
                name = m.name.lstrip("./")
                if m.isfile() and name.startswith("var/cache/apt/archives/") and name.endswith(".deb"):
                    f = t.extractfile(m)
                    assert f is not None
                    debs.append(work / "debs" / Path(name).name)
                    debs[-1].write_bytes(f.read())
        if not debs:
            raise FlashbedError(f"building the emulated board: mmdebstrap fetched no package for "
                                f"{', '.join(recipe.added)} (log: {log.f.name})")
        root = work / "root.img"
        log.run("cp", "--sparse=always", str(base.root), str(root))
        (work / "stage2").write_text(_ADD_STAGE2)
        # debugfs's write names a file of its current directory
        cmds = ["mkdir /var/cache/flashbed-added", "cd /var/cache/flashbed-added",
                *(f"write {d} {d.name}" for d in debs), "cd /", f"write {work / 'stage2'} flashbed-stage2",
                "sif /flashbed-stage2 mode 0100755"]
        (work / "debugfs.cmds").write_text("\n".join(cmds) + "\n")
        log.run(_tool("debugfs"), "-w", "-f", str(work / "debugfs.cmds"), str(root))
        # debugfs exits 0 whatever a command did; a boot without its script would start the base's
        # systemd instead, and never power off
        listed = subprocess.run([_tool("debugfs"), "-R", "ls -p /var/cache/flashbed-added", str(root)],
                                capture_output=True, text=True).stdout
        script = subprocess.run([_tool("debugfs"), "-R", "cat /flashbed-stage2", str(root)], capture_output=True,
                                text=True).stdout
        if script != _ADD_STAGE2 or any(f"/{d.name}/" not in listed for d in debs):
            raise FlashbedError(f"building the emulated board: debugfs did not put the packages and the script "
                                f"into the root's copy (log: {log.f.name})")
        _boot_once(base.kernel, base.initrd, f"root=/dev/vda rw console={CONSOLE} panic=-1 init=/flashbed-stage2",
                   root, log, f"its boot did not install {', '.join(recipe.added)}", timeout=ADD_WAIT)
        for name in ("vmlinuz", "initrd", "id_ed25519", "id_ed25519.pub", "host_key.pub"):
            if (base.dir / name).exists():
                shutil.copy2(base.dir / name, img.dir / name)
        os.replace(root, img.root)
        facts["release"] = json.loads((base.dir / "image.json").read_text()).get("release", "")
    return img


# --- a board --------------------------------------------------------------------------------

@dataclass(frozen=True)
class BoardDir:
    """One board's own state: its root overlay, its card, its port, its QEMU process."""

    dir: Path

    @property
    def config(self) -> Path:
        return self.dir / "board.json"

    @property
    def pidfile(self) -> Path:
        return self.dir / "qemu.pid"

    @property
    def console(self) -> Path:
        return self.dir / "console.log"

    @property
    def card(self) -> Path:
        return self.dir / "card.img"

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def power_log(self) -> Path:
        """One line per power action that started or killed QEMU: the board's restarts counted
        from QEMU's side, not from what the board or flashbed says of them."""
        return self.dir / "power.log"

    def log_power(self, what: str, pid: int | None) -> None:
        with open(self.power_log, "a") as f:
            f.write(f"{time.time():.3f} {what} qemu pid {pid}\n")

    def load(self) -> dict:
        try:
            return json.loads(self.config.read_text())
        except (OSError, ValueError):
            raise FlashbedError(f"{self.dir} is not an emulated board's directory: run "
                                f"'qemu-board.sh --dir {self.dir} start' first") from None

    def pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            if QEMU not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                return None
        except OSError:
            return None
        return pid


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def create(where: Path, recipe: Recipe, card_bytes: int = CARD_BYTES, port: int = 0, say=print) -> BoardDir:
    """The board's directory (kept if it is there): its card, its overlay, its ssh config."""
    b = BoardDir(where)
    if b.config.is_file():
        return b
    if card_bytes <= 0 or card_bytes & (card_bytes - 1):
        raise FlashbedError(f"--card-size {card_bytes}: QEMU's SD card takes a power of two (e.g. 512M, 1G)")
    img = build(recipe, say)
    _need("qemu-img")
    where.mkdir(parents=True, exist_ok=True)
    _blank(b, card_bytes, img.root if recipe.full else None)
    port = port or _free_port()
    known = where / "known_hosts"
    if img.host_key.is_file():
        known.write_text(f"[127.0.0.1]:{port} {img.host_key.read_text().split(' ', 2)[0]} "
                         f"{img.host_key.read_text().split()[1]}\n")
        check = f"StrictHostKeyChecking yes\n  UserKnownHostsFile {known}\n"
    else:  # a host key made at each boot (the busybox board keeps nothing)
        check = "StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
    b.ssh_config.write_text(f"Host 127.0.0.1\n  User root\n  IdentityFile {img.key_file}\n  IdentitiesOnly yes\n"
                            f"  {check}")
    # pristine: never powered on, so its root the overlay made here, which a saved machine state of
    # this configuration's kernel has mounted (power_on). The busybox board keeps booting cold: its
    # boot is short (20 s here), and a state of it would be its whole initramfs in RAM
    b.config.write_text(json.dumps({"recipe": recipe.name, "image": str(img.dir), "port": port,
                                    "card_bytes": card_bytes, "full": recipe.full,
                                    **({"pristine": True} if recipe.full else {})}, indent=1))
    return b


def _blank(b: BoardDir, card_bytes: int, root: Path | None) -> None:
    """The board's card all zeros (sparse) and its root overlay over `root`, both as a new board has them."""
    b.card.unlink(missing_ok=True)
    with open(b.card, "wb") as f:
        f.truncate(card_bytes)
    if root is not None:
        (b.dir / "root.qcow2").unlink(missing_ok=True)
        subprocess.run([_tool("qemu-img"), "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(root),
                        str(b.dir / "root.qcow2")], check=True)


def qemu_command(b: BoardDir) -> list[str]:
    c = b.load()
    img = Path(c["image"])
    # QMP, for saving and resuming a machine state: relative to the board's directory, where QEMU
    # starts, as a socket's address holds 107 bytes and the directory may be deeper
    cmd = [QEMU, *MACHINE, "-smp", str(CPUS), "-m", str(MEM_MB), "-display", "none",
           "-qmp", f"unix:{QMP_SOCKET},server=on,wait=off", "-no-reboot",
           "-kernel", str(img / "vmlinuz"), "-initrd", str(img / "initrd")]
    if c["full"]:
        cmd += ["-append", f"root=/dev/vda rw console={CONSOLE} panic=-1",
                "-drive", f"file={b.dir / 'root.qcow2'},if=none,id=root,format=qcow2,cache=writeback",
                "-device", "virtio-blk-pci,drive=root"]
    else:
        cmd += ["-append", f"console={CONSOLE} panic=-1"]
    cmd += ["-drive", f"file={b.card},if=none,id=card,format=raw,cache=writeback",
            "-device", "sdhci-pci", "-device", "sd-card,drive=card",
            "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{c['port']}-:22",
            "-device", "virtio-net-pci,netdev=n0,romfile=",
            "-serial", f"file:{b.console}", "-pidfile", str(b.pidfile), "-daemonize"]
    return cmd


def _say_err(line: str) -> None:
    print(line, file=sys.stderr)


def power_on(b: BoardDir, say=_say_err) -> None:
    """QEMU started on the board. A pristine board's first power-on resumes the saved machine state of
    its configuration where there is one (saved_state), waiting until SSH answers, a few seconds; else
    it boots cold, and that boot's state is saved once SSH answers (wait_ssh). Every later power-on,
    after a cut above all, is a cold boot on what the board's card and root hold."""
    if b.pid() is not None:
        return
    _need(QEMU)
    c = b.load()
    first = c.pop("pristine", False)
    c.pop("save_state", None)
    # no longer pristine from here, whatever this power-on does: a second one must boot what it left
    b.config.write_text(json.dumps(c, indent=1))
    key = state_key(b) if first else None
    state = saved_state(b, key) if key else None
    if state is not None:
        try:
            _resume(b, state)
            os.utime(state)  # used: the last a prune removes (_prune)
            b.log_power("on", b.pid())
            return
        except (FlashbedError, OSError) as e:
            say(f"qemu-board: the saved machine state {state.name} did not resume ({e}): removed it; booting cold")
            _kill(b)
            _discard(state)
            _blank(b, c["card_bytes"], Path(c["image"]) / "root.img")
    _start(b, qemu_command(b))
    if key:
        c["save_state"] = {"key": key, "pid": b.pid()}
        b.config.write_text(json.dumps(c, indent=1))
    b.log_power("on", b.pid())


def _start(b: BoardDir, cmd: list[str]) -> None:
    b.pidfile.unlink(missing_ok=True)
    r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=b.dir)
    if r.returncode != 0:
        err = r.stderr.strip().splitlines()
        raise FlashbedError(f"QEMU did not start the board: {err[-1] if err else f'exit {r.returncode}'}")


def _kill(b: BoardDir, logged: str | None = None) -> None:
    """The board's QEMU killed (SIGKILL), returning once it is gone; `logged`, the power log's word for
    it where it is a power action (the cut), none for a resume that failed."""
    pid = b.pid()
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if logged:
        b.log_power(logged, pid)
    deadline = time.monotonic() + 30
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    b.pidfile.unlink(missing_ok=True)


# --- saved machine states ---------------------------------------------------------------------------
#
# A Debian board's cold boot costs about 50 s of CPU under TCG (32 s of wall time here, minutes under
# load); a new board's first power-on is the same boot each time, so its outcome is saved once and
# resumed: the RAM and devices (QEMU's migration stream) with a copy of the root overlay as it was then.
# Only a pristine board may resume one (never powered on: its root the overlay as made, its card all
# zeros): the state's kernel has that root mounted and cached as it was then, and would corrupt any
# other. After a power cut the board must restart on what the cut left (the root's journal, the
# card), as a real board does: a power-on then is a real cold boot, as on any board already used. The
# state's kernel holds nothing of the card (_SD_OUT).

def _qemu_version() -> str:
    r = subprocess.run([QEMU, "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""


def state_key(b: BoardDir) -> str | None:
    """The hash of what a saved machine state depends on: QEMU's version, the machine's command line
    less what is the board's own (its directory's paths, its SSH port), the card's size and the image's
    files; None where one is missing."""
    c = b.load()
    version = _qemu_version()
    if not version:
        return None
    fwd = f"127.0.0.1:{c['port']}-"
    cmd = [a.replace(str(b.dir), "BOARD").replace(fwd, "127.0.0.1:PORT-") for a in qemu_command(b)]
    try:
        files = {n: [(st := (Path(c["image"]) / n).stat()).st_size, st.st_mtime_ns]
                 for n in ("image.json", "root.img", "vmlinuz", "initrd")}
    except OSError:
        return None
    text = json.dumps({"qemu": version, "command": cmd, "card_bytes": c["card_bytes"], "image": c["image"],
                       "files": files}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _states(b: BoardDir) -> Path:
    return Path(b.load()["image"]) / "states"


def saved_state(b: BoardDir, key: str) -> Path | None:
    """The saved state of `key` in the image's cache: a directory holding the migration stream (ram) and
    the root overlay (root.qcow2), whole or not there (it is renamed into place once written)."""
    d = _states(b) / key
    return d if (d / "ram").is_file() and (d / "root.qcow2").is_file() else None


def _discard(d: Path) -> None:
    gone = d.with_name(f".gone-{d.name}-{os.getpid()}")
    try:
        os.rename(d, gone)  # at once: no other board resumes a half-removed state
    except OSError:
        return
    shutil.rmtree(gone, ignore_errors=True)


class _QMP:
    """QEMU's machine protocol on the board's socket: one JSON object a line each way."""

    def __init__(self, b: BoardDir, wait: float = 60.0):
        deadline = time.monotonic() + wait
        while True:
            self.sock = socket.socket(socket.AF_UNIX)
            # a socket's address holds 107 bytes: the board's directory reached through a descriptor of it
            fd = os.open(b.dir, os.O_PATH)
            try:
                self.sock.connect(f"/proc/self/fd/{fd}/{QMP_SOCKET}")
                break
            except OSError as e:
                self.sock.close()
                if time.monotonic() > deadline or b.pid() is None:
                    raise FlashbedError(f"no QMP on the board's QEMU ({e.strerror})") from None
                time.sleep(0.1)
            finally:
                os.close(fd)
        self.sock.settimeout(wait)
        self.f = self.sock.makefile("rw")
        self._line()  # QEMU's greeting
        self("qmp_capabilities")

    def _line(self) -> dict:
        try:
            line = self.f.readline()
        except OSError as e:
            raise FlashbedError(f"QMP: {e}") from None
        if not line:
            raise FlashbedError("QEMU closed its QMP socket")
        return json.loads(line)

    def __call__(self, command: str, **arguments: Any) -> Any:
        try:
            self.f.write(json.dumps({"execute": command, "arguments": arguments}) + "\n")
            self.f.flush()
        except OSError as e:
            raise FlashbedError(f"QMP: {e}") from None
        while True:
            m = self._line()
            if "return" in m:
                return m["return"]
            if "error" in m:
                raise FlashbedError(f"QMP {command}: {m['error'].get('desc', m['error'])}")
            # else an event (STOP, RESUME, ...): nothing waits on one

    def close(self) -> None:
        self.f.close()
        self.sock.close()

    def __enter__(self) -> "_QMP":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _resume(b: BoardDir, state: Path) -> None:
    """The board started from `state`: its root overlay the state's copy (the same backing file), QEMU
    the board's own command (its own port, its own paths) reading the state's RAM and devices, then
    running once they are in; returns once SSH answers, the board's clock set to this machine's."""
    shutil.copyfile(state / "root.qcow2", b.dir / "root.qcow2")
    _start(b, qemu_command(b) + ["-incoming", f"exec:cat {shlex.quote(str(state / 'ram'))}"])
    try:
        # QEMU answers once it has read the state, which a loaded machine may take a while to
        with _QMP(b, RESUME_WAIT) as q:
            deadline = time.monotonic() + RESUME_WAIT
            while q("query-status")["status"] == "inmigrate":
                if time.monotonic() > deadline:
                    raise FlashbedError(f"its RAM not read within {RESUME_WAIT:.0f}s")
                time.sleep(0.05)
            m = q("query-migrate")
            if m.get("status") != "completed":
                raise FlashbedError(f"reading it {m.get('status')}: {m.get('error-desc', '')}".rstrip(": "))
            q("cont")  # it was saved stopped, which QEMU keeps after the migration
    except FlashbedError:
        if b.pid() is None:  # QEMU exits where a state does not load; its own words went to /dev/null
            raise FlashbedError("QEMU ended while reading it") from None
        raise
    _woken(b, RESUME_WAIT)


def _save(b: BoardDir, key: str, say=_say_err) -> None:
    """The running board's machine state saved as `key`'s: the machine stopped, its RAM and devices
    migrated into a file, its root overlay copied, then the machine run on. Written in a directory of its
    own renamed into place, so a save killed midway leaves nothing that is resumed."""
    states = _states(b)
    if (states / key).exists():
        return
    states.mkdir(exist_ok=True)
    for old in states.glob(".part-*"):  # a save killed midway, an hour ago or more
        if time.time() - old.stat().st_mtime > 3600:
            shutil.rmtree(old, ignore_errors=True)
    part = Path(tempfile.mkdtemp(prefix=".part-", dir=states))
    saved = False
    try:
        if subprocess.run([*_ssh_args(b), _SD_OUT], capture_output=True, stdin=subprocess.DEVNULL,
                          timeout=RESUME_WAIT).returncode:
            raise FlashbedError("its SD controller could not be taken out of the board's kernel")
        with _QMP(b) as q:
            q("stop")
            try:
                q("migrate", uri=f"exec:cat > {shlex.quote(str(part / 'ram'))}")
                deadline = time.monotonic() + SAVE_WAIT
                while (m := q("query-migrate")).get("status") not in ("completed", "failed", "cancelled"):
                    if time.monotonic() > deadline:
                        q("migrate_cancel")
                        raise FlashbedError(f"its migration not done within {SAVE_WAIT:.0f}s")
                    time.sleep(0.1)
                if m["status"] != "completed":
                    raise FlashbedError(f"its migration {m['status']}: {m.get('error-desc', '')}".rstrip(": "))
                # the migration's end flushed the root's drive and let go of it (QEMU inactivates
                # drives then): its file is the disk the saved RAM saw
                shutil.copyfile(b.dir / "root.qcow2", part / "root.qcow2")
            finally:
                q("cont")  # the drives taken back, the machine run on
        (part / "state.json").write_text(json.dumps(
            {"key": key, "qemu": _qemu_version(), "command": qemu_command(b), "card_bytes": b.load()["card_bytes"],
             "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1))
        if not (states / key).exists():  # another board's, saved meanwhile, is as good
            os.rename(part, states / key)
            saved = True
            _prune(states)
    except (FlashbedError, OSError, subprocess.TimeoutExpired) as e:
        say(f"qemu-board: the machine state was not saved ({e}): the next new board boots cold too")
    finally:
        shutil.rmtree(part, ignore_errors=True)
    try:
        _woken(b, RESUME_WAIT)  # this board too: its controller back, its clock on from the pause
    except FlashbedError:
        if saved:  # what this board did not come back from, no other board resumes
            _discard(states / key)
        raise


def _prune(states: Path, keep: int = KEEP_STATES) -> None:
    """The image's saved states but the `keep` most recently used (saved or resumed) removed."""
    found = []
    for d in states.iterdir():
        if not d.name.startswith(".") and d.is_dir():
            try:
                found.append((d.stat().st_mtime, d))
            except OSError:
                continue
    for _, d in sorted(found, reverse=True)[keep:]:
        _discard(d)


def _pending_save(b: BoardDir, waited: bool) -> str | None:
    """The key to save the board's state as, once SSH answered: the one its power-on marked, where that
    power-on was a pristine board's cold boot, its QEMU is still the one it started, and SSH did not
    answer at once (where it did, the board was up before this wait, and may have been used). The mark
    is taken off either way: a board's state is saved at most once."""
    c = b.load()
    mark = c.pop("save_state", None)
    if mark is None:
        return None
    b.config.write_text(json.dumps(c, indent=1))
    return mark["key"] if waited and mark.get("pid") == b.pid() else None


def power_off(b: BoardDir) -> None:
    """The cut: SIGKILL, no flush, no shutdown; returns once the process is gone."""
    _kill(b, "off (SIGKILL)")


def _running(pid: int) -> bool:
    """Whether `pid` still runs: a zombie (killed, its parent not yet told) has stopped. QEMU runs
    daemonized, never our child; a stand-in started by this process stays a zombie until waited
    for, which the cut need not wait on (it waited its 30 s for every such one)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _ssh_args(b: BoardDir) -> list[str]:
    return ["ssh", "-F", str(b.ssh_config), "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-p",
            str(b.load()["port"]), "127.0.0.1"]


def _answers(b: BoardDir, wait: float) -> bool:
    """Whether SSH answered at once (else it did within `wait` seconds; one line if not)."""
    started, first = time.monotonic(), True
    while True:
        if subprocess.run([*_ssh_args(b), "true"], capture_output=True, stdin=subprocess.DEVNULL).returncode == 0:
            return first
        first = False
        if b.pid() is None:
            raise FlashbedError(f"the board's QEMU ended while booting (console: {b.console})")
        if time.monotonic() - started > wait:
            raise FlashbedError(f"the board did not answer SSH within {wait:.0f}s (console: {b.console})")
        time.sleep(2)


# QEMU 7.2's sdhci-pci migrates the controller's registers but not its PCI configuration (its
# vmstate is the SDHCI core's alone): on a resumed machine its BAR is unmapped, every register reads
# all ones, the kernel's mmc0 times out ("Controller never released inhibit bit(s)") and the card is
# gone. So the board's kernel lets go of the controller before its state is saved (a PCI remove: no
# driver, no card, nothing cached of it), and finds it again by a rescan after each resume, which
# assigns its BAR and reads the card afresh
_SD_OUT = ('for d in /sys/bus/pci/devices/*; do [ "$(cat $d/vendor):$(cat $d/device)" = 0x1b36:0x0007 ] && '
           'echo 1 > $d/remove && exit 0; done; exit 1')
# the board's first command after a resume: its clock set to this machine's (a resumed kernel's runs
# on from when its state was saved; the time sent once the board's shell reads it, as the connection
# itself takes a second or more under TCG), then its SD controller found again and its card waited for
_WAKE = ('echo; read t; date -u -s "@$t" >/dev/null; echo 1 > /sys/bus/pci/rescan; i=0; '
         'while [ ! -b /dev/mmcblk0 ]; do [ $i -lt 300 ] || exit 3; sleep 0.1; i=$((i+1)); done')


def _woken(b: BoardDir, wait: float) -> None:
    """_WAKE run on the board once SSH answers (within `wait` seconds; one line if not, or if the card
    did not come back)."""
    started = time.monotonic()
    while True:
        p = subprocess.Popen([*_ssh_args(b), _WAKE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        assert p.stdin is not None and p.stdout is not None
        hung = threading.Timer(wait, p.kill)  # a board stuck after SSH connected: no line, no exit
        hung.start()
        try:
            if p.stdout.readline():
                p.stdin.write(f"{time.time():.3f}\n".encode())
            p.stdin.close()
        except OSError:
            pass  # the connection failed: its status says so
        rc = p.wait()
        hung.cancel()
        p.stdout.close()
        if rc == 0:
            return
        if rc < 0:
            raise FlashbedError(f"the board did not come back within {wait:.0f}s (console: {b.console})")
        if rc != 255:  # ssh's own failure is 255; the board's shell said otherwise
            raise FlashbedError("its SD card did not come back (no /dev/mmcblk0 after a PCI rescan)")
        if b.pid() is None:
            raise FlashbedError(f"the board's QEMU ended (console: {b.console})")
        if time.monotonic() - started > wait:
            raise FlashbedError(f"the board did not answer SSH within {wait:.0f}s (console: {b.console})")
        time.sleep(1)


def wait_ssh(b: BoardDir, wait: float = SSH_WAIT) -> float:
    """Seconds until the board answers SSH (one line after `wait`); then a pristine board's first cold
    boot is saved as its configuration's machine state (power_on)."""
    started = time.monotonic()
    at_once = _answers(b, wait)
    took = time.monotonic() - started
    key = _pending_save(b, waited=not at_once)
    if key:
        _save(b, key)
    return took


def url(b: BoardDir) -> str:
    return f"ssh://root@127.0.0.1:{b.load()['port']}"


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    try:
        return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)
    except ValueError:
        raise FlashbedError(f"--card-size {text}: give a size such as 512M or 1G") from None


ACTIONS = ("build", "on", "off", "cycle", "start", "stop", "restart", "status", "url")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="qemu-board.sh", description="An emulated arm64 board with an SD card "
                                "(QEMU, Debian's packages); on/off/cycle are its power switch.")
    p.add_argument("--dir", default="", help="the board's own directory (made on first start)")
    p.add_argument("--recipe", choices=sorted(RECIPES), default="debian", help="what the board runs")
    p.add_argument("--card-size", default="512M", help="the SD card's size, a power of two (default 512M)")
    p.add_argument("--port", type=int, default=0, help="the SSH port on 127.0.0.1 (default: a free one)")
    p.add_argument("action", choices=ACTIONS)
    a = p.parse_args(argv)
    try:
        recipe = RECIPES[a.recipe]
        if a.action == "build":
            img = build(recipe)
            print(img.dir)
            return 0
        if not a.dir:
            raise FlashbedError(f"qemu-board.sh {a.action}: give the board's directory with --dir DIR")
        where = Path(a.dir).resolve()
        b = (create(where, recipe, _size(a.card_size), a.port) if a.action in ("on", "start", "cycle", "restart")
             else BoardDir(where))
        b.load()
        if a.action in ("on", "start"):
            started = time.monotonic()
            power_on(b)
            if a.action == "start":
                wait_ssh(b)
                print(f"qemu-board: {url(b)} answers SSH {time.monotonic() - started:.1f}s after power on "
                      f"(--ssh-config {b.ssh_config})")
        elif a.action in ("off", "stop"):
            power_off(b)
        elif a.action in ("cycle", "restart"):
            power_off(b)
            started = time.monotonic()
            power_on(b)
            if a.action == "restart":
                wait_ssh(b)
                print(f"qemu-board: {url(b)} answers SSH {time.monotonic() - started:.1f}s after power on")
        elif a.action == "status":
            pid = b.pid()
            print(f"{url(b)} {'on (QEMU pid ' + str(pid) + ')' if pid else 'off'}")
        elif a.action == "url":
            print(url(b))
        return 0
    except FlashbedError as e:
        print(f"qemu-board: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
