import pytest

from flashbed.cli import main


@pytest.mark.parametrize("argv,words", [
    (["lab", "smoke", "--fs", "reiserfs"], "unknown filesystem 'reiserfs'"),
    (["lab", "bench-boot", "--boots", "0"], "--boots must be at least 1"),
    (["lab", "exec", "--kernel", "5.10", "--", "true"], "unknown lab kernel '5.10': choose 6.12 or 7.3"),
    (["lab", "smoke", "--kernel", "7.3:kvm"], "lab kernel 7.3 has no boot mode 'kvm'"),
    (["lab", "exec", "--kernel", "6.12", "--cpus", "2", "--", "nproc"], "lab kernel 6.12 has no SMP"),
    (["lab", "exec", "--kernel", "7.3", "--cpus", "99", "--", "nproc"], "runs 1 to 8 vCPUs, not 99"),
    (["lab", "exec", "--cpus", "0", "--", "nproc"], "runs 1 to 8 vCPUs, not 0"),
    (["kernel", "build", "--kernel", "3.19"], "unknown lab kernel '3.19'"),
    (["bench", "lab", "--kernel", "4.4"], "unknown lab kernel '4.4'"),
    (["bench", "lab", "--parts", "lab,gpu"], "unknown bench lab part 'gpu'"),
    (["bench", "lab", "--runs", "0"], "--runs must be at least 1"),
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
