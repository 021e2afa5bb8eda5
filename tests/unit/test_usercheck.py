"""Where the user's check runs (crashhost/usercheck.py): on the host unless it needs the mounted
filesystem itself, said with the reason; the host's answer to the lab's call on a packed tree."""

import dataclasses
import os
from pathlib import Path

import pytest

from flashbed.crashhost import sandbox, usercheck
from flashbed.lab.guest import trees

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WHY_NOT = sandbox.available()


@pytest.mark.parametrize("name", ["sqlite-check.sh", "ota-check.sh", "rotating-check.sh", "walcheck.sh"])
def test_the_shipped_checks_run_on_the_host(name):
    assert usercheck.needs_lab((EXAMPLES / name).read_bytes()) == ""


@pytest.mark.parametrize("line, why", [
    ("df -k . | tail -n 1", "statfs"),
    ("stat -f -c %a .", "statfs"),
    ("grep -q ro /proc/mounts", "statfs"),
    ("dd if=wal.log of=/dev/null iflag=direct", "direct I/O"),
    ("sync", "fsync"),
    ("filefrag -v wal.log", "a tool of the filesystem"),
    ("dd if=$FLASHBED_DEV bs=4k count=1", "$FLASHBED_DEV"),
    ("cat /dev/mmcblk0", "a device node"),
    ('echo done >> "$FLASHBED_RUN/seen"', "$FLASHBED_RUN"),
])
def test_a_check_that_needs_the_mounted_filesystem_stays_in_the_lab(line, why):
    assert why in usercheck.needs_lab(f"#!/bin/sh\nset -u\n{line}\n".encode())


def test_words_in_comments_and_names_are_not_needs():
    text = b"#!/bin/sh\n# after a sync, df would say\nn=$(grep -c synced= \"$FLASHBED_ACKED\")\ncat ./mount.log\n" \
           b"dd if=wal.log of=/dev/null bs=512 2>/dev/null\n"
    assert usercheck.needs_lab(text) == ""


def test_a_program_is_judged_by_the_calls_it_names():
    assert usercheck.needs_lab(b"\x7fELF\x02\x01" + b"\x00" * 20 + b"\x00read\x00fsync\x00") == \
        "it is a program that calls fsync()"
    assert usercheck.needs_lab(b"\x7fELF\x02\x01" + b"\x00read\x00write\x00") == ""


def test_where_says_why_the_lab(tmp_path):
    check = tmp_path / "c.sh"
    check.write_text("#!/bin/sh\ndf .\n")
    assert usercheck.where(check, True, True, False) == "appcheck.check_in_lab=true"
    assert "share_trees=false" in usercheck.where(check, False, False, False)
    assert "statfs" in usercheck.where(check, False, True, False)
    assert "fio" in usercheck.where(None, False, True, True)


@pytest.mark.skipif(not WHY_NOT, reason="a sandbox runs here")
def test_no_sandbox_here_keeps_the_check_in_the_lab(tmp_path):
    check = tmp_path / "c.sh"
    check.write_text("#!/bin/sh\ntrue\n")
    assert usercheck.where(check, False, True, False).startswith("no sandbox on this host")


@pytest.mark.skipif(bool(WHY_NOT), reason=f"no sandbox here: {WHY_NOT}")
def test_the_host_answers_the_lab_s_call_on_its_run_directory(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "wal.log").write_text("record 1\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    trees.pack(str(tree), str(run_dir / "tree.pack"))
    (run_dir / "acked.txt").write_text("records=1\n")
    (run_dir / "check.sh").write_text('#!/bin/sh\ncat "$FLASHBED_ACKED" wal.log; echo "$FLASHBED_RUN" "$FLASHBED_X"\n')
    (run_dir / "check.sh").chmod(0o755)
    guest = "/run/fb"  # the run directory as the lab saw it
    env = {"PATH": os.environ["PATH"], "FLASHBED_RUN": guest, "FLASHBED_X": f"{guest}/x", "FLASHBED_DEV": "/dev/ubda"}
    a = usercheck.answer({"cmd": "$FLASHBED_RUN/check.sh", "timeout": 30, "dir": "/mnt/cs", "pack": "tree.pack",
                          "acked": "acked.txt", "ro": False, "env": env}, run_dir)
    assert a["status"] == "ok" and a["rc"] == 0, a
    # the run directory at the lab's path, as every cell's check sees it (crashhost/verdicts.py)
    assert a["out"].splitlines() == ["records=1", "record 1", f"{guest} {guest}/x"]


@pytest.mark.skipif(bool(WHY_NOT), reason=f"no sandbox here: {WHY_NOT}")
@pytest.mark.parametrize("records", [0, 3, 8])
def test_the_guest_s_check_on_the_host_gives_the_lab_s_verdict(tmp_path, monkeypatch, records):
    """The guest's side (crashstates.user_check) asking the host (usercheck.answer, called directly here)
    gives the verdict its own run gives, failures and their words included; a tree the copy cannot
    be runs where it is."""
    from flashbed.lab.guest import crashstates
    from flashbed.lab.guest.protocol import CrashWorkSpec, HostAnswer
    run_dir, d = tmp_path / "run", tmp_path / "mnt" / "cs"
    run_dir.mkdir()
    d.mkdir(parents=True)
    (d / "wal.log").write_bytes(b"".join(b"%-511s\n" % (b"record %d" % i) for i in range(1, 6)))
    (run_dir / "check.sh").write_bytes((EXAMPLES / "walcheck.sh").read_bytes())
    (run_dir / "check.sh").chmod(0o755)
    monkeypatch.setenv("FLASHBED_RUN", str(run_dir))
    asked = []

    def host(rd, name, call, timeout, keep=True):
        asked.append(call.call)
        return HostAnswer(ok=True, data=usercheck.answer(call.args, Path(rd)))
    monkeypatch.setattr(crashstates, "call_host", host)
    recs = [{"e": "ack", "labels": [f"records={n}"]} for n in range(1, records + 1)]
    w = CrashWorkSpec(workload="user", mnt=str(d.parent), dir=str(d), log="", seed=1, mount=[], umount=[],
                      timeout=60, check="$FLASHBED_RUN/check.sh", check_timeout=30, share_trees=True)

    def verdict(where: str) -> dict:
        v = crashstates.user_check(dataclasses.replace(w, check_in_lab=where), str(d), recs, trees.SharedChecks())
        assert v["check"].pop("where") == ("host" if not where else "lab")
        for k in ("seconds", "host_seconds"):
            v["check"].pop(k, None)
        return v
    in_lab, on_host = verdict("in the lab"), verdict("")
    assert asked == ["user-check"]
    assert on_host == in_lab
    assert (in_lab["n_loss"] == 0) == (records <= 5), in_lab
    os.mkfifo(d / "pipe")  # a FIFO is copied; a socket cannot be
    assert verdict("") == verdict("in the lab")
    import socket
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(d / "sock"))
        v = crashstates.user_check(dataclasses.replace(w, check_in_lab=""), str(d), recs, trees.SharedChecks())
    assert v["check"]["where"] == "lab" and v["check"]["why"] == "sock is a socket"
