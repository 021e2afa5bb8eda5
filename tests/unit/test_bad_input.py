"""Issue 19: bad inputs and faults, each refused in one line (exit 2) or handled without
destroying or silently dropping anything. One test per defect; the fuzz test of the same
edges is test_fuzz_edges.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from flashbed.cli import main
from flashbed.errors import FlashbedError

PLAIN = "plain-file@512M"


def one_line(capsys, words: str) -> str:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert words in err, err
    return err


# --- 4. --set values parsed by their field's kind ---------------------------------------

def test_set_values_are_read_by_their_fields_kind():
    from flashbed.cli import _overrides
    got = _overrides(["bandwidth.bs=4k,4M", "bigfile.size=256M", "powercut.cut_min=0.7", "mount.fills=0,50",
                      "crashstates.sabotage=true", "bandwidth.rw=write"])
    # a block size stays the word fio takes: the cases read "randwrite 4k direct"
    assert got["bandwidth"] == {"bs": ["4k", "4M"], "rw": "write"}
    assert got["bigfile"] == {"size": 256 << 20}
    assert got["powercut"] == {"cut_min": 0.7}
    assert got["mount"] == {"fills": [0, 50]}
    assert got["crashstates"] == {"sabotage": True}


def test_set_block_sizes_reach_the_cases_as_given():
    from flashbed.cli import _overrides
    from flashbed.plan import PlanRequest, make_plan
    from flashbed.studies.bandwidth import case_name
    plan = make_plan(PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("bandwidth",),
                                 overrides={**_overrides(["bandwidth.bs=4k,4M", "bandwidth.size=64M"])}))
    p = plan.cells[0].params
    assert p.bs == ("4k", "4M")
    assert case_name("randwrite", p.bs[0], 1) == "randwrite 4k direct"


# --- 9, 10. every parameter's range, and its form, checked at the edge ----------------------

@pytest.mark.parametrize("setting", [
    "powercut.iterations=0", "bigfile.size=0", "bandwidth.runtime=-5", "crashstates.step_timeout=nan",
    "crashstates.step_timeout=inf", "mount.fills=200", "mount.fills=0,-1", "boot.text=101", "corruption.tail=0",
    "bandwidth.bs=bogus", "bandwidth.bs=4k,", "bandwidth.bs=", "mixed.scale_bs=0k", "powercut.max_bytes=0",
])
def test_set_values_out_of_range_or_form_are_refused_before_anything_runs(tmp_path, setting, capsys):
    out_dir = tmp_path / "run"
    argv = ["run", "--fs", "ext4", "--study", "bigfile", "--device", PLAIN, "--set", setting, "--out", str(out_dir)]
    assert main(argv) == 2
    one_line(capsys, f"for {setting.split('=')[0]}: expected")
    assert not out_dir.exists()


def test_every_number_declares_its_range():
    from flashbed.studies import STUDIES
    from flashbed.studies import params as P
    missing = [f"{n}.{k}" for n, st in STUDIES.items() for k, kind in P.kinds(st.Params).items()
               if kind.numeric and kind.low is None and kind.above is None]
    assert not missing
    for n, st in STUDIES.items():  # and every default lies in it
        st.params(**{f.name: f.default for f in dataclasses.fields(st.Params)})


def test_a_range_is_said_in_the_refusal_and_in_the_listing():
    from flashbed.studies import STUDIES
    with pytest.raises(FlashbedError, match=r"from 0 to 100"):
        STUDIES["mount"].params_at_edge({"fills": "200"})
    assert any("from 0 to 100" in line for line in STUDIES["mount"].param_lines())


# --- 1, 2, 16, 18. crashstate replay --image ---------------------------------------------

@pytest.fixture
def crash_run(tmp_path, monkeypatch):
    """A run directory with one crash-state cell that kept its write log, and an emulator
    whose crash-image writes a small image (a fake: the real one is in the lab tests)."""
    from flashbed.devices import emulator
    from flashbed.results import CellKey, CellResult
    from flashbed.store import RunStore
    from flashbed.studies.base import CRASHLOG
    store = RunStore(tmp_path / "run")
    store.create()
    store.write_manifest({"schema": 1, "request": {}})
    key = CellKey("emmc-8g@64M", "ext4", "crashstates", "powercut", 0)
    store.write(CellResult(key, "ok", extra={"failures": [{"state": "12+k3", "class": "data-loss", "why": "x"}]}))
    (store.logs_dir(key) / CRASHLOG).mkdir(parents=True)
    calls = []

    def fake(log_dir, state, image):
        calls.append(Path(image))
        Path(image).write_bytes(b"\xab" * 4096)
        return {"kind": "cut", "pos": 12, "acked": 10, "kept": 3, "volatile": 5, "damaged_ranges": []}

    monkeypatch.setattr(emulator, "rebuild_image", fake)
    store.calls = calls
    store.ref = f"{key.id}:12+k3"
    return store


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_replay_refuses_a_block_device_without_destroy_data_on(crash_run, tmp_path, capsys):
    import os
    import stat
    node = tmp_path / "blk"
    os.mknod(node, stat.S_IFBLK | 0o600, os.makedev(7, 250))  # a loop device node (needs root)
    before = snapshot(crash_run.root)
    assert main(["crashstate", "replay", str(crash_run.root), crash_run.ref, "--image", str(node)]) == 2
    one_line(capsys, f"--image {node} is a block device: the image would overwrite it; if that is what you want, "
                     f"add --destroy-data-on {node}")
    assert crash_run.calls == [] and snapshot(crash_run.root) == before
    # a --destroy-data-on that names something else is no permission either
    assert main(["crashstate", "replay", str(crash_run.root), crash_run.ref, "--image", str(node),
                 "--destroy-data-on", "/dev/sdz"]) == 2
    one_line(capsys, "--destroy-data-on /dev/sdz is not the --image")
    assert crash_run.calls == []


@pytest.mark.parametrize("where", ["manifest.json", "cells/new.img", "new.img", "."])
def test_replay_never_writes_into_a_run_directory(crash_run, where, capsys):
    before = snapshot(crash_run.root)
    image = crash_run.root / where
    assert main(["crashstate", "replay", str(crash_run.root), crash_run.ref, "--image", str(image), "--force"]) == 2
    one_line(capsys, f"is inside run directory {crash_run.root.resolve()}")
    assert snapshot(crash_run.root) == before and crash_run.calls == []


def test_replay_refuses_an_existing_file_unless_forced(crash_run, tmp_path, capsys):
    image = tmp_path / "keep.img"
    image.write_bytes(b"precious")
    argv = ["crashstate", "replay", str(crash_run.root), crash_run.ref, "--image", str(image)]
    assert main(argv) == 2
    one_line(capsys, f"--image {image} exists: add --force to replace it")
    assert image.read_bytes() == b"precious"
    assert main([*argv, "--force"]) == 0
    assert image.read_bytes() == b"\xab" * 4096
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".keep")] == []


def test_replay_into_a_missing_directory_says_what_to_do(crash_run, tmp_path, capsys):
    image = tmp_path / "no" / "such" / "s.img"
    assert main(["crashstate", "replay", str(crash_run.root), crash_run.ref, "--image", str(image)]) == 2
    one_line(capsys, f"directory {image.parent} does not exist: create it (mkdir -p {image.parent})")


def test_replay_on_a_full_disk_leaves_no_file(crash_run, tmp_path, monkeypatch, capsys):
    from flashbed.devices import emulator

    def full(log_dir, state, image):
        Path(image).write_bytes(b"")  # what the emulator leaves when the first write fails
        raise emulator.EmulatorError("writing the image: No space left on device (os error 28)")

    monkeypatch.setattr(emulator, "rebuild_image", full)
    out = tmp_path / "out"
    out.mkdir()
    assert main(["crashstate", "replay", str(crash_run.root), crash_run.ref, "--image", str(out / "s.img")]) == 2
    one_line(capsys, f"the disk holding {out} is full: free some space or give --image another path")
    assert list(out.iterdir()) == []


# --- 3. a preset edited between a killed run and --resume ---------------------------------

def test_resume_refuses_a_preset_changed_since_the_run_was_made(tmp_path, capsys):
    import io

    from tests.replay import DATA

    from flashbed.execute import execute
    from flashbed.executors import LocalExecutor
    from flashbed.lab.replay import ReplayLabs
    from flashbed.paths import repo_root
    from flashbed.plan import PlanRequest, make_plan
    from flashbed.store import RunStore
    preset = tmp_path / "mine" / "plain-file.toml"  # a preset of one's own, named as the recorded one
    preset.parent.mkdir()
    preset.write_text((repo_root() / "presets" / "plain-file.toml").read_text())
    req = PlanRequest(fs=("ext4",), devices=(f"{preset}@256M",), studies=("bigfile",),
                      overrides={"bigfile": {"size": 16 << 20}}, pace="none")
    store = RunStore(tmp_path / "run")
    execute(make_plan(req), store, ReplayLabs(DATA), LocalExecutor(1), stream=io.StringIO())
    assert store.manifest()["presets"]["plain-file@256M"].startswith("sha256:")
    before = snapshot(store.root)
    preset.write_text(preset.read_text().replace("page_size = 4096", "page_size = 8192"))
    assert main(["run", "--resume", str(store.root)]) == 2
    one_line(capsys, f"device plain-file@256M: its preset {preset} has changed since run run was made")
    with pytest.raises(FlashbedError, match="has changed since run"):
        execute(make_plan(req), store, ReplayLabs(DATA), LocalExecutor(1), stream=io.StringIO())
    after = snapshot(store.root)
    after.pop(str(store.root / ".lock"), None), before.pop(str(store.root / ".lock"), None)
    assert after == before
