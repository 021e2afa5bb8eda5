"""A path an ordinary user may not search, read or write is one line with the path and a hint,
wherever flashbed meets it (the CLI's own handler), never a traceback; a user's report of a run
they cannot write says --out before anything is rendered."""

from __future__ import annotations

import os

from flashbed import cli
from flashbed.commands import report as report_cmd


def test_a_permission_error_anywhere_is_one_line_with_the_path(monkeypatch, capsys):
    def denied(args):
        raise PermissionError(13, "Permission denied", "/home/other/secret/run")
    monkeypatch.setattr(cli, "_dispatch", denied)
    assert cli.main(["run", "--fs", "ext4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("flashbed: error: /home/other/secret/run: permission denied (Permission denied): run "
                          "flashbed as a user who may use it, or give a path of your own (--out DIR")


def test_a_command_without_out_gives_no_out_hint(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_dispatch", lambda a: (_ for _ in ()).throw(PermissionError(13, "Permission denied",
                                                                                         "/x/p.toml")))
    assert cli.main(["devices", "show", "emmc-8g"]) == 2
    err = capsys.readouterr().err
    assert "/x/p.toml: permission denied" in err and "--out" not in err


def test_a_report_of_a_run_the_user_cannot_write_says_out_first(tmp_path, monkeypatch, capsys):
    from tests.report_fixtures import generator
    gen = generator()
    run = gen.write_run(tmp_path / "run", gen.media_cells("emmc-1g", 10.0))
    real = os.access
    monkeypatch.setattr(report_cmd.os, "access", lambda p, m: False if str(p) == str(run) else real(p, m))
    assert cli.main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the report into run {run}" in err and "give --out DIR" in err
    assert not (run / "report.html").exists()
    out = tmp_path / "mine"
    assert cli.main(["report", str(run), "--out", str(out)]) == 0
    assert (out / "report.html").exists()
