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

from flashbed import userwork, variants
from flashbed.cell import run_cell
from flashbed.devices import presets
from flashbed.lab.labs import UmlLab
from flashbed.results import CellKey
from flashbed.status import PowerCutClass
from flashbed.store import RunStore
from flashbed.studies import STUDIES

pytestmark = [pytest.mark.lab, pytest.mark.emulator]

DEVICE = "emmc-8g@64M"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def spec(study: str, workload: str, check: str | None = None, **params):
    from flashbed.studies.base import CellSpec
    dev = presets.load_spec(DEVICE)
    w = userwork.load(str(EXAMPLES / workload), "--workload")
    c = userwork.load(check if check.startswith("/") else str(EXAMPLES / check), "--check", fio_allowed=False) \
        if check else None
    values = userwork.overrides(w, c)[study]
    p = STUDIES[study].params(**{**values, **params})
    case = STUDIES[study].cases(p, dev)[0].label
    return CellSpec(key=CellKey(dev.label, "ext4", study, case), device=dev, variant=variants.parse("ext4", dev),
                    params=p, seed=1, pace="none" if study == "appcheck" else "real",
                    clock="real" if study == "appcheck" else "virtual")


def run(kernel, root: Path, cell):
    store = RunStore(root)
    store.create()
    store.write_manifest({"schema": 1, "run_id": root.name})
    res = run_cell(cell, UmlLab(kernel), store.logs_dir(cell.key), root / "scratch")
    store.write(res)
    return res


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
    res = run(kernel, tmp_path / "run", spec("appcheck", "sqlite-logger.sh", str(slow), max_states=2,
                                             check_limit=2.0))
    c = counts(res)
    assert res.status == "ok", res.error
    # every state the sample checked hung, and those sharing their verdicts with them (issue 30)
    assert c["checked"] >= 2 and c["class:hang"] == c["iterations"] >= c["checked"]
    assert all("did not finish within 2 s" in f["why"] for f in res.extra["failures"])


def test_a_busy_check_is_bounded_in_wall_clock_time_in_virtual_time(tt_kernel, tmp_path):
    """Issue 28: a check that only computes stops the guest's clock in virtual time, so no
    guest-side limit fires; the lab bounds it on the host's clock and says so."""
    import dataclasses
    import time
    busy = tmp_path / "busy.sh"
    busy.write_text("#!/bin/sh\nwhile :; do :; done\n")
    busy.chmod(0o755)
    cell = dataclasses.replace(spec("appcheck", "sqlite-logger.sh", str(busy), max_states=3, check_limit=3.0),
                               clock="virtual")
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
