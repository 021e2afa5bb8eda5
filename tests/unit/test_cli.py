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
