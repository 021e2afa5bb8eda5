import os
from pathlib import Path

import pytest

from flashbed.lab import guestcode, labview
from flashbed.lab.boundary import GUEST_DIR, BlockDevice, BootSpec, Nandsim, Step
from flashbed.lab.uml import kernel_cmdline


def test_cmdline_root_is_readonly_host_and_init_is_ours(tmp_path):
    args = kernel_cmdline(BootSpec(run_dir=tmp_path, steps=(Step("x", "true"),)))
    assert "rootfstype=hostfs" in args and "ro" in args
    assert args[-2:] == ["--", "/proc/self/cwd/guest/init.sh"]
    assert "flashbed.run=/proc/self/cwd/run" in args and "flashbed.tools=/proc/self/cwd/guest" in args


def test_the_cmdline_names_no_path_of_this_machine(tmp_path):
    """Every host path reaches the lab through a link in its own directory (labview.py): the
    command line is the same wherever the checkout, the run directory and the disks are."""
    def spec(root):
        return BootSpec(run_dir=root / "logs" / "cell", steps=(), disks=(
            BlockDevice(root / "scratch" / "device", shared=True, model_clock=True),
            BlockDevice(root / "disk.img", overlay=root / "logs" / "cell" / "disk1.cow")))
    short, long = tmp_path / "a", tmp_path / ("b" * 60)
    assert kernel_cmdline(spec(short)) == kernel_cmdline(spec(long))
    assert not any(str(tmp_path) in a or str(GUEST_DIR) in a for a in kernel_cmdline(spec(long)))
    lab = labview.view(spec(long).run_dir, spec(long).disks)
    assert lab.disks == ("disk0/device", "cow1/disk1.cow,disk1")
    tools = guestcode.tools_dir(labview.TOOLS)  # lab/guest's files, compiled for the guest (guestcode.py)
    assert lab.links == {"run": (long / "logs" / "cell").resolve(), "guest": tools,
                         "disk0": (long / "scratch").resolve(), "cow1": (long / "logs" / "cell").resolve(),
                         "disk1": (long / "disk.img").resolve()}
    lab_dir = tmp_path / "lab"
    lab_dir.mkdir()
    lab.make(lab_dir)
    assert os.readlink(lab_dir / "guest") == str(tools) and (lab_dir / "guest" / "init.sh").is_file()


def test_ubd_flags_for_shared_and_no_trim(tmp_path):
    spec = BootSpec(run_dir=tmp_path, steps=(), disks=(
        BlockDevice(Path("/x/a")), BlockDevice(Path("/x/b"), shared=True, discard=False)))
    args = kernel_cmdline(spec)
    assert "ubd0=disk0" in args and "ubd1ct=disk1" in args


def test_nandsim_geometry_goes_on_the_cmdline(tmp_path):
    spec = BootSpec(run_dir=tmp_path, steps=(), nandsim=Nandsim(id_bytes=(0x2c, 0xdc), parts=(64, 64)))
    args = kernel_cmdline(spec)
    assert "nandsim.id_bytes=0x2c,0xdc" in args and "nandsim.parts=64,64" in args


def test_no_lab_starts_once_flashbed_is_stopping(tmp_path, monkeypatch):
    from flashbed import stopping
    from flashbed.lab import uml
    monkeypatch.setattr(stopping, "_STOPPING", __import__("threading").Event())
    stopping.kill_all()
    with pytest.raises(stopping.Stopping):
        uml.boot(BootSpec(run_dir=tmp_path, steps=(Step("noop", "true"),)))


def _info(name: str, mode: str, max_cpus: int):
    from flashbed.lab.kernel import KernelInfo
    return KernelInfo(path="/x/linux", key="k", name=name, source_package=f"linux-source-{name}",
                      source_version="1", release=name, patches=[], boot_mode=mode, max_cpus=max_cpus,
                      build_seconds=0, built_at="t")


def test_seccomp_mode_and_vcpus_go_on_the_cmdline(tmp_path):
    args = kernel_cmdline(BootSpec(run_dir=tmp_path, steps=(), cpus=2), _info("7.3", "seccomp", 8))
    assert "seccomp=on" in args and "ncpus=2" in args
    assert args.index("ncpus=2") < args.index("--")  # kernel parameters, not init's argv
    one = kernel_cmdline(BootSpec(run_dir=tmp_path, steps=()), _info("7.3", "seccomp", 8))
    assert "seccomp=on" in one and not any(a.startswith("ncpus=") for a in one)


def test_ptrace_mode_adds_nothing_a_6_12_kernel_would_not_know(tmp_path):
    args = kernel_cmdline(BootSpec(run_dir=tmp_path, steps=()), _info("6.12", "ptrace", 1))
    assert not any(a.startswith(("seccomp=", "ncpus=")) for a in args)


@pytest.mark.parametrize("name,mode,max_cpus,words", [
    ("6.12", "ptrace", 1, "lab kernel 6.12 has no SMP"),
    ("7.3", "ptrace", 8, "lab kernel 7.3 runs several vCPUs in seccomp mode only"),
])
def test_vcpus_a_kernel_cannot_run_are_one_line(tmp_path, name, mode, max_cpus, words):
    from flashbed.errors import FlashbedError
    with pytest.raises(FlashbedError) as e:
        kernel_cmdline(BootSpec(run_dir=tmp_path, steps=(), cpus=2), _info(name, mode, max_cpus))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_lab_with_vcpus_its_kernel_cannot_run_is_refused_before_it_starts(tmp_path):
    from flashbed.errors import FlashbedError
    from flashbed.lab import uml
    with pytest.raises(FlashbedError, match="lab kernel 6.12 has no SMP"):
        uml.boot(BootSpec(run_dir=tmp_path / "lab", steps=(Step("nproc", "nproc"),), cpus=2),
                 _info("6.12", "ptrace", 1))
    assert not (tmp_path / "lab").exists()


@pytest.mark.parametrize("shm_flag,shm_free_mb,want", [
    (0, 4096, "/dev/shm"),  # a host's tmpfs: the lab's memory stays off the disk
    (os.ST_NOEXEC, 4096, "TMP"),  # a container's /dev/shm is noexec, which UML refuses
    (0, 64, "TMP"),  # and 64 MiB, which a lab's memory outgrows
])
def test_the_labs_memory_goes_where_uml_can_map_all_of_it(monkeypatch, tmp_path, shm_flag, shm_free_mb, want):
    from flashbed.lab import uml

    def statvfs(d):
        flag, free = (shm_flag, shm_free_mb) if d == "/dev/shm" else (0, 1)
        return os.statvfs_result((4096, 4096, 0, 0, free * 256, 0, 0, 0, flag, 255))
    monkeypatch.setattr(os, "statvfs", statvfs)
    monkeypatch.setattr(os, "access", lambda d, mode: True)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(uml.tempfile, "tempdir", None)
    assert uml.memory_dir(768) == ("/dev/shm" if want == "/dev/shm" else str(tmp_path))


def test_no_directory_for_the_labs_memory_is_one_line(monkeypatch, tmp_path):
    from flashbed.errors import FlashbedError
    from flashbed.lab import uml
    monkeypatch.setattr(os, "statvfs", lambda d: os.statvfs_result((4096, 4096, 0, 0, 1 << 20, 0, 0, 0,
                                                                    os.ST_NOEXEC, 255)))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(uml.tempfile, "tempdir", None)
    with pytest.raises(FlashbedError, match="set TMPDIR to a writable directory mounted exec") as e:
        uml.memory_dir(768)
    assert "\n" not in str(e.value)
