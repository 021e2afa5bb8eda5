"""The option layer: every command's options are read here, once, before any command runs.

`Parser` is argparse with one line on a bad option (exit 2, no usage block) and the one place
where a value given empty or blank is refused, for every option and argument of every command
(`--target "$BOARD"` with BOARD unset must not pass for "no --target"): past the parser a value
is either not given (None) or not empty. Types that check a value (`seconds`) raise BadValue,
which the parser says after the option's name. Every command's parser is made of it (cli.py and
the command modules of commands/, bench/fusecost.py). `items` reads a repeatable,
comma-separated option.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .errors import FlashbedError


class Parser(argparse.ArgumentParser):
    """argparse, with a bad option in one line (no usage block before it), exit 2; and the one
    place where a value given empty is refused, for every option and argument of every command
    (`--target "$BOARD"` with BOARD unset must not pass for "no --target"): past the parser, a
    value is either not given (None) or not empty."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")

    def add_argument(self, *args, **kwargs):
        return _guarded(super().add_argument(*args, **kwargs))

    def add_argument_group(self, *args, **kwargs):
        """A group of options (--help shows them together), each refused empty as every other."""
        group = super().add_argument_group(*args, **kwargs)
        add = group.add_argument
        group.add_argument = lambda *a, **k: _guarded(add(*a, **k))  # type: ignore[method-assign]
        return group


def _guarded(action: argparse.Action) -> argparse.Action:
    if action.nargs != 0 and not isinstance(action, argparse._SubParsersAction):
        action.type = not_empty(action.type, action.option_strings[0] if action.option_strings else "",
                                action.metavar or action.dest, alone=action.nargs == "?")
    return action


def not_empty(convert, option: str, name: str, alone: bool = False):
    """`convert` (argparse's type) behind a refusal of an empty or blank value: a FlashbedError,
    which argparse lets through, so main says it as every other refusal. `alone`: the option
    takes its default value when given without one (nargs='?', as --robust), not when left out."""
    def read(text: str):
        if isinstance(text, str) and not text.strip():
            default = f"give {option} alone for its default" if alone else f"leave {option} out for its default"
            raise FlashbedError(f"{option} '{text}': an empty value: give one, or {default}" if option
                                else f"{name} '{text}': an empty value: give one")
        try:
            return convert(text) if convert is not None else text
        except BadValue as e:
            raise FlashbedError(f"{option or name} {e}") from None
    read.__name__ = getattr(convert, "__name__", "value")  # argparse names the type in its own messages
    return read


def one_line(text: str) -> str:
    """A message as one line: control characters a user typed (a newline in a value) escaped."""
    from .results import printable
    return printable(text)


class BadValue(FlashbedError):
    """An option's value its type refuses: the parser says it after the option's name."""


def seconds(text: str) -> float:
    """A duration option's value: a number of seconds above 0, and finite (nan and inf are no time)."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0 < v < float("inf"):
        raise BadValue(f"must be a number of seconds above 0 (and finite), not '{text}'")
    return v


def path(text: str) -> Path:
    """A path option's value, with a leading `~` or `~user` expanded here, as a shell would: the
    path checked (writeguard) and the path written are then one, whatever quoted the `~`."""
    if not text.startswith("~"):
        return Path(text)
    expanded = os.path.expanduser(text)
    if expanded.startswith("~"):
        raise BadValue(f"'{text}': {text.split('/')[0]} is no user of this host (and no $HOME for ~): give the "
                       f"path in full")
    return Path(expanded)


EXIT_CODES = """exit codes:
  0    done: every cell ran (a measured outcome such as a filesystem hanging on corrupted media is a result)
  1    done, but cells failed or errored: a study step that had to succeed broke, or flashbed or the lab
       did (`flashbed results RUN` lists them; a rerun retries the errored ones); a smoke test or a replayed
       crash state that did not come out as recorded
  2    bad input or a refusal: nothing was run (one line on stderr says what to do)
  130  interrupted (Ctrl-C): finished cells are kept; the same command resumes
  143  terminated (SIGTERM): as Ctrl-C
  141  the reader of stdout went away (e.g. `| head`)"""


def items(values: list[str] | None, option: str = "") -> tuple[str, ...]:
    """A repeatable, comma-separated option's items. An empty item is refused: `--fs ""` or
    `--fs ,` must not pass for leaving the option out (which means every default)."""
    out = tuple(x.strip() for v in (values or []) for x in v.split(","))
    if "" in out:
        given = next(v for v in values or [] if "" in (x.strip() for x in v.split(",")))
        raise FlashbedError(f"--{option} '{given}' has an empty item: name what you want (e.g. --{option} "
                            f"{EXAMPLES.get(option, 'NAME')}), or leave --{option} out for the default")
    return out


EXAMPLES = {"fs": "ext4,f2fs", "study": "bandwidth", "device": "emmc-8g@512M", "kernel": "7.3", "parts": "lab",
            "cpu-profile": "cortex-a8,none"}
