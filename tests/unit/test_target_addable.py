"""A new kind of target is one module (issue 32): this file is one, a shelf of boots recorded
in the real lab (tests/data/replay), and `flashbed run --target shelf://DIR` runs its cells
through the same command, plan, cells, store and report as the lab's, none of which names it.
It is registered the way a module of targets/ is: its --target URL scheme in targets.KINDS."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from flashbed import targets
from flashbed.cli import main
from flashbed.devices import presets
from flashbed.lab.replay import ReplayLabs
from flashbed.store import RunStore
from flashbed.targets import ItsOwnLab, Target
from tests.replay import DATA


@dataclass
class ShelfTarget(Target):
    """Cells served from recorded boots: presets as the lab loads them, no vCPUs, its own time."""

    root: Path = field(default=DATA)

    @classmethod
    def url(cls, text: str, options: Any) -> str:
        if not Path(text.removeprefix("shelf://")).is_dir():
            from flashbed.errors import FlashbedError
            raise FlashbedError(f"--target {text}: no shelf of recorded boots there")
        return text

    @classmethod
    def open(cls, request, options: Any, store, executor) -> "ShelfTarget":
        return cls(executor=executor, root=Path(request.target.removeprefix("shelf://")))

    def choices(self, request) -> list[ItsOwnLab]:
        return [ItsOwnLab("shelf", "a shelf replays what one vCPU did")]

    def load_devices(self, specs: tuple[str, ...], destroy_data_on: tuple[str, ...]) -> dict:
        return {d.label: d for d in map(presets.load_spec, specs)}

    def labs(self, plan, store, say) -> ReplayLabs:
        say(f"cells from the shelf {self.root}")
        return ReplayLabs(self.root)


@pytest.fixture
def shelf(monkeypatch):
    monkeypatch.setitem(targets.KINDS, "shelf", ShelfTarget)
    return f"shelf://{DATA}"


CAPS = ["--fs", "ext4,vfat", "--device", "plain-file@256M", "--study", "caps", "--pace", "none"]


def test_a_new_target_runs_through_the_one_run_path(shelf, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--target", shelf, *CAPS, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"flashbed: cells from the shelf {DATA}" in err
    store = RunStore(out)
    assert store.manifest()["request"]["target"] == shelf
    cells = sorted(store.cells_dir.glob("*.json"))
    assert [p.name for p in cells] == ["plain-file@256M__ext4__caps__r0.json", "plain-file@256M__vfat__caps__r0.json"]
    for p in cells:  # what the real lab measured, read by the study's parse
        got, want = json.loads(p.read_text()), json.loads((DATA / p.stem / "cell.json").read_text())
        assert got["status"] == "ok" and got["measurements"] == want["measurements"]
        assert got["provenance"]["lab_kernel"] == "shelf"
    assert (out / "report.html").is_file()


@pytest.mark.parametrize("argv, words", [
    (["--clock", "virtual"], "--clock virtual is the lab's: this target keeps its own time: drop --clock"),
    (["--cpus", "2"], "at 2 vCPUs not run on lab kernel shelf: a shelf replays what one vCPU did"),
])
def test_its_refusals_are_one_line(shelf, argv, words, tmp_path, capsys):
    assert main(["run", "--target", shelf, *CAPS, *argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "x").exists()


def test_its_url_is_checked_at_the_edge(shelf, tmp_path, capsys):
    assert main(["run", "--target", "shelf:///nowhere", *CAPS, "--out", str(tmp_path / "x")]) == 2
    assert "--target shelf:///nowhere: no shelf of recorded boots there" in capsys.readouterr().err
