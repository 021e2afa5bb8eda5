import pytest
from pathlib import Path

from flashbed.lab.uml import INIT, BlockDevice, BootSpec, Nandsim, Step, kernel_cmdline


def test_cmdline_root_is_readonly_host_and_init_is_ours(tmp_path):
    args = kernel_cmdline(BootSpec(run_dir=tmp_path, steps=(Step("x", "true"),)))
    assert "rootfstype=hostfs" in args and "ro" in args
    assert args[-2:] == ["--", str(INIT)]
    assert f"flashbed.run={tmp_path.resolve()}" in args


def test_ubd_flags_for_shared_and_no_trim(tmp_path):
    spec = BootSpec(run_dir=tmp_path, steps=(), disks=(
        BlockDevice(Path("/x/a")), BlockDevice(Path("/x/b"), shared=True, discard=False)))
    args = kernel_cmdline(spec)
    assert "ubd0=/x/a" in args and "ubd1ct=/x/b" in args


def test_nandsim_geometry_goes_on_the_cmdline(tmp_path):
    spec = BootSpec(run_dir=tmp_path, steps=(), nandsim=Nandsim(id_bytes=(0x2c, 0xdc), parts=(64, 64)))
    args = kernel_cmdline(spec)
    assert "nandsim.id_bytes=0x2c,0xdc" in args and "nandsim.parts=64,64" in args


def test_no_lab_starts_once_flashbed_is_stopping(tmp_path, monkeypatch):
    from flashbed.lab import uml
    monkeypatch.setattr(uml, "_STOPPING", __import__("threading").Event())
    uml.kill_all()
    with pytest.raises(uml.Stopping):
        uml.boot(uml.BootSpec(run_dir=tmp_path, steps=(uml.Step("noop", "true"),)))
