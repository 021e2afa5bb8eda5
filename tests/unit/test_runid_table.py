"""Every run id a table of `flashbed run` commands gets, unchanged since the front door was
rebuilt (issue 32): the ids on the right were given by flashbed before it (commit eb1ff6f,
each command's run directory runs/<id>), so the same command still resumes its run.

A workload's and a preset file's path is part of its request (absolute), so the files the
table names live at one fixed place, FIX, with a fixed content (the hash is part of the id).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from flashbed.cli import parser
from flashbed.commands.run import request
from flashbed.paths import repo_root

FIX = Path("/tmp/flashbed-runid-table")

TABLE = [
    ([], "quick-17fb021a"),
    (["--profile", "paper"], "paper-800cf7dc"),
    (["--profile", "quick", "--fs", "ext4,f2fs", "--device", "emmc-8g@512M", "--study", "bigfile"], "quick-deb65f53"),
    (["--fs", "ext4", "--study", "mkfs,mount", "--device", "emmc-8g@256M", "--clock", "real"], "quick-3185e801"),
    (["--fs", "ext4", "--study", "mkfs,mount", "--device", "emmc-8g@256M", "--clock", "real,virtual"], "quick-0d34b591"),
    (["--fs", "ext4", "--study", "mkfs,mount", "--device", "emmc-8g@256M", "--clock", "virtual"], "quick-46d8d401"),
    (["--fs", "ext4", "--study", "mkfs,mount", "--device", "emmc-8g@256M", "--clock", "auto"], "quick-1d756d62"),
    (["--fs", "ext4,btrfs", "--study", "powercut,mkfs", "--pace", "none"], "quick-890eedc8"),
    (["--fs", "ext4,btrfs", "--study", "powercut,mkfs", "--pace", "real"], "quick-81c44393"),
    (["--fs", "ext4,btrfs", "--study", "powercut,corruption"], "quick-b35b8e1a"),
    (["--fs", "ext4,btrfs", "--study", "powercut,corruption", "--clock", "real"], "quick-e3769d54"),
    (["--fs", "ext4", "--study", "bigfile", "--kernel", "6.12"], "quick-bfe5ac50"),
    (["--fs", "ext4", "--study", "bigfile", "--kernel", "6.12,7.3"], "quick-d2f50f92"),
    (["--fs", "ext4", "--study", "bigfile", "--kernel", "7.3:ptrace", "--clock", "real"], "quick-76a9a6ac"),
    (["--fs", "ext4", "--study", "mixed", "--cpus", "2", "--clock", "real"], "quick-24321634"),
    (["--fs", "ext4", "--study", "bigfile", "--cpu-profile", "cortex-a8,none"], "quick-c132fc53"),
    (["--fs", "ext4", "--study", "bigfile", "--cpu-profile", "rpi4"], "quick-ae604d5c"),
    (["--fs", "ext4", "--study", "bigfile", "--set", "bigfile.size=256M"], "quick-3f1ef213"),
    (["--fs", "ext4", "--study", "bandwidth", "--set", "bandwidth.bs=4k,4M", "--set", "bandwidth.runtime=3"], "quick-e7699fc8"),
    (["--fs", "ext4,f2fs", "--study", "powercut", "--iterations", "50"], "quick-26049d84"),
    (["--fs", "ext4", "--study", "corruption,powercut", "--iterations", "3", "--repeat", "2", "--seed", "7"], "quick-a1fbd788"),
    (["--fs", "squashfs+xz,erofs+lz4hc,ext4", "--study", "boot,mount,bandwidth"], "quick-67725e15"),
    (["--fs", "ubifs", "--device", "nand-2g-4k@128M", "--device", "nand-2g-4k@512M", "--study", "mount"], "quick-5ce53967"),
    (["--fs", "ubifs,yaffs2,jffs2", "--study", "mount,badblocks", "--device", "nand-2g-4k@128M"], "quick-388ade7d"),
    (["--fs", "ext2@f2fs", "--fs", "f2fs+tuned", "--fs", "ext4+noatime", "--study", "appio"], "quick-60d05543"),
    (["--study", "crashstates", "--fs", "ext4,f2fs,btrfs,xfs,nilfs2,vfat,exfat"], "quick-37b41386"),
    (["--study", "caps", "--fs", "ext4,vfat,exfat", "--device", "plain-file@256M"], "quick-67469059"),
    (["--workload", "FIX/work.sh", "--check", "FIX/check.sh", "--fs", "ext4,f2fs", "--device", "emmc-8g@512M"], "quick-4a0da8ed"),
    (["--workload", "FIX/job.fio", "--fs", "ext4"], "quick-0653d4a6"),
    (["--workload", "FIX/work.sh", "--age", "50", "--daily-writes", "2G", "--device", "sandisk-ultra-fit-32g@512M"], "quick-5e14454c"),
    (["--workload", "FIX/work.sh", "--study", "bigfile", "--fs", "xfs", "--set", "workload.passes=3"], "quick-3bbdec95"),
    (["--device", "FIX/mypart.toml@1G", "--fs", "ext4", "--study", "bigfile"], "quick-a2321a25"),
    (["--target", "ssh://root@board", "--device", "/dev/mmcblk0p3", "--study", "bigfile,smallfiles", "--fs", "ext4,f2fs"], "quick-3d50f15a"),
    (["--target", "ssh://root@board:2222", "--device", "/dev/mmcblk0p3", "--study", "powercut", "--fs", "ext4", "--power-cmd", "relay {action}"], "quick-537b95d9"),
    (["--target", "ssh://root@board", "--device", "/dev/sda1", "--study", "mount", "--fs", "ext4", "--clock", "auto"], "quick-438a769b"),
    # the robust pass (issue 31, merged after eb1ff6f): the ids main's request gave at fa68800; its
    # field is part of the id only when --robust is given
    (["--profile", "quick", "--robust", "--device", "emmc-8g@512M"], "quick-c4d412c1"),
    (["--fs", "ext4,f2fs", "--device", "emmc-8g@64M", "--study", "bigfile,caps", "--robust", "2"], "quick-882fbc5e"),
    (["--fs", "ext4,f2fs", "--device", "emmc-8g@64M", "--study", "bigfile,caps"], "quick-044e024d"),
    # variants with any options (issue 38): the spec as given is the variant's identity
    (["--fs", "ext4+o:commit=60,data=journal", "--study", "crashstates", "--device", "emmc-8g@64M"], "quick-6881bb1f"),
    (["--fs", "f2fs+mkfs:-O extra_attr,compression+o:compress_algorithm=lz4", "--study", "bigfile"], "quick-e300b748"),
]


@pytest.fixture(scope="module")
def fixed_files():
    FIX.mkdir(exist_ok=True)
    for name, text, mode in (("work.sh", "#!/bin/sh\necho ops=1\n", 0o755), ("check.sh", "#!/bin/sh\nexit 0\n", 0o755),
                             ("job.fio", "[job]\nrw=write\nsize=1M\n", 0o644)):
        path = FIX / name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        os.chmod(path, mode)
    preset = FIX / "mypart.toml"
    if not preset.is_file():
        shutil.copyfile(repo_root() / "presets" / "emmc-8g.toml", preset)
    return FIX


@pytest.mark.parametrize("argv, run_id", TABLE, ids=[" ".join(a) or "(defaults)" for a, _ in TABLE])
def test_a_command_keeps_its_run_id(argv, run_id, fixed_files):
    args = parser().parse_args(["run", *(a.replace("FIX", str(fixed_files)) for a in argv)])
    assert request(args).run_id() == run_id
