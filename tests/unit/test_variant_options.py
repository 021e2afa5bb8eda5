"""Variants with any mkfs and mount options (issue 38): the syntax, the checks made before any
cell runs (names from the catalogue, tags, read-only and FUSE filesystems), --fs's commas."""

from __future__ import annotations

import pytest

from flashbed import variants
from flashbed.errors import FlashbedError
from flashbed.optiontrial import Trial, _mkfs_message
from flashbed.variants import fs_items


def test_options_reach_mkfs_and_mount():
    v = variants.parse("f2fs+mkfs:-O extra_attr,compression+o:compress_algorithm=lz4")
    assert v.mkfs_extra == ("-O", "extra_attr,compression")
    assert v.mount_extra == ("compress_algorithm=lz4",)
    assert "-O extra_attr,compression" in v.make_cmds()[0]
    assert "compress_algorithm=lz4" in v.mount_cmds()[0]
    assert v.given
    assert not variants.parse("ext4+noatime").given


def test_tags_and_options_combine():
    v = variants.parse("ext4+noatime+o:commit=60,data=journal")
    assert v.mount_extra == ("noatime", "commit=60", "data=journal")


@pytest.mark.parametrize("spec, words", [
    ("ext4+o:comit=60", "ext4 has no mount option 'comit' (did you mean commit?)"),
    ("ext4+commit=60", "write it after o:, e.g. ext4+o:commit=60"),
    ("xfs+mkfs:-O foo", "mkfs.xfs (xfs) has no flag '-O'"),
    ("squashfs+o:noatime", "squashfs is a read-only image"),
    ("erofs+mkfs:-x", "erofs is a read-only image"),
    ("yaffs2+o:noatime", "yaffs2 runs in user space (FUSE"),
    ("ubifs+mkfs:-x 1", "takes no mkfs flags"),
    ("ext4+nobarrier+o:barrier", "o:barrier conflicts with the tag that sets nobarrier"),
    ("ext4+noatime+o:relatime", "conflicts with the tag that sets noatime"),
    ("ext4+sync+o:sync", "repeats what a tag sets"),
    ("ext4+o:barrier,nobarrier", "contradict each other"),
    ("ext4+o:data=journal,data=ordered", "set data twice"),
    ("ext4+mkfs:-E", "takes a value"),
    ("ext4+mkfs:-O ^has_journal foo", "'foo' in mkfs: is no flag's value"),
    ("ext4+mkfs:-O 'a", "No closing quotation"),
])
def test_bad_options_are_one_line_before_anything_runs(spec, words):
    with pytest.raises(FlashbedError) as e:
        variants.parse(spec)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_mkfs_flag_tuned_sets_too_is_refused():
    from flashbed.devices import presets
    dev = presets.load_spec("emmc-8g@512M")
    with pytest.raises(FlashbedError, match=r"\+tuned sets -E"):
        variants.parse("ext4+tuned+mkfs:-E lazy_itable_init=0", dev)
    assert variants.parse("ext4+tuned+mkfs:-O ^metadata_csum", dev).mkfs_extra[-2:] == ("-O", "^metadata_csum")


def test_fs_commas_split_only_before_a_filesystem():
    assert fs_items(["ext4+o:commit=60,data=journal,f2fs", "f2fs+mkfs:-O extra_attr,compression,ext4"]) == (
        "ext4+o:commit=60,data=journal", "f2fs", "f2fs+mkfs:-O extra_attr,compression", "ext4")
    assert fs_items(["ext4,f2fs"]) == ("ext4", "f2fs")
    with pytest.raises(FlashbedError, match="has an empty item"):
        fs_items(["ext4+o:a,,f2fs"])


def test_a_variants_file_holds_one_spec_a_line(tmp_path):
    f = tmp_path / "variants"
    f.write_text("# long ones\nf2fs+mkfs:-O extra_attr,compression+o:compress_algorithm=lz4  # the logger's\n\n"
                 "ext4+o:commit=60\n")
    assert fs_items(["ext4"], [str(f)]) == ("ext4", "f2fs+mkfs:-O extra_attr,compression+o:compress_algorithm=lz4",
                                             "ext4+o:commit=60")
    (tmp_path / "empty").write_text("# nothing\n")
    with pytest.raises(FlashbedError, match="names no variant"):
        fs_items([], [str(tmp_path / "empty")])


def test_mkfs_complaint_is_its_own_line_not_its_usage():
    out = ["mkfs.fat 4.2 (2021-01-31)", "Usage: mkfs.vfat [OPTIONS] TARGET [BLOCKS]",
           "created with a size of 1024 bytes times BLOCKS, which must be specified.", "",
           "  -s COUNT   Set number of sectors per cluster", "Bad number of sectors per cluster : 3"]
    assert _mkfs_message(out) == "Bad number of sectors per cluster : 3"


def test_a_refusal_names_the_spec_the_refuser_and_its_message():
    line = Trial("ext4+o:commit=abc", "7.3", "mount", "ext4: Bad value for 'commit'").line()
    assert line.startswith("ext4+o:commit=abc: the lab kernel 7.3 refuses it")
    assert "ext4: Bad value for 'commit'" in line and "nothing was run" in line


def test_the_catalogue_lists_options_with_sources_and_marks_the_risky_ones(capsys):
    from flashbed import fsoptions
    from flashbed.cli import main
    assert main(["filesystems", "ext4"]) == 0
    out = capsys.readouterr().out
    assert "commit=60" in out and "noauto_da_alloc" in out and "Documentation/admin-guide/ext4.rst" in out
    assert "data  RISKY" in out
    assert fsoptions.risk("ext4", "data=writeback") and not fsoptions.risk("ext4", "data=journal")
    assert fsoptions.risk("f2fs", "fsync_mode=nobarrier") and not fsoptions.risk("f2fs", "fsync_mode=strict")
    assert fsoptions.risk("btrfs", "nodatasum") and fsoptions.risk("ext4", "nobarrier")


def test_every_catalogue_entry_is_an_option_its_kernel_or_mkfs_takes():
    from flashbed import fsoptions
    from flashbed.filesystems import by_fstype
    for fstype, entries in fsoptions.OPTIONS.items():
        for e in entries:
            for v in e.values:
                if e.kind == fsoptions.Kind.MOUNT:
                    assert fsoptions.option_name(v) in fsoptions.mount_names(fstype), (fstype, v)
                else:
                    flags, _ = fsoptions.MKFS_FLAGS[by_fstype(fstype).mkfs[0]]
                    assert v.split()[0] in flags, (fstype, v)
