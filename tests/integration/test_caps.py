"""The capability probe in the real lab: what a filesystem holds after a remount."""
import pytest

from flashbed import variants
from flashbed.cell import run_cell
from flashbed.devices import presets
from flashbed.lab.guest.caps import PROBES
from flashbed.lab.labs import UmlLab
from flashbed.results import CellKey
from flashbed.studies import STUDIES
from flashbed.studies.base import CellSpec

pytestmark = [pytest.mark.lab, pytest.mark.spread]


def caps(fs, device, kernel, tmp_path):
    dev = presets.load_spec(device)
    st = STUDIES["caps"]
    spec = CellSpec(key=CellKey(dev.label, fs, "caps", ""), device=dev, variant=variants.parse(fs, dev),
                    params=st.params())
    res = run_cell(spec, UmlLab(kernel), tmp_path / "logs", tmp_path / "scratch")
    assert res.status == "ok", res.error
    return {m.metric.removeprefix("cap:"): m.value for m in res.measurements}, res.extra["why"]


def test_ext4_holds_everything_and_exfat_almost_nothing(kernel, tmp_path):
    got, why = caps("ext4", "plain-file@256M", kernel, tmp_path / "ext4")
    assert got == {p: 1 for p in PROBES}, why
    got, why = caps("exfat", "plain-file@256M", kernel, tmp_path / "exfat")
    # a 256 MiB device has no room for a 5 GiB file without holes: exFAT's limit is shown instead
    assert [p for p, v in got.items() if v] == ["large_files"], why
    assert why["owners"].startswith("not made: EPERM") and why["case_sensitive"].startswith("not made: EEXIST")
    assert "passed the size limit" in why["large_files"]


def test_vfat_stops_at_4_gib(kernel, tmp_path):
    got, why = caps("vfat", "plain-file@256M", kernel, tmp_path)
    assert got["large_files"] == 0 and why["large_files"] == "not made: EFBIG: File too large"


def test_ubifs_on_raw_nand(kernel, tmp_path):
    got, why = caps("ubifs", "nand-slc-256m@64M", kernel, tmp_path)
    assert got["owners"] == got["symlinks"] == got["hard_links"] == got["device_nodes"] == 1, why
