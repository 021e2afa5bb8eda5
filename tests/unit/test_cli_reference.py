"""docs/cli.md is the commands' own parsers as text (issue 32): a test fails when it is stale."""

from __future__ import annotations

from flashbed.cli import parser
from flashbed.clidoc import markdown
from flashbed.paths import repo_root

STALE = "docs/cli.md is stale: run `python3 -m flashbed.clidoc > docs/cli.md`"


def test_docs_cli_md_is_what_the_parsers_say():
    assert (repo_root() / "docs" / "cli.md").read_text() == markdown(), STALE


def test_an_option_the_docs_do_not_have_makes_them_stale():
    p = parser()
    run = next(a for a in p._actions if a.dest == "command").choices["run"]
    run.add_argument("--frobnicate", help="an option only this test has")
    assert "--frobnicate" in markdown(p) and markdown(p) != (repo_root() / "docs" / "cli.md").read_text()


def test_every_command_and_option_is_in_it():
    text = (repo_root() / "docs" / "cli.md").read_text()
    for words in ("### flashbed run", "#### flashbed lab exec", "### flashbed probe", "#### flashbed crashstate replay",
                  "`--workload FILE`", "`--target ssh://USER@HOST[:PORT]`", "*your workload*", "## Exit codes"):
        assert words in text, words
