"""flashbed command line: parse once at the edge, one clear line on bad input."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading

from . import __version__
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
    try:
        rc = _dispatch(parser().parse_args(argv))
        # stdout to a pipe is buffered: a reader that is gone (`| head`) shows here, not at exit
        sys.stdout.flush()
        return rc
    except FlashbedError as e:
        print(f"flashbed: error: {one_line(str(e))}", file=sys.stderr)
        return e.exit_code
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


if __name__ == "__main__":
    sys.exit(main())
