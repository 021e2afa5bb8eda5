"""scripts/board-vs-twin.sh without a board: the commands of its four steps (--dry-run), its resumes,
and its refusals, one line each with exit 2. The flow itself, on the emulated board, is in
docs/boards.md."""

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "board-vs-twin.sh"


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def _board(tmp_path: Path) -> Path:
    b = tmp_path / "board"
    b.mkdir()
    (b / "board.json").write_text(json.dumps({"recipe": "debian", "port": 40022}))
    return b


def _commands(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("$ ")]


def test_the_emulated_boards_directory_names_its_target_device_config_and_switch(tmp_path):
    b, out = _board(tmp_path), tmp_path / "out"
    r = _script("--board-dir", str(b), "--set", "bigfile.size=16M", "--dry-run", str(out))
    assert r.returncode == 0, r.stderr
    start, probe, board, twin, report = _commands(r.stdout)
    assert start.endswith(f"qemu-board.sh --dir {b} start")
    assert f" probe --target " in probe and f"--ssh-config {b}/ssh_config" in probe
    assert "--device /dev/mmcblk0 --destroy-data-on /dev/mmcblk0" in probe and f"--write-preset {out}/twin.toml" in probe
    # the board's run cuts power with the board's own switch, so powercut is among its studies
    assert f"--power-cmd '{REPO}/scripts/qemu-board.sh --dir {b} {{action}}'" in board
    assert "--study bigfile,mount,powercut" in board
    assert "--set bigfile.size=16M" in board and f"--out {out}/board" in board
    # the twin: the same studies and settings on the written preset, in the lab (no board option)
    assert f"--device {out}/twin.toml" in twin and "--study bigfile,mount,powercut" in twin
    assert "--set bigfile.size=16M" in twin and "--target" not in twin and "--power-cmd" not in twin
    assert report.endswith(f"report {out}/board {out}/twin --out {out}/compare --force")


def test_a_step_whose_output_is_there_is_resumed_or_kept(tmp_path):
    out = tmp_path / "out"
    (out / "board").mkdir(parents=True)
    (out / "board" / "manifest.json").write_text("{}")
    (out / "twin.toml").write_text("")
    r = _script("--target", "ssh://root@b", "--device", "/dev/mmcblk0p3", "--ssh-config", "/etc/hostname",
                "--dry-run", str(out))
    assert r.returncode == 0, r.stderr
    assert "twin.toml is there" in r.stdout
    board, twin, _ = _commands(r.stdout)
    # a resumed run keeps its target and studies (flashbed refuses them again); how to reach the board it takes
    assert board.endswith(f"run --resume {out}/board --ssh-config /etc/hostname --destroy-data-on /dev/mmcblk0p3 "
                          "--no-report")
    assert "--study bigfile,mount " in twin  # no power switch: no powercut


def test_steps_can_be_run_apart(tmp_path):
    r = _script("--target", "ssh://root@b", "--device", "/dev/sda", "--step", "twin,report", "--dry-run",
                str(tmp_path / "o"))
    assert [c.split()[2] for c in _commands(r.stdout)] == ["run", "report"]


@pytest.mark.parametrize("argv,words", [
    ([], "give the output directory (OUT) last"),
    (["--target", "ssh://root@b", "o"], "give the board: --target ssh://USER@HOST --device"),
    (["--target", "ssh://root@b", "--device", "/dev/sda", "--boot-wait", "600", "o"],
     "--boot-wait is the wait after --power-cmd's on"),
    (["--target", "ssh://root@b", "--device", "/dev/sda", "--step", "fit", "o"], "--step fit: the steps are"),
    (["--board-dir", "nowhere", "o"], "--board-dir nowhere is no emulated board"),
    (["--target", "ssh://root@b", "--device", "/dev/sda", "--frobnicate", "o"], "unknown option --frobnicate"),
    (["--target"], "--target needs a value"),
])
def test_bad_input_is_one_line_and_exit_2(argv, words, tmp_path):
    r = subprocess.run(["bash", str(SCRIPT), *argv], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and words in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


def test_a_board_directory_with_a_target_is_refused(tmp_path):
    r = _script("--board-dir", str(_board(tmp_path)), "--target", "ssh://root@b", str(tmp_path / "o"))
    assert r.returncode == 2 and "drop --target" in r.stderr and r.stderr.count("\n") == 1
