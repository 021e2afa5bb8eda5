import pytest

from flashbed.cli import main


@pytest.mark.parametrize("argv,words", [
    (["lab", "smoke", "--fs", "reiserfs"], "unknown filesystem 'reiserfs'"),
    (["lab", "bench-boot", "--boots", "0"], "--boots must be at least 1"),
])
def test_bad_input_is_one_line_and_nonzero(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


@pytest.mark.parametrize("argv,words", [
    (["run", "--study", "mkfs", "--iterations", "5"], "--iterations applies to --study powercut or corruption or badblocks"),
    (["run", "--resume", "x", "--fs", "ext4"], "--resume finishes the run's own plan; drop --fs"),
    (["run", "--set", "bigfile"], "bad --set 'bigfile'"),
    (["run", "--device", "emmc-9g", "--study", "mkfs"], "unknown device preset 'emmc-9g'"),
])
def test_bad_run_options_are_one_line(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


def test_progress_counts_the_finished_part_of_running_cells_and_throttles_its_lines():
    import io

    from flashbed.progress import Progress
    out = io.StringIO()
    p = Progress(4, stream=out, every=0.0)
    assert p.eta() is None
    p.start("a")
    p.part("a", 50, 100)
    assert "a: 50/100 boots" in out.getvalue()
    assert p.eta() is not None  # half a cell done: an estimate exists
    quiet = Progress(4, stream=io.StringIO(), every=3600)
    quiet.start("a")
    quiet.part("a", 1, 100)
    quiet.part("a", 2, 100)
    assert "boots" not in quiet.stream.getvalue()
    p.finish("a", "done")
    assert p.done == 1 and "a" not in p._part


def test_an_out_directory_that_cannot_be_made_is_one_line(capsys):
    argv = ["run", "--fs", "ext4", "--study", "mkfs", "--device", "plain-file@512M", "--out", "/proc/flashbed-no"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "cannot create the run directory /proc/flashbed-no" in err and "Traceback" not in err


def test_dask_without_a_scheduler_is_refused_before_the_run_directory_is_made(tmp_path, capsys):
    out_dir = tmp_path / "run"
    argv = ["run", "--fs", "ext4", "--study", "mkfs", "--device", "plain-file@512M", "--executor", "dask",
            "--out", str(out_dir)]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1  # no banner, only the refusal
    assert "--executor dask needs --scheduler ADDR" in err
    assert not out_dir.exists()
