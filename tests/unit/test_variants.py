from pathlib import Path

import pytest

from flashbed import variants
from flashbed.devices import presets
from flashbed.devices.presets import Device
from flashbed.errors import FlashbedError

SD = Device(name="sd", path=Path("sd.toml"), kind="block", capacity=512 << 20, page_size=16384,
            erase_block=4 << 20, preset_capacity=8 << 30)
NAND = Device(name="nand", path=Path("n.toml"), kind="nandsim", capacity=256 << 20, page_size=4096,
              erase_block=512 << 10, preset_capacity=2 << 30)


def test_mount_tags_become_mount_options():
    v = variants.parse("ext4+noatime+discard")
    assert v.mount_cmds() == ["mount -t ext4 -o noatime,discard ${FLASHBED_DEV} /mnt"]


@pytest.mark.parametrize("spec,mkfs_words", [
    ("ext4+tuned", "-E stride=1024,stripe_width=1024"),
    ("f2fs+tuned", "-s 2 -z 1"),
    ("nilfs2+tuned", "-B 1024"),
])
def test_tuned_options_follow_the_erase_block(spec, mkfs_words):
    assert mkfs_words in variants.parse(spec, SD).make_cmds()[0]


def test_btrfs_tuned_is_the_ssd_mount_option():
    assert "-o ssd" in variants.parse("btrfs+tuned", SD).mount_cmds()[0]


def test_layered_variant_makes_an_image_on_the_lower_filesystem():
    v = variants.parse("ext2@f2fs")
    assert v.media == "block" and v.base.name == "f2fs"
    cmds = v.make_cmds()
    assert cmds[0].startswith("mkfs.f2fs") and cmds[-1].startswith("mkfs.ext2") and variants.IMAGE in cmds[-1]
    assert "loop" in v.mount_cmds()[-1] and v.umount_cmds() == ["umount /mnt", "umount /tmp/lower"]
    assert variants.parse("ext2@ubifs").media == "mtd"


@pytest.mark.parametrize("spec,device,words", [
    ("ext4+fast", None, "unknown variant 'fast'"),
    ("ext4+tuned", None, "needs a device"),
    ("jffs2+discard", None, "does not apply"),
    ("ubifs@f2fs", None, "only a block filesystem"),
    ("yaffs2+noatime", None, "runs in user space .FUSE. and takes no mount options"),
])
def test_bad_specs_say_what_is_wrong(spec, device, words):
    with pytest.raises(FlashbedError, match=words):
        variants.parse(spec, device)


def test_device_kind_and_size_are_checked():
    with pytest.raises(FlashbedError, match="needs a raw NAND"):
        variants.check_device(variants.parse("ubifs"), SD)
    with pytest.raises(FlashbedError, match="needs a block device"):
        variants.check_device(variants.parse("ext4"), NAND)
    small = Device(name="s", path=Path("s"), kind="block", capacity=64 << 20, page_size=4096,
                   erase_block=1 << 20, preset_capacity=64 << 20)
    with pytest.raises(FlashbedError, match="xfs needs at least"):
        variants.check_device(variants.parse("xfs"), small)


def test_raw_nand_filesystems_refuse_mlc_and_take_the_ubi_layout_from_the_device():
    from flashbed.devices import presets
    with pytest.raises(FlashbedError, match="refuses MLC NAND .* nand-2g-4k"):
        variants.check_device(variants.parse("ubifs"), presets.load_spec("nand-mlc-2g@128M"))
    variants.check_device(variants.parse("yaffs2"), presets.load_spec("nand-mlc-2g@128M"))  # its own driver
    dev = presets.load_spec("nand-2g-4k@128M")
    v = variants.parse("ubifs", dev)
    variants.check_device(v, dev)
    cmds = v.make_cmds()
    assert cmds[0] == "ubiformat -y -q -O 4096 /dev/mtd1" and cmds[1].endswith("-O 4096")
    assert v.ubi_attach_cmd() == "ubiattach -m 1 -d 0 -O 4096"


def test_read_only_variants_are_an_image_of_a_tree_written_to_the_device():
    v = variants.parse("squashfs+zstd", SD)
    assert v.read_only and v.compressor == "zstd" and v.media == "block"
    assert v.image_cmds("/tmp/rootfs") == [
        "mksquashfs /tmp/rootfs ro.img -noappend -quiet -no-progress -comp zstd",
        "stat -c %s ro.img > ro.img.bytes && dd if=ro.img of=${FLASHBED_DEV} bs=1M oflag=direct conv=fsync status=none "
        "&& rm -f ro.img"]
    # the space it takes: the image's size (df would round it to squashfs's 128 KiB blocks)
    assert v.used_cmd("/mnt") == "cat ro.img.bytes"
    assert variants.parse("ext4").used_cmd("/mnt") == "df -B1 --output=used /mnt | tail -n 1"
    # "make" = an image of an empty tree (the mkfs study's empty filesystem)
    assert v.make_cmds() == ["mkdir -p /tmp/empty", *v.image_cmds("/tmp/empty")]
    assert v.mount_cmds("/mnt") == v.mount_cmds("/mnt", ro=True) == ["mount -t squashfs -o ro ${FLASHBED_DEV} /mnt"]
    assert variants.parse("erofs").compressor == "" and not variants.parse("ext4").read_only
    # a writable filesystem mounted read-only, as a boot partition is
    assert variants.parse("ext4+noatime").mount_cmds("/mnt", ro=True) == ["mount -t ext4 -o noatime,ro ${FLASHBED_DEV} /mnt"]


@pytest.mark.parametrize("spec, words", [
    ("squashfs+noatime", "read-only image; its variants are one compressor: squashfs\\+gzip"),
    ("erofs+zstd", "erofs\\+lz4, erofs\\+lz4hc"),
    ("squashfs+xz+zstd", "one compressor"),
    ("ext2@squashfs", "squashfs is read-only: an image file cannot live in it"),
    ("erofs@f2fs", "goes on the device itself"),
])
def test_read_only_variants_refuse_what_does_not_apply(spec, words):
    with pytest.raises(FlashbedError, match=words):
        variants.parse(spec, SD)


def test_an_ext2_image_on_yaffs2_mounts_and_unmounts_yaffs2_through_its_daemon():
    v = variants.parse("ext2@yaffs2")
    assert v.media == "mtd" and v.base.name == "yaffs2"
    make = v.make_cmds()
    assert make[0] == "flash_erase -q /dev/mtd1 0 0"
    assert "--mtd /dev/mtd1" in make[2] and make[2].endswith(" /tmp/lower")
    assert v.mount_cmds("/mnt")[1] == "mount -t ext2 -o loop /tmp/lower/fs.img /mnt"
    umount = v.umount_cmds("/mnt")
    assert umount[0] == "umount /mnt" and umount[1].startswith("umount /tmp/lower && p=$(cat /tmp/yaffs2/tmp_lower.pid)")


def test_a_seeded_ext4_variant_fixes_its_uuid_and_hash_seed_and_keeps_its_own_options():
    from flashbed.variants import seeded
    dev = presets.load_spec("emmc-8g@512M")
    plain = seeded(variants.parse("ext4", dev), 1)
    cmd = plain.make_cmds()[0]
    uid = cmd.split("-U ")[1].split()[0]
    assert f"-E hash_seed={uid}" in cmd
    # nothing for the ext4 driver's lazyinit thread, which starts at a random instant
    assert "-o noinit_itable,no_prefetch_block_bitmaps " in plain.mount_cmds()[0]
    assert "-o " not in seeded(variants.parse("ext2", dev), 1).mount_cmds()[0]  # the ext2 driver has none
    assert seeded(variants.parse("ext4", dev), 1).make_cmds() == plain.make_cmds()
    assert seeded(variants.parse("ext4", dev), 2).make_cmds() != plain.make_cmds()
    tuned = variants.parse("ext4+tuned", dev)
    if "-E" in tuned.mkfs_extra:  # one -E (mke2fs keeps the last): the tuned options and the seed
        t = seeded(tuned, 1).mkfs_extra
        assert t.count("-E") == 1 and "hash_seed=" in t[t.index("-E") + 1]
        assert t[t.index("-E") + 1].startswith(tuned.mkfs_extra[tuned.mkfs_extra.index("-E") + 1])
    f2fs = variants.parse("f2fs", dev)
    assert seeded(f2fs, 1) == f2fs


def test_a_variant_carries_any_mount_options_and_mkfs_flags():
    from flashbed.variants import parse
    v = parse("f2fs+mkfs:-O extra_attr,compression+o:compress_algorithm=lz4,background_gc=off")
    assert v.mkfs_extra == ("-O", "extra_attr,compression")
    assert v.mount_extra == ("compress_algorithm=lz4", "background_gc=off")
    assert "-O extra_attr,compression" in v.make_cmds()[0] and "compress_algorithm=lz4,background_gc=off" in \
        v.mount_cmds()[0]
    assert parse("ext4+noatime+o:commit=60").mount_extra == ("noatime", "commit=60")


@pytest.mark.parametrize("spec, words", [
    ("ext4+o:", "an empty mount option"),
    ("ext2@f2fs+o:commit=60", "unknown filesystem"),
    ("yaffs2+o:x", "runs in user space .FUSE.* takes no mount options"),
    ("ext4+mkfs:-E 'a", "mkfs:"),
])
def test_options_where_none_can_go_are_one_line(spec, words):
    from flashbed.variants import parse
    with pytest.raises(FlashbedError, match=words):
        parse(spec)
