"""Issue 43's bad input on the host's path: a check that writes outside its scratch, one that hangs and
one that forks for ever, each asked of the host as the lab asks for it (the guest's
crashstates.user_check, Call.USER_CHECK answered by usercheck.answer, which runs it in the sandbox):
contained (nothing of the host changed, none of its processes left), classified (the verdict the lab
gets and the class the cell records for the state). test_checksandbox.py holds the sandbox itself to the
same three; this is the path a cell takes."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from flashbed.crashhost import sandbox, usercheck
from flashbed.lab.guest import crashstates, trees
from flashbed.lab.guest.protocol import CrashWorkSpec, HostAnswer, StateFacts
from flashbed.status import PowerCutClass
from flashbed.studies import STUDIES
from tests.unit.test_checksandbox import running

WHY_NOT = sandbox.available()
pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=f"no check sandbox here: {WHY_NOT}")


def snapshot(root: Path) -> dict[str, str]:
    """Every file under `root` by its bytes, every directory by its names."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(root):
        seen[dirpath] = " ".join(sorted(dirnames + filenames))
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p) and os.path.isfile(p):
                seen[p] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return seen


@pytest.fixture
def world(monkeypatch):
    """A recovered workload directory, the boot's run directory, a host directory the check can see (under
    /var/tmp: the temporary directory is the check's own scratch there), and the guest's side wired to
    the host's answer (as test_usercheck does)."""
    # under a short path: a verdict keeps the check's last line cut at 200 characters, and the shell's
    # 'cannot create' line names the check's path and the file's; under tmp_path in an xdist worker
    # (pytest-N/popen-gwN/test_...) the cut fell before 'Read-only file system'
    base = Path(tempfile.mkdtemp(prefix="fh-"))
    run_dir, d = base / "run", base / "mnt" / "cs"
    host = Path("/var/tmp", f"flashbed-hostile-{uuid.uuid4().hex}")
    for p in (run_dir, d, host):
        p.mkdir(parents=True)
    (d / "wal.log").write_bytes(b"".join(b"%-511s\n" % (b"record %d" % i) for i in range(1, 6)))
    (host / "canary").write_text("untouched")
    monkeypatch.setenv("FLASHBED_RUN", str(run_dir))

    def answer(rd, name, call, timeout, keep=True):
        return HostAnswer(ok=True, data=usercheck.answer(call.args, Path(rd)))
    monkeypatch.setattr(crashstates, "call_host", answer)
    try:
        yield run_dir, d, host
    finally:
        shutil.rmtree(host, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)


def verdict(world, text: str, limit: float) -> tuple[dict, dict]:
    """The check `text` at one state, on the host: (the guest's verdict, the cell's record of the state)."""
    run_dir, d, _ = world
    (run_dir / "check.sh").write_text("#!/bin/sh\n" + text)
    (run_dir / "check.sh").chmod(0o755)
    w = CrashWorkSpec(workload="user", mnt=str(d.parent), dir=str(d), log="", seed=1, mount=[], umount=[],
                      timeout=60, check="$FLASHBED_RUN/check.sh", check_timeout=limit, share_trees=True)
    v = crashstates.user_check(dataclasses.replace(w, check_in_lab=""), str(d), [{"e": "ack", "labels": ["records=5"]}],
                               trees.SharedChecks(), "7")
    facts = {"phase": "done", "mounted": True, "verified_by": "mount1", "fsck": {"result": "clean"},
             "mount1": {"status": "ok", "kmsg": []}, "verify": v}
    return v, STUDIES["appcheck"]._record(StateFacts(id="7", kind="cut", acked=1, damaged=0, facts=facts), "ext4")


def test_a_check_that_writes_outside_its_scratch_changes_nothing_and_fails_as_in_the_lab(world):
    run_dir, d, host = world
    name = f"flashbed-hostile-{uuid.uuid4().hex}"
    before = {p: snapshot(p) for p in (d, host)}
    # a check that cleans up after itself where it should not: the host's files, the run directory (its
    # $FLASHBED_ACKED), the host's /tmp and /var/tmp; its scratch (/tmp in the sandbox) and its copy of the
    # directory take writes, as the lab's /tmp and mounted filesystem do
    v, rec = verdict(world, f"""set -e
echo scratch > /tmp/{name}; echo copy > ./{name}; cat /tmp/{name} ./{name}
echo gone > {host}/canary || rm -f {host}/canary || echo "host canary kept"
: > "$FLASHBED_ACKED" || touch "$FLASHBED_RUN/{name}" || echo "run directory kept"
rm -f wal.log && echo "the copy's wal.log removed"
touch {host}/{name}
echo "never here"
""", 30)
    assert v["check"]["where"] == "host" and v["check"]["status"] == "failed" and v["check"]["rc"] != 0, v
    assert "Read-only file system" in v["check"]["out"], v  # the last line: touch's
    assert rec["class"] == PowerCutClass.DATA_LOSS and "the check failed" in rec["why"], rec
    # the run directory holds what the lab wrote (the labels, the pack) and nothing of the check's
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(["check.sh", crashstates.ACKED, crashstates.PACK])
    assert (run_dir / crashstates.ACKED).read_text() == "records=5\n"
    assert snapshot(d) == before[d] and snapshot(host) == before[host]
    assert not Path("/tmp", name).exists()


def test_a_check_that_hangs_is_a_hang_and_leaves_nothing_running(world):
    marker = f"{uuid.uuid4().int % 10**9}.5"
    # one sleep in its process group, one that left it (its own session), one in the background
    v, rec = verdict(world, f"setsid sleep {marker} & sleep {marker} &\nsleep {marker}\n", 1.0)
    assert v["check"]["where"] == "host" and v["check"]["status"] == "timeout" and v["check_timeout"], v
    assert rec["class"] == PowerCutClass.HANG and rec["no_verdict"] == "your check did not finish", rec
    assert rec["why"] == "the check did not finish within 1 s"
    assert float(v["check"]["host_seconds"]) < 1.0 + sandbox.KILL_WAIT
    assert running(marker) == []


def test_a_check_that_forks_for_ever_is_bounded_and_leaves_nothing_running(world):
    marker = f"fbbomb{uuid.uuid4().hex}"
    # each process forks for ever (until a shell gives up on a fork it could not make)
    v, rec = verdict(world, f"# {marker}\nb() {{ while :; do b & done; }}; b\n", 3.0)
    assert v["check"]["where"] == "host" and v["check"]["status"] in ("timeout", "failed"), v
    assert rec["class"] in (PowerCutClass.HANG, PowerCutClass.DATA_LOSS), rec  # as its end says: limit or exit
    assert float(v["check"]["host_seconds"]) < 3.0 + sandbox.KILL_WAIT + 5
    assert running(marker) == []  # (its pids limit: test_checksandbox.py's fork bomb)
