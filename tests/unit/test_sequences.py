"""The B3-style sequences: the generator's bounds, and the verifier against directories
made here the way a crash could leave them (the real operations, on the host)."""

from __future__ import annotations

import shutil

import pytest

from flashbed.lab.guest import sequences as S
from flashbed.lab.guest.guestlib import SECTOR

SEED = 7


class Log:
    def __init__(self):
        self.recs: list[dict] = []

    def write(self, rec: dict) -> None:
        self.recs.append(dict(rec))


def test_the_alphabet_and_the_exhaustive_counts():
    assert len(S.STEPS) == 27  # 5 data operations x 3 persistence points + 6 namespace ones x 2
    assert len(S.generate(1, 0, 3, 1)) == 27  # every one-step sequence is valid
    two = S.generate(2, 0, 3, 1)
    assert len(two) == 668 and len(set(two)) == 668
    # nothing writes a file an earlier step removed
    assert (("unlink", "fsync"), ("write", "fsync")) not in two
    assert (("unlink", "fsync"), ("append", "sync")) in two


def test_sampling_is_seeded_distinct_valid_and_longer():
    a, b = S.generate(1, 40, 3, 5), S.generate(1, 40, 3, 5)
    assert a == b and a != S.generate(1, 40, 3, 6)
    sampled = a[27:]
    assert len(sampled) == 40 and len(set(sampled)) == 40
    assert all(2 <= len(s) <= 3 and S._valid_seq(s) for s in sampled)


def run(tmp_path, seqs):
    log = Log()
    S.lay_out(str(tmp_path), SEED, len(seqs))
    S.run_all(str(tmp_path), SEED, seqs, log)
    return log.recs


def verdict(tmp_path, seqs, recs):
    v = S.verify_dir(str(tmp_path), recs, seqs, SEED)
    return v["n_loss"], v["n_garbage"]


def upto(recs, seq, k, acked):
    """The records a crash keeps: through step k of sequence seq, its ack or not."""
    out = []
    for r in recs:
        if (r["seq"], r["k"]) > (seq, k) or (r["seq"], r["k"]) == (seq, k) and r["e"] == "ack" and not acked:
            break
        out.append(r)
    return out


def test_every_sequence_done_and_acknowledged_verifies(tmp_path):
    seqs = S.generate(1, 30, 3, 2)
    recs = run(tmp_path, seqs)
    assert verdict(tmp_path, seqs, recs) == (0, 0)
    # the starting state of the sequences is what a crash before any step must show
    base = tmp_path / "base"
    S.lay_out(str(base), SEED, len(seqs))
    assert verdict(base, seqs, []) == (0, 0)
    # the done directories against a log that acknowledged nothing: every changed name is a loss
    assert verdict(tmp_path, seqs, [])[0] > 0


@pytest.mark.parametrize("step", S.STEPS)
def test_a_step_under_way_may_be_old_or_new_but_once_acked_only_new(tmp_path, step):
    seqs = [(step,)]
    old = tmp_path / "old"
    S.lay_out(str(old), SEED, 1)
    new = tmp_path / "new"
    recs = run(new, seqs)
    pending = upto(recs, 0, 0, acked=False)
    assert verdict(old, seqs, pending) == (0, 0)
    assert verdict(new, seqs, pending) == (0, 0)
    assert verdict(new, seqs, recs) == (0, 0)
    assert verdict(old, seqs, recs)[0] > 0, "the acknowledged step is missing: a loss"


def write(p, data: bytes) -> None:
    with open(p, "wb") as f:
        f.write(data)


def test_a_pwrite_under_way_may_leave_any_mix_of_sectors_never_other_bytes(tmp_path):
    seqs = [(("pwrite", "fsync"),)]
    recs = run(tmp_path / "new", seqs)
    new = (tmp_path / "new/s0000/A/foo").read_bytes()
    S.lay_out(str(tmp_path / "d"), SEED, 1)
    foo = tmp_path / "d/s0000/A/foo"
    old = foo.read_bytes()
    pending = upto(recs, 0, 0, acked=False)
    # the first sector of the write new, the rest old (a 4 KiB write split across two units)
    mix = old[:4608] + new[4608:4608 + SECTOR] + old[4608 + SECTOR:]
    write(foo, mix)
    assert verdict(tmp_path / "d", seqs, pending) == (0, 0)
    assert verdict(tmp_path / "d", seqs, recs)[0] == 1, "once acknowledged only the new bytes will do"
    write(foo, old[:4608] + b"\xaa" * SECTOR + old[4608 + SECTOR:])
    assert verdict(tmp_path / "d", seqs, pending)[0] == 1, "bytes never written over acked data"


def test_a_truncate_under_way_may_zero_the_tail_before_the_size_changes(tmp_path):
    seqs = [(("truncate", "fdatasync"),)]
    recs = run(tmp_path / "new", seqs)
    S.lay_out(str(tmp_path / "d"), SEED, 1)
    foo = tmp_path / "d/s0000/A/foo"
    old = foo.read_bytes()
    write(foo, old[:2500] + bytes(4096 - 2500) + old[4096:])  # the last block's tail zeroed, old size
    assert verdict(tmp_path / "d", seqs, upto(recs, 0, 0, acked=False)) == (0, 0)
    write(foo, old[:2000])  # shorter than either size
    assert verdict(tmp_path / "d", seqs, upto(recs, 0, 0, acked=False))[0] == 1


def test_an_append_under_way_may_stop_short_with_unwritten_zero_sectors(tmp_path):
    seqs = [(("append", "fsync"),)]
    recs = run(tmp_path / "new", seqs)
    new = (tmp_path / "new/s0000/A/bar").read_bytes()
    S.lay_out(str(tmp_path / "d"), SEED, 1)
    bar = tmp_path / "d/s0000/A/bar"
    write(bar, new[:5120] + bytes(1024) + new[6144:8000])  # sectors of the file: 512-byte aligned
    assert verdict(tmp_path / "d", seqs, upto(recs, 0, 0, acked=False)) == (0, 0)
    write(bar, new[:5000] + b"\x55" * 1024)
    assert verdict(tmp_path / "d", seqs, upto(recs, 0, 0, acked=False))[1] == 1, "bytes never written: garbage"


def test_a_rename_under_way_may_leave_both_names_never_neither(tmp_path):
    seqs = [(("rename", "fsync"),)]
    recs = run(tmp_path / "new", seqs)
    pending = upto(recs, 0, 0, acked=False)
    S.lay_out(str(tmp_path / "d"), SEED, 1)
    d = tmp_path / "d/s0000"
    shutil.copyfile(d / "A/bar", d / "B/bar")
    assert verdict(tmp_path / "d", seqs, pending) == (0, 0)
    (d / "A/bar").unlink()
    (d / "B/bar").unlink()
    assert verdict(tmp_path / "d", seqs, pending)[0] >= 1


def test_names_undone_or_unknown_and_broken_links(tmp_path):
    seqs = [(("unlink", "sync"),), (("link", "fsync"),)]
    root = tmp_path / "run"
    recs = run(root, seqs)
    assert verdict(root, seqs, recs) == (0, 0)
    S.lay_out(str(tmp_path / "fresh"), SEED, 1)
    foo = root / "s0000/A/foo"
    shutil.copyfile(tmp_path / "fresh/s0000/A/foo", foo)
    assert verdict(root, seqs, recs) == (1, 0), "an acknowledged unlink undone"
    foo.unlink()
    (root / "s0000/A/junk").write_bytes(b"junk")
    assert verdict(root, seqs, recs) == (0, 1), "a name never made: garbage"
    (root / "s0000/A/junk").unlink()
    (root / "s0009").mkdir()
    assert verdict(root, seqs, recs) == (0, 1), "an entry no sequence made"
    (root / "s0009").rmdir()
    link = root / "s0001/B/foo"
    link.unlink()
    shutil.copyfile(root / "s0001/A/foo", link)  # the same bytes, but no longer the same file
    assert verdict(root, seqs, recs) == (1, 0)


def test_a_filesystem_without_hard_links_gets_no_link_steps():
    seqs = S.generate(1, 30, 3, 1, skip=("link",))
    assert len(seqs) == 25 + 30
    assert not any(op == "link" for s in seqs for op, _ in s)
