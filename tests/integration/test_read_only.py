"""squashfs and erofs with every compressor Debian's tools offer: an image built from a
tree, written to the device as a flashing step would, mounted read-only by the lab
kernel and read back, all in one lab boot."""
import pytest

from flashbed import filesystems as fscat
from flashbed import variants
from flashbed.lab.boundary import BlockDevice, BootSpec, Step
from flashbed.lab.uml import boot
from flashbed.studies.base import MNT, TOOL

pytestmark = pytest.mark.lab

SPECS = [f"{name}+{c}" for name in fscat.READ_ONLY for c in fscat.get(name).compressors] + list(fscat.READ_ONLY)


def test_every_compressor_makes_an_image_the_lab_kernel_mounts_read_only_and_reads(kernel, tmp_path):
    img = tmp_path / "device.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    manifest = "$FLASHBED_RUN/manifest.json"
    steps = [Step("tree", f"{TOOL} write-tree /tmp/tree {manifest} --dirs 5 --files 60 --big-mb 4 --seed 3")]
    for i, spec in enumerate(SPECS):
        v = variants.parse(spec)
        build, flash = v.image_cmds("/tmp/tree")
        steps += [Step(f"build{i}", build), Step(f"flash{i}", flash), Step(f"mount{i}", v.mount_cmds(MNT)[0]),
                  Step(f"write{i}", f"touch {MNT}/new", may_fail=True),
                  Step(f"verify{i}", f"{TOOL} verify-tree {MNT} {manifest}"),
                  Step(f"used{i}", f"df -B1 --output=used {MNT} | tail -n 1"), Step(f"umount{i}", f"umount {MNT}")]
    r = boot(BootSpec(run_dir=tmp_path, steps=tuple(steps), disks=(BlockDevice(img),), timeout=900), kernel)
    assert r.ok, (r.status, r.error, [(s.name, s.stderr[-300:]) for s in r.steps if not s.status.ok],
                  r.console_log)
    used = {}
    for i, spec in enumerate(SPECS):
        assert r.step(f"write{i}").rc != 0 and "Read-only" in r.step(f"write{i}").stderr, spec
        used[spec] = int(r.step(f"used{i}").stdout)
    # the big file is random: no compressor shrinks it, every image holds it
    assert all(u > 4 << 20 for u in used.values()), used
    assert not (tmp_path / variants.RO_IMAGE).exists()  # the image is gone once written
