"""The run's kept verdicts of the user's check (crashhost/verdicts.py): the pack's content and tree keys,
the store (the first verdict of a key stays, written whole, safe between processes), and the host's
answer taking a kept verdict from another cell's run where the check cannot tell the trees apart."""

import multiprocessing
import os
from pathlib import Path

import pytest

from flashbed.crashhost import sandbox, usercheck
from flashbed.crashhost.checkwords import VerdictKey
from flashbed.crashhost.verdicts import Seen, VerdictStore, shared_from
from flashbed.lab.guest import trees

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WHY_NOT = sandbox.available()


def wal(root: Path, records: int, mtime: int, mode: int = 0o644) -> Path:
    root.mkdir(parents=True)
    (root / "wal.log").write_bytes(b"".join(b"%-511s\n" % (b"record %d" % i) for i in range(1, records + 1)))
    os.chmod(root / "wal.log", mode)
    os.utime(root / "wal.log", ns=(mtime, mtime))
    os.utime(root, ns=(mtime, mtime))
    return root


def keys(tmp_path: Path, tree: Path) -> tuple[str, str]:
    out = tmp_path / f"{tree.name}.pack"
    trees.pack(str(tree), str(out))
    return trees.pack_keys(str(out))


def test_the_content_key_leaves_out_times_and_keeps_what_a_reader_sees(tmp_path):
    a = keys(tmp_path, wal(tmp_path / "a", 3, 1_000_000_000))
    b = keys(tmp_path, wal(tmp_path / "b", 3, 7_000_000_000))  # another filesystem's times
    assert a[0] == b[0] and a[1] != b[1]
    assert keys(tmp_path, wal(tmp_path / "c", 4, 1_000_000_000))[0] != a[0]  # one record more
    d = keys(tmp_path, wal(tmp_path / "d", 3, 1_000_000_000, mode=0o755))  # vfat's permission bits
    assert d[0] == a[0] and d[1] != a[1]
    e = wal(tmp_path / "e", 3, 1_000_000_000)
    os.symlink("wal.log", e / "link")
    assert keys(tmp_path, e)[0] != a[0]


def test_a_key_covers_every_part_the_check_sees():
    base = dict(cmd="$FLASHBED_RUN/check.sh", check=b"cat x", acked=b"records=50\n", read_only=False,
                env={"FLASHBED_RUN": "/run/flashbed"}, workdir="/mnt/cs", timeout=60.0, key=VerdictKey.CONTENT,
                tree="t")
    first = Seen(**base).digest()
    assert Seen(**base).digest() == first
    for change in (dict(check=b"cat y"), dict(acked=b"records=100\n"), dict(read_only=True),
                   dict(env={"FLASHBED_RUN": "/run/other"}), dict(workdir="/mnt/x"), dict(timeout=30.0),
                   dict(key=VerdictKey.TREE), dict(tree="u"), dict(cmd="$FLASHBED_RUN/other.sh")):
        assert Seen(**{**base, **change}).digest() != first, change


def test_the_first_verdict_of_a_key_stays(tmp_path):
    store = VerdictStore(tmp_path / "verdicts")
    assert store.get("k") is None
    assert store.put("k", {"status": "ok", "rc": 0, "from": {"cell": "c1", "state": "7", "key": "content"}})
    assert not store.put("k", {"status": "failed", "rc": 1})
    assert store.get("k")["status"] == "ok"
    assert shared_from(store.get("k")) == "shared from the tree of c1 state 7 (content key)"
    assert not store.confirmed("k")
    assert store.confirm("k", {"cell": "c2"}) and not store.confirm("k", {"cell": "c3"}) and store.confirmed("k")
    # no half-written file left
    assert sorted(p.name for p in (tmp_path / "verdicts").iterdir()) == ["k.confirmed", "k.json"]


def _put_many(root: str, who: int) -> int:
    store = VerdictStore(Path(root))
    return sum(store.put(f"k{i}", {"status": "ok", "rc": 0, "who": who, "pad": "x" * 10000}) for i in range(40))


def test_processes_writing_at_once_keep_one_whole_verdict_per_key(tmp_path):
    with multiprocessing.get_context("fork").Pool(4) as pool:
        kept = pool.starmap(_put_many, [(str(tmp_path), w) for w in range(4)])
    assert sum(kept) == 40
    store = VerdictStore(tmp_path)
    assert all(store.get(f"k{i}")["pad"] == "x" * 10000 for i in range(40))


def _cell(tmp_path: Path, name: str, mtime: int, records: int, acked: int, check: bytes) -> tuple[Path, dict]:
    """One cell's boot directory as the lab leaves it for a host check (its pack, labels, staged check)."""
    run_dir = tmp_path / name / "attempt-1"
    run_dir.mkdir(parents=True)
    tree = wal(tmp_path / name / "tree", records, mtime)
    trees.pack(str(tree), str(run_dir / "tree.pack"))
    (run_dir / "acked.txt").write_text(f"records={acked}\n" if acked else "")
    (run_dir / "check.sh").write_bytes(check)
    (run_dir / "check.sh").chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "FLASHBED_RUN": "/run/flashbed", "FLASHBED_DEV": "/dev/ubda"}
    return run_dir, {"cmd": "$FLASHBED_RUN/check.sh", "timeout": 30, "dir": "/mnt/cs", "pack": "tree.pack",
                     "acked": "acked.txt", "ro": False, "env": env}


@pytest.mark.skipif(bool(WHY_NOT), reason=f"no sandbox here: {WHY_NOT}")
@pytest.mark.parametrize("records, acked", [(5, 5), (3, 5)])
def test_a_second_cell_takes_the_first_cell_s_verdict_for_the_same_content(tmp_path, records, acked):
    """walcheck.sh reads contents only: a tree of another filesystem (other times) with the same log takes
    the verdict kept from the first, and it is the verdict running the check gives; the check saw the
    run directory at the lab's path in both."""
    store = VerdictStore(tmp_path / "verdicts")
    check = (EXAMPLES / "walcheck.sh").read_bytes()
    rd1, a1 = _cell(tmp_path, "ext4", 1_000_000_000, records, acked, check)
    rd2, a2 = _cell(tmp_path, "vfat", 8_000_000_000, records, acked, check)
    first = usercheck.answer(a1, rd1, store, "ext4-cell", "12")
    assert "shared" not in first and first["status"] == ("ok" if records >= acked else "failed"), first
    taken = usercheck.answer(a2, rd2, store, "vfat-cell", "40")
    assert taken["shared"]["cell"] == "ext4-cell" and taken["shared"]["state"] == "12"
    assert taken["shared"]["said"] == "shared from the tree of ext4-cell state 12 (content key)"
    # asked afresh (a lab's first recurrence of a tree): run, the same verdict, and the key confirmed
    ran = usercheck.answer({**a2, "fresh": True}, rd2, store, "vfat-cell", "40")
    assert "shared" not in ran
    assert (taken["status"], taken["rc"], taken["out"]) == (ran["status"], ran["rc"], ran["out"]) == \
        (first["status"], first["rc"], first["out"])
    again = usercheck.answer({**a1, "fresh": True}, rd1, store, "ext4-cell", "13")  # two runs agreed: taken
    assert again["shared"]["state"] == "12" and again["status"] == first["status"]
    # other labels, or another log: not the same key
    rd3, a3 = _cell(tmp_path, "btrfs", 8_000_000_000, records + 1, acked, check)
    assert "shared" not in usercheck.answer(a3, rd3, store, "btrfs-cell", "3")


@pytest.mark.skipif(bool(WHY_NOT), reason=f"no sandbox here: {WHY_NOT}")
def test_a_check_that_reads_times_is_shared_by_its_whole_tree_only(tmp_path):
    store = VerdictStore(tmp_path / "verdicts")
    check = b"#!/bin/sh\nstat -c %Y wal.log\n"
    rd1, a1 = _cell(tmp_path, "ext4", 1_000_000_000, 2, 0, check)
    rd2, a2 = _cell(tmp_path, "vfat", 8_000_000_000, 2, 0, check)
    rd3, a3 = _cell(tmp_path, "f2fs", 8_000_000_000, 2, 0, check)
    one = usercheck.answer(a1, rd1, store, "ext4-cell", "1")
    two = usercheck.answer(a2, rd2, store, "vfat-cell", "1")
    assert "shared" not in two and one["out"] != two["out"]  # its times differ: not taken
    three = usercheck.answer(a3, rd3, store, "f2fs-cell", "2")
    assert three["shared"]["key"] == "tree" and three["out"] == two["out"]


@pytest.mark.skipif(bool(WHY_NOT), reason=f"no sandbox here: {WHY_NOT}")
def test_the_check_sees_the_same_run_directory_in_every_cell(tmp_path):
    check = b'#!/bin/sh\necho "$FLASHBED_RUN $FLASHBED_ACKED $PWD $0"; ls "$FLASHBED_RUN"\n'
    outs = []
    for name in ("ext4", "f2fs"):
        rd, a = _cell(tmp_path, name, 1_000_000_000, 1, 0, check)
        (rd / "steps.json").write_text(name)  # the cell's own files stay out of the check's sight
        outs.append(usercheck.answer(a, rd)["out"])
    assert outs[0] == outs[1]
    assert outs[0].split() == ["/run/flashbed", "/run/flashbed/acked.txt", "/mnt/cs", "/run/flashbed/check.sh",
                               "acked.txt", "check.sh"]
