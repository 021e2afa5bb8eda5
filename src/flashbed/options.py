"""The option layer: every command's options are read here, once, before any command runs.

`Parser` is argparse with one line on a bad option (exit 2, no usage block) and the one place
where a value given empty or blank is refused, for every option and argument of every command
(`--target "$BOARD"` with BOARD unset must not pass for "no --target"): past the parser a value
is either not given (None) or not empty. Types that check a value (`seconds`) raise BadValue,
which the parser says after the option's name. Every command's parser is made of it (cli.py,
probe/command.py, yaffs2/fusecost.py).
"""

from __future__ import annotations

import argparse

from .errors import FlashbedError


class Parser(argparse.ArgumentParser):
    """argparse, with a bad option in one line (no usage block before it), exit 2; and the one
    place where a value given empty is refused, for every option and argument of every command
    (`--target "$BOARD"` with BOARD unset must not pass for "no --target"): past the parser, a
    value is either not given (None) or not empty."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")

    def add_argument(self, *args, **kwargs):
        action = super().add_argument(*args, **kwargs)
        if action.nargs != 0 and not isinstance(action, argparse._SubParsersAction):
            action.type = not_empty(action.type, action.option_strings[0] if action.option_strings else "",
                                    action.metavar or action.dest)
        return action


def not_empty(convert, option: str, name: str):
    """`convert` (argparse's type) behind a refusal of an empty or blank value: a FlashbedError,
    which argparse lets through, so main says it as every other refusal."""
    def read(text: str):
        if isinstance(text, str) and not text.strip():
            raise FlashbedError(f"{option} '{text}': an empty value: give one, or leave {option} out for its "
                                f"default" if option else f"{name} '{text}': an empty value: give one")
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
