"""A study's file that the filesystem's own mkfs leaves no room for is refused at the edge (issue
42, 17: bigfile on f2fs failed ENOSPC in the lab at a size the plan accepted; the same holds for
every study that writes a size the user sets, on every filesystem whose free space is read here)."""

from __future__ import annotations

import re
import shutil

import pytest

from flashbed import fsspace, variants
from flashbed.cli import main
from flashbed.devices import presets
from flashbed.errors import FlashbedError
from flashbed.plan import PlanRequest, make_plan
from flashbed.sizes import parse_size


def needs(*tools: str):
    return pytest.mark.skipif(not all(shutil.which(t) for t in tools), reason=f"needs {', '.join(tools)}")


@needs("mkfs.f2fs", "dump.f2fs")
def test_f2fs_leaves_less_than_the_device_for_files_and_more_on_a_larger_one():
    dev = presets.load_spec("emmc-8g@64M")
    v = variants.parse("f2fs", dev)
    small, large = fsspace.usable(v, 64 << 20), fsspace.usable(v, 256 << 20)
    assert 0 < small < 64 << 20 and small < large < 256 << 20


@pytest.mark.parametrize("fs,capacity,tools", [
    ("ext2", 64 << 20, ("mkfs.ext2", "dumpe2fs")), ("ext4", 64 << 20, ("mkfs.ext4", "dumpe2fs")),
    ("ext4-nojournal", 64 << 20, ("mkfs.ext4", "dumpe2fs")), ("btrfs", 256 << 20, ("mkfs.btrfs", "btrfs")),
    ("xfs", 1 << 30, ("mkfs.xfs", "xfs_db")), ("vfat", 64 << 20, ("mkfs.vfat", "fsck.fat")),
])
def test_every_filesystem_with_a_reader_leaves_less_than_its_device(fs, capacity, tools):
    if not all(shutil.which(t) for t in tools):
        pytest.skip(f"needs {', '.join(tools)}")
    dev = presets.load_spec("emmc-8g@64M")
    free = fsspace.usable(variants.parse(fs, dev), capacity)
    assert free is not None and 0.3 * capacity < free < capacity
    if fs == "ext4":  # the journal takes its share: more is left without it
        assert fsspace.usable(variants.parse("ext4-nojournal", dev), capacity) > free


def test_no_reader_no_refusal():
    dev = presets.load_spec("emmc-8g@64M")
    for fs in ("nilfs2", "ext2@f2fs"):  # no reader, a layered variant: the study's own margin holds there
        assert fsspace.usable(variants.parse(fs, dev), 256 << 20) is None
    assert fsspace.fits(variants.parse("f2fs", dev), 64 << 20, 1 << 20) is None  # a fifth: no mkfs asked


@needs("mkfs.f2fs", "dump.f2fs")
def test_bigfile_that_f2fs_cannot_hold_is_one_line_naming_a_device_that_can():
    size = 32 << 20
    req = PlanRequest(devices=("emmc-8g@64M",), fs=("f2fs",), studies=("bigfile",), overrides={"bigfile": {"size": size}})
    with pytest.raises(FlashbedError) as e:
        make_plan(req)
    said = str(e.value)
    assert "study bigfile's files (bigfile.size=32M) do not fit f2fs on emmc-8g@64M: its mkfs leaves" in said
    suggested = parse_size(re.search(r"emmc-8g@(\w+)\)", said).group(1))
    dev = presets.load_spec("emmc-8g@64M")
    assert fsspace.usable(variants.parse("f2fs", dev), suggested) >= size  # the suggestion holds the file
    assert make_plan(PlanRequest(devices=("emmc-8g@64M",), fs=("ext4",), studies=("bigfile",),
                                 overrides={"bigfile": {"size": size}})).cells


@needs("mkfs.btrfs", "btrfs", "mkfs.f2fs", "dump.f2fs")
@pytest.mark.parametrize("study,fs,device,size", [
    ("cpu", "btrfs", "emmc-8g@128M", 64 << 20),  # btrfs keeps its metadata twice: 128 MiB leaves under 64
    ("bigfile", "btrfs", "emmc-8g@128M", 64 << 20),
    ("bandwidth", "f2fs", "emmc-8g@64M", 40 << 20),
    ("mixed", "f2fs", "emmc-8g@64M", 40 << 20),
])
def test_every_studys_size_is_checked_against_the_filesystems_own_space(study, fs, device, size):
    dev = presets.load_spec(device)
    free = fsspace.usable(variants.parse(fs, dev), dev.capacity)
    assert free is not None and free < size <= dev.capacity / 1.3  # the study's own margin let it through
    with pytest.raises(FlashbedError, match=rf"study {study}'s files \({study}.size=\S+\) do not fit {fs} on "
                                            rf"{re.escape(device)}: its mkfs leaves"):
        make_plan(PlanRequest(devices=(device,), fs=(fs,), studies=(study,), overrides={study: {"size": size}}))
    # half of what is left fits: planned
    assert make_plan(PlanRequest(devices=(device,), fs=(fs,), studies=(study,),
                                 overrides={study: {"size": free // 2 // (1 << 20) << 20}})).cells


@needs("mkfs.btrfs", "btrfs")
def test_the_command_says_it_in_one_line_and_runs_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--fs", "btrfs", "--study", "cpu", "--device", "emmc-8g@128M", "--set", "cpu.size=64M",
                 "--out", "r", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "do not fit btrfs on emmc-8g@128M" in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []
