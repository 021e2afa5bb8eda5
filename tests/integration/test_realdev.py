"""Real block devices on loop devices (a sparse file in the test's temp dir; never a real disk):
every refusal at the edge (one line, exit 2, nothing written), the identity, the session's hold
on the device, and (marker `lab`) the bigfile study end to end.

Needs root and loop devices; skipped without them. The holder refusal needs device-mapper on the
host (skipped without it; tests/unit/test_realdev.py checks it on a fake sysfs)."""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from flashbed.cli import main
from flashbed.devices import realdev as R
from flashbed.errors import FlashbedError
from flashbed.plan import PlanRequest, make_plan

MiB = 1 << 20
RUN = ["run", "--fs", "ext4", "--study", "bigfile", "--set", "bigfile.size=16M"]


def _sh(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def loop(tmp_path):
    """A factory of loop devices on sparse files; every one is unmounted and detached afterwards,
    whatever happened."""
    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    made: list[str] = []
    mounts: list[Path] = []

    def make(size: int = 64 * MiB, *flags: str, setup=None) -> str:
        img = tmp_path / f"disk{len(made)}.img"
        with open(img, "wb") as f:
            f.truncate(size)
        if setup:
            setup(img)
        try:
            node = _sh("losetup", "-f", "--show", *flags, str(img))
        except (OSError, subprocess.CalledProcessError) as e:
            pytest.skip(f"no loop device: {e}")
        made.append(node)
        return node

    make.mounts = mounts
    yield make
    for m in reversed(mounts):
        subprocess.run(["umount", str(m)], capture_output=True)
    for node in made:
        subprocess.run(["losetup", "-d", node], capture_output=True)


def _refused(capsys, argv: list[str], out: Path) -> str:
    assert main([*argv, "--out", str(out)]) == 2
    o, err = capsys.readouterr()
    assert o == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert not out.exists()  # checked before anything is written
    return err


def _mbr(img: Path) -> None:
    """A DOS partition table with one partition (sectors 2048..34815)."""
    mbr = bytearray(512)
    struct.pack_into("<B3sB3sII", mbr, 446, 0, b"\0\0\0", 0x83, b"\0\0\0", 2048, 32768)
    mbr[510:512] = b"\x55\xaa"
    with open(img, "r+b") as f:
        f.write(mbr)


def _mount(loop, node: str, where: Path) -> None:
    where.mkdir()
    r = subprocess.run(["mount", node, str(where)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount here: {r.stderr.strip()}")
    loop.mounts.append(where)


def test_a_clean_loop_device_is_planned_with_its_identity(loop, tmp_path):
    node = loop()
    name = Path(node).name
    req = PlanRequest(fs=("ext4",), devices=(node,), studies=("bigfile",), overrides={"bigfile": {"size": 16 * MiB}})
    plan = make_plan(req)
    assert plan.request.devices == (f"real:{name}",)  # the request names the device, not the node
    dev = plan.devices[name]
    assert dev.backend == "real" and dev.capacity == 64 * MiB and str(dev.path) == node
    ident = dev.info["identity"]
    assert dev.info["kind"] == "real" and ident["loop_backing_file"] == str(tmp_path / "disk0.img")
    assert ident["logical_block_size"] == 512 and ident["transport"] == "virtual"
    assert "the host's storage (not flash) limits its figures" in dev.info["description"]
    assert [c.key.device for c in plan.cells] == [name]
    assert f"{node} judged blank: no signature, all 64 MiB read zero" in plan.notes[0]  # read whole, and said
    # the same run found again from the stored request (resume)
    again = make_plan(PlanRequest(**{**json.loads(json.dumps(plan.request.__dict__))}))
    assert again.request.run_id() == req.run_id() and str(again.devices[name].path) == node


def test_a_filesystem_signature_is_refused_unless_destroy_data_on_repeats_the_path(loop, tmp_path, capsys):
    node = loop()
    _sh("mkfs.ext4", "-q", "-L", "precious", node)
    err = _refused(capsys, [*RUN, "--device", node], tmp_path / "run")
    assert f"{node} carries data (ext4 labelled 'precious')" in err and f"--destroy-data-on {node}" in err
    plan = make_plan(PlanRequest(fs=("ext4",), devices=(node,), studies=("bigfile",),
                                 overrides={"bigfile": {"size": 16 * MiB}}), destroy_data_on=(node,))
    assert len(plan.cells) == 1
    err = _refused(capsys, [*RUN, "--device", node, "--destroy-data-on", "/dev/loop-other"], tmp_path / "run")
    assert "--destroy-data-on /dev/loop-other names no real device of this run" in err



def test_probe_refuses_a_real_device_with_data_unless_destroy_data_on_repeats_it(loop, tmp_path, capsys):
    node = loop()
    _sh("mkfs.ext4", "-q", "-L", "precious", node)
    err = _refused(capsys, ["probe", node], tmp_path / "probe")
    assert f"{node} carries data (ext4 labelled 'precious')" in err and f"--destroy-data-on {node}" in err
    err = _refused(capsys, ["probe", "ideal@64M", "--destroy-data-on", node], tmp_path / "probe")
    assert "--destroy-data-on applies to a real device, and ideal@64M is a preset" in err

def _raw(offset: int):
    """Data without any signature (a raw backup, plain dm-crypt): a page of bytes at `offset`."""
    def put(img: Path) -> None:
        with open(img, "r+b") as f:
            f.seek(offset)
            f.write(os.urandom(4096).replace(b"\0", b"\1"))
    return put


@pytest.mark.parametrize("offset", [0, 512, 40 * MiB])
def test_data_without_a_signature_is_refused_naming_where_it_is(loop, tmp_path, capsys, offset):
    node = loop(setup=_raw(offset))
    before = R.first_data(node, 64 * MiB)
    err = _refused(capsys, [*RUN, "--device", node], tmp_path / "run")
    assert f"{node} may carry data (no filesystem or partition-table signature, but non-zero data at offset " \
           f"{offset}), which the run would destroy: if that is what you want, add --destroy-data-on {node}" in err
    assert R.first_data(node, 64 * MiB) == before  # nothing written
    err = _refused(capsys, ["probe", node], tmp_path / "probe")
    assert f"non-zero data at offset {offset}" in err


def test_a_device_too_large_to_read_whole_needs_destroy_data_on(loop, tmp_path, capsys, monkeypatch):
    node = loop()
    monkeypatch.setattr(R, "BLANK_READ", 16 * MiB)
    err = _refused(capsys, [*RUN, "--device", node], tmp_path / "run")
    assert "its first 16 MiB read zero, but it holds 64 MiB, more than flashbed reads to prove a device blank" in err
    assert f"add --destroy-data-on {node}" in err


def test_a_partition_table_is_refused(loop, tmp_path, capsys):
    node = loop(setup=_mbr)
    err = _refused(capsys, [*RUN, "--device", node], tmp_path / "run")
    assert f"{node} carries data (dos partition table" in err


def test_a_mounted_device_is_refused_even_with_destroy_data_on(loop, tmp_path, capsys):
    node = loop()
    _sh("mkfs.ext4", "-q", node)
    _mount(loop, node, tmp_path / "mnt")
    err = _refused(capsys, [*RUN, "--device", node, "--destroy-data-on", node], tmp_path / "run")
    assert f"{node} is mounted at {tmp_path / 'mnt'}: unmount it first" in err


def test_a_device_whose_partition_is_mounted_is_refused_naming_it(loop, tmp_path, capsys):
    node = loop(64 * MiB, "-P", setup=_mbr)
    part = f"{node}p1"
    subprocess.run(["partx", "-a", node], capture_output=True)
    for _ in range(50):
        if os.path.exists(part):
            break
        time.sleep(0.1)
    else:
        pytest.skip("the kernel made no partition node for the loop device")
    _sh("mkfs.ext4", "-q", part)
    _mount(loop, part, tmp_path / "mnt")
    err = _refused(capsys, [*RUN, "--device", node, "--destroy-data-on", node], tmp_path / "run")
    assert f"{part} (a partition of {node}) is mounted at {tmp_path / 'mnt'}" in err


def test_a_read_only_device_is_refused(loop, tmp_path, capsys):
    node = loop(64 * MiB, "-r")
    err = _refused(capsys, [*RUN, "--device", node, "--destroy-data-on", node], tmp_path / "run")
    assert f"{node} is read-only" in err


def test_a_device_held_by_device_mapper_is_refused(loop, tmp_path, capsys):
    node = loop()
    name = f"flashbed-test-{os.getpid()}"
    r = subprocess.run(["dmsetup", "create", name, "--table", f"0 2048 linear {node} 0"], capture_output=True,
                       text=True)
    if r.returncode:
        pytest.skip(f"no device-mapper on this host: {r.stderr.strip().splitlines()[0] if r.stderr else r}")
    try:
        err = _refused(capsys, [*RUN, "--device", node, "--destroy-data-on", node], tmp_path / "run")
        assert f"{node} is in use by dm-" in err and f"device-mapper/LVM {name}" in err
    finally:
        subprocess.run(["dmsetup", "remove", name], capture_output=True)


def test_not_a_block_device_and_missing_are_one_line(tmp_path, capsys):
    f = tmp_path / "image.img"
    f.write_bytes(b"\0" * 4096)
    assert "is not a block device" in _refused(capsys, [*RUN, "--device", str(f)], tmp_path / "run")
    err = _refused(capsys, [*RUN, "--device", "/dev/flashbed-no-such-device"], tmp_path / "run")
    assert "/dev/flashbed-no-such-device: no such device" in err


@pytest.mark.parametrize("extra, words", [
    (["--study", "powercut"], "study powercut cannot run on loop"),
    (["--fs", "f2fs+tuned"], "'f2fs+tuned' aligns to the erase block"),
    (["--executor", "dask", "--scheduler", "tcp://127.0.0.1:1"], "a real device is attached to this machine"),
])
def test_what_a_real_device_cannot_do_is_one_line(loop, tmp_path, capsys, extra, words):
    node = loop()
    argv = [*RUN, "--device", node, *extra]
    assert words in _refused(capsys, argv, tmp_path / "run")


def test_a_size_on_a_real_device_is_refused(loop, tmp_path, capsys):
    node = loop()
    assert "a real device's size is its own; drop '@32M'" in _refused(capsys, [*RUN, "--device", f"{node}@32M"],
                                                                       tmp_path / "run")


def test_a_cell_holds_the_device_alone_and_nothing_can_mount_it_meanwhile(loop, tmp_path):
    node = loop()
    dev = R.load(node)
    order: list[str] = []
    with R.claimed(dev, lambda: False, poll=0.01):
        assert f"{node} is in use" in R._exclusive(node)  # what a mount would meet: EBUSY

        def second():
            with R.claimed(dev, lambda: False, poll=0.01):
                order.append("second")

        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        order.append("first done")
    t.join(10)
    assert order == ["first done", "second"]
    assert R._exclusive(node) is None
    with pytest.raises(FlashbedError, match=f"{node} is now {Path(node).name}, not the planned elsewhere"):
        with R.claimed(replace(dev, name="elsewhere"), lambda: False):
            pass


def _sectors_read(node: str) -> int:
    return int(Path(f"/sys/class/block/{Path(node).name}/stat").read_text().split()[2])


@pytest.mark.lab
def test_bigfile_runs_on_a_loop_device_end_to_end(kernel, loop, tmp_path):
    node = loop(512 * MiB)
    out = tmp_path / "run"
    read_before = _sectors_read(node)
    r = subprocess.run([sys.executable, "-m", "flashbed.cli", "run", "--fs", "ext4,f2fs", "--study", "bigfile",
                        "--set", "bigfile.size=64M", "--device", node, "--destroy-data-on", node,
                        "--out", str(out)], capture_output=True, text=True, timeout=1800,
                       env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src")))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "not observable on a real device" in r.stdout
    # the default clock (auto) runs a real device in real time, and says so in one line
    assert [line for line in r.stderr.splitlines() if "run in real time" in line] == [
        f"flashbed: 2 cells on {Path(node).name} (real) run in real time: virtual time needs a device the emulator "
        f"serves (nandsim and real devices have no model clock)"]
    name = Path(node).name
    man = json.loads((out / "manifest.json").read_text())
    assert man["devices"][name]["kind"] == "real" and man["request"]["devices"] == [f"real:{name}"]
    for fs in ("ext4", "f2fs"):
        cell = json.loads((out / "cells" / f"{name}__{fs}__bigfile__r0.json").read_text())
        assert cell["status"] == "ok", cell["error"]
        assert cell["device_stats"] == {}  # nothing to show as zero
        assert cell["provenance"]["preset"] is None
        assert cell["provenance"]["real_device"]["loop_backing_file"] == str(tmp_path / "disk0.img")
        seconds = {m["case"]: m["value"] for m in cell["measurements"] if m["metric"] == "seconds"}
        assert seconds["write"] > 0 and seconds["read"] > 0
    # the lab wrote the device itself: the last cell's filesystem is on it; and read it itself (O_DIRECT):
    # through the host's page cache, the cold reads would have been served from what the writes left there
    assert json.loads(_sh("wipefs", "--no-act", "--json", node))["signatures"]
    assert (_sectors_read(node) - read_before) * 512 >= 2 * 64 * MiB
    report = (out / "report" / "report.md").read_text() if (out / "report" / "report.md").exists() else \
        next(out.rglob("report.md")).read_text()
    assert "not observable on a real device" in report


def test_destroy_data_on_a_second_node_of_the_same_device_is_that_device(loop, tmp_path, capsys):
    """Issue 42, 17: a second node of the device (mknod, same device number) was told to 'repeat
    the --device path exactly'; it names the same device, so it is the permission for it."""
    node = loop(64 * MiB, setup=_mbr)
    st = os.stat(node)
    twin = tmp_path / "twin"
    os.mknod(twin, 0o600 | stat.S_IFBLK, st.st_rdev)
    err = _refused(capsys, [*RUN, "--device", node, "--destroy-data-on", str(twin), "--study", "powercut"],
                   tmp_path / "run")
    assert "names no real device" not in err and "study powercut cannot run on loop" in err
    other = loop()
    err = _refused(capsys, [*RUN, "--device", node, "--destroy-data-on", other], tmp_path / "run")
    assert f"--destroy-data-on {other} names no real device of this run" in err
