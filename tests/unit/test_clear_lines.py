"""Issue 42, 17: lines that said something misleading now say what is so and what to do."""

from __future__ import annotations

from flashbed.cli import main


def test_an_unknown_setting_lists_only_what_set_can_change(capsys):
    assert main(["run", "--study", "appcheck", "--set", "appcheck.nosuch=1"]) == 2
    err = capsys.readouterr().err
    listed = err.split("choose from ", 1)[1].split(" (", 1)[0].split(", ")
    assert "mode" in listed and "check_limit" in listed
    assert not {"file", "check", "workload"} & set(listed), listed  # options set them, or nothing to choose
    assert "(file: set by --workload FILE; check: set by --check FILE)" in err


def test_write_preset_naming_a_directory_suggests_a_preset_file(tmp_path, capsys):
    d = tmp_path / "dir.toml"
    d.mkdir()
    assert main(["probe", "emmc-8g@64M", "--write-preset", str(d)]) == 2
    err = capsys.readouterr().err
    assert f"--write-preset {d} is a directory: give a preset file path, e.g. {d / 'mypart.toml'}" in err
    # the example passes the check that follows (it ends in .toml)
    assert str(d / "mypart.toml").endswith(".toml")
