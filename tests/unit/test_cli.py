import pytest

from flashbed.cli import main
from flashbed.errors import FlashbedError


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
    (["bench", "clock", "--profile", "fast"], "--profile 'fast' is not a profile"),
    (["bench", "clock", "--profile", "quick", "--hog"], "--hog times fio jobs, not a whole profile"),
    (["bench", "clock", "--profile", "quick", "--runs", "0"], "--runs must be at least 1"),
    (["bench", "clock", "--profile", "quick", "--keep", "/"], "--keep / exists: name a new directory"),
    (["bench", "clock", "--keep", "kept"], "--keep keeps the runs of --profile"),
    (["bench", "crashstates", "--check", "examples/sqlite-check.sh"], "--check goes with a user workload"),
    (["bench", "crashstates", "--workload", "no-such-workload.sh"], "--workload no-such-workload.sh: no such file"),
    (["bench", "crashstates", "--workload", "examples/sqlite-logger.sh", "--check", "nocheck.sh"],
     "--check nocheck.sh: no such file"),
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
    # refused by the write guard before any mkdir (issue 28: never a new file under /proc)
    assert "--out /proc/flashbed-no is under /proc" in err and "Traceback" not in err


def test_dask_without_a_scheduler_is_refused_before_the_run_directory_is_made(tmp_path, capsys):
    out_dir = tmp_path / "run"
    argv = ["run", "--fs", "ext4", "--study", "mkfs", "--device", "plain-file@512M", "--executor", "dask",
            "--out", str(out_dir)]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1  # no banner, only the refusal
    assert "--executor dask needs --scheduler ADDR" in err
    assert not out_dir.exists()


@pytest.mark.parametrize("setting,words", [
    ("bigfile.sise=1G", "unknown parameter 'sise' for study bigfile: choose from size"),
    ("bigfile.size=banana", "bad value 'banana' for bigfile.size: expected a size in bytes"),
    ("powercut.cut_min=soon", "bad value 'soon' for powercut.cut_min: expected a number (s) of at least 0, "
                              "e.g. --set powercut.cut_min=0.5"),
    ("powercut.modes=sometimes", "expected a comma-separated list of values from sync, async"),
    ("powercut.mode=sync", "powercut.mode is set per case, from powercut.modes"),
    ("nosuch.size=1", "--set for unknown study 'nosuch'"),
    ("bandwidth.sync_rw=randread", "expected a comma-separated list of values from randwrite, write, none"),
    ("sqlite.journals=wall", "expected a comma-separated list of values from wal, rollback"),
    ("sqlite.transactions=many", "bad value 'many' for sqlite.transactions"),
])
def test_set_is_checked_against_the_studys_parameters_before_anything_runs(tmp_path, setting, words, capsys):
    out_dir = tmp_path / "run"
    argv = ["run", "--fs", "ext4", "--study", "bigfile", "--device", "plain-file@512M", "--set", setting,
            "--out", str(out_dir)]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and words in err and "Traceback" not in err
    assert not out_dir.exists()


def test_bad_set_value_names_an_example_that_is_accepted():
    from flashbed.plan import study_params
    with pytest.raises(FlashbedError) as e:
        study_params("quick", {"bigfile": {"size": "banana"}})
    example = str(e.value).split("e.g. --set bigfile.size=")[1]
    assert study_params("quick", {"bigfile": {"size": example}})["bigfile"].size == 4 << 30


def test_every_profile_gives_valid_parameters_for_every_study():
    from flashbed import profiles
    from flashbed.plan import study_params
    from flashbed.studies import STUDIES
    for name in profiles.PROFILES:
        assert set(study_params(name, {})) == set(STUDIES)  # raises on a field a study does not have
