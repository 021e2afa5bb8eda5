"""The recovered tree's key (lab/guest/trees.py): what shares the user's check's verdict and what must not."""

import os

import pytest

from flashbed.lab.guest.trees import SharedChecks, tree_key


def make(root, records=3, extra=b""):
    os.makedirs(root / "sub", exist_ok=True)
    (root / "wal.log").write_bytes(b"".join(b"record %06d\n" % i for i in range(records)) + extra)
    (root / "sub" / "meta").write_text("v1")
    os.utime(root / "wal.log", ns=(1, 1_000_000_000))
    os.utime(root / "sub" / "meta", ns=(1, 2_000_000_000))
    for d in (root / "sub", root):  # directories' times are part of the key too
        os.utime(d, ns=(1, 3_000_000_000))
    return root


def test_same_tree_and_labels_share_a_key(tmp_path):
    a, b = make(tmp_path / "a"), make(tmp_path / "b")
    os.utime(b / "wal.log", ns=(99, 1_000_000_000))  # access times are left out (a recovery stamps them)
    assert tree_key(str(a), b"records=2\n") == tree_key(str(b), b"records=2\n")


def test_one_byte_the_check_reads_is_not_merged(tmp_path):
    a = make(tmp_path / "a")
    b = make(tmp_path / "b")
    data = bytearray((b / "wal.log").read_bytes())
    data[9] ^= 1  # one byte of record 0
    (b / "wal.log").write_bytes(bytes(data))
    os.utime(b / "wal.log", ns=(1, 1_000_000_000))
    assert tree_key(str(a), b"") != tree_key(str(b), b"")


@pytest.mark.parametrize("change", ["labels", "mode", "mtime", "size", "name", "symlink", "xattr"])
def test_what_the_key_covers(tmp_path, change):
    a, b = make(tmp_path / "a"), make(tmp_path / "b")
    la = lb = b"records=2\n"
    if change == "labels":
        lb = b"records=3\n"
    elif change == "mode":
        os.chmod(b / "wal.log", 0o600)
        os.chmod(a / "wal.log", 0o644)
    elif change == "mtime":
        os.utime(b / "wal.log", ns=(1, 5))
    elif change == "size":
        os.truncate(b / "wal.log", 5)
        os.utime(b / "wal.log", ns=(1, 1_000_000_000))
    elif change == "name":
        os.rename(b / "sub" / "meta", b / "sub" / "meta2")
        os.utime(b / "sub", ns=(1, 3_000_000_000))
    elif change == "symlink":
        os.symlink("wal.log", a / "link")
        os.symlink("sub/meta", b / "link")
        for d in (a, b):
            os.utime(d, ns=(1, 3_000_000_000))
    elif change == "xattr":
        try:
            os.setxattr(b / "wal.log", "user.flashbed", b"1")
        except OSError:
            pytest.skip("no user xattrs on this filesystem")
    assert tree_key(str(a), la) != tree_key(str(b), lb)


def test_shared_checks_runs_once_per_key_and_names_the_first(tmp_path):
    a, b, c = make(tmp_path / "a"), make(tmp_path / "b"), make(tmp_path / "c", records=4)
    runs = []

    def check(verdict):
        def run():
            runs.append(verdict)
            return {"n_loss": 0, "loss": [], "check": {"rc": 0, "out": verdict}}
        return run

    sc = SharedChecks()
    first = sc.check("1", str(a), b"x\n", check("a"))
    second = sc.check("2", str(b), b"x\n", check("b"))
    third = sc.check("3", str(c), b"x\n", check("c"))
    fourth = sc.check("4", str(b), b"x\n", check("d"))
    # the first recurrence of a tree runs the check again (it agreed); after that, shared
    assert runs == ["a", "b", "c"] and sc.runs == 3 and not sc.unstable
    assert "tree_same" not in first and second["tree_same"] == "1" and second["check"]["out"] == "a"
    assert second["tree_rerun"] and fourth["tree_same"] == "1" and "tree_rerun" not in fourth
    assert second["tree"] == first["tree"] != third["tree"]


def test_a_check_with_two_verdicts_for_one_tree_gives_it_none(tmp_path):
    """A nondeterministic check (passes once, fails on the same tree): the disagreeing run says
    so (check_unstable: the state whose run it contradicts) and later states share that mark."""
    a, b, c = make(tmp_path / "a"), make(tmp_path / "b"), make(tmp_path / "c")
    verdicts = iter([{"n_loss": 0, "loss": []}, {"n_loss": 1, "loss": ["row 3 missing"]}])
    sc = SharedChecks()
    first = sc.check("1", str(a), b"", lambda: next(verdicts))
    second = sc.check("2", str(b), b"", lambda: next(verdicts))
    third = sc.check("3", str(c), b"", lambda: pytest.fail("the tree's verdict is known to be unstable"))
    assert "check_unstable" not in first and second["check_unstable"] == "1" and second["n_loss"] == 1
    assert third["check_unstable"] == "1" and third["tree_same"] == "1" and sc.unstable == 1 and sc.runs == 2


def test_a_check_over_its_limit_runs_again(tmp_path):
    a = make(tmp_path / "a")
    sc = SharedChecks()
    sc.check("1", str(a), b"", lambda: {"n_loss": 1, "check_timeout": True, "loss": ["slow"]})
    again = sc.check("2", str(a), b"", lambda: {"n_loss": 0, "loss": []})
    assert sc.runs == 2 and "tree_same" not in again and again["n_loss"] == 0


def test_a_walk_that_meets_an_error_is_perturbed_and_runs_no_check(tmp_path, monkeypatch):
    """Keying may change a damaged state (a FAT that turns read-only on a read the check would
    not make): such a walk shares nothing and runs no check; the loop checks the state again."""
    from flashbed.lab.guest import trees

    a = make(tmp_path / "a")
    real = trees._file_digest

    def eio(path, walk):
        return walk.err("read", OSError(5, "Input/output error")) if path.endswith("wal.log") else real(path, walk)

    monkeypatch.setattr(trees, "_file_digest", eio)
    sc = SharedChecks()
    ran = []
    v = sc.check("7", str(a), b"", lambda: ran.append(1) or {"n_loss": 0, "loss": []})
    assert v["tree_perturbed"] and not ran and sc.perturbed == 1 and sc.runs == 0 and not sc.seen
    assert "a read error" in v["perturbed_why"]  # the lab's run of the check says why it was not the host's



def test_a_kernel_message_during_the_walk_perturbs_it(tmp_path):
    """The walk's own kernel-log reader (powercut.Kmsg's shape): a line logged while it read
    means the walk may have changed the state; lines from before it do not count."""
    a = make(tmp_path / "a")

    class Log:
        def __init__(self, batches):
            self.batches = list(batches)

        def take(self):
            return self.batches.pop(0) if self.batches else []

    quiet = SharedChecks(Log([["EXT4-fs: mounted"], []]))  # before the walk, then nothing
    assert "tree_perturbed" not in quiet.check("1", str(a), b"", lambda: {"n_loss": 0, "loss": []})
    loud = SharedChecks(Log([[], ["FAT-fs (ubda): error, fat_get_cluster: invalid cluster chain"]]))
    v = loud.check("2", str(a), b"", lambda: {"n_loss": 0, "loss": []})
    assert v["tree_perturbed"] and loud.perturbed == 1 and loud.runs == 0
    assert "a kernel message" in v["perturbed_why"]


def test_the_host_counts_the_check_s_runs_perturbed_states_included():
    from flashbed.studies import STUDIES

    study = STUDIES["appcheck"]
    ran = {"check": {"rc": 0}}
    recs = [{**ran, "tree": "a"}, {**ran, "tree": "a", "tree_same": "1"}, {**ran, "tree_perturbed": True},
            {**ran, "tree": "a", "same": "1"}]
    assert study.check_runs(recs) == 2  # the first of tree a, and the state checked again without a key
    assert study.check_runs([*recs, {**ran, "tree": "a", "tree_same": "1", "tree_rerun": True}]) == 3
    assert study.check_runs([{**ran, "tree_perturbed": True}]) == 1
    assert study.check_runs([ran]) is None  # share_trees off: no key at all


def test_a_perturbed_state_s_lab_run_says_why_in_the_cell_line(monkeypatch):
    """A state whose walk met trouble is checked again in the lab: the cell's line names that
    reason, never "not said" (a vfat run on the USB-stick twin had 114 such runs unexplained)."""
    from flashbed.studies import STUDIES

    study = STUDIES["appcheck"]
    monkeypatch.setattr(type(study), "check_place", lambda self, spec: "")  # the cell itself: the host
    why = "keying its tree met a kernel message: served again, checked here"
    recs = [{"check": {"rc": 0, "where": "host"}, "tree": "a"},
            {"check": {"rc": 0, "where": "lab", "why": why}, "tree_perturbed": True}]
    text, counts = study.check_where(None, recs)
    assert "not said" not in text and why in text and counts == {"host": 1, "lab": 1, "why": {why: 1}}
