"""Documented behaviours as tests (issue 38): flashbed's crash states held to what the
filesystems' own documentation promises. Each documented difference is a pair of small
cells on the emulated eMMC (its 512 KiB volatile write cache, paired pages protected),
and each cell must give the verdict the documentation predicts:

- ext4 `auto_da_alloc` (Documentation/admin-guide/ext4.rst, auto_da_alloc): a file replaced
  by rename without fsync, past the journal's commit and before writeback, is never left
  zero-length by default; with `noauto_da_alloc` it is.
- ext4 `data=journal` and `data=ordered` (ext4.rst, "Data Mode"): both keep what fsync made
  durable and never show bytes that were not written; data=journal ("all new data is
  written to the journal first", delayed allocation off) keeps data written without fsync
  once a journal commit has passed, data=ordered (delayed allocation) does not.
- f2fs `fsync_mode=nobarrier` (Documentation/filesystems/f2fs.rst, fsync_mode): fsync
  issues no flush, so on a part with a volatile cache acknowledged data is lost; the
  default `posix` keeps it.
- btrfs `commit=` (btrfs(5), commit: "the interval of periodic transaction commit",
  default 30 s): a change made without fsync 12 s before a cut is there with commit=5 and
  not with the default.

The journal's and btrfs's commits are timer-driven: those cells sleep past the interval in
virtual time (the lab's sleep costs nothing there), then acknowledge a label that only marks
the moment, so a state right after it is listed; the commit's own flush is a state too.
docs/crash-states.md lists these behaviours and their sources."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from flashbed import variants
from flashbed.cell import run_alone
from flashbed.devices import presets
from flashbed.lab.guest.guestlib import read_log
from flashbed.lab.labs import UmlLab
from flashbed.results import CellKey
from flashbed.studies import STUDIES, edge
from flashbed.studies.base import CellSpec
from flashbed.studies.crashstates import LOG_FILE, STATES_FILE

pytestmark = [pytest.mark.lab, pytest.mark.emulator, pytest.mark.spread]

DEVICE = "emmc-8g@64M"  # a 512 KiB volatile write cache, paired pages protected
BTRFS_DEVICE = "emmc-8g@128M"  # mkfs.btrfs wants 109 MiB at least


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body).lstrip())
    path.chmod(0o755)
    return path


def appcheck(kernel, root: Path, fs: str, workload: Path, check: Path, device: str = DEVICE):
    """Your workload and check (study appcheck) on `fs` in virtual time: (the result, its logs)."""
    dev = presets.load_spec(device)
    study = STUDIES["appcheck"]
    p = study.params(**edge.overrides({"--workload": str(workload), "--check": str(check)})["appcheck"],
                     subsets=1)
    cell = CellSpec(key=CellKey(dev.label, fs, "appcheck", study.cases(p, dev)[0].label), device=dev,
                    variant=variants.parse(fs, dev), params=p, seed=1, pace="real", clock="virtual")
    return run(kernel, root, cell)


def run(kernel, root: Path, cell: CellSpec):
    store, res = run_alone(cell, UmlLab(kernel), root)
    assert res.status == "ok", res.error
    print(f"{cell.variant.spec}: {res.headline}")  # the verdicts, for the record (pytest -s)
    return res, store.logs_dir(cell.key)


def counts(res) -> dict[str, float]:
    return {m.metric: m.value for m in res.measurements}


def whys(res) -> set[str]:
    return {f["why"].removeprefix("the check failed (exit 1): ") for f in res.extra["failures"]}


def mark(logs: Path, label: str) -> int:
    """The write log's position of the acknowledgement `label` (a state at P has acknowledged the marks < P)."""
    return next(r["m"] for r in read_log(str(logs / LOG_FILE)) if label in r.get("labels", ()))


def test_ext4_leaves_a_file_replaced_by_rename_zero_length_only_with_noauto_da_alloc(tt_kernel, tmp_path):
    # ext4.rst, auto_da_alloc: "If auto_da_alloc is enabled, ext4 will detect the replace-via-rename
    # [...] pattern and force that any delayed allocation blocks are allocated such that at the next
    # journal commit, in the default data=ordered mode, the data blocks of the new file are forced to
    # disk before the rename() operation is committed. [...] avoids the 'zero-length' problem"
    work = script(tmp_path / "replace.sh", """\
        set -eu
        head -c 16384 /dev/zero | tr '\\0' o > foo
        sync foo .
        $FLASHBED_ACK old
        head -c 16384 /dev/zero | tr '\\0' n > foo.new
        mv foo.new foo    # replaced by rename, no fsync
        sleep 7           # past jbd2's commit timer (5 s), well before writeback's expiry (30 s)
        $FLASHBED_ACK slept
        """)
    check = script(tmp_path / "replace-check.sh", """\
        set -u
        grep -qx old "$FLASHBED_ACKED" || { echo "ok: nothing durable yet"; exit 0; }
        [ -e foo ] || { echo "foo is missing"; exit 1; }
        size=$(stat -c %s foo)
        [ "$size" -gt 0 ] || { echo "foo is zero-length"; exit 1; }
        for c in o n; do
          [ "$size" -eq 16384 ] && [ "$(tr -d $c < foo | wc -c)" -eq 0 ] && { echo "ok: foo holds $c"; exit 0; }
        done
        [ "$(tr -d '\\0' < foo | wc -c)" -eq 0 ] && { echo "foo reads as $size zero bytes"; exit 1; }
        echo "foo holds neither version ($size bytes)"; exit 1
        """)
    auto, logs = appcheck(tt_kernel, tmp_path / "auto", "ext4", work, check)
    c = counts(auto)
    assert c["failures"] == 0, auto.extra["failures"][:3]
    # not vacuous: the states include the timer's commit during the sleep (its flush), past the rename
    listed = json.loads((logs / STATES_FILE).read_text())["states"]
    old, slept = mark(logs, "old"), mark(logs, "slept")
    assert any(s["kind"] == "flush" and old < s["acked"] <= slept for s in listed), auto.headline

    noauto, logs = appcheck(tt_kernel, tmp_path / "noauto", "ext4+o:noauto_da_alloc", work, check)
    c = counts(noauto)
    assert c["class:data-loss"] > 0, noauto.headline
    # what the documentation predicts, and its cousin: a commit between the allocation of the file's
    # blocks (unwritten extents: dioread_nolock, the default) and their conversion once written, as
    # the unmount's sync makes, leaves its size over blocks that read as zeros
    assert "foo is zero-length" in whys(noauto), whys(noauto)
    assert whys(noauto) <= {"foo is zero-length", "foo reads as 16384 zero bytes"}, whys(noauto)
    # one of them before the workload's end: past the timer's commit, during the sleep, before writeback
    slept = mark(logs, "slept")
    assert any(f["acked"] <= slept for f in noauto.extra["failures"]), noauto.extra["failures"][:5]


def test_ext4_data_journal_keeps_unsynced_data_past_a_commit_and_data_ordered_only_what_fsync_made_durable(
        tt_kernel, tmp_path):
    # ext4.rst, Data Mode: ordered "only officially journals metadata [...] the associated data blocks
    # are written first" (never data that was not written); journal: "All new data is written to the
    # journal first [...] the journal can be replayed, bringing both data and metadata into a
    # consistent state [...] Enabling this mode will disable delayed allocation"
    work = script(tmp_path / "modes.sh", """\
        set -eu
        head -c 16384 /dev/zero | tr '\\0' a > a
        sync a .
        $FLASHBED_ACK a
        head -c 16384 /dev/zero | tr '\\0' b > b    # no fsync
        sleep 7                                    # past jbd2's commit timer (5 s)
        $FLASHBED_ACK slept
        """)
    check = script(tmp_path / "modes-check.sh", """\
        set -u
        acked() { grep -qx "$1" "$FLASHBED_ACKED"; }
        only() { [ -e "$2" ] && [ "$(tr -d "$1" < "$2" | wc -c)" -eq 0 ]; }
        acked a || { echo "ok: nothing durable yet"; exit 0; }
        [ "$(stat -c %s a 2>/dev/null)" = 16384 ] && only a a || { echo "a (synced) is not intact"; exit 1; }
        if [ -e b ]; then
          [ "$(tr -d 'b\\0' < b | wc -c)" -eq 0 ] || { echo "b holds bytes never written to it"; exit 1; }
          only b b || { echo "b reads as zeros where it was written"; exit 1; }
        fi
        if acked slept; then
          n=$(stat -c %s b 2>/dev/null || echo missing)
          [ "$n" = 16384 ] || { echo "b holds $n of the 16384 bytes written before the commit"; exit 1; }
        fi
        echo ok
        """)
    journal, _ = appcheck(tt_kernel, tmp_path / "journal", "ext4+o:data=journal", work, check)
    assert counts(journal)["failures"] == 0, journal.extra["failures"][:3]

    ordered, _ = appcheck(tt_kernel, tmp_path / "ordered", "ext4", work, check)
    assert counts(ordered)["class:data-loss"] > 0, ordered.headline
    # only the unsynced data the commit did not carry: the fsync'ed file intact, nothing stale (the
    # writeback mode's "incorrect data"); at most blocks that read as zeros (unwritten extents, whose
    # conversion a later commit carries: dioread_nolock, the default, which data=journal turns off)
    lost = {w for w in whys(ordered) if w.startswith("b holds ") and w.endswith(" of the 16384 bytes written "
                                                                               "before the commit")}
    assert lost and whys(ordered) - lost <= {"b reads as zeros where it was written"}, whys(ordered)


def test_f2fs_fsync_mode_nobarrier_loses_fsynced_data_on_a_volatile_cache_and_posix_keeps_it(tt_kernel, tmp_path):
    # f2fs.rst, fsync_mode: '"nobarrier" is based on "posix", but doesn't issue flush command for
    # non-atomic files likewise "nobarrier" mount option'
    assert presets.load_spec(DEVICE).info["cache_bytes"] > 3 * 65536  # what the difference needs: a volatile cache
    # appends to a file that a checkpoint made durable (a new file's first fsync checkpoints, which flushes
    # in every mode)
    work = script(tmp_path / "appends.sh", """\
        set -eu
        : > f
        sync f .
        $FLASHBED_ACK created
        for i in 1 2 3; do
          head -c 65536 /dev/zero | tr '\\0' "$i" >> f
          sync f
          $FLASHBED_ACK "appended $i"
        done
        """)
    check = script(tmp_path / "appends-check.sh", """\
        set -u
        grep -qx created "$FLASHBED_ACKED" || { echo "ok: nothing durable yet"; exit 0; }
        n=$(grep -c '^appended ' "$FLASHBED_ACKED")
        size=$(stat -c %s f 2>/dev/null || echo 0)
        [ "$size" -ge $((n * 65536)) ] || { echo "f holds $size bytes after $n synced appends of 64 KiB"; exit 1; }
        i=1
        while [ "$i" -le "$n" ]; do
          [ "$(dd if=f bs=65536 skip=$((i - 1)) count=1 2>/dev/null | tr -d "$i" | wc -c)" -eq 0 ] ||
            { echo "append $i (synced) is damaged"; exit 1; }
          i=$((i + 1))
        done
        echo ok
        """)
    posix, _ = appcheck(tt_kernel, tmp_path / "posix", "f2fs", work, check)
    assert counts(posix)["failures"] == 0, posix.extra["failures"][:3]

    nobarrier, _ = appcheck(tt_kernel, tmp_path / "nobarrier", "f2fs+o:fsync_mode=nobarrier", work, check)
    assert counts(nobarrier)["class:data-loss"] > 0, nobarrier.headline
    assert all(w.startswith("f holds ") for w in whys(nobarrier)), whys(nobarrier)
    assert {f["cause"] for f in nobarrier.extra["failures"]} == {"filesystem"}  # the device kept its promises


def test_btrfs_keeps_a_change_made_without_fsync_after_its_commit_interval(tt_kernel, tmp_path):
    # btrfs(5), commit=<seconds> (default 30): "Set the interval of periodic transaction commit when
    # data are synchronized to permanent storage. Higher interval values lead to larger amount of
    # unwritten data, which has obvious consequences when the system crashes."
    work = script(tmp_path / "interval.sh", """\
        set -eu
        mkdir d
        touch d/f     # no fsync
        sleep 12      # two intervals of commit=5, less than the default's one
        $FLASHBED_ACK slept
        """)
    check = script(tmp_path / "interval-check.sh", """\
        set -u
        grep -qx slept "$FLASHBED_ACKED" || { echo "ok: nothing promised yet"; exit 0; }
        [ -e d/f ] || { echo "d/f, made 12 s before, is missing"; exit 1; }
        echo ok
        """)
    short, _ = appcheck(tt_kernel, tmp_path / "short", "btrfs+o:commit=5", work, check, device=BTRFS_DEVICE)
    assert counts(short)["failures"] == 0, short.extra["failures"][:3]

    default, _ = appcheck(tt_kernel, tmp_path / "default", "btrfs", work, check, device=BTRFS_DEVICE)
    assert counts(default)["class:data-loss"] > 0, default.headline
    assert whys(default) == {"d/f, made 12 s before, is missing"}
