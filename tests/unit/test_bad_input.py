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
    from flashbed.commands.run import _overrides
    got = _overrides(["bandwidth.bs=4k,4M", "bigfile.size=256M", "powercut.cut_min=0.7", "mount.fills=0,50",
                      "crashstates.sabotage=true", "bandwidth.rw=write"])
    # a block size stays the word fio takes: the cases read "randwrite 4k direct"
    assert got["bandwidth"] == {"bs": ["4k", "4M"], "rw": "write"}
    assert got["bigfile"] == {"size": 256 << 20}
    assert got["powercut"] == {"cut_min": 0.7}
    assert got["mount"] == {"fills": [0, 50]}
    assert got["crashstates"] == {"sabotage": True}


def test_set_block_sizes_reach_the_cases_as_given():
    from flashbed.commands.run import _overrides
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
    "crashstates.max_states=-1", "crashstates.dedup=maybe",
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

    from flashbed.execute import execute
    from flashbed.executors import LocalExecutor
    from flashbed.lab.replay import ReplayLabs
    from flashbed.paths import repo_root
    from flashbed.plan import PlanRequest, make_plan
    from flashbed.store import RunStore
    from tests.replay import DATA
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


# --- 5, 6, 7. devices, lists and labels that silently did something else -----------------

def refused(capsys, argv: list[str], words: str, tmp_path) -> str:
    out = tmp_path / "never"
    assert main([*argv, "--out", str(out)]) == 2
    err = one_line(capsys, words)
    assert not out.exists()
    return err


def test_a_device_with_nothing_after_the_at_is_refused(tmp_path, capsys):
    refused(capsys, ["run", "--fs", "ext4", "--study", "mkfs", "--device", "plain-file@"],
            "device plain-file@: nothing after '@': give a size, e.g. plain-file@512M", tmp_path)


@pytest.mark.parametrize("argv,option", [
    (["--fs", ""], "fs"), (["--fs", ","], "fs"), (["--fs", "ext4,"], "fs"), (["--study", ""], "study"),
    (["--device", ""], "device"), (["--kernel", ","], "kernel"),
])
def test_an_empty_list_item_is_not_every_default(argv, option, tmp_path, capsys):
    base = {"fs": ["--fs", "ext4"], "study": ["--study", "mkfs"], "device": ["--device", PLAIN], "kernel": []}
    rest = [a for o, v in base.items() if o != option for a in v]
    # a value empty as a whole is the parser's refusal of every empty value (issue 28), an empty item this one
    words = f"--{option} '': an empty value: give one" if not argv[1] else f"--{option} '{argv[1]}' has an empty item"
    refused(capsys, ["run", *rest, *argv], words, tmp_path)


def test_two_devices_with_one_label_are_refused(tmp_path, capsys):
    from flashbed.paths import repo_root
    mine = tmp_path / "p2" / "plain-file.toml"
    mine.parent.mkdir()
    mine.write_text((repo_root() / "presets" / "plain-file.toml").read_text())
    refused(capsys, ["run", "--fs", "ext4", "--study", "mkfs", "--device", "plain-file@64M", "--device",
                     f"{mine}@64M"], f"--device plain-file@64M and --device {mine}@64M are both labelled "
                                     f"plain-file@64M", tmp_path)


# --- 8, 13, 16. preset files read here: as strict as the emulator's ------------------------

NANDSIM = """name = "n"
kind = "nandsim"
description = "test"
[nandsim]
id_bytes = [0x20, 0xaa, 0x00, 0x15]
[ubi]
vid_hdr_offset = 2048
[geometry]
capacity_bytes = 268435456
page_size = 2048
erase_block_bytes = 131072
cell = "slc"
"""
FILE = """name = "f"
kind = "file"
[geometry]
capacity_bytes = 1073741824
page_size = 4096
erase_block_bytes = 1048576
"""


@pytest.mark.parametrize("base,change,words", [
    (NANDSIM, ("vid_hdr_offset", "vid_hdr_offest"), "field [ubi].vid_hdr_offest: unknown field"),
    (NANDSIM, ("capacity_bytes", "capcity"), "field [geometry].capcity: unknown field"),
    (NANDSIM, ("page_size = 2048", "page_size = 0"), "[geometry].page_size: must be a whole number of at least 1"),
    (NANDSIM, ("page_size = 2048", "page_size = -4096"), "[geometry].page_size: must be a whole number"),
    (NANDSIM, ("page_size = 2048", 'page_size = "big"'), "[geometry].page_size: must be a whole number"),
    (NANDSIM, ("erase_block_bytes = 131072", "erase_block_bytes = 0"), "[geometry].erase_block_bytes: must be"),
    (NANDSIM, ("capacity_bytes = 268435456", "capacity_bytes = -5"), "[geometry].capacity_bytes: must be"),
    (NANDSIM, ("capacity_bytes = 268435456", "capacity_bytes = 4096"),
     "[geometry].capacity_bytes (4096) must be a whole number of erase blocks (128K)"),
    (NANDSIM, ("erase_block_bytes = 131072", "erase_block_bytes = 131000"), "must be a whole number of pages"),
    (NANDSIM, ('cell = "slc"', 'cell = "qlc"'), "[geometry].cell: must be one of slc, mlc, tlc"),
    (NANDSIM, ("[ubi]", "[ubi_]"), "field ubi_: unknown field"),
    (FILE, ("page_size", "page_sise"), "field [geometry].page_sise: unknown field"),
    (FILE, ("capacity_bytes = 1073741824", "capacity_bytes = 0"), "[geometry].capacity_bytes: must be"),
    (FILE, ("page_size = 4096", 'page_size = "big"'), "[geometry].page_size: must be a whole number"),
])
def test_nandsim_and_file_presets_are_checked_strictly(base, change, words, tmp_path, capsys):
    preset = tmp_path / "mine.toml"
    preset.write_text(base.replace(*change))
    assert main(["devices", "show", str(preset)]) == 2
    one_line(capsys, words)


def test_the_presets_shipped_still_load():
    from flashbed.devices import presets
    for name in presets.available():
        if name.startswith(("nand", "plain")):
            presets.load(name)


@pytest.mark.parametrize("content,words", [
    (b"\x00\xff\xfe binary \x80", "not a preset file (not text)"),
])
def test_a_binary_preset_file_is_one_line(content, words, tmp_path, capsys):
    preset = tmp_path / "bin.toml"
    preset.write_bytes(content)
    assert main(["devices", "show", str(preset)]) == 2
    one_line(capsys, words)


def test_a_preset_path_that_is_a_directory_or_a_block_device_says_so(tmp_path, capsys):
    import os
    import stat
    d = tmp_path / "dir.toml"
    d.mkdir()
    assert main(["devices", "show", str(d)]) == 2
    one_line(capsys, f"preset file {d} is a directory")
    node = tmp_path / "loop1"
    os.mknod(node, stat.S_IFBLK | 0o600, os.makedev(7, 251))
    assert main(["devices", "show", str(node)]) == 2
    one_line(capsys, f"{node} is a block device, not a preset file: `flashbed run --device {node}` runs on a real")


def test_a_small_device_names_the_size_to_give(tmp_path, capsys):
    refused(capsys, ["run", "--fs", "ext4", "--study", "mkfs", "--device", "plain-file@8M"],
            "ext4 needs at least 16 MiB, but plain-file@8M has 8 MiB: give a larger --device SIZE, e.g. "
            "plain-file@16M", tmp_path)
    err = refused(capsys, ["run", "--fs", "ext4", "--study", "bandwidth", "--device", "plain-file@64M", "--set",
                           "bandwidth.bs=3k"], "study bandwidth needs a device of at least 84M for its files "
                                               "(bandwidth.size=64M), but plain-file@64M has 64M", tmp_path)
    assert "87241523" not in err


def test_a_nandsim_chip_smaller_than_its_capacity_names_a_size_that_fits(capsys):
    assert main(["devices", "show", "nand-slc-256m@64K"]) == 2
    one_line(capsys, "capacity 64K must be a multiple of the 128K erase block and at most the chip's 256M: e.g. "
                     "nand-slc-256m@128K")


# --- 11, 12, 13, 15, 17. results, lab exec, damaged run directories, pipes, argparse ------

@pytest.fixture
def a_run(tmp_path):
    import io

    from flashbed.execute import execute
    from flashbed.executors import LocalExecutor
    from flashbed.lab.replay import ReplayLabs
    from flashbed.plan import PlanRequest, make_plan
    from flashbed.store import RunStore
    from tests.replay import DATA
    req = PlanRequest(fs=("ext4",), devices=("plain-file@256M",), studies=("bigfile",),
                      overrides={"bigfile": {"size": 16 << 20}}, pace="none")
    store = RunStore(tmp_path / "run")
    execute(make_plan(req), store, ReplayLabs(DATA), LocalExecutor(1), stream=io.StringIO())
    return store


def test_results_for_a_study_the_run_does_not_have(a_run, capsys):
    assert main(["results", str(a_run.root), "--study", "nosuch"]) == 2
    one_line(capsys, "unknown study 'nosuch': choose from")
    assert main(["results", str(a_run.root), "--study", "mkfs"]) == 2
    one_line(capsys, "run run has no cells of study mkfs: it has bigfile")
    assert main(["results", str(a_run.root), "--study", "bigfile"]) == 0


@pytest.mark.parametrize("timeout", ["-1", "0", "nan", "inf"])
def test_lab_exec_refuses_a_timeout_that_is_not_positive(timeout, capsys):
    assert main(["lab", "exec", "--timeout", timeout, "true"]) == 2
    one_line(capsys, "--timeout must be a number of seconds above 0")


@pytest.mark.parametrize("content,command", [
    *((c, cmd) for c in (b"", b"garbage{", b"[]", b"\xff\xfe", b'{"request": 5}', b'{"devices": []}',
                         b'{"request": {"fs": 5}}', b'{"request": {"studies": [1]}}')  # issue 28, 14
      for cmd in (["results"], ["report"], ["run", "--resume"])),
    (b'{"request": {"bogus": 1}}', ["run", "--resume"]), (b'{"request": {"repeat": "x"}}', ["run", "--resume"])])
def test_a_damaged_manifest_is_one_line(a_run, content, command, capsys):
    a_run.manifest_path.write_bytes(content)
    before = snapshot(a_run.root)
    assert main([*command, str(a_run.root)]) == 2
    one_line(capsys, str(a_run.manifest_path))
    assert snapshot(a_run.root) == before


@pytest.mark.parametrize("content", [b"[]", b"5", b'{"schema": 1}', b"\xff"])
def test_a_cell_file_that_is_not_a_result(a_run, content, capsys):
    stray = a_run.cells_dir / "stray.json"
    stray.write_bytes(content)
    for command in (["results"], ["report"], ["run", "--resume"]):
        assert main([*command, str(a_run.root)]) == 2
        one_line(capsys, f"{stray}: not a flashbed cell result")
    # a planned cell's damaged file does not block a resume: that cell is run again
    stray.unlink()
    planned = next(a_run.cells_dir.glob("*.json"))
    planned.write_bytes(content)
    from flashbed.results import CellKey
    assert not a_run.finished(CellKey("plain-file@256M", "ext4", "bigfile", "", 0))


def test_results_into_a_closed_pipe_is_quiet(a_run):
    import os
    import subprocess
    import sys
    code = ("import sys; sys.path.insert(0, 'src'); from flashbed.cli import main; "
            f"sys.exit(main(['results', {str(a_run.root)!r}]))")
    # stdout buffered, as on a stock machine (PYTHONUNBUFFERED hid the last flush's failure)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         cwd=Path(__file__).resolve().parents[2], env=env)
    p.stdout.close()  # `| head` that read nothing
    err = p.stderr.read().decode()
    assert p.wait() == 141 and "Traceback" not in err and err == "", err


@pytest.mark.parametrize("argv,words", [
    (["run", "--jobs", "abc"], "flashbed run: error: argument --jobs: invalid int value: 'abc'"),
    (["run", "--seed", "abc"], "argument --seed: invalid int value: 'abc'"),
    (["run", "--executor", "bogus"], "argument --executor: invalid choice: 'bogus'"),
])
def test_argparse_errors_are_one_line(argv, words, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    one_line(capsys, words)


def test_help_says_what_each_exit_code_means(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    for code in ("0 ", "1 ", "2 ", "130", "141"):
        assert f"\n  {code}" in out


# --- 10, 14, 18. exit status of a run, a full disk, an interrupted run's scratch -----------

def test_a_run_whose_cells_failed_or_errored_exits_1(monkeypatch, tmp_path, capsys):
    from flashbed import cli
    from flashbed.results import CellKey, CellResult
    from flashbed.status import CellStatus
    for status, code in ((CellStatus.OK, 0), (CellStatus.HANG, 0), (CellStatus.FAILED, 1), (CellStatus.ERROR, 1)):
        results = [CellResult(CellKey("d", "ext4", "mkfs"), CellStatus.OK),
                   CellResult(CellKey("d", "xfs", "mkfs"), status)]
        monkeypatch.setattr("flashbed.execute.execute", lambda *a, r=results, **k: r)
        monkeypatch.setattr("flashbed.lab.kernel.ensure_kernel", lambda k, **kw: None)
        monkeypatch.setattr("flashbed.lab.labs.UmlLabs", lambda *a: None)
        monkeypatch.setattr("flashbed.report.text.print_results", lambda *a, **k: None)
        out = tmp_path / f"run-{status}"
        assert cli.main(["run", "--fs", "ext4", "--study", "mkfs", "--device", PLAIN, "--out", str(out),
                         "--no-report"]) == code, status


def test_a_full_disk_is_said_once_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    import errno
    import os

    from flashbed.results import write_json_atomic
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(FlashbedError, match=f"the disk holding {tmp_path} is full: free some space"):
        write_json_atomic(tmp_path / "manifest.json", {"a": 1})
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_run_leaves_no_scratch(tmp_path):
    import io

    from flashbed.execute import execute
    from flashbed.lab.replay import ReplayLabs
    from flashbed.plan import PlanRequest, make_plan
    from flashbed.store import RunStore
    from tests.replay import DATA

    class Interrupted:
        def run(self, task, items, name, on_result, progress):
            scratch = store.root / "scratch" / "cell"
            scratch.mkdir(parents=True)
            (scratch / "device.img").write_bytes(b"x" * 4096)  # as a session left it, cut short
            raise KeyboardInterrupt

    store = RunStore(tmp_path / "run")
    plan = make_plan(PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("mkfs",)))
    with pytest.raises(KeyboardInterrupt):
        execute(plan, store, ReplayLabs(DATA), Interrupted(), stream=io.StringIO())
    assert not (store.root / "scratch").exists()


@pytest.mark.emulator
def test_a_block_preset_with_63_pages_per_block_is_refused(tmp_path, capsys):
    from flashbed.paths import repo_root
    text = (repo_root() / "presets" / "ideal.toml").read_text()
    preset = tmp_path / "odd.toml"
    preset.write_text("\n".join("pages_per_block = 63" if line.startswith("pages_per_block") else line
                                for line in text.splitlines()))
    assert main(["devices", "show", str(preset)]) == 2
    one_line(capsys, "field `nand.pages_per_block`: 63 is not a power of two")


def test_more_nandsim_faults_than_the_lab_kernels_command_line_holds_are_refused(tmp_path, capsys):
    err = refused(capsys, ["run", "--fs", "yaffs2", "--study", "badblocks", "--device", "nand-2g-4k@128M",
                           "--set", "badblocks.nand_bad=200"], "badblocks.nand_bad", tmp_path)
    assert "64" in err


# --- issue 28, 23. SIGTERM stops flashbed as Ctrl-C does, with its line -------------------------

def test_sigterm_is_one_line_and_exit_143(monkeypatch, capsys):
    import os
    import signal
    import time

    from flashbed import cli
    stopped = []

    def long_work(args):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except KeyboardInterrupt:  # what the executors catch to kill the labs
            stopped.append(True)
            raise
        return 0

    monkeypatch.setattr(cli, "_dispatch", long_work)
    assert main(["studies"]) == 143
    one_line(capsys, "flashbed: terminated (SIGTERM); finished results are kept: the same command resumes")
    assert stopped == [True] and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_check_on_raw_nand_is_refused_not_dropped(tmp_path, capsys):
    """Issue 28, 11: --check on a raw-NAND preset ran the workload and dropped the check silently."""
    w = tmp_path / "w.sh"
    w.write_text("#!/bin/sh\necho a=1\n")
    w.chmod(0o755)
    refused(capsys, ["run", "--workload", str(w), "--check", str(w), "--fs", "ubifs", "--device", "nand-2g-4k@128M"],
            "--check (study appcheck) runs on block devices, and none of this run's (nand-2g-4k@128M)", tmp_path)


@pytest.mark.parametrize("argv", [
    ["probe", "plain-file@64M", "--runtime", "nan"], ["bench", "presets", "--runtime", "inf"],
    ["bench", "clock", "--runtime", "nan"], ["bench", "cpu", "--runtime=-inf"],
    ["lab", "exec", "--timeout", "nan", "--", "true"],
])
def test_nan_and_inf_are_no_duration(argv, capsys):
    """Issue 28, 15: nan and inf passed --runtime (probe, bench presets, bench clock)."""
    assert main(argv) == 2
    one_line(capsys, "must be a number of seconds above 0 (and finite)")


def test_a_kernel_cache_that_cannot_be_written_is_one_line(monkeypatch, tmp_path):
    """A lab kernel not built, in a cache this user cannot write: one line, not an OSError's traceback
    (the sandboxed fuzz runs every command so, with the lab off)."""
    from flashbed.lab import kernel
    monkeypatch.setenv("FLASHBED_CACHE", "/proc/flashbed-no-cache")
    with pytest.raises(FlashbedError, match="is not built, and its cache .* cannot be written"):
        kernel.ensure_kernel()


def test_an_absurd_repeat_is_refused_before_the_plan(tmp_path, capsys):
    """Found by the sandboxed fuzz (issue 28): --repeat=10^23 made the plan forever."""
    refused(capsys, ["run", "--fs", "ext4", "--study", "mkfs", "--device", PLAIN, "--repeat",
                     "99999999999999999999999"], "--repeat must be 1 to 1000", tmp_path)
