"""The command reference, docs/cli.md, made from the commands' own parsers:

    python3 -m flashbed.clidoc > docs/cli.md

tests/unit/test_cli_reference.py fails when docs/cli.md is not what this prints, so the
options and their help never drift from the documentation. Each command (and each of its
subcommands) is a section: its help line, its arguments, then its options, in the groups its
parser shows them in (flashbed run's), with their defaults and choices.
"""

from __future__ import annotations

import argparse
import sys

HEAD = """# flashbed command reference

Every command, its arguments and its options, as `flashbed COMMAND --help` gives them. This page
is made from the parsers themselves (`python3 -m flashbed.clidoc > docs/cli.md`;
a test fails when it is stale). What the commands are for: the [README](../README.md).
"""


def markdown(parser: argparse.ArgumentParser | None = None) -> str:
    if parser is None:
        from .cli import parser as cli_parser
        parser = cli_parser()
    out = [HEAD]
    for path, sub, help_text in _commands(parser):
        out.append(_section(path, sub, help_text))
    out.append("## Exit codes\n\n```\n" + (parser.epilog or "").strip() + "\n```\n")
    return "\n".join(out)


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("flashbed",), help_text: str = ""):
    """(words, parser, its help line) of every command with options or arguments of its own, in order."""
    subs = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    own = [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    if subs is None or own or len(path) > 1:
        yield path, parser, help_text
    if subs is not None:
        helps = {c.dest: c.help or "" for c in subs._choices_actions}
        for name, sub in subs.choices.items():
            yield from _commands(sub, (*path, name), helps.get(name, ""))


def _section(path: tuple[str, ...], parser: argparse.ArgumentParser, help_text: str) -> str:
    level = "#" * min(len(path) + 1, 4)
    lines = [f"{level} {' '.join(path)}", ""]
    if help_text:
        lines += [_text(help_text[0].upper() + help_text[1:]) + ".", ""]
    subs = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if subs is not None:
        lines += ["Commands: " + ", ".join(f"`{' '.join((*path, n))}`" for n in subs.choices) + ".", ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction, argparse._VersionAction))]
        if not actions:
            continue
        title = {"positional arguments": "arguments", "options": "options"}.get(group.title or "", group.title)
        lines += [f"*{title}*", "", "| | |", "| --- | --- |"]
        lines += [f"| {_name(a)} | {_what(a)} |" for a in actions]
        lines.append("")
    return "\n".join(lines)


def _name(a: argparse.Action) -> str:
    if not a.option_strings:
        return f"`{a.metavar or a.dest.upper()}`" + (" …" if a.nargs in ("+", "*") else "")
    if a.nargs == 0:
        return f"`{a.option_strings[0]}`"
    value = a.metavar or a.dest.upper()
    return f"`{a.option_strings[0]} {f'[{value}]' if a.nargs == '?' else value}`"  # an optional value: --robust [DRAWS]


def _what(a: argparse.Action) -> str:
    parts = [_text(a.help % {"default": a.default} if a.help else "")]
    if a.choices:
        parts.append("one of " + ", ".join(f"`{c}`" for c in a.choices))
    if a.default not in (None, False, [], argparse.SUPPRESS) and a.nargs != 0:
        parts.append(f"default `{a.default}`")
    if isinstance(a, argparse._AppendAction) and "repeatable" not in parts[0]:
        parts.append("repeatable")
    if a.required:
        parts.append("required")
    return "; ".join(p for p in parts if p) or " "


def _text(s: str) -> str:
    """Help text in a table cell: one line, its pipes escaped."""
    return " ".join(s.split()).replace("|", "\\|").replace("<", "\\<")


if __name__ == "__main__":
    sys.stdout.write(markdown())
