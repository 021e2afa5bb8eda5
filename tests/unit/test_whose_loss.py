"""Whose loss a failed crash state is: the filesystem's, or the device's (studies/crashstates.attribute),
from fixtures of each cause as the guest writes them (checked.jsonl): a torn program that damaged a
page under acknowledged, flushed data, whose undamaged twin (the same cut without the damage)
recovered; and a filesystem that dropped an fsync'ed write the device kept (no flash damage in the
state). Then the report's lines for them: only the filesystem's loss rules a filesystem out, the
device's is said once per device on the first screen. And no evidence, no answer: a run whose
cells crashed recommends nothing. No kernel, no emulator."""

from __future__ import annotations

import json

import pytest

from flashbed.lab.guest import crashstates as guest
from flashbed.lab.guest.protocol import HostAnswer, RecoverFacts, StateFacts
from flashbed.report.eligibility import Verdict
from flashbed.report.load import load_run
from flashbed.report.markdown import section_md
from flashbed.report.partloss import part_loss
from flashbed.report.recommend import answer_line, answer_section, recommend
from flashbed.results import CellKey, CellResult
from flashbed.status import LossCause
from flashbed.studies import STUDIES
from tests.report_fixtures import generator
from tests.unit.test_crashstates import boot, cell, lay_out, state
from tests.unit.test_powercut_classify import facts

gen = generator()
STUDY = STUDIES["crashstates"]
LOST = facts(verify={"n_loss": 1, "loss": ["f00004: acknowledged content differs"]})


def torn(sid: str, twin_facts: dict | None, f: dict = LOST, flushed: int = 8192) -> dict:
    """A torn-program state: the cut damaged 3 units, `flushed` bytes of them flushed data; its twin's facts."""
    s = state(sid, "tear", f)
    s["damaged"] = 3
    s["damage"] = {"ranges": [[40960, 12288]], "flushed": [[40960, flushed]] if flushed else []}
    if twin_facts is not None:
        s["twin"] = StateFacts(id=sid + "+u", kind="tear", acked=10, facts=twin_facts, switch={"ns": 1},
                               damage={"place": {"files": {"cs/f00004": flushed}, "outside": 0, "why": ""}}).to_json()
    return s


def parsed(tmp_path, states, fs="ext4"):
    lay_out(tmp_path, states)
    # the listing carries each state's damage count, as the emulator lists it
    listing = json.loads((tmp_path / "states.json").read_text())
    for st, s in zip(listing["states"], states):
        st["damaged"] = s.get("damaged", 0)
    (tmp_path / "states.json").write_text(json.dumps(listing))
    return STUDY.parse(cell(fs), [boot()], tmp_path)


def test_each_cause_from_the_write_log_and_the_undamaged_twin(tmp_path):
    out = parsed(tmp_path, [
        state("100", "flush", facts()),
        torn("812+t5", twin_facts=facts()),  # the twin recovered: the device's loss
        state("900", "flush", LOST),  # no damage: the filesystem lost what the device kept
        torn("950+t9", twin_facts=LOST),  # the twin lost it too: both
        torn("960+t10", twin_facts=None, f=facts(mounted=False, mount1={"status": "failed"})),  # stopped: unknown
        torn("970+t11", twin_facts=None, f=facts(), flushed=0),  # survived its damage
    ])
    v = {m.metric: m.value for m in out.measurements}
    assert [v[f"cause:{c}"] for c in LossCause] == [1, 1, 1, 1]
    assert (v["fs_failures"], v["fs_data_loss"]) == (2, 2)  # the filesystem's alone, and both
    assert (v["damaged_states"], v["damaged_flushed_states"], v["damage_survived"]) == (4, 3, 25.0)
    assert v["undamaged_survived"] == 50.0
    by = {f["state"]: f for f in out.extra["failures"]}
    assert {s: f["cause"] for s, f in by.items()} == {"812+t5": "device", "900": "filesystem", "950+t9": "both",
                                                      "960+t10": "unknown"}
    assert by["950+t9"]["fs_class"] == "data-loss" and by["812+t5"]["fs_class"] is None
    assert "by cause: 1 device, 1 filesystem, 1 both, 1 unknown" in out.headline
    why = {x.item: x.why for x in STUDY.reproducers("run", CellResult(key=cell().key, status="ok", extra=out.extra))}
    assert why["812+t5"].endswith("the device's loss: the cut damaged 3 units, 8 KiB of flushed data "
                                  "(cs/f00004 8 KiB); its undamaged twin 812+t5+u clean")
    assert why["900"].endswith("the filesystem's loss: no flash damage in this state (the device kept everything "
                               "durable)")
    assert "the filesystem's loss too" in why["950+t9"] and "whose loss is unknown" in why["960+t10"]


def _stick_run(tmp_path, states_of: dict[str, list[dict]], **manifest):
    cells = []
    for fs, states in states_of.items():
        d = tmp_path / fs
        d.mkdir()
        out = parsed(d, states, fs)
        k = CellKey("stick-1g", fs, "crashstates", "powercut")
        cells.append(CellResult(key=k, status="ok", measurements=out.measurements, headline=out.headline,
                                extra=out.extra))
    devices = {"stick-1g": {"name": "stick-1g", "kind": "block", "ftl": "page", "capacity_bytes": 1 << 30,
                            "protect_paired_pages": False, "part": {"model": "a cheap USB stick"}}}
    return gen.write_run(tmp_path / "run", cells, devices=devices, **manifest)


def test_the_device_s_loss_never_rules_a_filesystem_out_and_is_said_once_on_the_first_screen(tmp_path):
    run = load_run(_stick_run(tmp_path, {
        "ext4": [state("100", "flush", facts()), torn("812+t5", twin_facts=facts())],
        "exfat": [state("100", "flush", facts()), state("900", "flush", LOST)],
    }))
    recs = {r.use_case.id: r for r in recommend(run)["stick-1g"]}
    logging = recs["logging"]
    assert [e.fs for e in logging.not_eligible] == ["exfat"]  # the filesystem's loss rules it out
    assert logging.checks["ext4"].checks[0].verdict is Verdict.MET  # the device's does not
    [c] = logging.not_eligible[0].failed
    assert c.why == "acknowledged data lost in 1 of 2 crash states"
    assert c.reproducer.item == "900"
    pl = part_loss(run, "stick-1g")
    assert (pl.states, pl.damaged, pl.flushed, pl.caused, pl.survived) == (4, 1, 1, {"ext4": 1}, {"ext4": 0.0})
    text = pl.text()
    assert text.startswith("**This part destroyed data it had acknowledged as durable.** In 1 of the 4 crash "
                           "states checked here the cut tore a NAND program whose paired pages held flushed data")
    assert "1 failed state was its doing alone — the same cut without the damage recovered (ext4 1)" in text
    assert "no paired-page or power-loss protection (preset stick-1g: protect_paired_pages = false)" in text
    assert "No filesystem can make this part safe" in text
    first = section_md(answer_section(run, recommend(run)), 2)
    assert first.count("This part destroyed data") == 1
    # the first screen: the use cases the run measured (crash states: root, logging, database), one line for
    # the built-in ones none of whose studies ran
    assert "**Data logging (small sync writes)**" in first and "**Read-only / boot partition**" not in first
    assert "Built-in use cases (Read-only / boot partition, Media recording (big sequential writes)): none of " \
           "their studies ran on stick-1g" in first
    assert "Not eligible: exfat (acknowledged data lost in 1 of 2 crash states)." in answer_line(logging)
    # the scored criterion: the device's damage survived, 0 % for ext4 (its one damaged state failed)
    i = [c.label for c in logging.use_case.criteria].index("the device's damage survived")
    assert i in logging.measured and logging.entries[0].values[i].value == 0.0


def test_a_protected_part_damages_nothing_and_says_why_the_damage_criterion_is_not_measured(tmp_path):
    run = load_run(_stick_run(tmp_path, {"ext4": [state("100", "flush", facts())],
                                         "exfat": [state("900", "flush", LOST)]}))
    assert part_loss(run, "stick-1g") is None
    logging = {r.use_case.id: r for r in recommend(run)["stick-1g"]}["logging"]
    # nothing to measure there: not "not measured", and not counted among the use case's criteria
    assert dict((logging.use_case.criteria[i].label, why) for i, why in logging.not_applicable) == {
        "the device's damage survived": "stick-1g damaged no durable data in any crash state: nothing to survive"}
    assert "the device's damage survived" not in [logging.use_case.criteria[i].label for i, _ in logging.not_measured]
    assert [e.fs for e in logging.not_eligible] == ["exfat"]


def test_a_run_whose_cells_all_crashed_recommends_nothing_and_exits_non_zero(tmp_path, capsys):
    err = 'check step failed: ile "/usr/lib/python3.11/subprocess.py", line 1901, in _execute_child raise ' \
          "child_exception_type(errno_num) FileNotFoundError: [Errno 2] No such file or directory: '/mnt/cs'"
    cells = [gen.cell(fs, study, [], status="crash", error=err, case=case)
             for fs in ("btrfs", "erofs+lz4", "ext4") for study, case in (("boot", ""), ("caps", ""), ("mkfs", ""))]
    run_dir = gen.write_run(tmp_path / "run", cells)
    run = load_run(run_dir)
    recs = recommend(run)
    assert all(r.winner is None for r in recs["emmc-1g"])
    root = {r.use_case.id: r for r in recs["emmc-1g"]}["rootfs"]
    # a crashed probe is no evidence: its requirements are not measured, never a capability missing
    assert not root.not_eligible
    assert {c.verdict for e in root.checks.values() for c in e.checks if c.req.study == "caps"} == {Verdict.UNCHECKED}
    first = section_md(answer_section(run, recs), 2)
    assert first.startswith("## Answer\n\n**No recommendation: most of this run failed.** 9 of 9 cells of this run "
                                     "did not finish (9 crash): the first error, ")
    assert "FileNotFoundError: [Errno 2] No such file or directory: '/mnt/cs'" in first
    assert "Traceback" not in first and 'line 1901' not in first
    assert "**btrfs**" not in first and "runner-up" not in first
    from flashbed.cli import main
    assert main(["report", str(run_dir)]) == 1
    assert "no cell of run run finished: its report recommends nothing" in capsys.readouterr().err


def test_a_failed_probe_is_not_measured_beside_measured_ones(tmp_path):
    cells = [gen.cell("ext4", "caps", gen.caps_meas()),
             gen.cell("vfat", "caps", [], status="crash", error="the lab kernel died"),
             gen.cell("ext4", "boot", [("boot", "seconds", 0.3, "s")]),
             gen.cell("vfat", "boot", [("boot", "seconds", 0.2, "s")])]
    run = load_run(gen.write_run(tmp_path / "run", cells))
    root = {r.use_case.id: r for r in recommend(run)["emmc-1g"]}["rootfs"]
    assert not root.not_eligible and not root.decided
    assert any("not checked for vfat" in u.why and "its caps cell crash" in u.why for u in root.undecided), \
        [u.why for u in root.undecided]


# ---- the guest's check loop: every state classified, a damaged failure gets its twin ----------------

def test_the_check_loop_checks_a_damaged_failure_s_twin_and_classifies_a_check_that_cannot_run(tmp_path,
                                                                                             monkeypatch):
    states = [{"id": "10+t1", "kind": "tear", "acked": 3, "damaged": 2}, {"id": "11", "kind": "cut", "acked": 3},
              {"id": "12", "kind": "flush", "acked": 4}]
    (tmp_path / "states.json").write_text(json.dumps({"states": states}))
    (tmp_path / "cslog.jsonl").write_text("")
    served = []

    def call_host(run_dir, name, call, timeout, keep=True):
        served.append(call.args["state"])
        damage = {"damaged_ranges": [[0, 8192]], "damaged_flushed_ranges": [[0, 4096]]} \
            if call.args["state"] == "10+t1" else {}
        return HostAnswer(ok=True, data={"switch_ns": 5, **damage})

    def recover(spec, verify=None, kmsg=None, checker=None):
        now = served[-1]
        if now == "11":
            raise FileNotFoundError(2, "No such file or directory", "/mnt/cs")
        v = verify("/mnt/cs")
        return RecoverFacts.from_json(facts(verify=v) if now != "10+t1" else LOST)
    monkeypatch.setenv("FLASHBED_RUN", str(tmp_path))
    monkeypatch.setattr(guest, "call_host", call_host)
    monkeypatch.setattr(guest, "drop_buffers", lambda device: None)
    monkeypatch.setattr(guest, "place", lambda mnt, device, ranges: guest.TwinPlace(files={"cs/x": 4096}))
    monkeypatch.setattr(guest.powercut, "recover_facts", recover)
    monkeypatch.setattr(guest.powercut, "Kmsg", lambda: None)
    monkeypatch.setattr(guest, "verifier", lambda w, *shared: lambda d, recs: {"n_loss": 0, "n_garbage": 0})
    spec = STUDY.check_spec(cell(), cell().variant, STUDY.work_spec(cell(), cell().variant))
    import dataclasses
    # the states in the listing's order (claim=False: no other lab shares this cell's)
    spec = dataclasses.replace(spec, states=str(tmp_path / "states.json"), out=str(tmp_path / "checked.jsonl"),
                               work={**spec.work, "log": str(tmp_path / "cslog.jsonl")}, claim=False)
    res = guest.check(spec)
    assert res == {"listed": 3, "checked": 3, "stopped": ""}
    assert served == ["10+t1", "10+t1+u", "11", "12"]  # the twin right after its failed state
    rows = [StateFacts.from_json(json.loads(x)) for x in (tmp_path / "checked.jsonl").read_text().splitlines()]
    assert rows[0].damage == {"ranges": [[0, 8192]], "flushed": [[0, 4096]]}
    tw = StateFacts.from_json(rows[0].twin)
    assert tw.id == "10+t1+u" and tw.damage == {"place": {"files": {"cs/x": 4096}, "outside": 0, "why": ""}}
    assert rows[1].error.startswith("FileNotFoundError") and rows[1].facts is None
    assert rows[2].facts and rows[2].twin is None
    # the host: the state that could not be checked is an error of its own, the loop went on
    rec = STUDY.record(rows[1], "ext4")
    assert rec["class"] == "error" and "could not run: FileNotFoundError" in rec["why"] and rec["cause"] is None


def test_a_missing_workload_directory_is_a_loss_not_a_crashed_check(tmp_path, monkeypatch):
    from flashbed.lab.guest.protocol import CrashWorkSpec
    monkeypatch.setenv("FLASHBED_RUN", str(tmp_path))
    w = CrashWorkSpec(workload="user", mnt="/mnt", dir="/mnt/cs", log="x", seed=1, mount=[], umount=[],
                      timeout=1.0, command="true", check="true", check_timeout=5.0)
    v = guest.user_check(w, str(tmp_path / "cs"), [])
    assert v["n_loss"] == 1 and "the workload's directory cs is missing" in v["loss"][0]


@pytest.mark.parametrize("text, want", [
    ('Traceback (most recent call last):\n  File "x.py", line 3, in <module>\n    f()\nValueError: bad\n',
     "ValueError: bad"),
    ('294 of 294 states were not checked: check step failed: ile "/usr/lib/python3.11/subprocess.py", line 1901, '
     "in _execute_child raise x FileNotFoundError: [Errno 2] No such file or directory: '/mnt/cs'",
     "294 of 294 states were not checked: check step failed: FileNotFoundError: [Errno 2] No such file or "
     "directory: '/mnt/cs'"),
    ("mount failed: wrong fs type", "mount failed: wrong fs type"),
])
def test_summaries_never_carry_a_traceback(text, want):
    from flashbed.errors import no_traceback
    assert no_traceback(text) == want


def test_request_sizes_below_1_kib_are_bytes():
    from flashbed.sizes import size_text
    assert [size_text(b) for b in (367, 1023, 1024, 1536, 4 << 20)] == ["367 B", "1023 B", "1 KiB", "1.5 KiB",
                                                                        "4 MiB"]


def test_run_exits_non_zero_when_no_cell_finished(tmp_path, capsys):
    import argparse

    from flashbed.commands import run as run_command
    from flashbed.store import RunStore
    cells = [gen.cell(fs, "boot", [], status="crash", error="the lab kernel died") for fs in ("ext4", "f2fs")]
    store = RunStore(gen.write_run(tmp_path / "run", cells))
    assert run_command._finish(argparse.Namespace(no_report=True), store, cells) == 1
    assert "no cell of this run finished (2 cells; the first crash: the lab kernel died): nothing is recommended" \
        in capsys.readouterr().err
    ok = [gen.cell("ext4", "boot", [("boot", "seconds", 0.3, "s")]), cells[1]]
    assert run_command._finish(argparse.Namespace(no_report=True), store, ok) == 0  # a crash beside a finished cell: a result
