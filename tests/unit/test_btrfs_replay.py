"""btrfs's log replay at mount, read from its superblock: its kernel message is rate-limited."""

def test_btrfs_log_replay_is_read_from_the_superblock(tmp_path):
    from flashbed.lab.guest.powercut import BTRFS_MAGIC, BTRFS_SUPER, log_replay_due
    from flashbed.lab.guest.protocol import DirectMount

    def dev(log_root):
        img = tmp_path / f"dev{log_root}"
        sb = bytearray(4096)
        sb[64:72] = BTRFS_MAGIC
        sb[96:104] = log_root.to_bytes(8, "little")
        img.write_bytes(bytes(BTRFS_SUPER) + bytes(sb))
        return str(img)

    assert log_replay_due(DirectMount(device=dev(30408704), fstype="btrfs")) is True
    assert log_replay_due(DirectMount(device=dev(0), fstype="btrfs")) is False
    assert log_replay_due(DirectMount(device=dev(5), fstype="ext4")) is None
    assert log_replay_due(DirectMount(device=str(tmp_path / "none"), fstype="btrfs")) is None


def test_the_superblock_decides_a_btrfs_mount_s_recovery_not_its_rate_limited_message():
    from flashbed.status import MountState
    from flashbed.studies.failures import mount_state

    said = ["BTRFS info (device ubda): start tree-log replay"]
    base = {"phase": "done", "mounted": True, "verified_by": "mount1"}
    m = {"status": "ok", "rc": 0, "seconds": 0.0, "out": ""}
    assert mount_state({**base, "mount1": {**m, "kmsg": [], "log_replay": True}}, "btrfs") is MountState.RECOVERY
    assert mount_state({**base, "mount1": {**m, "kmsg": said, "log_replay": False}}, "btrfs") is MountState.OK
    assert mount_state({**base, "mount1": {**m, "kmsg": said}}, "btrfs") is MountState.RECOVERY  # older records
