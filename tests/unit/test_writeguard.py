"""Issue 28: one write guard. Every path a command writes is decided once, symlinks resolved
(writeguard.py): the destructive inputs of the issue are refused in one line and leave a
canary loop device (an ext4 on it) and the user's files as they were. No lab boots here."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from flashbed import writeguard
from flashbed.cli import main
from flashbed.errors import FlashbedError
from flashbed.paths import repo_root
from tests.fixtures.report import make_runs as gen


def one_line(capsys, words: str) -> str:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert words in err, err
    return err


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def tree(root: Path) -> dict[str, str]:
    """Every file under `root` by its content (symlinks are the canaries' stand-ins: not followed)."""
    return {str(p.relative_to(root)): digest(p) for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.fixture
def canary(tmp_path):
    """A loop device holding an ext4 (root and losetup needed), released afterwards."""
    if os.geteuid() != 0 or shutil.which("losetup") is None or shutil.which("mkfs.ext4") is None:
        pytest.skip("needs root, losetup and mkfs.ext4")
    img = tmp_path / "canary.img"
    with open(img, "wb") as f:
        f.truncate(16 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True)
    r = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"no loop device: {r.stderr.strip()}")
    node = r.stdout.strip()
    try:
        yield Path(node)
    finally:
        subprocess.run(["umount", node], capture_output=True)
        subprocess.run(["losetup", "-d", node], check=True)


@pytest.fixture
def mounted(canary, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", str(canary), str(mnt)], check=True)
    yield canary
    subprocess.run(["umount", str(mnt)], check=True)


@pytest.fixture
def a_run(tmp_path):
    return gen.write_run(tmp_path / "runs" / "one", [gen.cell("ext4", "mkfs", [("empty", "mkfs", 0.5, "s")])])


# --- the guard itself ---------------------------------------------------------------------

def test_a_symlink_is_decided_by_what_it_points_to(tmp_path, canary):
    link = tmp_path / "blk.toml"
    link.symlink_to(canary)
    with pytest.raises(FlashbedError, match=rf"blk.toml \(that is {canary}\) is a block device: flashbed writes a "
                                            r"file here, never a device"):
        writeguard.check(link, "--write-preset", writeguard.Output.FILE)
    # where devices may be written, only when --destroy-data-on names the device itself
    with pytest.raises(FlashbedError, match=f"add --destroy-data-on {link}"):
        writeguard.check(link, "--image", writeguard.Output.FILE, devices=True)
    assert writeguard.check(link, "--image", writeguard.Output.FILE, devices=True, destroy=(str(canary),)).device


def test_a_mounted_device_is_refused_even_when_named(mounted):
    with pytest.raises(FlashbedError, match="is mounted at"):
        writeguard.check(mounted, "--disk", writeguard.Output.DISK, devices=True, destroy=(str(mounted),))


@pytest.mark.parametrize("path", ["/dev/mmcblk9", "/dev/shm/../flashbed-x", "/proc/x", "/sys/kernel/x"])
def test_never_a_new_file_under_the_kernels_trees(path):
    with pytest.raises(FlashbedError, match="the kernel's own tree: flashbed makes nothing there"):
        writeguard.check(path, "--image", writeguard.Output.FILE, devices=True)
    assert not os.path.lexists(path)


def test_a_character_device_never(tmp_path):
    with pytest.raises(FlashbedError, match="is a character device"):
        writeguard.check("/dev/null", "--image", writeguard.Output.FILE, devices=True, destroy=("/dev/null",))


def test_an_existing_file_only_with_force_and_never_inside_a_run(tmp_path, a_run):
    mine = tmp_path / "mine.toml"
    mine.write_text("x")
    with pytest.raises(FlashbedError, match="exists: add --force"):
        writeguard.check(mine, "--write-preset", writeguard.Output.FILE)
    assert writeguard.check(mine, "--write-preset", writeguard.Output.FILE, force=True).replace
    for inside in (a_run / "p.toml", a_run / "cells" / "x.toml", a_run / "logs" / "new" / "deeper"):
        with pytest.raises(FlashbedError, match=f"is inside run directory {a_run}"):
            writeguard.check(inside, "--out", writeguard.Output.DIR)


def test_a_directory_that_is_not_a_run_never_becomes_one(tmp_path, a_run):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.txt").write_text("mine")
    with pytest.raises(FlashbedError, match="is not a flashbed run"):
        writeguard.check(docs, "--out", writeguard.Output.RUN)
    assert writeguard.check(a_run, "--out", writeguard.Output.RUN).exists  # a run: resumed
    with pytest.raises(FlashbedError, match="is inside run directory"):  # but never a run inside a run
        writeguard.check(a_run / "inner", "--out", writeguard.Output.RUN)
    assert not writeguard.check(tmp_path / "new", "--out", writeguard.Output.RUN).exists


def test_write_file_never_replaces_a_file_that_appeared_since_the_check(tmp_path):
    target = tmp_path / "p.toml"
    allowed = writeguard.check(target, "--write-preset", writeguard.Output.FILE)
    target.write_text("someone else's")
    with pytest.raises(FlashbedError, match="appeared while flashbed worked"):
        writeguard.write_file(allowed, "preset")
    assert target.read_text() == "someone else's" and [p.name for p in tmp_path.iterdir()] == ["p.toml"]


# --- the destructive commands ---------------------------------------------------------

def test_lab_exec_disk_refuses_a_device_not_named(canary, tmp_path, capsys):
    before = digest(canary)
    assert main(["lab", "exec", "--disk", str(canary), "--", "dd if=/dev/zero of=/dev/ubdb bs=1M count=1"]) == 2
    one_line(capsys, f"--disk {canary} is a block device: the lab's writes would overwrite it; if that is what you "
                     f"want, add --destroy-data-on {canary}")
    assert main(["lab", "exec", "--disk", str(canary), "--destroy-data-on", "/dev/sdz", "--", "true"]) == 2
    one_line(capsys, "--destroy-data-on /dev/sdz names no --disk")
    assert digest(canary) == before


def test_lab_exec_disk_refuses_a_mounted_device_even_when_named(mounted, capsys):
    assert main(["lab", "exec", "--disk", str(mounted), "--destroy-data-on", str(mounted), "--", "true"]) == 2
    one_line(capsys, f"{mounted} is mounted at")


def test_write_preset_through_a_symlink_to_a_device_is_refused_before_the_probe(canary, tmp_path, capsys,
                                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("blk.toml").symlink_to(canary)
    before = digest(canary)
    assert main(["probe", "plain-file@64M", "--write-preset", "blk.toml"]) == 2
    one_line(capsys, f"--write-preset blk.toml (that is {canary}) is a block device")
    assert digest(canary) == before and not Path("runs").exists()


@pytest.mark.parametrize("where", ["mine", "shipped", "run"])
def test_write_preset_never_replaces_a_file_without_force_nor_writes_into_a_run(where, tmp_path, a_run, capsys,
                                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = {"mine": tmp_path / "mine.toml", "shipped": repo_root() / "presets" / "emmc-8g.toml",
            "run": a_run / "p.toml"}[where]
    if where == "mine":
        path.write_text("# my part\n")
    before = digest(path) if path.exists() else None
    assert main(["probe", "plain-file@64M", "--write-preset", str(path)]) == 2
    one_line(capsys, "is inside run directory" if where == "run" else "exists: add --force to replace it")
    assert (digest(path) if path.exists() else None) == before and not list(Path("runs").glob("probe-*"))


def test_report_out_leaves_the_users_files_and_other_runs_alone(tmp_path, a_run, capsys):
    docs = tmp_path / "mydocs"
    (docs / "report-figures").mkdir(parents=True)
    for name in ("report.md", "report.html", "summary.json", "report-figures/chart.svg"):
        (docs / name).write_text(f"my {name}")
    other = gen.write_run(tmp_path / "runs" / "other", [gen.cell("f2fs", "mkfs", [("empty", "mkfs", 0.4, "s")])])
    main(["report", str(other)])
    capsys.readouterr()
    mine, theirs = tree(docs), tree(other)
    assert main(["report", str(a_run), "--out", str(docs)]) == 2
    one_line(capsys, "report.html is there and flashbed did not write it (nor 2 more of the report files): give "
                     "another directory, or --force")
    assert main(["report", str(a_run), "--out", str(other)]) == 2
    one_line(capsys, f"--out {other} is inside run directory {other}")
    assert main(["report", str(a_run), str(other), "--out", str(other / "cmp")]) == 2
    one_line(capsys, "is inside run directory")
    assert tree(docs) == mine and tree(other) == theirs
    # with --force the report's own names are replaced; nothing else is touched or deleted
    assert main(["report", str(a_run), "--out", str(docs), "--force"]) == 0
    capsys.readouterr()
    assert (docs / "report-figures" / "chart.svg").read_text() == "my report-figures/chart.svg"
    assert json.loads((docs / "summary.json").read_text())["run"]["run_id"] == "one"


def test_run_and_probe_out_never_take_a_directory_that_is_not_theirs(tmp_path, a_run, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "thesis.tex").write_text("years of work")
    argv = ["run", "--fs", "ext4", "--study", "mkfs", "--device", "plain-file@512M", "--no-report"]
    assert main([*argv, "--out", str(docs)]) == 2
    one_line(capsys, f"--out {docs} is not a flashbed run (no manifest.json) and holds files")
    assert main([*argv, "--out", str(a_run / "sub")]) == 2
    one_line(capsys, f"is inside run directory {a_run}")
    assert main(["probe", "plain-file@64M", "--out", str(a_run)]) == 2
    one_line(capsys, f"--out {a_run} is inside run directory {a_run}")
    assert main(["probe", "plain-file@64M", "--out", "/proc/x"]) == 2
    one_line(capsys, "--out /proc/x is under /proc")
    assert main(["lab", "smoke", "--out", str(docs / "thesis.tex")]) == 2
    one_line(capsys, "exists and is not a directory")
    assert sorted(p.name for p in docs.iterdir()) == ["thesis.tex"]


def test_replay_image_on_a_missing_device_makes_no_file_in_dev(tmp_path, capsys):
    assert main(["crashstate", "replay", str(tmp_path), "x:1", "--image", "/dev/mmcblk9"]) == 2
    one_line(capsys, "--image /dev/mmcblk9 is under /dev")
    assert not os.path.lexists("/dev/mmcblk9")


def test_a_block_node_made_for_a_test_is_still_a_device(tmp_path):
    node = tmp_path / "blk"
    os.mknod(node, stat.S_IFBLK | 0o600, os.makedev(7, 251))
    with pytest.raises(FlashbedError, match="is a block device: flashbed writes a report directory here"):
        writeguard.check(node, "--out", writeguard.Output.REPORT)


def test_a_directory_the_command_filled_before_may_be_filled_again(tmp_path):
    out = tmp_path / "probe"
    writeguard.make_dir(writeguard.check(out, "--out", writeguard.Output.DIR, mark="probe.json"))
    (out / "probe.json").write_text("{}")
    (out / "flashbench-a.txt").write_text("")
    assert writeguard.check(out, "--out", writeguard.Output.DIR, mark="probe.json").exists
    with pytest.raises(FlashbedError, match="holds files"):
        writeguard.check(out, "--out", writeguard.Output.DIR, mark="smoke.json")


@pytest.mark.parametrize("command,mark", [(["lab", "smoke", "--fs", "ext4"], "smoke.json"),
                                          (["probe", "plain-file@64M"], "probe.json")])
def test_a_file_of_the_commands_name_does_not_make_a_directory_its_own(command, mark, tmp_path, capsys):
    """Issue 42, kind 4: a directory holding a file named smoke.json or probe.json was taken."""
    mine = tmp_path / "mydata"
    mine.mkdir()
    (mine / mark).write_text("my own measurements")
    (mine / "notes.txt").write_text("years of work")
    before = tree(mine)
    assert main([*command, "--out", str(mine)]) == 2
    one_line(capsys, f"--out {mine} holds files and no index of this command's ({writeguard.DIR_INDEX}): give a "
                     f"new or empty directory, or add --force to write {mark} and its other files there")
    assert tree(mine) == before
    # an index naming another command, or a symlink for one, is no better
    (mine / writeguard.DIR_INDEX).symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_text(json.dumps({"made_by": mark}))
    with pytest.raises(FlashbedError, match="holds files"):
        writeguard.check(mine, "--out", writeguard.Output.DIR, mark=mark)


@pytest.mark.parametrize("mark", ["smoke.json", "probe.json", "fusecost.json"])
def test_force_takes_a_directory_of_files_and_replaces_only_the_index(mark, tmp_path):
    """Issue 42, kind 4: --force is the one way to let a command take a directory of the user's;
    its index then replaces a forged one (a symlink to elsewhere is replaced, not followed)."""
    mine = tmp_path / "mydata"
    mine.mkdir()
    (mine / "notes.txt").write_text("years of work")
    (tmp_path / "elsewhere").write_text(json.dumps({"made_by": "someone"}))
    (mine / writeguard.DIR_INDEX).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FlashbedError, match="add --force"):
        writeguard.check(mine, "--out", writeguard.Output.DIR, mark=mark)
    allowed = writeguard.check(mine, "--out", writeguard.Output.DIR, mark=mark, force=True)
    writeguard.make_dir(allowed)
    writeguard.write_into(mine, mark, "{}")
    assert writeguard.taken_by(mine) == mark and not (mine / writeguard.DIR_INDEX).is_symlink()
    assert (tmp_path / "elsewhere").read_text() == json.dumps({"made_by": "someone"})
    assert (mine / "notes.txt").read_text() == "years of work" and (mine / mark).read_text() == "{}"
    # from then on the command's own, without --force; another command's still not
    assert writeguard.check(mine, "--out", writeguard.Output.DIR, mark=mark).exists
    with pytest.raises(FlashbedError, match="holds files"):
        writeguard.check(mine, "--out", writeguard.Output.DIR, mark="other.json")
    # a directory without a command's index (bench clock --keep) has no --force to offer
    with pytest.raises(FlashbedError, match="holds files: give a new or empty directory$"):
        writeguard.check(mine, "--keep", writeguard.Output.DIR, force=True)


def test_a_writer_into_an_allowed_directory_follows_no_swapped_link(tmp_path):
    """Issue 42, item 1: smoke.json, probe.json, a lab's log directory and a cell's attempt are
    written through the directory opened with no symlink on the way, not by name."""
    out, victim = tmp_path / "out", tmp_path / "victim"
    victim.mkdir()
    writeguard.make_dir(writeguard.check(out, "--out", writeguard.Output.DIR, mark="smoke.json"))
    out.rename(tmp_path / "moved")
    out.symlink_to(victim)
    with pytest.raises(FlashbedError, match="changed since flashbed checked it"):
        writeguard.write_into(out, "smoke.json", "{}")
    with pytest.raises(FlashbedError, match="changed since flashbed checked it"):
        writeguard.make_sub(out, "ext4")
    (tmp_path / "moved" / "ext4").symlink_to(victim)
    with pytest.raises(FlashbedError, match="ext4 is not flashbed's own directory"):
        writeguard.make_sub(tmp_path / "moved", "ext4", "attempt-1")
    assert list(victim.iterdir()) == []
    assert writeguard.make_sub(tmp_path / "moved", "btrfs", "attempt-1") == tmp_path / "moved" / "btrfs" / "attempt-1"
    with pytest.raises(FileExistsError):
        writeguard.make_sub(tmp_path / "moved", "btrfs", "attempt-1", new=True)


def test_a_runs_attempts_are_made_and_pruned_through_the_run_not_a_swapped_logs(tmp_path):
    from flashbed.results import CellKey, CellResult
    from flashbed.store import RunStore
    store = RunStore(tmp_path / "run")
    store.create()
    key = CellKey(device="d", fs="ext4", study="mkfs")
    first, second = store.new_attempt(key), store.new_attempt(key)
    assert (first.name, second.name) == ("attempt-1", "attempt-2") and second.is_dir()
    (first / "console.log").write_text("killed")
    victim = tmp_path / "victim"
    (victim / first.parent.name / "attempt-1").mkdir(parents=True)
    (victim / first.parent.name / "attempt-1" / "keep").write_text("the victim's")
    (store.root / "logs").rename(tmp_path / "logs.moved")
    (store.root / "logs").symlink_to(victim)
    result = CellResult(key=key, status="ok", measurements=[], attempt_dir=str(second.relative_to(store.root)))
    store.prune_attempts(result)  # removes nothing through the link
    assert (victim / first.parent.name / "attempt-1" / "keep").read_text() == "the victim's"
    with pytest.raises(FlashbedError, match="is not flashbed's own directory"):
        store.new_attempt(key)
    (store.root / "logs").unlink()
    (tmp_path / "logs.moved").rename(store.root / "logs")
    store.prune_attempts(result)
    assert sorted(p.name for p in first.parent.iterdir()) == ["attempt-2"]


def test_a_runs_subdirectories_are_nobodys_output(tmp_path, a_run, capsys):
    """Issue 42, kind 3: report RUN --out RUN/cells wrote the report into the run's results."""
    (a_run / "logs").mkdir(exist_ok=True)
    before = tree(a_run)
    for sub in ("cells", "logs", "new", "cells/deeper"):
        assert main(["report", str(a_run), "--out", str(a_run / sub)]) == 2
        one_line(capsys, f"--out {a_run / sub} is inside run directory {a_run} ({sub}), whose files are that "
                         f"run's results: give the run directory itself, or a path outside it")
    assert tree(a_run) == before and not (a_run / "new").exists()


def test_the_readmes_fuse_cost_command_starts(capsys):
    """Issue 28, 24: `python3 -m flashbed.bench.fusecost`, cited in the README, crashed on import."""
    from flashbed.bench import fusecost
    assert fusecost.main(["--out", "/proc/x"]) == 2
    one_line(capsys, "--out /proc/x is under /proc")


def test_a_file_is_placed_where_a_filesystem_has_no_hard_links(tmp_path, monkeypatch):
    import errno

    def no_links(*a, **k):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    allowed = writeguard.check(tmp_path / "p.toml", "--write-preset", writeguard.Output.FILE)
    writeguard.write_file(allowed, "preset")
    assert (tmp_path / "p.toml").read_text() == "preset" and sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]


@pytest.mark.parametrize("argv,words", [
    (["report", "{run}", "--force"], "--force replaces files in --out: a run's own report needs none"),
    (["probe", "plain-file@64M", "--force"], "--force lets --write-preset replace a file and --out take a directory "
                                             "that holds files: give --write-preset FILE or --out DIR"),
    (["lab", "smoke", "--fs", "ext4", "--force"], "--force lets --out take a directory that holds files: give --out DIR"),
    (["lab", "exec", "--destroy-data-on", "/dev/sdz", "--", "true"], "--destroy-data-on /dev/sdz names no --disk"),
])
def test_the_new_options_alone_are_one_line(argv, words, a_run, capsys):
    assert main([a.replace("{run}", str(a_run)) for a in argv]) == 2
    one_line(capsys, words)


# --- issue 42: the path checked is the path written ---------------------------------------

def test_a_tilde_is_expanded_at_the_edge_so_the_checked_path_is_the_written_one(tmp_path, a_run, capsys,
                                                                                 monkeypatch):
    """Issue 42, kind 2: `run --out '~/y'` was checked at $HOME/y and written at ./~/y."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    (cwd / "~" / "y").mkdir(parents=True)
    (cwd / "~" / "y" / "report.md").write_text("my notes")
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    before = tree(cwd)
    (home / "y").mkdir()
    (home / "y" / "report.md").write_text("my other notes")
    argv = ["run", "--fs", "ext4", "--study", "mkfs", "--device", "plain-file@512M", "--no-report"]
    assert main([*argv, "--out", "~/y"]) == 2
    one_line(capsys, f"--out {home / 'y'} is not a flashbed run (no manifest.json) and holds files")
    assert main(["bench", "clock", "--profile", "quick", "--keep", "~/y"]) == 2
    one_line(capsys, f"--keep {home / 'y'} exists")
    assert main(["report", str(a_run), "--out", "~/y"]) == 2
    one_line(capsys, "report.md is there and flashbed did not write it")
    assert main(["probe", "plain-file@64M", "--out", "~/y"]) == 2
    one_line(capsys, f"--out {home / 'y'} holds files")
    assert main(["probe", "plain-file@64M", "--out", "~nosuchuser42/y"]) == 2
    one_line(capsys, "--out '~nosuchuser42/y': ~nosuchuser42 is no user of this host")
    assert tree(cwd) == before and sorted(p.name for p in (home / "y").iterdir()) == ["report.md"]
    assert (home / "y" / "report.md").read_text() == "my other notes"
    # and the guard itself takes a '~' it is handed as a name, where a writer given it writes
    assert writeguard.check("~x", "--out", writeguard.Output.DIR).path == cwd / "~x"


def _swap_for_symlink(d: Path, to: Path) -> None:
    """`d` moved aside and a symlink to `to` put in its place: what an attacker does between a
    check and the write."""
    d.rename(d.with_name(d.name + ".moved"))
    d.symlink_to(to)


def test_a_parent_swapped_for_a_symlink_after_the_check_is_refused_not_followed(tmp_path):
    """Issue 42, kind 5: a preset written into /dev/shm through a parent swapped after the check."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    before = tree(victim)
    for depth in (1, 2, 3):
        top = tmp_path / f"out{depth}"
        parent = top.joinpath(*["d"] * (depth - 1))
        parent.mkdir(parents=True)
        allowed = writeguard.check(parent / "p.toml", "--write-preset", writeguard.Output.FILE)
        _swap_for_symlink(top if depth > 1 else parent, victim)
        with pytest.raises(FlashbedError, match="changed since flashbed checked it|no longer the directory"):
            writeguard.write_file(allowed, "preset")
        new = tmp_path / f"new{depth}"
        new.mkdir()
        allowed = writeguard.check(new / "a" / "b", "--out", writeguard.Output.DIR, mark="probe.json")
        _swap_for_symlink(new, victim)
        with pytest.raises(FlashbedError, match="changed since flashbed checked it|no longer the directory"):
            writeguard.make_dir(allowed)
    assert tree(victim) == before and sorted(p.name for p in victim.iterdir()) == ["keep.txt"]


def test_a_run_directory_swapped_for_a_symlink_gets_no_more_cells(tmp_path):
    """Issue 42, kind 5: a run's remaining cells were written into a user's directory."""
    from flashbed.store import RunStore
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    store = RunStore(tmp_path / "run")
    store.create()
    store.write_manifest({"run_id": "run"})
    first = gen.cell("ext4", "mkfs", [("empty", "mkfs", 0.5, "s")])
    store.write(first)
    assert [r.key for r in store.results()] == [first.key]
    _swap_for_symlink(store.root / "cells", victim)
    with pytest.raises(FlashbedError, match="not the run's own directory now"):
        store.write(gen.cell("f2fs", "mkfs", [("empty", "mkfs", 0.5, "s")]))
    (store.root / "cells").unlink()
    (store.root / "cells.moved").rename(store.root / "cells")
    _swap_for_symlink(store.root, victim)
    with pytest.raises(FlashbedError, match="changed since flashbed checked it|no longer the directory"):
        store.write(gen.cell("xfs", "mkfs", [("empty", "mkfs", 0.5, "s")]))
    with pytest.raises(FlashbedError, match="changed since flashbed checked it|no longer the directory"):
        store.write_manifest({"run_id": "run"})
    assert sorted(p.name for p in victim.iterdir()) == ["keep.txt"]


def test_without_openat2_the_components_are_walked_with_o_nofollow(tmp_path, monkeypatch):
    monkeypatch.setattr(writeguard, "_openat2_missing", True)
    test_a_parent_swapped_for_a_symlink_after_the_check_is_refused_not_followed(tmp_path)
    fd = writeguard.open_dir(tmp_path)
    try:
        assert os.path.samestat(os.fstat(fd), os.stat(tmp_path))
    finally:
        os.close(fd)


def test_bench_clock_keeps_its_runs_where_the_guard_checked(tmp_path, monkeypatch):
    """bench clock --keep made its directory by name after the check (Path.mkdir): now the guard's
    make_dir makes it, at the resolved path, no symlink followed after the check."""
    from flashbed.bench import profilewall
    kept: list = []
    monkeypatch.setattr(profilewall, "bench", lambda profile, device, runs, keep: kept.append(keep))
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert main(["bench", "clock", "--profile", "quick", "--keep", str(tmp_path / "link" / "k")]) == 0
    assert kept == [tmp_path / "real" / "k"] and (tmp_path / "real" / "k").is_dir()


def test_a_smoke_tests_image_replaces_a_link_planted_in_its_place(tmp_path, monkeypatch):
    """The smoke test's device.img was opened by name ('wb'): a link planted there had its
    target truncated to the image's size."""
    from flashbed.lab import smoke
    monkeypatch.setattr(smoke, "smoke_steps", lambda fs: [])  # the boot is not the question
    out = writeguard.make_dir(writeguard.check(tmp_path / "s", "--out", writeguard.Output.DIR, mark="smoke.json"))
    victim = tmp_path / "victim"
    victim.write_bytes(b"the victim's bytes")
    (out / "ext4").mkdir()
    (out / "ext4" / "device.img").symlink_to(victim)

    class Booted(Exception):
        pass

    class Lab:
        def boot(self, spec):
            assert not (out / "ext4" / "device.img").is_symlink()
            raise Booted

    with pytest.raises(Booted):
        smoke.smoke_one("ext4", None, out=out, lab=Lab())
    assert victim.read_bytes() == b"the victim's bytes"


def test_the_smoke_tests_steps_are_built_for_every_filesystem():
    """`flashbed lab smoke` ended in KeyError: 'FLASHBED_TOOLS' before any boot: its write step was
    built with str.format over a tool path of ${FLASHBED_TOOLS}/... (found by the leftover scan,
    whose lab smoke ended by itself, exit 1, at every interrupt)."""
    from flashbed import filesystems as fscat
    from flashbed.lab import smoke
    for name in fscat.CATALOGUE:
        writes = [s.cmd for s in smoke.smoke_steps(fscat.get(name)) if s.name == "write"]
        assert len(writes) == 1 and "${FLASHBED_TOOLS}/fbtool.py write-tree " in writes[0], (name, writes)
