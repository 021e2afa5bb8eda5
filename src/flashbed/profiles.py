"""Profiles: the device and studies a run defaults to, and the sizes they run at.

Each study's parameters and defaults (the sizes of the reference study) are its
own (`Study.Params`); a profile only overrides fields. `paper` runs the
reference studies' sizes (500 MB fio sets, a 4 GB dd, 1 GB mount tests...);
`quick` keeps every study small enough for all ten block filesystems on the
default device in about twenty minutes on two cores.
"""

from __future__ import annotations

from typing import Any

from .errors import FlashbedError

MiB = 1 << 20

MAIN_STUDIES = ("bandwidth", "mixed", "bigfile", "smallfiles", "appio", "overwrite", "mount", "boot", "mkfs", "cpu")
BLOCK_FILESYSTEMS = ("ext2", "ext3", "ext4", "ext4-nojournal", "btrfs", "xfs", "f2fs", "nilfs2", "vfat", "exfat")

PROFILES: dict[str, dict[str, Any]] = {
    "quick": {
        "device": "emmc-8g@512M",
        # the failure studies (powercut, corruption, badblocks) run with --study
        "studies": MAIN_STUDIES,
        "bandwidth": {"size": 64 * MiB, "nrfiles": 8, "runtime": 2},
        "mixed": {"size": 64 * MiB, "nrfiles": 8, "runtime": 3},
        "bigfile": {"size": 64 * MiB},
        "overwrite": {"mb": [1]},
        "mount": {"fills": [0, 50]},
        "cpu": {"size": 32 * MiB},
        "powercut": {"iterations": 20},
        "crashstates": {"ops": 60, "sequences": 25},
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
