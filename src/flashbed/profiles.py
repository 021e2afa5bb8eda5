"""Profiles: the sizes each study runs at.

`quick` keeps every study small enough for all ten block filesystems on the
default device in about twenty minutes on two cores; `paper` uses the sizes
of the original studies (500 MB fio sets, a 4 GB dd, 1 GB mount tests...).
"""

from __future__ import annotations

from typing import Any

from .errors import FlashbedError

MiB = 1 << 20
GiB = 1 << 30

MAIN_STUDIES = ("bandwidth", "mixed", "bigfile", "smallfiles", "appio", "overwrite", "mount", "boot", "mkfs", "cpu")
BLOCK_FILESYSTEMS = ("ext2", "ext3", "ext4", "ext4-nojournal", "btrfs", "xfs", "f2fs", "nilfs2", "vfat", "exfat")

# The failure studies' parameters are the reference studies' in both profiles;
# only the number of power cuts per case differs.
POWERCUT: dict[str, Any] = {"modes": ["sync", "async"], "cut_min": 0.5, "cut_max": 3.0, "max_file": 1 * MiB,
                            "max_files": 64, "nand_cut_min": 4, "nand_cut_max": 120}
CORRUPTION: dict[str, Any] = {"iterations": 15, "modes": ["after", "alternate"], "features": ["corrupt", "drop"],
                              "corrupt_after": 10, "tail": 3, "alternate_seconds": 5, "round_seconds": 1.0,
                              "big_mb": 30, "many_count": 30, "many_mb": 1}
BADBLOCKS: dict[str, Any] = {"iterations": 5, "files": 8, "file_size": 1 * MiB, "file_blocks": 8,
                             "random_blocks": 32, "raw_cases": ["badblocks", "weakblocks", "weakpages", "bitflips"],
                             "nand_bad": 8, "nand_bitflips": 4}

PROFILES: dict[str, dict[str, Any]] = {
    "quick": {
        "device": "emmc-8g@512M",
        "studies": MAIN_STUDIES,
        "bandwidth": {"size": 64 * MiB, "nrfiles": 8, "runtime": 2, "rw": ["randread", "randwrite", "read", "write"],
                      "bs": ["4k", "4M"], "direct": [1, 0]},
        "mixed": {"size": 64 * MiB, "nrfiles": 8, "runtime": 3},
        "bigfile": {"size": 64 * MiB},
        "smallfiles": {"dirs": 1019, "files": 4499, "mean_bytes": 2048},
        "appio": {"sizes": [1 * MiB, 4 * MiB], "record": 4096},
        "overwrite": {"mb": [1], "unit": 1024},
        "mount": {"fills": [0, 50]},
        "boot": {"mb": 15},
        "mkfs": {},
        "cpu": {"size": 32 * MiB},
        # failure studies (not in MAIN_STUDIES: run them with --study)
        "powercut": {**POWERCUT, "iterations": 20},
        "corruption": CORRUPTION,
        "badblocks": BADBLOCKS,
    },
    "paper": {
        "device": "emmc-8g",
        "studies": MAIN_STUDIES,
        "bandwidth": {"size": 500 * 1000 * 1000, "nrfiles": 50, "runtime": 120,
                      "rw": ["randread", "randwrite", "read", "write"], "bs": ["4k", "4M"], "direct": [1, 0]},
        "mixed": {"size": 500 * 1000 * 1000, "nrfiles": 50, "runtime": 120},
        "bigfile": {"size": 4 * GiB},
        "smallfiles": {"dirs": 1019, "files": 4499, "mean_bytes": 2048},
        "appio": {"sizes": [1 * MiB, 4 * MiB], "record": 4096},
        "overwrite": {"mb": [1, 5], "unit": 1024},
        "mount": {"fills": [0, 25, 50, 75]},
        "boot": {"mb": 15},
        "mkfs": {},
        "cpu": {"size": 256 * MiB},
        "powercut": {**POWERCUT, "iterations": 226},  # the reference study's count per case
        "corruption": CORRUPTION,
        "badblocks": BADBLOCKS,
    },
}


def get(name: str) -> dict[str, Any]:
    try:
        return PROFILES[name]
    except KeyError:
        raise FlashbedError(f"unknown profile '{name}': choose from {', '.join(PROFILES)}") from None
