"""The crash-state loop starts a plain command without the shell (guestlib.plain_argv, within
plain_commands): the same program, arguments, exit status and output as through `sh -c`, and
anything the shell would change (variables it would drop or split, redirections, lists, its own
words) still goes to the shell."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from flashbed.lab.guest import guestlib
from flashbed.lab.guest.guestlib import plain_argv, plain_commands, run_shell


@pytest.mark.parametrize("cmd", [
    "e2fsck -f -n ${UNSET_HERE}",  # unset: the shell drops the word
    "e2fsck -f -n $SPACED",  # a value the shell would split
    "fsck.vfat -n /dev/x > /tmp/out",  # redirection
    "a=b e2fsck",  # an assignment
    "cd /tmp",  # the shell's own
    "exit 3",
    "e2fsck '-f' /dev/x",  # quoting
    "e2fsck /dev/sd*",  # a glob
    "e2fsck /dev/x; rm -rf /",  # a list
    "no-such-program-here -x",  # not on PATH: the shell says so
    "",
])
def test_a_command_the_shell_would_change_goes_to_the_shell(cmd):
    assert plain_argv(cmd, {"PATH": os.environ["PATH"], "SPACED": "a b"}) is None


def test_a_plain_command_is_its_program_and_arguments_with_set_variables_put_in():
    env = {"PATH": os.environ["PATH"], "FLASHBED_DEV": "/dev/ubda"}
    prog, argv = plain_argv("fsck.f2fs -f --dry-run ${FLASHBED_DEV}", env)
    assert prog == shutil.which("fsck.f2fs") and argv == ["fsck.f2fs", "-f", "--dry-run", "/dev/ubda"]
    assert plain_argv("e2fsck -f -n $FLASHBED_DEV", env)[1] == ["e2fsck", "-f", "-n", "/dev/ubda"]


def test_outside_plain_commands_every_command_goes_through_the_shell(monkeypatch):
    seen = []
    real = subprocess.Popen

    def popen(argv, **kw):
        seen.append((kw.get("executable"), argv))
        return real(argv, **kw)
    monkeypatch.setattr(guestlib.subprocess, "Popen", popen)
    run_shell("true", 10)
    with plain_commands():
        run_shell("true", 10)
        run_shell("true && true", 10)
    run_shell("true", 10)
    assert [e for e, _ in seen] == ["/bin/sh", shutil.which("true"), "/bin/sh", "/bin/sh"]


@pytest.mark.parametrize("cmd", ["sh -c 'exit 3'", "ls /no/such/dir", "true", "kill -KILL $$"])
def test_with_or_without_the_shell_the_status_and_output_are_the_same(cmd, tmp_path):
    # the same program both ways where the command is plain; the shell where it is not
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/sh\n{cmd}\n")
    script.chmod(0o755)
    shelled = run_shell(str(script), 10)
    with plain_commands():
        plain = run_shell(str(script), 10)
    # the status, the exit code (a signal's as the shell gives it) and the output; only the shell's
    # own report of a killed program ("Killed") is not there without it
    assert plain[:3] == shelled[:3]
    assert plain[3] == shelled[3] or "KILL" in cmd
