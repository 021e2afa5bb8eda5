"""Profiles: the device and studies a run defaults to, and the sizes they run at.

Each study's parameters and defaults (the sizes of the reference study) are its
own (`Study.Params`); a profile only overrides fields. `paper` runs the
reference studies' sizes (500 MB fio sets, a 4 GB dd, 1 GB mount tests...);
`quick` keeps every study small enough for all ten block filesystems and two
read-only images on the default device for `make demo` to finish, lab kernel
build included, within twenty minutes on two cores; it runs short power-cut and
corruption studies too (at --pace auto their cells skip the emulator's delays),
so every use case's decisive criteria are measured. What it trades away against
`paper` is in docs/studies.md.
"""

from __future__ import annotations

from typing import Any

from .errors import FlashbedError

MiB = 1 << 20

# caps: what each filesystem holds (the use cases' requirements), probed in one short boot each
MAIN_STUDIES = ("bandwidth", "mixed", "bigfile", "smallfiles", "appio", "overwrite", "sqlite", "mount", "boot", "mkfs",
                "caps", "cpu")
# the failure studies the quick profile runs short (badblocks runs with --study); crash states decide
# durability, the random power cuts are the second, independent figure
ROBUSTNESS_STUDIES = ("powercut", "crashstates", "corruption")
# the default filesystems: the ten writable block ones, and one read-only image of each kind
BLOCK_FILESYSTEMS = ("ext2", "ext3", "ext4", "ext4-nojournal", "btrfs", "xfs", "f2fs", "nilfs2", "vfat", "exfat",
                     "squashfs+zstd", "erofs+lz4")

PROFILES: dict[str, dict[str, Any]] = {
    "quick": {
        "device": "emmc-8g@512M",
        "studies": MAIN_STUDIES + ROBUSTNESS_STUDIES,
        "bandwidth": {"size": 64 * MiB, "nrfiles": 8, "runtime": 2},
        # no scaling case: a 2-vCPU lab takes both host CPUs of a small host and stalls the run
        # (the scaling answer: --study mixed --set mixed.scale_cpus=1,2)
        "mixed": {"size": 64 * MiB, "nrfiles": 8, "runtime": 3, "scale_cpus": [0]},
        "bigfile": {"size": 64 * MiB},
        "overwrite": {"mb": [1]},
        # 100 commits per journal mode (paper: 2000): 3-13 s per mode on emmc-8g@512M, a lab boot in
        # all per filesystem
        "sqlite": {"transactions": 100},
        "mount": {"fills": [0, 50]},
        "cpu": {"size": 32 * MiB},
        # 4 cuts per mount mode, 0.3-1.5 s into the workload (paper: 226, 0.5-3 s): the second,
        # independent durability figure; crash states below are the decisive one, and the 4 cuts
        # fewer per mode pay for most of them within make demo's budget (docs/studies.md)
        "powercut": {"iterations": 4, "cut_min": 0.3, "cut_max": 1.5},
        # 2 runs per case; writes corrupted (not dropped) 1 s into the workload, for 1 s; an
        # 8 MB file or 8 files of 1 MB (paper: 15 runs, corrupt and drop, after 10 s and
        # 1 s on / 1 s off, 30 MB)
        "corruption": {"iterations": 2, "modes": ["after"], "features": ["corrupt"], "corrupt_after": 1,
                       "tail": 1, "big_mb": 8, "many_count": 8},
        # every crash state of 8 operations of the powercut workload and of 5 B3-style sequences of up
        # to three steps, 2 lost-cache subsets per interval between flushes: what fits make demo's
        # budget beside the 4 random cuts above (docs/studies.md; paper: 150 operations, every one-step
        # sequence and 50 more, 4 subsets)
        "crashstates": {"ops": 8, "exhaustive": 0, "sequences": 5, "subsets": 2},
    },
    "paper": {
        "device": "emmc-8g",
        "studies": MAIN_STUDIES,
    },
}


def get(name: str) -> dict[str, Any]:
    try:
        return PROFILES[name]
    except KeyError:
        raise FlashbedError(f"unknown profile '{name}': choose from {', '.join(PROFILES)}") from None


def overrides(name: str, study: str) -> dict[str, Any]:
    """What profile `name` changes of `study`'s parameters."""
    return dict(get(name).get(study, {}))
