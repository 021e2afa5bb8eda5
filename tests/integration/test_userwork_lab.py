"""Your own workload and check in the real lab on the emulated eMMC (64 MiB): the SQLite
logger's figures and lifetime; its check passes every crash state with synchronous=FULL
and fails some with synchronous=OFF (the known-unsafe control); a check over its limit is
a recorded outcome and the next state is checked.

The workload cell runs in virtual time (issue 17); the crash-state (appcheck) cells run
unpaced in real time: measured, virtual time saved nothing overall there. The camera job's
rate-limited workload took a fifth of its real time, but checking its states took longer:
that is host calls, on each of which a virtual-time guest spins (guestlib.wait_file)
against the host's work, the more so the busier the host."""

from __future__ import annotations

from pathlib import Path

import pytest

from flashbed import variants
from flashbed.cell import run_alone
from flashbed.crashhost import usercheck
from flashbed.devices import presets
from flashbed.lab.labs import UmlLab
from flashbed.results import CellKey
from flashbed.status import PowerCutClass
from flashbed.store import RunStore
from flashbed.studies import STUDIES, edge

pytestmark = [pytest.mark.lab, pytest.mark.emulator, pytest.mark.spread]

DEVICE = "emmc-8g@64M"
STICK = "sandisk-ultra-fit-32g@64M"  # the USB-stick twin: a torn program damages unprotected paired pages
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def spec(study: str, workload: str, check: str | None = None, **params):
    from flashbed.studies.base import CellSpec
    dev = presets.load_spec(DEVICE)
    given = {"--workload": str(EXAMPLES / workload)}
    if check:
        given["--check"] = check if check.startswith("/") else str(EXAMPLES / check)
    values = edge.overrides(given)[study]
    p = STUDIES[study].params(**{**values, **params})
    case = STUDIES[study].cases(p, dev)[0].label
    return CellSpec(key=CellKey(dev.label, "ext4", study, case), device=dev, variant=variants.parse("ext4", dev),
                    params=p, seed=1, pace="none" if study == "appcheck" else "real",
                    clock="real" if study == "appcheck" else "virtual")


def run(kernel, root: Path, cell):
    return run_alone(cell, UmlLab(kernel), root)[1]


def counts(res):
    return {m.metric: m.value for m in res.measurements}


def test_the_sqlite_logger_gives_its_figures_the_device_counters_and_a_lifetime(tt_kernel, tmp_path):
    res = run(tt_kernel, tmp_path, spec("workload", "sqlite-logger.sh", passes=2))
    assert res.status == "ok", res.error
    c = counts(res)
    assert c["rows"] == 160 and c["transactions"] == 8  # what the script printed
    assert c["seconds"] > 0 and c["flushes"] > 0 and c["write_requests"] > 0
    assert res.device_stats["workload"]["host_write_bytes"] > 0
    assert "pass1" in res.device_stats
    lt = res.extra["lifetime"]
    assert lt["passes"] == 2 and not lt["steady"] and lt["years"] > 0 and lt["pe_source"].startswith("class default")


def test_synchronous_full_survives_every_state_and_off_loses_committed_rows(kernel, tmp_path):
    full = run(kernel, tmp_path / "full", spec("appcheck", "sqlite-logger.sh", "sqlite-check.sh", max_states=80))
    c = counts(full)
    assert full.status == "ok", full.error
    # max_states is a seeded sample of the distinct states (issue 30): every flush state, the others in proportion
    assert c["checked"] <= c["distinct"] <= c["states"] and c["iterations"] <= c["states"]
    assert c["checked"] < c["states"] and "max_states 80" in full.extra["coverage"], full.extra["coverage"]
    assert c["failures"] == 0, full.extra["failures"][:3]
    assert full.extra["work"]["acks"] == 9  # the schema and eight commits

    off = run(kernel, tmp_path / "off", spec("appcheck", "sqlite-logger-unsafe.sh", "sqlite-check.sh"))
    c = counts(off)
    assert off.status == "ok", off.error
    assert c["class:data-loss"] > 0
    f = off.extra["failures"][0]
    assert f["class"] == PowerCutClass.DATA_LOSS and "the check failed" in f["why"]
    assert (tmp_path / "off" / "logs").is_dir()


def test_a_check_over_its_limit_is_recorded_and_the_next_state_checked(kernel, tmp_path):
    # in real time in any case: the check's limit is a guest-side timeout, off in virtual time
    slow = tmp_path / "slow.sh"
    slow.write_text("#!/bin/sh\nsleep 600\n")
    slow.chmod(0o755)
    # half a second: the check never ends, so any limit proves the same; each state checked waits it out
    # (a hang's verdict is never shared), and at 2 s the test waited over two minutes for them
    res = run(kernel, tmp_path / "run", spec("appcheck", "sqlite-logger.sh", str(slow), max_states=2,
                                             check_limit=0.5))
    c = counts(res)
    assert res.status == "ok", res.error
    # every state the sample checked hung, and those sharing their verdicts with them (issue 30)
    assert c["checked"] >= 2 and c["class:hang"] == c["iterations"] >= c["checked"]
    assert all("did not finish within 0.5 s" in f["why"] for f in res.extra["failures"])


def test_a_busy_check_is_bounded_in_wall_clock_time_in_virtual_time(tt_kernel, tmp_path):
    """Issue 28: a check that only computes stops the guest's clock in virtual time, so no
    guest-side limit fires; the lab bounds it on the host's clock and says so."""
    import dataclasses
    import time
    busy = tmp_path / "busy.sh"
    busy.write_text("#!/bin/sh\nwhile :; do :; done\n")
    busy.chmod(0o755)
    # in the lab: a check on the host runs on the host's clock anyway (crashhost/sandbox.py)
    cell = dataclasses.replace(spec("appcheck", "sqlite-logger.sh", str(busy), max_states=3, check_limit=3.0,
                                    check_in_lab=True), clock="virtual")
    t = time.monotonic()
    res = run(tt_kernel, tmp_path / "run", cell)
    took = time.monotonic() - t
    assert res.status == "ok", res.error
    (f,) = [x for x in res.extra["failures"] if not x.get("same")]  # the state it hung on; others share it
    assert f["class"] == PowerCutClass.HANG
    assert "your check ran past its limit of 3 s of wall-clock time" in f["why"], f["why"]
    assert "states after it not checked" in res.headline
    assert took < 120, took  # not the crash-state watchdog's quarter of an hour


def test_a_fio_job_gets_crash_states_with_fio_s_own_verification(kernel, tmp_path):
    """The camera job without a check: every crash state recovers, and those after fio's end (and a
    sync) were acknowledged pass fio's read-back of every write it completed; the earlier ones say
    why fio's state does not apply to them."""
    import json

    from flashbed.studies.crashstates import CHECKED_FILE
    cell = spec("appcheck", "camera-recording.fio")
    res = run(kernel, tmp_path, cell)
    c = counts(res)
    assert res.status == "ok", res.error
    assert c["iterations"] > 10 and c["failures"] == 0, res.extra["failures"][:3]
    assert res.extra["work"]["acks"] == 1  # fio=completed
    checked = RunStore(tmp_path).logs_dir(cell.key) / CHECKED_FILE
    outs = [((json.loads(line).get("facts") or {}).get("verify") or {}).get("check", {}).get("out", "")
            for line in checked.read_text().splitlines() if line.strip()]
    assert "fio verify: every write fio completed is there" in outs
    assert any(o.startswith("fio verify: not run") for o in outs)


def test_aging_runs_unpaced_and_the_workload_paced_on_the_aged_device(kernel, tmp_path):
    """--age at --pace real: the preconditioning's boot with the emulator unpaced, then the emulator
    restarted paced on the same device; the workload's boot mounts the aged filesystem. Real time:
    the emulator's change of pace between the boots is the subject."""
    import dataclasses
    cell = dataclasses.replace(spec("workload", "sqlite-logger.sh", fill=30, churn=1, passes=2), pace="real",
                               clock="real")
    res = run(kernel, tmp_path, cell)
    assert res.status == "ok", res.error
    assert res.extra["age_pace"] == "none" and res.extra["age"]["fill"] >= 0.29
    logs = RunStore(tmp_path).logs_dir(cell.key)
    assert (logs / "boot0").is_dir() and (logs / "boot1" / "workload.out").exists()
    assert res.extra["lifetime"]["passes"] == 2 and counts(res)["rows"] == 160
    w = res.device_stats["workload"]
    assert w["busy_seconds"] <= w["wall_seconds"]  # paced again: the device's time is spent, not skipped


WAL = """#!/bin/sh
# an append-only log: each record made durable (fsync) before it is acknowledged in fives; the
# last ten are acknowledged without their fsync (the unsafe control: states lose them)
set -e
i=1
while [ $i -le 30 ]; do
  if [ $i -le 20 ]; then sync=conv=notrunc,fsync; else sync=conv=notrunc; fi
  printf 'record %06d %0113d\\n' "$i" "$i" | dd of=wal.log bs=128 count=1 oflag=append $sync status=none
  if [ $((i % 5)) -eq 0 ]; then $FLASHBED_ACK records=$i; fi
  i=$((i + 1))
done
"""
WAL_CHECK = """#!/bin/sh
# every acknowledged record there, byte for byte, each read on its own
n=$(tail -n 1 "$FLASHBED_ACKED" | sed -n 's/^records=//p')
[ -n "$n" ] || exit 0
i=1
while [ $i -le "$n" ]; do
  want=$(printf 'record %06d %0113d' "$i" "$i")
  got=$(dd if=wal.log bs=128 skip=$((i - 1)) count=1 status=none 2>/dev/null | head -c 127)
  [ "$got" = "$want" ] || { echo "record $i of $n lost"; exit 1; }
  i=$((i + 1))
done
"""


def wal_cells(tmp_path: Path, check_text: str, device: str = DEVICE):
    """The WAL workload and a check written to tmp_path, and a maker of its ext4 appcheck cells on
    `device` (params on top of the files' own): in virtual time, so two runs record the same workload
    and list the same states."""
    from flashbed.studies.base import CellSpec
    wal, check = tmp_path / "wal.sh", tmp_path / "walcheck.sh"
    wal.write_text(WAL)
    check.write_text(check_text)
    for f in (wal, check):
        f.chmod(0o755)
    dev = presets.load_spec(device)
    values = edge.overrides({"--workload": str(wal), "--check": str(check)})["appcheck"]

    def cell(fs: str = "ext4", **params):
        return CellSpec(key=CellKey(dev.label, fs, "appcheck", "user"), device=dev,
                        variant=variants.parse(fs, dev), params=STUDIES["appcheck"].params(**{**values, **params}),
                        seed=1, pace="none", clock="virtual")
    return cell


def test_the_check_runs_once_per_recovered_tree_with_the_exhaustive_verdicts(tt_kernel, tmp_path):
    """Issue 30: states that recover to the same workload directory and acknowledged labels share
    the check's run (trees.py); every state's verdict equals the exhaustive run's (every state
    checked, its own check run), failures included."""
    cell = wal_cells(tmp_path, WAL_CHECK)

    every = run(tt_kernel, tmp_path / "every", cell(dedup=False, share_trees=False))
    shared = run(tt_kernel, tmp_path / "shared", cell())
    for r in (every, shared):
        assert r.status == "ok", r.error
    verdicts = {r: {f["state"]: f["class"] for f in res.extra["failures"]} for r, res in
                (("every", every), ("shared", shared))}
    ce, cs = counts(every), counts(shared)
    assert ce["iterations"] == cs["iterations"] == ce["states"] == cs["states"]
    assert verdicts["every"] and verdicts["every"] == verdicts["shared"]  # the unsafe tail lost records
    assert {k: v for k, v in ce.items() if k.startswith("class:")} == \
        {k: v for k, v in cs.items() if k.startswith("class:")}
    assert "check_runs" not in ce
    assert cs["check_runs"] < cs["checked"] <= ce["checked"], (cs, ce)
    assert "recovered trees" in shared.headline


def test_a_check_that_is_not_a_function_of_the_tree_gives_it_no_verdict(tt_kernel, tmp_path):
    """A check that alternates pass and fail (it counts its own runs outside the directory): the
    first recurrence of a recovered tree runs it again, the two verdicts differ, and the tree's
    states have no verdict: counted, said, and no filesystem's failure."""
    flaky = ('#!/bin/sh\nf="$(dirname "$FLASHBED_ACKED")/flaky.count"\nn=$(cat "$f" 2>/dev/null || echo 0)\n'
             'echo $((n + 1)) > "$f"\n[ $((n % 2)) -eq 0 ] || { echo "odd run $n"; exit 1; }\n')
    # in the lab: its count lives in the run directory, which only the lab's check may write (on the
    # host it reads read-only, and every run would be the first)
    cell = wal_cells(tmp_path, flaky)(check_in_lab=True)
    res = run(tt_kernel, tmp_path / "run", cell)
    assert res.status == "ok", res.error
    c = counts(res)
    assert c["no_verdict"] > 0, c
    why = res.extra["no_verdict"]["why"]
    assert any("your check gave different verdicts to one recovered tree" in w for w in why), why
    assert "without a verdict" in res.headline
    # a tree seen once ran the check once: its verdict stands (what can be caught is a tree that recurs)
    unstable = [f for f in res.extra["failures"] if "different verdicts" in (f.get("no_verdict") or "")]
    assert unstable and all(not f.get("cause") for f in unstable)


def state_verdicts(root: Path, res, fs: str = "ext4") -> dict[str, tuple[str, str]]:
    """Every state's verdict (its class and why), those shared with another state's included."""
    import json

    from flashbed.lab.guest.protocol import StateFacts
    from flashbed.studies.crashstates import CHECKED_FILE, STATES_FILE, with_shared
    study = STUDIES["appcheck"]
    logs = root / res.attempt_dir if res.attempt_dir else next((root / "logs").rglob(STATES_FILE)).parent
    lab = [study.record(StateFacts.from_json(json.loads(line)), fs)
           for f in sorted(logs.rglob(CHECKED_FILE)) for line in f.read_text().splitlines() if line.strip()]
    states = json.loads(next(logs.rglob(STATES_FILE)).read_text())["states"]
    return {r["state"]: (r["class"], r.get("why", "")) for r in with_shared(states, lab)}


@pytest.fixture
def host_sandbox():
    """A check on the host runs in the sandbox (crashhost/sandbox.py). Where the sandbox cannot run, as in
    a chroot, where the kernel refuses unshare(CLONE_NEWUSER), every check runs in the lab and the result
    says why (tests/unit/test_usercheck.py): these tests of checks on the host are skipped, saying so."""
    why = usercheck.host_unavailable()
    if why:
        pytest.skip(f"{why}: every check runs in the lab, and these tests check on the host")


def test_the_check_on_the_host_gives_every_state_the_lab_s_verdict(tt_kernel, host_sandbox, tmp_path):
    """Issue 43: the user's check run on the host, in a sandbox, on a copy of each recovered directory,
    gives every state the verdict the check run in the lab gives it (the unsafe tail's losses too), and
    the result says where it ran. On the USB-stick twin, whose states the device damages too (torn
    programs of unprotected paired pages, a lost cache): scripts/check-where.py makes the same
    comparison on larger logs and other filesystems."""
    cell = wal_cells(tmp_path, WAL_CHECK, STICK)

    lab = run(tt_kernel, tmp_path / "lab", cell(check_in_lab=True))
    host_root = tmp_path / "host"
    host = run(tt_kernel, host_root, cell())
    for r in (lab, host):
        assert r.status == "ok", r.error
    in_lab, on_host = state_verdicts(tmp_path / "lab", lab), state_verdicts(host_root, host)
    assert len(in_lab) == counts(lab)["iterations"] == counts(host)["iterations"]
    assert {s: v for s, v in on_host.items() if v != in_lab.get(s)} == {}
    assert any(c == PowerCutClass.DATA_LOSS for c, _ in in_lab.values())  # the unsafe tail lost records
    assert counts(host)["damaged_states"] == counts(lab)["damaged_states"] > 0
    where = host.extra["check_where"]
    assert where["host"] + where["lab"] == counts(host)["check_runs"] and where["host"] > 0
    # a damaged state whose tree met a read error while it was keyed is served again and checked in the lab
    assert all(w.startswith("keying its tree met") for w in where.get("why", {})), where
    in_lab_where = lab.extra["check_where"]
    assert in_lab_where["host"] == 0 and in_lab_where["lab"] == counts(lab)["check_runs"]
    assert in_lab_where["why"]["appcheck.check_in_lab=true"] > 0
    assert all(w == "appcheck.check_in_lab=true" or w.startswith("keying its tree met") for w in in_lab_where["why"])
    # the headline (cut at 200 characters) gives the classes first, then where the check ran; the
    # reasons are the result's (check_where, above)
    assert "on the host" in host.headline and "in the lab" in lab.headline
    assert "data-loss" in lab.headline and "data-loss" in host.headline
    assert "appcheck.check_in_lab=true" not in host.headline


WAL_CONTENT_CHECK = """#!/bin/sh
# WAL_CHECK in words that read contents only (crashhost/checkwords.py): its verdicts are shared by content
n=$(grep -o 'records=[0-9]*' "${FLASHBED_ACKED:-/dev/null}" | tail -n 1 | cut -d= -f2)
n=${n:-0}
i=1
while [ "$i" -le "$n" ]; do
  want=$(printf 'record %06d %0113d' "$i" "$i")
  got=$(dd if=wal.log bs=128 skip=$((i - 1)) count=1 status=none 2>/dev/null | head -c 127)
  [ "$got" = "$want" ] || { echo "record $i of $n lost"; exit 1; }
  i=$((i + 1))
done
"""


def test_a_second_filesystem_of_a_run_takes_the_first_s_verdicts_and_they_are_its_own(tt_kernel, host_sandbox, tmp_path):
    """Issue 43: the run's kept verdicts (crashhost/verdicts.py). The ext4 cell's host checks keep their
    verdicts; the f2fs cell of the same run (its trees' times differ, their contents not) takes them by
    the content key, says whose they were, and every state's verdict equals that of the f2fs cell that
    ran every check itself (a store of its own)."""
    cell = wal_cells(tmp_path, WAL_CONTENT_CHECK)
    kept = tmp_path / "verdicts"
    first = run_alone(cell("ext4"), UmlLab(tt_kernel), tmp_path / "ext4", verdicts=kept)[1]
    second = run_alone(cell("f2fs"), UmlLab(tt_kernel), tmp_path / "f2fs", verdicts=kept)[1]
    alone = run_alone(cell("f2fs"), UmlLab(tt_kernel), tmp_path / "alone", verdicts=tmp_path / "own")[1]
    for r in (first, second, alone):
        assert r.status == "ok", r.error
    where = second.extra["check_where"]
    assert where["shared_other_cells"] > 0 and where["key"].startswith("content key"), where
    assert alone.extra["check_where"].get("shared_other_cells", 0) == 0
    assert counts(second)["check_runs"] < counts(alone)["check_runs"]
    took = state_verdicts(tmp_path / "f2fs", second, "f2fs")
    ran = state_verdicts(tmp_path / "alone", alone, "f2fs")
    assert took and {s: v for s, v in took.items() if v != ran.get(s)} == {}
    assert any(c == PowerCutClass.DATA_LOSS for c, _ in ran.values())  # the unsafe tail lost records
    import json
    said = [json.loads(line)["facts"]["verify"]["check"].get("shared", {}).get("said", "")
            for f in (tmp_path / "f2fs").rglob("checked.jsonl") for line in f.read_text().splitlines()
            if line.strip() and json.loads(line).get("facts", {}).get("verify", {}).get("check")]
    assert any(s.startswith(f"shared from the tree of {first.key.id} state ") for s in said), said
