import pytest

from flashbed import filesystems as fscat
from flashbed.errors import FlashbedError, HostToolMissing


def test_catalogue_has_the_fifteen_filesystems():
    # the twelve writable ones, (issue 14) the read-only images squashfs and erofs, and
    # (issue 20) YAFFS2 in user space
    assert set(fscat.CATALOGUE) == {
        "ext2", "ext3", "ext4", "ext4-nojournal", "btrfs", "xfs", "f2fs", "nilfs2",
        "vfat", "exfat", "ubifs", "jffs2", "yaffs2", "squashfs", "erofs"}
    assert set(fscat.RAW) == {"ubifs", "jffs2", "yaffs2"}
    assert set(fscat.READ_ONLY) == {"squashfs", "erofs"}


def test_read_only_images_are_built_from_a_tree_with_a_chosen_compressor():
    sq, er = fscat.get("squashfs"), fscat.get("erofs")
    assert sq.image_cmd("/tmp/t", "ro.img", "zstd") == "mksquashfs /tmp/t ro.img -noappend -quiet -no-progress " \
                                                       "-comp zstd"
    assert sq.image_cmd("/tmp/t", "ro.img") == "mksquashfs /tmp/t ro.img -noappend -quiet -no-progress"
    assert er.image_cmd("/tmp/t", "ro.img", "lz4") == "mkfs.erofs --quiet -zlz4 ro.img /tmp/t"
    assert er.image_cmd("/tmp/t", "ro.img") == "mkfs.erofs --quiet ro.img /tmp/t"
    # the compressors Debian 12's tools offer (erofs-utils 1.5 is built without lzma)
    assert sq.compressors == ("gzip", "lz4", "xz", "zstd") and er.compressors == ("lz4", "lz4hc")
    assert sq.mount_cmd("/dev/ubda", "/mnt") == "mount -t squashfs -o ro /dev/ubda /mnt"
    assert sq.tools == ("mksquashfs",) and er.tools == ("mkfs.erofs", "fsck.erofs")


def test_mount_names_type_and_never_probes():
    cmd = fscat.get("f2fs").mount_cmd("/dev/ubda", "/mnt", ("noatime",))
    assert cmd == "mount -t f2fs -o noatime /dev/ubda /mnt"


def test_ext4_nojournal_turns_the_journal_off():
    assert "^has_journal" in fscat.get("ext4-nojournal").make_cmd("/dev/ubda")


def test_unknown_filesystem_says_what_to_choose():
    with pytest.raises(FlashbedError, match="unknown filesystem 'ext5': choose from ext2"):
        fscat.get("ext5")


def test_ubifs_is_formatted_attached_and_given_a_volume():
    cmds = fscat.raw_make_cmds(fscat.get("ubifs"))
    assert cmds[0].startswith("ubiformat") and "ubiattach" in cmds[1] and "ubimkvol" in cmds[2]
    assert fscat.raw_device(fscat.get("ubifs")) == "ubi0:" + fscat.UBI_VOLUME
    assert fscat.raw_device(fscat.get("jffs2")) == "mtd1"


def test_missing_tool_names_the_package(monkeypatch):
    monkeypatch.setattr(fscat.shutil, "which", lambda *a, **k: None)
    with pytest.raises(HostToolMissing, match="apt-get install xfsprogs"):
        fscat.check_host_tools(["xfs"])


def test_catalogue_facts_say_where_they_come_from():
    """Recovery model and online resize are the catalogue's (no probe shows them in one boot): each
    entry names its documented source, and the read-only images recover by never being written."""
    from flashbed import filesystems as fscat
    for fs in fscat.CATALOGUE.values():
        assert fs.facts in fscat.FACTS_SOURCE, fs.name
        assert fs.online_resize in ("grow", "grow and shrink", "no"), fs.name
        assert (fs.recovery is fscat.Recovery.READ_ONLY) == fs.read_only, fs.name
    assert fscat.get("btrfs").recovery is fscat.Recovery.COW
    assert fscat.get("exfat").recovery is fscat.Recovery.FSCK and fscat.get("exfat").online_resize == "no"


def test_yaffs2_is_erased_then_mounted_by_its_daemon_and_unmounting_waits_for_the_checkpoint():
    from flashbed.yaffs2.build import daemon_path
    y = fscat.get("yaffs2")
    assert fscat.raw_make_cmds(y) == ["flash_erase -q /dev/mtd1 0 0"]  # blank flash is an empty YAFFS2
    dev = fscat.raw_device(y)
    assert dev == "/dev/mtd1"
    mount = y.mount_cmd(dev, "/mnt")
    assert f"{daemon_path()} --mtd /dev/mtd1 --pidfile /tmp/yaffs2/mnt.pid" in mount
    # its mount and unmount lines, and its log (YAFFS2's trace and the NAND's faults), in the run
    assert mount.endswith('--stats "$FLASHBED_RUN/yaffs2.jsonl" --log "$FLASHBED_RUN/yaffs2.log" /mnt')
    assert y.log_cmd().startswith("dmesg; cat \"$FLASHBED_RUN/yaffs2.log\"")
    assert fscat.get("ubifs").log_cmd() == "dmesg" and fscat.get("ubifs").clear_log_cmd() == "dmesg -C"
    umount = y.umount_cmd("/mnt")
    assert umount.startswith("umount /mnt && p=$(cat /tmp/yaffs2/mnt.pid)")  # then waits for its exit
    assert fscat.get("jffs2").umount_cmd("/mnt") == "umount /mnt"
