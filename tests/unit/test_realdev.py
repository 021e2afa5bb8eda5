"""Real block devices without a device: naming, labels, every refusal's rule and line, and the
sysfs/proc reading on a fake tree (a holder, a mounted partition, root on LVM above it).
The same refusals on loop devices: tests/integration/test_realdev.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flashbed.devices import realdev as R
from flashbed.lab import labview
from flashbed.lab.boundary import BlockDevice, BootSpec
from flashbed.lab.uml import kernel_cmdline

SDB, SDB1, SDB2, DM0 = os.makedev(8, 16), os.makedev(8, 17), os.makedev(8, 18), os.makedev(254, 7)


@pytest.mark.parametrize("spec, real", [
    ("/dev/sdb", True), ("/dev/mmcblk0", True), ("/dev/disk/by-id/usb-X", True), ("real:Ultra_Fit-4C53", True),
    ("/tmp/not-a-device.img", True), ("emmc-8g", False), ("emmc-8g@512M", False), ("./mypart.toml", False),
    ("./mypart.toml@1G", False), ("plain-file@256M", False)])
def test_what_names_a_real_device(spec, real):
    assert R.names_device(spec) is real


@pytest.mark.parametrize("ident, label", [
    ({"name": "sdc", "model": "Ultra Fit", "serial": "4C530001230825118513"}, "Ultra_Fit-4C530001230825118513"),
    ({"name": "sdc", "vendor": "SanDisk", "serial": "ab/c@1"}, "SanDisk-ab_c_1"),
    ({"name": "mmcblk0", "model": "SC32G", "serial": "0x1a2b3c4d", "partition": 1}, "SC32G-0x1a2b3c4d-part1"),
    ({"name": "loop3"}, "loop3"),  # no serial: the node's name
])
def test_the_label_follows_model_and_serial_and_is_filesystem_safe(ident, label):
    assert R.label(ident) == label
    assert "/" not in label and "@" not in label


def _facts(**kw) -> R.Facts:
    base = dict(node="/dev/sdb", size=1 << 30, read_only=False, logical_block=512,
                parts=(("sdb", SDB), ("sdb1", SDB1), ("sdb2", SDB2)))
    return R.Facts(**{**base, **kw})


@pytest.mark.parametrize("kw, words", [
    ({"host_roles": (("/", "sdb2"),)}, "/dev/sdb2 (a partition of /dev/sdb) holds the host's root filesystem (/)"),
    ({"host_roles": (("/boot", "sdb"),)}, "/dev/sdb holds the host's boot filesystem (/boot)"),
    ({"mounted": (("sdb1", "/media/card"),)}, "/dev/sdb1 (a partition of /dev/sdb) is mounted at /media/card: "
                                                "unmount it first"),
    ({"swap": ("sdb2",)}, "is in use as swap: swapoff /dev/sdb2 first"),
    ({"held": (("sdb1", "dm-0 (device-mapper/LVM vg-data)"),)}, "is in use by dm-0 (device-mapper/LVM vg-data)"),
    ({"size": 0}, "/dev/sdb has no medium (size 0): insert the card"),
    ({"read_only": True}, "/dev/sdb is read-only"),
    ({"logical_block": 4096}, "has 4096-byte logical blocks"),
])
def test_each_hard_refusal_is_one_line(kw, words):
    why = R.refusal(_facts(**kw))
    assert why is not None and words in why and "\n" not in why


def test_a_free_device_is_not_refused():
    assert R.refusal(_facts()) is None


def test_the_host_root_outranks_everything_else():
    why = R.refusal(_facts(host_roles=(("/", "sdb"),), mounted=(("sdb", "/"),), read_only=True))
    assert "root filesystem" in why


@pytest.mark.parametrize("sigs, parts, words", [
    ([{"type": "ext4", "label": "rootfs"}], 0, "/dev/sdb carries data (ext4 labelled 'rootfs'), which the run "
                                                 "would destroy: if that is what you want, add --destroy-data-on /dev/sdb"),
    ([{"type": "dos", "label": None}], 2, "carries data (dos partition table, 2 partition(s))"),
    ([{"type": "gpt"}, {"type": "PMBR"}], 0, "gpt partition table; PMBR partition table"),
])
def test_a_signature_is_refused_naming_what_is_there(sigs, parts, words):
    why = R.signature_refusal("/dev/sdb", sigs, parts)
    assert words in why and "\n" not in why


def test_no_signature_no_refusal():
    assert R.signature_refusal("/dev/sdb", [], 0) is None


def _boardcheck():
    import importlib.util
    spec = importlib.util.spec_from_file_location("boardcheck", Path(R.__file__).parents[1] / "lab" / "guest" /
                                                  "boardcheck.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("offset", [None, 0, 1, 4095, (4 << 20) - 1, 4 << 20, (9 << 20) + 3])
def test_the_first_non_zero_byte_is_found_here_and_on_a_board(tmp_path, offset):
    img = tmp_path / "disk"
    with open(img, "wb") as f:
        f.truncate(12 << 20)
        if offset is not None:
            f.seek(offset)
            f.write(b"\x01")
    z = R.first_data(str(img), 12 << 20)
    assert z == R.Zeroes(offset, z.read, 12 << 20) and z.blank == (offset is None)
    on_board = _boardcheck().zeroes(str(img), R.BLANK_READ)
    assert R.Zeroes(on_board["first_data"], on_board["read"], on_board["size"]) == z
    why = R.data_refusal("/dev/sdb", z)
    if offset is None:
        assert why is None and R.blank_note("/dev/sdb", z) == ("/dev/sdb judged blank: no signature, all 12 MiB "
                                                                "read zero (nothing on it to destroy)")
    else:
        assert why == (f"/dev/sdb may carry data (no filesystem or partition-table signature, but non-zero data at "
                       f"offset {offset}), which the run would destroy: if that is what you want, add "
                       f"--destroy-data-on /dev/sdb")


def test_a_device_larger_than_what_is_read_is_not_blank(tmp_path):
    img = tmp_path / "disk"
    with open(img, "wb") as f:
        f.truncate(12 << 20)
    z = R.first_data(str(img), 12 << 20, limit=8 << 20)
    assert z == R.Zeroes(None, 8 << 20, 12 << 20) and not z.blank
    assert "its first 8 MiB read zero, but it holds 12 MiB" in R.data_refusal("/dev/sdb", z)
    assert _boardcheck().zeroes(str(img), 8 << 20) == {"first_data": None, "read": 8 << 20, "size": 12 << 20}


# ---- sysfs and proc, on a fake tree --------------------------------------------------

def _write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


@pytest.fixture
def fake_host(tmp_path):
    """A USB stick sdb (two partitions; sdb1 under LVM volume dm-7, which holds the host's root)
    and a mountinfo with sdb2 mounted."""
    sys, proc = tmp_path / "sys", tmp_path / "proc"
    usb = sys / "devices" / "pci0000:00" / "usb1" / "1-1"
    _write(usb / "idVendor", "0781")
    _write(usb / "serial", "4C530001230825118513")
    scsi = usb / "1-1:1.0" / "host0" / "target0:0:0" / "0:0:0:0"
    _write(scsi / "model", "Ultra Fit")
    _write(scsi / "vendor", "SanDisk")
    sdb = scsi / "block" / "sdb"
    _link(sdb / "device", scsi)
    for name, val in (("dev", "8:16"), ("size", "60437492"), ("ro", "0"), ("removable", "1"),
                      ("queue/logical_block_size", "512"), ("queue/physical_block_size", "512"),
                      ("queue/rotational", "0")):
        _write(sdb / name, val)
    (sdb / "holders").mkdir()
    for n, part in ((1, "sdb1"), (2, "sdb2")):
        _write(sdb / part / "dev", f"8:{16 + n}")
        _write(sdb / part / "partition", str(n))
        _write(sdb / part / "size", "1000")
        (sdb / part / "holders").mkdir()
    dm = sys / "devices" / "virtual" / "block" / "dm-7"
    _write(dm / "dev", "254:7")
    _write(dm / "dm" / "name", "vg-root")
    _link(dm / "slaves" / "sdb1", sdb / "sdb1")
    _link(sdb / "sdb1" / "holders" / "dm-7", dm)
    for d, target in (("8:16", sdb), ("8:17", sdb / "sdb1"), ("8:18", sdb / "sdb2"), ("254:7", dm)):
        _link(sys / "dev" / "block" / d, target)
    for target in (sdb, dm):
        _link(sys / "class" / "block" / target.name, target)
    _write(proc / "self" / "mountinfo", "\n".join([
        "27 1 254:7 / / rw,relatime - ext4 /dev/mapper/vg-root rw",
        r"40 27 8:18 / /media/my\040card rw,relatime - vfat /dev/sdb2 rw",
        "41 27 0:45 / /srv rw - btrfs /dev/nonexistent rw"]))
    _write(proc / "swaps", "Filename\tType\tSize\tUsed\tPriority")
    return R.Host(sysfs=sys, proc=proc, dev=tmp_path / "dev")


def test_identity_comes_from_sysfs(fake_host):
    ident = R.identity(R.sys_dir(SDB, fake_host))
    assert ident["model"] == "Ultra Fit" and ident["vendor"] == "SanDisk"
    assert ident["serial"] == "4C530001230825118513"  # the USB device's, up the tree
    assert ident["transport"] == "usb" and ident["removable"] and not ident["rotational"]
    assert ident["size_bytes"] == 60437492 * 512 and ident["logical_block_size"] == 512
    assert R.label(ident) == "Ultra_Fit-4C530001230825118513"
    part = R.identity(R.sys_dir(SDB1, fake_host))
    assert part["disk"] == "sdb" and part["partition"] == 1 and R.label(part).endswith("-part1")


def test_a_holder_a_mount_and_the_root_above_lvm_are_found(fake_host):
    sd = R.sys_dir(SDB, fake_host)
    facts = R.gather("/dev/sdb", SDB, sd, R.identity(sd), fake_host)
    assert facts.held == (("sdb1", "dm-7 (device-mapper/LVM vg-root)"),)
    assert facts.mounted == (("sdb2", "/media/my card"),)
    assert ("/", "sdb1") in facts.host_roles  # / is on vg-root, which is built on sdb1
    assert "holds the host's root filesystem" in R.refusal(facts)
    # without the root role, the holder and the mount still refuse it
    assert "is mounted at /media/my card" in R.refusal(_facts(mounted=facts.mounted, held=facts.held))
    assert "dm-7 (device-mapper/LVM vg-root)" in R.refusal(_facts(held=facts.held))


def test_a_device_is_found_again_by_its_label(fake_host):
    assert R.find("real:Ultra_Fit-4C530001230825118513", fake_host) == str(fake_host.dev / "sdb")
    with pytest.raises(R.FlashbedError, match="no block device attached now has that identity"):
        R.find("real:Ultra_Fit-0000", fake_host)


def test_ubd_opens_a_real_device_direct_and_without_a_cow_probe():
    spec = BootSpec(run_dir=Path("/tmp/r"), steps=(), disks=(BlockDevice(Path("/dev/sdb"), direct=True,
                                                                         discard=False),))
    assert "ubd0tod=disk0" in kernel_cmdline(spec)
    assert labview.view(spec.run_dir, spec.disks).links["disk0"] == Path("/dev/sdb")
    plain = BootSpec(run_dir=Path("/tmp/r"), steps=(), disks=(BlockDevice(Path("/tmp/d.img")),))
    assert "ubd0=disk0" in kernel_cmdline(plain)
