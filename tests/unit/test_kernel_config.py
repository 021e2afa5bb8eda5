from flashbed.lab import kernel


def test_fragment_requires_the_filesystems_and_flash_stack():
    want = kernel.required_options()
    for opt in ("CONFIG_EXT4_FS", "CONFIG_BTRFS_FS", "CONFIG_XFS_FS", "CONFIG_F2FS_FS", "CONFIG_NILFS2_FS",
                "CONFIG_VFAT_FS", "CONFIG_EXFAT_FS", "CONFIG_UBIFS_FS", "CONFIG_JFFS2_FS",
                "CONFIG_MTD_NAND_NANDSIM", "CONFIG_MTD_UBI_FASTMAP", "CONFIG_DM_FLAKEY",
                "CONFIG_HOSTFS", "CONFIG_BLK_DEV_UBD", "CONFIG_F2FS_FS_COMPRESSION"):
        assert want[opt] == "y", opt
    assert int(want["CONFIG_KERNEL_STACK_ORDER"]) >= 3


def test_missing_options_are_named(tmp_path):
    want = kernel.required_options()
    lines = [f"{k}={v}" if v != "n" else f"# {k} is not set" for k, v in want.items()]
    cfg = tmp_path / ".config"
    cfg.write_text("\n".join(lines) + "\n")
    assert kernel.missing_options(cfg) == []
    cfg.write_text("\n".join(l for l in lines if not l.startswith("CONFIG_DM_FLAKEY=")) + "\n")
    assert kernel.missing_options(cfg) == ["CONFIG_DM_FLAKEY=y (got unset)"]


def test_cache_key_follows_source_config_and_patches(tmp_path, monkeypatch):
    k1 = kernel.cache_key("6.12.1-1")
    assert kernel.cache_key("6.12.1-1") == k1
    assert kernel.cache_key("6.12.2-1") != k1
    pdir = tmp_path / "patches"
    pdir.mkdir()
    for p in kernel.patches():
        (pdir / p.name).write_bytes(p.read_bytes())
    monkeypatch.setattr(kernel, "PATCH_DIR", pdir)
    assert kernel.cache_key("6.12.1-1") == k1
    (pdir / "0099-extra.patch").write_text("--- a/x\n+++ b/x\n")
    assert kernel.cache_key("6.12.1-1") != k1


def test_the_xsave_patch_is_carried():
    names = [p.name for p in kernel.patches()]
    assert any("xstate" in n for n in names)
