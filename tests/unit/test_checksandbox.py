"""The user's check on the host (crashhost/sandbox.py): it sees a copy of the recovered directory and
its scratch, and nothing of the host it can change: a write outside the scratch fails, a check that
hangs is a timeout and leaves nothing running, a fork bomb stays within its pids limit."""

import os
import re
import uuid
from pathlib import Path

import pytest

from flashbed.crashhost import sandbox
from flashbed.lab.guest import trees

WHY_NOT = sandbox.available()
pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=f"no check sandbox here: {WHY_NOT}")
WORKDIR = "/mnt/cs"  # the lab's directory of the workload (studies/appcheck.py: MNT/cs)


def env(run_dir: Path, **more: str) -> dict[str, str]:
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/tmp", "FLASHBED_RUN": str(run_dir),
            "FLASHBED_MNT": WORKDIR, **more}


def running(marker: str) -> list[int]:
    """Processes on the host whose command line holds `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


def tree(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "wal.log").write_bytes(b"".join(b"%-511d\n" % i for i in range(8)))
    (root / "sub" / "meta").write_text("v1")
    (root / "link").symlink_to("wal.log")
    os.link(root / "wal.log", root / "wal.hard")
    (root / "sub" / "meta").chmod(0o600)
    os.utime(root / "wal.log", ns=(1, 1_000_000_123))
    for d in (root / "sub", root):
        os.utime(d, ns=(1, 3_000_000_456))
    return root


def test_the_copy_keys_as_the_tree(tmp_path):
    src = tree(tmp_path / "src")
    dst = tmp_path / "dst"
    dst.mkdir()
    trees.pack(str(src), str(tmp_path / "tree.pack"))
    trees.unpack(str(tmp_path / "tree.pack"), str(dst))
    assert trees.tree_key(str(dst), b"records=8\n") == trees.tree_key(str(src), b"records=8\n")


def test_a_device_node_stays_in_the_lab(tmp_path):
    src = tree(tmp_path / "src")
    os.symlink("/dev/null", src / "ok-a-symlink")
    trees.pack(str(src), str(tmp_path / "a.pack"))
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(src / "node", 0o600 | 0o020000, os.makedev(1, 3))
    with pytest.raises(trees.NotPortable, match="node is a device node"):
        trees.pack(str(src), str(tmp_path / "b.pack"))


def test_the_check_reads_the_copy_where_the_lab_had_it(tmp_path):
    src = tree(tmp_path / "src")
    pack = tmp_path / "run" / "tree.pack"
    pack.parent.mkdir()
    trees.pack(str(src), str(pack))
    (pack.parent / "acked.txt").write_text("records=8\n")
    ran = sandbox.run('pwd; echo "$FLASHBED_MNT"; cat "$FLASHBED_ACKED"; dd if=wal.log bs=512 skip=7 count=1 '
                      '2>/dev/null; cat link | wc -c', WORKDIR, env(pack.parent, FLASHBED_ACKED=str(pack.parent / "acked.txt")),
                      30, pack=str(pack), visible=(str(pack.parent),))
    assert ran.status == "ok", ran.err
    assert ran.out.decode().split("\n")[:4] == [WORKDIR, WORKDIR, "records=8", "%-511d" % 7]
    assert ran.out.decode().split("\n")[4].strip() == str(8 * 512)


def test_permission_bits_decide_none_of_the_checks_reads_writes_or_searches(tmp_path):
    """Why the content key may leave them out (trees.METADATA_FIELDS): the check is root of its namespace
    over a copy it owns, so a file and a directory of mode 000 read, write and search as any other."""
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "f").write_text("secret\n")
    (src / "d" / "g").write_text("inside\n")
    (src / "f").chmod(0)
    (src / "d").chmod(0)
    pack = tmp_path / "tree.pack"
    try:
        trees.pack(str(src), str(pack))
    finally:
        (src / "d").chmod(0o755)
    ran = sandbox.run("cat f d/g; [ -r f ] && [ -w f ] && echo rw; echo more >> f && cat f", WORKDIR,
                      env(tmp_path), 30, pack=str(pack))
    assert ran.status == "ok", ran.err
    assert ran.out.decode().split("\n")[:5] == ["secret", "inside", "rw", "secret", "more"]


def test_a_write_outside_its_scratch_fails_and_changes_nothing(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "canary").write_text("untouched")
    before = sorted(p.name for p in run_dir.iterdir())
    scratch_name = f"flashbed-scratch-{uuid.uuid4().hex}"
    ran = sandbox.run(f'echo scratch > /tmp/{scratch_name} && cat /tmp/{scratch_name}; echo in-copy > ./new && '
                      f'cat ./new; echo changed > "$FLASHBED_RUN/canary"; touch "$FLASHBED_RUN/new" '
                      f'/usr/flashbed-new /var/flashbed-new', WORKDIR, env(run_dir), 30, visible=(str(run_dir),))
    assert ran.status == "failed" and ran.rc != 0
    assert ran.out.decode().split() == ["scratch", "in-copy"]  # its scratch and its copy take writes
    assert ran.err.decode().count("Read-only file system") == 4
    assert (run_dir / "canary").read_text() == "untouched"
    assert sorted(p.name for p in run_dir.iterdir()) == before
    assert not Path("/tmp", scratch_name).exists() and not Path("/usr/flashbed-new").exists()


def test_a_read_only_recovery_reads_read_only(tmp_path):
    ran = sandbox.run("echo x > ./new", WORKDIR, env(tmp_path), 30, read_only=True)
    assert ran.status == "failed" and b"Read-only file system" in ran.err


def test_a_check_that_hangs_is_a_timeout_and_leaves_nothing(tmp_path):
    marker = f"{uuid.uuid4().int % 10**9}.5"
    # one sleep in its process group, one that left it (its own session)
    ran = sandbox.run(f"setsid sleep {marker} & sleep {marker}", WORKDIR, env(tmp_path), 1.0)
    assert ran.status == "timeout" and ran.rc is None
    assert ran.seconds < 1.0 + sandbox.KILL_WAIT
    assert running(marker) == []


def test_a_fork_bomb_is_contained(tmp_path):
    marker = f"fbbomb{uuid.uuid4().hex}"
    # each process forks for ever (until the shell gives up on a fork it could not make: exit 2)
    ran = sandbox.run(f"# {marker}\nb() {{ while :; do b & done; }}; b", WORKDIR, env(tmp_path), 3.0, pids=64)
    assert ran.status in ("timeout", "failed")
    assert running(marker) == []
    if ran.peak is not None:  # a pids cgroup counted them
        assert ran.peak <= 64


def test_an_owner_the_namespace_cannot_map_sends_the_check_to_the_lab(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a file another owner needs root")
    src = tree(tmp_path / "src")
    os.chown(src / "wal.log", 4321, 4321)
    trees.pack(str(src), str(tmp_path / "tree.pack"))
    ran = sandbox.run("true", WORKDIR, env(tmp_path), 30, pack=str(tmp_path / "tree.pack"))
    assert re.match(r"owner 4321:4321 of wal\.(log|hard) cannot be set here", ran.refused)


def test_checks_in_one_sandbox_share_nothing(tmp_path):
    # the inside lives on between checks (started once); each check's scratch, copy, IPC objects and
    # processes are its own and end with it
    marker = f"{uuid.uuid4().int % 10**9}.25"
    first = sandbox.run(f"echo left > /tmp/left; echo left > ./left; ipcmk -Q >/dev/null; setsid sleep {marker} & "
                        "echo $$", WORKDIR, env(tmp_path), 30)
    assert first.status == "ok", first.err
    second = sandbox.run("ls /tmp ./; ipcs -q | grep -c '^0x' || true; echo $$", WORKDIR, env(tmp_path), 30)
    assert second.status == "ok", second.err
    lines = second.out.decode().split()
    assert "left" not in lines and lines[-2] == "0"  # no file, no message queue of the first check's
    assert first.out.decode().split()[-1] == lines[-1]  # each check's shell the same pid of its own namespace
    assert running(marker) == []
    assert len([b for b in sandbox._SANDBOXES if b.proc is not None and b.pids == sandbox.PIDS]) == 1
