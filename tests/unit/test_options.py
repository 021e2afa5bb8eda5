"""Issue 28: empty means empty. Every option and argument of every command, given an empty
(or blank) value, is refused in one line with exit 2 by the parser (cli._Parser), before any
command runs: `--target "$BOARD"` with BOARD unset no longer passes for "no --target". And
--set is for a study's settings in the run, not for what another option sets with its checks."""

from __future__ import annotations

import argparse

import pytest

from flashbed.cli import _parser, main


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _valued():
    """(command words, option or '' for a positional, the action's name) of every value taken."""
    out = []
    for path, parser in _commands(_parser()):
        for a in parser._actions:
            if a.nargs == 0 or isinstance(a, argparse._SubParsersAction):
                continue
            out.append((path, a.option_strings[0] if a.option_strings else "", a.dest))
    return out


VALUED = _valued()


def test_the_table_covers_every_command_and_the_options_of_the_issue():
    opts = {(" ".join(p), o) for p, o, _ in VALUED}
    for want in [("run", "--target"), ("run", "--workload"), ("run", "--check"), ("run", "--ssh-key"),
                 ("run", "--daily-writes"), ("run", "--out"), ("report", "--out"), ("lab exec", "--disk"),
                 ("probe", "--write-preset"), ("crashstate replay", "--image"), ("bench clock", "--keep")]:
        assert want in opts, want
    assert len({p for p, _, _ in VALUED}) >= 18 and len(VALUED) >= 90


@pytest.mark.parametrize("blank", ["", " "])
@pytest.mark.parametrize("path, option, dest", VALUED, ids=[f"{' '.join(p)} {o or d}" for p, o, d in VALUED])
def test_an_empty_value_is_refused_in_one_line(path, option, dest, blank, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [*path, option, blank] if option else [*path, blank]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert "an empty value: give one" in err, err
    assert list(tmp_path.iterdir()) == []  # nothing made: not the current directory as a run (--out "")


def _one_line(capsys, words):
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and words in err, err


@pytest.mark.parametrize("setting, option", [
    ("workload.file=/etc/passwd", "--workload FILE"), ("workload.kind=fio", "--workload FILE"),
    ("workload.digest=0123456789abcdef", "--workload FILE"), ("appcheck.check=/bin/true", "--check FILE"),
    ("appcheck.check_digest=00", "--check FILE"),
])
def test_set_refuses_what_another_option_sets_with_its_checks(setting, option, capsys, tmp_path):
    argv = ["run", "--study", setting.split(".")[0], "--fs", "ext4", "--set", setting, "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    _one_line(capsys, f"--set {setting.split('=')[0]} is not a setting: {option} sets it")


def test_set_of_a_study_not_in_the_run_is_refused(capsys, tmp_path):
    argv = ["run", "--study", "bigfile", "--fs", "ext4", "--set", "mount.fills=10", "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    _one_line(capsys, "--set mount.fills=10: study mount is not in this run (bigfile): add --study mount")
    assert not (tmp_path / "r").exists()
