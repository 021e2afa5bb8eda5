import pytest

from flashbed.errors import FlashbedError
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
    names = [p.name for p in kernel.patches(kernel.KERNELS["6.12"])]
    assert any("xstate" in n for n in names)


def test_each_kernel_has_its_own_patch_set():
    k612 = [p.name for p in kernel.patches(kernel.KERNELS["6.12"])]
    k73 = [p.name for p in kernel.patches(kernel.KERNELS["7.3"])]
    # 7.3 sizes the XSAVE area from the host itself; flushes and request-sized
    # ubd I/O are needed by both
    assert not any("xstate" in n for n in k73)
    for both in ("0002-um-ubd-pass-flushes-to-the-host.patch", "0003-um-ubd-one-host-call-per-request.patch"):
        assert both in k612 and both in k73
    assert k612 == sorted(k612) and k73 == sorted(k73)


def test_the_fragment_is_shared_and_each_kernel_adds_its_own():
    k612 = kernel.required_options(kernel.KERNELS["6.12"])
    k73 = kernel.required_options(kernel.KERNELS["7.3"])
    for opts in (k612, k73):
        assert opts["CONFIG_SCHEDSTATS"] == "y"  # /proc/<pid>/schedstat in ns
        assert opts["CONFIG_EXT4_FS"] == "y"
    assert k73["CONFIG_SMP"] == "y" and "CONFIG_SMP" not in k612
    assert kernel.KERNELS["7.3"].max_cpus() == int(k73["CONFIG_NR_CPUS"]) >= 2
    assert kernel.KERNELS["6.12"].max_cpus() == 1
    shared = kernel.required_options(kernel.KernelSpec("none", "x", (kernel.BootMode.PTRACE,)))
    assert shared.items() <= k612.items() and shared.items() <= k73.items()
    # options 7.3 dropped (ext3 is ext4's, /proc/sys is SYSCTL's) are 6.12's own
    assert k612["CONFIG_EXT3_FS"] == "y" and "CONFIG_EXT3_FS" not in k73


def test_the_cache_key_tells_the_kernels_and_their_fragments_apart(tmp_path, monkeypatch):
    k612, k73 = kernel.KERNELS["6.12"], kernel.KERNELS["7.3"]
    assert kernel.cache_key("1", k612) != kernel.cache_key("1", k73)
    cdir = tmp_path / "config"
    cdir.mkdir()
    for f in k73.fragments:
        (cdir / f.name).write_bytes(f.read_bytes())
    monkeypatch.setattr(kernel, "CONFIG_DIR", cdir)
    monkeypatch.setattr(kernel, "CONFIG_FRAGMENT", cdir / "lab.config")
    before612, before73 = kernel.cache_key("1", k612), kernel.cache_key("1", k73)
    (cdir / "7.3.config").write_text((cdir / "7.3.config").read_text() + "CONFIG_NR_CPUS=4\n")
    assert kernel.cache_key("1", k73) != before73
    assert kernel.cache_key("1", k612) == before612  # another kernel's additions are not 6.12's


def test_a_built_config_without_an_option_of_the_kernels_own_fragment_is_refused(tmp_path):
    spec = kernel.KERNELS["7.3"]
    want = kernel.required_options(spec)
    cfg = tmp_path / ".config"
    cfg.write_text("\n".join(f"{k}={v}" for k, v in want.items() if k != "CONFIG_SMP") + "\n")
    assert kernel.missing_options(cfg, spec) == ["CONFIG_SMP=y (got unset)"]
    assert sorted(kernel.missing_options(cfg, kernel.KERNELS["6.12"])) == [
        "CONFIG_EXT3_FS=y (got unset)", "CONFIG_PROC_SYSCTL=y (got unset)"]  # 6.12's own, not SMP


@pytest.mark.parametrize("text,name,mode", [
    (None, kernel.DEFAULT_KERNEL, None),
    ("6.12", "6.12", "ptrace"),
    ("7.3", "7.3", "seccomp"),
    ("7.3:ptrace", "7.3", "ptrace"),
])
def test_kernel_choices(text, name, mode):
    c = kernel.choose(text)
    assert c.spec.name == name
    assert c.mode == (kernel.BootMode(mode) if mode else c.spec.default_mode)


@pytest.mark.parametrize("text,words", [
    ("6.1", "unknown lab kernel '6.1': choose 6.12 or 7.3"),
    ("6.12:seccomp", "lab kernel 6.12 has no boot mode 'seccomp': choose ptrace"),
    ("7.3:kvm", "lab kernel 7.3 has no boot mode 'kvm': choose seccomp or ptrace"),
])
def test_bad_kernel_choices_name_the_valid_ones(text, words):
    with pytest.raises(FlashbedError) as e:
        kernel.choose(text)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_guest_vcpus_are_refused_where_the_kernel_cannot_run_them():
    kernel.choose("7.3").check_cpus(2)
    kernel.choose("6.12").check_cpus(1)
    with pytest.raises(FlashbedError, match="lab kernel 6.12 has no SMP .*use --kernel 7.3"):
        kernel.choose("6.12").check_cpus(2)
    with pytest.raises(FlashbedError, match="seccomp mode only"):
        kernel.choose("7.3:ptrace").check_cpus(2)
    with pytest.raises(FlashbedError, match="runs 1 to 8 vCPUs, not 9"):
        kernel.choose("7.3").check_cpus(9)


def test_the_pinned_source_needs_no_host_package_and_the_installed_one_does(monkeypatch):
    assert kernel.source_version(kernel.KERNELS["7.3"]) == kernel.KERNELS["7.3"].pinned_version
    missing = kernel.KernelSpec(name="x", package="linux-source-0.0", modes=(kernel.BootMode.PTRACE,))
    with pytest.raises(FlashbedError, match="linux-source-0.0 is not installed"):
        kernel.source_version(missing)


def test_kernel_info_carries_name_source_patches_and_boot_mode():
    info = kernel.KernelInfo(path="/x/linux", key="k", name="7.3", source_package="linux-source-7.3",
                             source_version="7.3.4-1~bpo13+1", release="7.3.4", patches=["0002-x.patch"],
                             boot_mode="seccomp", max_cpus=8, build_seconds=1.0, built_at="t")
    prov = info.provenance()
    assert prov == {"name": "7.3", "release": "7.3.4", "source_package": "linux-source-7.3",
                    "source_version": "7.3.4-1~bpo13+1", "patches": ["0002-x.patch"], "boot_mode": "seccomp",
                    "key": "k"}


def test_a_cache_entry_copied_elsewhere_is_found_at_its_new_place(tmp_path, monkeypatch):
    # issue 27: an ordinary user's cache seeded from root's, a container's cache: info.json
    # records the path the kernel was built at, the binary is the `linux` beside it
    import dataclasses
    import json
    spec = kernel.KERNELS["7.3"]
    key = kernel.cache_key(spec.pinned_version, spec)
    entry = tmp_path / "cache" / "kernel" / key
    entry.mkdir(parents=True)
    (entry / "linux").write_text("")
    built = kernel.KernelInfo(path="/elsewhere/kernel/linux", key=key, name="7.3", source_package=spec.package,
                              source_version=spec.pinned_version, release="7.3.4", patches=[], boot_mode="seccomp",
                              max_cpus=8, build_seconds=1.0, built_at="t")
    (entry / "info.json").write_text(json.dumps(dataclasses.asdict(built)))
    monkeypatch.setenv("FLASHBED_CACHE", str(tmp_path / "cache"))
    found = kernel.cached_kernel("7.3")
    assert found is not None and found.path == str(entry / "linux")
