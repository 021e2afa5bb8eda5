"""A study's file that the filesystem's own mkfs leaves no room for is refused at the edge (issue
42, 17: bigfile on f2fs failed ENOSPC in the lab at a size the plan accepted)."""

from __future__ import annotations

import re
import shutil

import pytest

from flashbed import fsspace, variants
from flashbed.devices import presets
from flashbed.errors import FlashbedError
from flashbed.plan import PlanRequest, make_plan
from flashbed.sizes import parse_size

pytestmark = pytest.mark.skipif(not (shutil.which("mkfs.f2fs") and shutil.which("dump.f2fs")),
                                reason="needs f2fs-tools")


def test_f2fs_leaves_less_than_the_device_for_files_and_more_on_a_larger_one():
    dev = presets.load_spec("emmc-8g@64M")
    v = variants.parse("f2fs", dev)
    small, large = fsspace.usable(v, 64 << 20), fsspace.usable(v, 256 << 20)
    assert 0 < small < 64 << 20 and small < large < 256 << 20
    assert fsspace.usable(variants.parse("ext4", dev), 64 << 20) is None  # the study's own margin holds there


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
