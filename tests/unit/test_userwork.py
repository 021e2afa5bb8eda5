"""The user's own workload and check: edge checks, the run id's content hash, the fio
option refusal, the figures read from a workload cell, and the lifetime arithmetic."""

import shutil
from pathlib import Path

import pytest

from flashbed import lifetime, userwork
from flashbed.cli import main
from flashbed.errors import FlashbedError
from flashbed.plan import PlanRequest
from flashbed.studies import edge
from flashbed.studies.workload import blk_delta, metrics

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _script(tmp_path: Path, name: str, body: str, mode: int = 0o755) -> Path:
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(mode)
    return p


def _run_id(workload: Path, check: Path | None = None) -> str:
    overrides, studies = edge.apply({"--workload": str(workload), **({"--check": str(check)} if check else {})}, {},
                                      ())
    return PlanRequest(fs=("ext4",), devices=("emmc-8g@512M",), studies=studies, overrides=overrides).run_id()


def test_the_run_id_follows_the_content_of_the_workload_and_the_check(tmp_path):
    w = _script(tmp_path, "w.sh", "echo a=1\n")
    c = _script(tmp_path, "c.sh", "exit 0\n")
    first = _run_id(w, c)
    assert _run_id(w, c) == first  # same content: the same run (a resume)
    w.write_text("#!/bin/sh\necho a=2\n")
    edited = _run_id(w, c)
    assert edited != first
    c.write_text("#!/bin/sh\nexit 1\n")
    assert _run_id(w, c) not in (first, edited)
    assert _run_id(w) != _run_id(w, c)  # a check adds its study


def test_a_cell_refuses_a_file_edited_after_its_run_started(tmp_path):
    w = _script(tmp_path, "w.sh", "echo a=1\n")
    uf = userwork.load(str(w), "--workload")
    staged = userwork.stage(uf.path, uf.digest, tmp_path / "staged.sh")
    assert staged.read_bytes() == w.read_bytes()
    w.write_text("#!/bin/sh\necho changed\n")
    with pytest.raises(FlashbedError, match="changed since this run started"):
        userwork.stage(uf.path, uf.digest, tmp_path / "staged.sh")


@pytest.mark.parametrize("line,words", [
    ("filename=/dev/sda", "leaves the filesystem under test"),
    ("filename=../../etc/passwd", "leaves the filesystem under test"),
    ("filename=a:/tmp/b", "leaves the filesystem under test"),
    ("filename=${HOME}/x", "leaves the filesystem under test"),
    ("write_bw_log=/tmp/bw", "leaves the filesystem under test"),
    ("directory=/tmp", "flashbed sets directory="),
    ("exec_prerun=rm -rf /", "runs a program"),
    ("exec_postrun=reboot", "runs a program"),
    ("ioengine=sg", "does not do its I/O through the filesystem's files"),
    ("ioengine=exec", "does not do its I/O through the filesystem's files"),
    ("replay_redirect=/dev/sdb", "another device"),
    ("[unclosed", "is not a [section]"),
])
def test_fio_options_that_escape_the_filesystem_are_refused(line, words):
    problems = userwork.fio_problems(f"[job]\nrw=write\nsize=1M\n{line}\n")
    assert len(problems) == 1 and words in problems[0] and "line 4" in problems[0]


def test_a_plain_fio_job_passes_and_include_is_refused():
    assert userwork.fio_problems("[global]\nioengine=psync\n; a comment\n[cam]\nrw=write\nbs=1M\n"
                                 "filename=video.bin\nfsync_on_close=1\n") == []
    assert "include" in userwork.fio_problems("include other.fio\n[j]\nrw=read\n")[0]


def test_the_shipped_camera_job_passes_fio_itself():
    if shutil.which("fio") is None:
        pytest.skip("fio not installed")
    uf = userwork.load(str(EXAMPLES / "camera-recording.fio"), "--workload")
    assert uf.kind is userwork.Kind.FIO


def test_bad_workload_input_is_one_line_exit_2(tmp_path, capsys):
    if shutil.which("fio") is None:
        pytest.skip("fio not installed")
    bad_fio = tmp_path / "bad.fio"
    bad_fio.write_text("[job]\nrw=write\nsize=1M\nbogus_option=3\n")
    escaping = tmp_path / "esc.fio"
    escaping.write_text("[job]\nfilename=/dev/ubda\nrw=write\n")
    plain = _script(tmp_path, "plain.sh", "echo hi\n", mode=0o644)
    ok = _script(tmp_path, "ok.sh", "echo hi\n")
    out = tmp_path / "never"
    cases = [
        (["--workload", str(bad_fio)], "fio does not accept it: Bad option <bogus_option=3>"),
        (["--workload", str(escaping)], "filename=/dev/ubda leaves the filesystem under test"),
        (["--workload", str(plain)], "is not executable: chmod +x it"),
        (["--workload", str(tmp_path / "none.sh")], "no such file"),
        (["--check", str(ok)], "--check needs --workload FILE"),
        (["--workload", str(ok), "--check", str(plain)], "--check " + str(plain) + " is not executable"),
        (["--workload", str(ok), "--check", str(bad_fio)], "is not executable"),
        (["--resume", "x", "--workload", str(ok)], "drop --workload"),
        (["--age", "50"], "--age needs --workload FILE"),
        (["--daily-writes", "2G"], "--daily-writes needs --workload FILE"),
        (["--workload", str(ok), "--age", "99"], "--age 99: give the fill in % of the filesystem, 1 to 95"),
        (["--workload", str(ok), "--daily-writes", "lots"], "--daily-writes lots: give a size a day"),
    ]
    for args, words in cases:
        assert main(["run", *args, "--out", str(out)]) == 2, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err and "Traceback" not in err, (args, err)
    assert not out.exists()


def test_study_workload_without_a_file_says_how_to_give_one(capsys):
    assert main(["run", "--study", "workload", "--fs", "ext4", "--device", "emmc-8g@512M"]) == 2
    assert "--workload FILE" in capsys.readouterr().err


def test_script_metrics_and_block_counters():
    out = metrics("starting\nrows=600\ncommit_ms=207ms\nnote = not a number\nrate=1.5e3 B/s\nrows=640\n")
    assert out == {"rows": (640.0, ""), "commit_ms": (207.0, "ms"), "rate": (1500.0, "B/s")}
    before = " ".join(["0"] * 17)
    # 10 writes of 80 sectors (40 KiB each), 3 discards, 7 flushes
    after = "0 0 0 0 10 0 800 0 0 0 0 3 0 0 0 7 0"
    assert blk_delta(before, after) == {"write_requests": 10.0, "write_request_kib": 40.0, "discards": 3.0,
                                        "flushes": 7.0}
    assert blk_delta("", after) == {}


def test_lifetime_arithmetic():
    gib = 1 << 30
    # 8 GiB x 3000 cycles = 24 000 GiB of programs; 2 GiB a day x WAF 3 = 6 GiB a day: 4000 days
    assert lifetime.years(8 * gib, 3000, 2 * gib, 3.0) == pytest.approx(4000 / 365)
    assert lifetime.years(8 * gib, 3000, 0, 3.0) == float("inf")
    with pytest.raises(ValueError):
        lifetime.years(0, 3000, gib, 1.0)
    # a rate of 1 MB per 10 s, around the clock
    assert lifetime.daily_from_rate(1e6, 10) == pytest.approx(8.64e9)
    lt = lifetime.Lifetime(8 * gib, 3000, "class default: consumer MLC", 2 * gib, "--daily-writes 2G", 3.0,
                           steady=False, passes=4, erase_spread=(1, 9))
    text = "\n".join(lt.lines())
    assert "11.0 years" in text and "did NOT converge in 4 passes" in text and "class default" in text
    assert "1 to 9" in text


def test_write_amplification_converges_only_when_the_last_passes_agree():
    assert not lifetime.converged([1.2, 2.5])
    assert not lifetime.converged([1.2, 2.0, 2.6, 3.1])
    assert lifetime.converged([1.2, 2.0, 3.0, 3.05, 2.98])
    assert not lifetime.converged([3.0, 3.0, 0.0])  # a pass that wrote nothing does not count


def _phase(waf: float, host: int, secs: float, erases=(0, 3)) -> dict:
    return {"write_amplification": waf, "host_write_bytes": host, "wall_seconds": secs,
            "erase_count_min": erases[0], "erase_count_max": erases[1]}


def test_a_workload_cell_projects_the_lifetime_from_its_passes(tmp_path):
    import json

    from flashbed import variants
    from flashbed.devices import presets
    from flashbed.results import CellKey
    from flashbed.studies import STUDIES
    from flashbed.studies.base import CellSpec
    from flashbed.studies.workload import host_stats

    calls = tmp_path / "host-calls"
    calls.mkdir()
    phases = {"pass1": _phase(1.5, 10_000_000, 10), "pass2": _phase(2.9, 10_000_000, 10),
              "pass3": _phase(3.0, 10_000_000, 10), "workload": _phase(3.1, 10_000_000, 10, (2, 9))}
    for i, (name, data) in enumerate(phases.items()):
        (calls / f"{i:04d}.req").write_text(json.dumps({"call": "stats", "args": {"phase": name}}))
        (calls / f"{i:04d}.resp").write_text(json.dumps({"ok": True, "data": data, "error": ""}))
    assert host_stats(tmp_path) == phases
    study = STUDIES["workload"]
    dev = presets.load_spec("emmc-8g@512M")
    spec = CellSpec(CellKey(dev.label, "ext4", "workload", "w", 0), dev, variants.parse("ext4", dev),
                    study.params(file="w.sh", passes=4))
    lt = study.lifetime(spec, phases)
    assert lt.steady and lt.waf == pytest.approx(3.0)  # the mean of the last three passes
    assert lt.daily_bytes == pytest.approx(1e6 * 86400)
    assert lt.capacity == dev.preset_capacity and lt.pe_cycles == dev.info["endurance"]
    assert lt.pe_source.startswith("class default")
    assert lt.years == pytest.approx(dev.preset_capacity * lt.pe_cycles / (86.4e9 * 3.0) / 365)
    assert lt.erase_spread == (2, 9)
    daily = study.lifetime(dataclasses_replace(spec, study.params(file="w.sh", daily_writes=2 << 30)),
                           {"workload": phases["workload"]})
    assert not daily.steady and daily.waf == pytest.approx(3.1) and daily.daily_source == "--daily-writes"
    assert "did NOT converge in 1 pass:" in "\n".join(daily.lines())


def dataclasses_replace(spec, params):
    import dataclasses
    return dataclasses.replace(spec, params=params)


def test_the_guest_runs_the_check_on_the_state_and_reads_its_verdict(tmp_path, monkeypatch):
    from flashbed.lab.guest import crashstates as guest
    from flashbed.lab.guest.protocol import CrashWorkSpec

    monkeypatch.setenv("FLASHBED_RUN", str(tmp_path))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    (mnt / "count").write_text("3\n")
    check = _script(tmp_path, "check.sh", 'want=$(tail -n 1 "$FLASHBED_ACKED" | cut -d= -f2)\n'
                    '[ "$(pwd)" = "$FLASHBED_MNT" ] || exit 9\n'
                    '[ "$(cat count)" -ge "${want:-0}" ] || { echo "lost: have $(cat count), want $want"; exit 1; }\n')
    w = CrashWorkSpec(workload="user", mnt=str(mnt), dir=str(mnt), log="", seed=1, mount=[], umount=[], timeout=5,
                      check=str(check), check_timeout=5)
    recs = [{"e": "begin", "m": 1}, {"e": "ack", "labels": ["committed=2"], "m": 5},
            {"e": "ack", "labels": ["committed=3"], "m": 9}]
    ok = guest.user_check(w, str(mnt), recs)
    assert ok["n_loss"] == 0 and ok["check"]["rc"] == 0
    assert (tmp_path / guest.ACKED).read_text() == "committed=2\ncommitted=3\n"
    lost = guest.user_check(w, str(mnt), recs + [{"e": "ack", "labels": ["committed=4"], "m": 12}])
    assert lost["n_loss"] == 1 and lost["loss"] == ["the check failed (exit 1): lost: have 3, want 4"]
    slow = _script(tmp_path, "slow.sh", "sleep 30\n")
    import dataclasses
    stuck = guest.user_check(dataclasses.replace(w, check=str(slow), check_timeout=0.5), str(mnt), recs)
    assert stuck["check_timeout"] and "did not finish within 0.5 s" in stuck["loss"][0]


def test_a_check_over_its_limit_is_a_recorded_outcome_not_a_loss():
    from flashbed.lab.guest.protocol import StateFacts
    from flashbed.status import PowerCutClass
    from flashbed.studies import STUDIES

    def facts(verify):
        return {"phase": "done", "mounted": True, "verified_by": "mount1", "fsck": {"result": "clean"},
                "mount1": {"status": "ok", "kmsg": []}, "verify": verify}
    study = STUDIES["appcheck"]
    timed_out = StateFacts(id="7", kind="cut", acked=3, facts=facts(
        {"n_loss": 1, "loss": ["the check did not finish within 3 s"], "check_timeout": True}))
    failed = StateFacts(id="8", kind="cut", acked=3, facts=facts(
        {"n_loss": 1, "loss": ["the check failed (exit 1): rows lost"]}))
    assert study._record(timed_out, "ext4")["class"] == PowerCutClass.HANG
    assert study._record(timed_out, "ext4")["why"] == "the check did not finish within 3 s"
    assert study._record(failed, "ext4")["class"] == PowerCutClass.DATA_LOSS


def _aged_spec(pace: str = "real", device: str = "emmc-8g@512M", fill: int = 50):
    from flashbed import variants
    from flashbed.devices import presets
    from flashbed.results import CellKey
    from flashbed.studies import STUDIES
    from flashbed.studies.base import CellSpec
    dev = presets.load_spec(device)
    study = STUDIES["workload"]
    return study, CellSpec(CellKey(dev.label, "ext4", "workload", "w", 0), dev, variants.parse("ext4", dev),
                           study.params(file=str(EXAMPLES / "sqlite-logger.sh"), digest=userwork.digest(
                               EXAMPLES / "sqlite-logger.sh"), fill=fill, passes=2), pace=pace)


def test_preconditioning_runs_unpaced_in_a_boot_of_its_own(tmp_path):
    study, spec = _aged_spec()
    age, work = study.boots(spec, tmp_path)
    names = [s.name for s in age]
    assert names[0] == "mkfs" and "age" in names and names[-1] == "umount-age"
    assert not any(n.startswith("workload") for n in names)
    names = [s.name for s in work]
    assert names[0] == "mount" and "mkfs" not in names and "age" not in names  # the aged filesystem, mounted
    assert [study.boot_pace(spec, i) for i in (0, 1)] == ["none", None]
    # the workload's boot finds its file in its own run directory
    study.before_boot(spec, 0, tmp_path)
    study.before_boot(spec, 1, tmp_path)
    assert (tmp_path / "boot1" / "workload.sh").exists() and not (tmp_path / "workload.sh").exists()
    # unpaced already (or no delays to skip): one boot, as before
    for s in (_aged_spec(pace="none")[1], _aged_spec(device="plain-file@256M")[1], _aged_spec(fill=0)[1]):
        assert len(study.boots(s, tmp_path)) == 1 and study.boot_pace(s, 0) is None


def test_a_cell_switches_the_device_s_pace_between_its_boots(tmp_path):
    """run_cell asks the session for the study's pace before each boot, the device kept."""
    from flashbed.cell import run_cell
    from flashbed.lab.boundary import BootResult, Pacing, session_has

    study, spec = _aged_spec()
    events = []

    class Session:
        pace = "real"

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def skips_time(self):
            return self.pace == "none"

        def set_pace(self, pace):
            events.append(("pace", pace))
            self.pace = pace

        def disks(self):
            return ()

        def nandsim(self):
            return None

        def mem_mb(self):
            return 256

    class Lab:
        release = "test"

        def open_session(self, device, scratch, seed=1, pace="real", clock="real"):
            return Session()

        def boot(self, bspec, host=None, kill=None):
            events.append(("boot", bspec.steps[0].name))
            return BootResult("done", [], 0.1, 0.2, str(tmp_path / "console.log"), 0, "test")

    assert session_has(Session, Pacing)
    run_cell(spec, Lab(), tmp_path / "logs", tmp_path / "scratch")
    assert events == [("pace", "none"), ("boot", "mkfs"), ("pace", "real"), ("boot", "mount")]


def test_a_fio_workload_gets_crash_states_with_fio_s_own_verification(tmp_path):
    """Without --check a fio job still has its crash states: the recorded run writes verify headers
    and saves fio's write state; the state's check reads back every write fio completed, once fio's
    end was acknowledged (real fio on this host, on a plain directory)."""
    import os
    import subprocess

    from flashbed.studies import STUDIES
    from flashbed.studies.appcheck import FIO_CHECK, FIO_DONE, FIO_STATE, FIO_VERIFY
    from flashbed.studies.base import MNT

    job = EXAMPLES / "camera-recording.fio"
    overrides, studies = edge.apply({"--workload": str(job)}, {}, ())
    assert studies == ("workload", "appcheck") and "check" not in overrides["appcheck"]
    study = STUDIES["appcheck"]
    p = study.params(**overrides["appcheck"])
    assert study.cases(p, None)[0].label == "user"
    _, spec = _aged_spec(fill=0)
    import dataclasses
    spec = dataclasses.replace(spec, params=p)
    run = tmp_path / "run"
    run.mkdir()
    study.before_boot(spec, 0, run)
    staged, verify = (run / "workload.fio").read_text(), (run / FIO_VERIFY).read_text()
    assert "verify=crc32c\ndo_verify=0\nverify_state_save=1\n" in staged and "rate=1m" in staged
    assert "verify=crc32c" in verify and "do_verify" not in verify and "rate=" not in verify
    work = study.work_spec(spec, spec.variant)
    assert work.command.endswith(f"&& sync && $FLASHBED_ACK {FIO_DONE}") and work.check.endswith(FIO_CHECK)
    # the recorded run and the state's check with the real fio, in a directory standing for the mount
    d = tmp_path / "fs"
    for name in ("workload.fio", FIO_VERIFY):
        text = (run / name).read_text().replace(f"directory={MNT}/cs", f"directory={d}")
        (run / name).write_text(text.replace("filesize=8M", "filesize=2M").replace("rate=", "#rate="))
    d.mkdir()
    env = {**os.environ, "FLASHBED_RUN": str(run), "FLASHBED_ACK": "true"}
    subprocess.run(work.command.replace("$FLASHBED_ACK", "true"), shell=True, check=True, env=env,
                   cwd=d, executable="/bin/sh", capture_output=True)
    assert list((run / FIO_STATE).glob("*-verify.state"))
    acked = tmp_path / "acked"

    def check(*labels):
        acked.write_text("".join(f"{x}\n" for x in labels))
        r = subprocess.run([str(run / FIO_CHECK)], env={**env, "FLASHBED_ACKED": str(acked)}, cwd=d,
                           capture_output=True, text=True)
        return r.returncode, r.stdout.strip().splitlines()[-1]
    assert check(FIO_DONE) == (0, "fio verify: every write fio completed is there")
    with open(d / "main-stream.0.1", "r+b") as f:  # a completed write damaged: fio finds it
        f.seek(5000)
        f.write(b"XXXX")
    rc, line = check(FIO_DONE)
    assert rc == 1 and line.startswith("fio verify failed: crc32c: verify failed at file") and "main-stream.0.1" in line
    # before fio's end was acknowledged its state does not apply: the state is held to its recovery only
    assert check("other=1") == (0, "fio verify: not run (before fio's end was acknowledged, its write state "
                                   "does not apply)")


# --- issue 28, 6 and 18: what the workload checks let through, and what they refused --------

@pytest.mark.parametrize("job,words", [
    ("[../../tmp/escape]\nrw=write\nsize=1M\n", "job name [../../tmp/escape]: fio names a job's files after it"),
    ("[a/b]\nrw=write\n", "must not hold a /"),
    ("[global]\nrw=write\nsize=1M\n", "it has no [job] section (only [global])"),
    ("[j]\nfilename=$HOME/x\n", "leaves the filesystem under test"),
])
def test_fio_jobs_that_leave_the_filesystem_or_do_nothing_are_refused(job, words):
    problems = userwork.fio_problems(job)
    assert problems and words in problems[0], problems


def test_fios_own_file_name_keywords_pass():
    assert userwork.fio_problems("[cam]\nrw=write\nnumjobs=2\nfilename_format=$jobname.$jobnum.$filenum\n"
                                 "filename=clip-$jobnum.bin\n") == []


def test_an_executable_that_is_neither_a_script_nor_a_program_is_refused(tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(bytes(range(7, 200)))
    junk.chmod(0o755)
    with pytest.raises(FlashbedError, match="is neither a script .* nor a program"):
        userwork.load(str(junk), "--workload")


@pytest.mark.parametrize("what,words", [("dir", "is a directory: give a file"),
                                        ("/dev/null", "is not a regular file"), ("none", "no such file")])
def test_a_path_that_is_no_file_says_what_it_is(tmp_path, what, words):
    path = {"dir": str(tmp_path), "/dev/null": "/dev/null", "none": str(tmp_path / "none.sh")}[what]
    with pytest.raises(FlashbedError, match=words):
        userwork.load(path, "--workload")


def test_a_workload_printing_thousands_of_metrics_keeps_the_first_few(tmp_path):
    """Issue 28, 10: 2 000 key=value lines kept `run` in the report for over 10 minutes, 20 000
    took 5.6 GB: the cell keeps the first MAX_FIGURES and says how many it left out."""
    from flashbed.lab.boundary import BootResult, StepResult
    from flashbed.studies.workload import MAX_FIGURES, SCRIPT_OUT
    study, spec = _aged_spec(fill=0)
    (tmp_path / SCRIPT_OUT).write_text("".join(f"k{i}={i}ms\n" for i in range(2000)))
    step = StepResult(name="workload", cmd="x", status="ok", rc=0, seconds=1.0, stdout="", stderr="")
    out = study.parse(spec, [BootResult("done", [step], 1.0, 2.0, "console.log", 0, "test")], tmp_path)
    keys = {m.metric for m in out.measurements if m.metric.startswith("k")}
    assert keys == {f"k{i}" for i in range(MAX_FIGURES)}
    assert f"{2000 - MAX_FIGURES} more key=value metrics not kept" in out.headline
    assert len(out.extra["ranked"]) <= MAX_FIGURES + 2


def test_a_checks_escapes_and_nul_bytes_never_reach_the_screen_or_the_report(tmp_path):
    """Issue 28, 22: terminal escapes and NUL bytes a check printed reached the screen and report.md."""
    from flashbed.lab.guest.protocol import StateFacts
    from flashbed.studies import STUDIES
    from tests.unit.test_powercut_classify import facts
    bad = "\x1b[2J\x1b]0;pwned\x07lost\x00 rows"
    f = facts(verify={"n_loss": 1, "loss": [f"the check failed (exit 1): {bad}"],
                      "check": {"status": "failed", "rc": 1, "out": bad, "seconds": 0.1}})
    r = STUDIES["appcheck"]._record(StateFacts(id="9", kind="cut", acked=3, damaged=0, facts=f), "ext4")
    for text in (r["why"], r["check"]["out"]):
        assert text.isprintable() and "\x1b" not in text and "\x00" not in text and "lost\\x00 rows" in text


def test_resume_after_the_workload_was_deleted_or_edited_is_one_line(tmp_path, capsys):
    """Issue 28, 21: --resume after the workload file was deleted failed cell by cell."""
    import json
    w = _script(tmp_path, "w.sh", "echo a=1\n")
    uf = userwork.load(str(w), "--workload")
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"schema": 1, "run_id": "run", "request": {
        "profile": "quick", "fs": ["ext4"], "devices": ["emmc-8g@512M"], "studies": ["workload"], "repeat": 1,
        "seed": 1, "pace": "auto", "overrides": {"workload": {"file": uf.path, "digest": uf.digest,
                                                              "kind": "script"}}}}))
    w.write_text("#!/bin/sh\necho edited\n")
    assert main(["run", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"this run's --workload {uf.path} changed since the run started" in err
    w.unlink()
    assert main(["run", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be read (No such file or directory): restore it" in err
