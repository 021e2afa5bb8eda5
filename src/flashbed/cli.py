"""flashbed command line: parse once at the edge, one clear line on bad input."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading

from . import __version__, scratch
from .commands import COMMANDS
from .errors import FlashbedError
from .options import EXIT_CODES, Parser, one_line


def parser() -> argparse.ArgumentParser:
    """Every command's parser (each command's module adds its own, commands.COMMANDS)."""
    p = Parser(prog="flashbed", description=__doc__, epilog=EXIT_CODES,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"flashbed {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def _dispatch(args: argparse.Namespace) -> int:
    return args.handler(args)  # the command module's own (its parser's default)


class Terminated(KeyboardInterrupt):
    """SIGTERM: stopped as Ctrl-C stops flashbed (labs killed, finished results kept)."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    old = signal.signal(signal.SIGTERM, _on_sigterm) if threading.current_thread() is threading.main_thread() \
        else None
    args = None
    try:
        args = parser().parse_args(argv)
        with scratch.root():  # every temporary file of the command, removed when it ends
            rc = _dispatch(args)
        # stdout to a pipe is buffered: a reader that is gone (`| head`) shows here, not at exit
        sys.stdout.flush()
        return rc
    except FlashbedError as e:
        print(f"flashbed: error: {one_line(str(e))}", file=sys.stderr)
        return e.exit_code
    except PermissionError as e:
        # a path this user may not search, read or write (a directory of another user's, a run made by
        # root): one line with the path, wherever flashbed met it; finished cells stay as they are
        print(f"flashbed: error: {one_line(permission_line(e, args))}", file=sys.stderr)
        return FlashbedError.exit_code
    except Terminated:
        print("flashbed: terminated (SIGTERM); finished results are kept: the same command resumes", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("flashbed: interrupted; finished results are kept", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader stopped reading (`| head`): not an error of ours; stdout's last
        # flush at exit must not fail again
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def permission_line(e: PermissionError, args: argparse.Namespace | None) -> str:
    """What a PermissionError says to the user: the path, and what to do about it."""
    path = e.filename if e.filename is not None else "a path"
    also = f" (and {e.filename2})" if e.filename2 is not None else ""
    hint = "run flashbed as a user who may use it, or give a path of your own"
    if args is not None and hasattr(args, "out"):
        hint += " (--out DIR for what this command writes)"
    return f"{path}{also}: permission denied ({e.strerror or 'not permitted'}): {hint}"


if __name__ == "__main__":
    sys.exit(main())
