"""The guest programs a lab mounts (lab/guestcode.py): lab/guest's files with bytecode the guest's
interpreter compiled under the guest's names, so whether the checkout's own __pycache__ exists (a
host process writes it when it first imports a guest module) and where the checkout is change
nothing the guest runs."""

import os
import shutil
import time

import pytest

from flashbed.lab import guestcode, labview
from flashbed.lab.boundary import GUEST_DIR


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """tools_dir without its per-process memo, its cache in tmp_path/cache, its sources at `src`."""
    monkeypatch.setenv("FLASHBED_CACHE", str(tmp_path / "cache"))
    guestcode.tools_dir.cache_clear()

    def make(src):
        monkeypatch.setattr(guestcode, "GUEST_DIR", src)
        guestcode.tools_dir.cache_clear()
        return guestcode.tools_dir(labview.TOOLS)
    yield make
    guestcode.tools_dir.cache_clear()


def test_the_copy_holds_the_guest_programs_compiled_under_the_guests_names(fresh, tmp_path):
    src = tmp_path / ("checkout-" + "x" * 40) / "guest"
    shutil.copytree(GUEST_DIR, src, ignore=shutil.ignore_patterns("__pycache__"))
    out = fresh(src)
    assert out.parent == tmp_path / "cache" / "guest"
    names = sorted(p.name for p in src.iterdir())
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == names
    for name in names:
        assert (out / name).read_bytes() == (src / name).read_bytes()
        assert (out / name).stat().st_mode == (src / name).stat().st_mode  # init.sh stays executable
    pycs = list((out / "__pycache__").iterdir())
    assert sorted(p.name.split(".")[0] for p in pycs) == sorted(n.removesuffix(".py") for n in names if n.endswith(".py"))
    for pyc in pycs:
        data = pyc.read_bytes()
        assert int.from_bytes(data[4:8], "little") == 1  # PEP 552: hash-based, source never checked
        name = pyc.name.split(".")[0]
        assert f"{labview.TOOLS}/{name}.py".encode() in data and str(src).encode() not in data


def test_two_checkouts_give_the_same_copy_and_a_change_a_new_one(fresh, tmp_path):
    a, b = tmp_path / "a" / "guest", tmp_path / ("b" * 50) / "guest"
    for d in (a, b):
        shutil.copytree(GUEST_DIR, d, ignore=shutil.ignore_patterns("__pycache__"))
    (b / "__pycache__").mkdir()  # a host's bytecode in one checkout: never the guest's
    (b / "__pycache__" / "guestlib.cpython-311.pyc").write_bytes(b"not bytecode")
    first = fresh(a)
    pyc = {p.name: p.read_bytes() for p in (first / "__pycache__").iterdir()}
    assert fresh(b) == first
    assert {p.name: p.read_bytes() for p in (first / "__pycache__").iterdir()} == pyc
    (b / "guestlib.py").write_text((b / "guestlib.py").read_text() + "\n# changed\n")
    second = fresh(b)
    assert second != first and (second / "guestlib.py").read_text().endswith("# changed\n")
    assert first.is_dir()  # the other copy stays for whoever mounts it


def test_a_copy_unused_for_a_month_goes_when_a_new_one_is_made(fresh, tmp_path):
    a, b = tmp_path / "a" / "guest", tmp_path / "b" / "guest"
    for d in (a, b):
        shutil.copytree(GUEST_DIR, d, ignore=shutil.ignore_patterns("__pycache__"))
    (b / "guestlib.py").write_text((b / "guestlib.py").read_text() + "\n# changed\n")
    old = fresh(a)
    month = time.time() - (guestcode.UNUSED_DAYS + 1) * 86400
    os.utime(old, (month, month))
    assert fresh(a) == old and old.stat().st_mtime > month  # a process mounts it: marked used
    os.utime(old, (month, month))
    new = fresh(b)
    assert new.is_dir() and not old.exists()
    recent = fresh(a)  # made again, as new; the copy of b was used just now and stays
    assert recent == old and new.is_dir()


def test_the_lab_mounts_the_copy(fresh, tmp_path):
    out = fresh(GUEST_DIR)
    assert labview.view(tmp_path, ()).links[labview.TOOLS_LINK] == out
