"""Issue 28: the fuzz in a sandbox. Generated hostile inputs to every command (run, report,
probe, lab exec and smoke, bench, crashstate replay, devices), each case run as a process
where only its own scratch directory is writable (tests/sandbox.py: a private mount namespace,
every other mount read-only), beside a canary loop device holding an ext4, a canary file, two
run directories and the user's files in the case's own directory (a docs/ folder with a
report.md, a preset of theirs, symlinks to the canaries). Every case must be refused in one
line with exit 2; any write outside its scratch fails it: a canary's hash changed, or a
"Read-only file system" the command met. The lab is off (a kernel cache that is empty and
cannot be written: a command that would boot is refused there, in one line too).

1 000 cases by default (a fixed seed: repeatable); FLASHBED_FUZZ_EXAMPLES=N runs N from a
fresh seed. The last test prints the cases per command and the time they took.
"""

from __future__ import annotations

import io
import os
import shutil
import string
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flashbed.paths import repo_root
from tests import sandbox
from tests.unit.test_fuzz_edges import bad_setting
from tests.unit.test_writeguard import digest, tree

MORE = int(os.environ.get("FLASHBED_FUZZ_EXAMPLES", "0"))
EXAMPLES = MORE or 1000
COUNTS: dict[str, int] = {}
LAB_OFF: dict[str, int] = {}  # cases whose input passed every check: refused only where the lab would boot
TIMES: list[float] = []
STARTED: list[float] = []

why_not = sandbox.available()
pytestmark = [pytest.mark.skipif(bool(why_not), reason=why_not or "sandbox"), pytest.mark.long]




@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The canaries and the runs, outside every case's scratch (read-only in its sandbox)."""
    from flashbed.execute import execute
    from flashbed.executors import LocalExecutor
    from flashbed.lab.replay import ReplayLabs
    from flashbed.plan import PlanRequest, make_plan
    from flashbed.results import CellKey, CellResult
    from flashbed.store import RunStore
    from flashbed.studies.base import CRASHLOG
    from tests.replay import DATA

    root = tmp_path_factory.mktemp("sandboxed-fuzz")
    w = {"ROOT": root, "REPO": repo_root()}
    canary = root / "canary-file.bin"
    canary.write_bytes(os.urandom(64 << 10))
    w["CANARY_FILE"] = canary
    runs = {}
    for name in ("run-a", "run-b"):
        store = RunStore(root / name)
        req = PlanRequest(fs=("ext4",), devices=("plain-file@256M",), studies=("bigfile",),
                          overrides={"bigfile": {"size": 16 << 20}}, pace="none")
        execute(make_plan(req), store, ReplayLabs(DATA), LocalExecutor(1), stream=io.StringIO())
        runs[name] = store
    # a crash-state cell that kept its write log: what `crashstate replay` reads
    key = CellKey("emmc-8g@64M", "ext4", "crashstates", "powercut", 0)
    runs["run-a"].write(CellResult(key, "ok", extra={"failures": [{"state": "12+k3", "class": "data-loss",
                                                                     "why": "x"}]}))
    (runs["run-a"].logs_dir(key) / CRASHLOG).mkdir(parents=True)
    (runs["run-a"].logs_dir(key) / CRASHLOG / "log.bin").write_bytes(b"\0" * 64)
    w["RUN_A"], w["RUN_B"], w["STATE"] = runs["run-a"].root, runs["run-b"].root, f"{key.id}:12+k3"
    w["NOCACHE"] = root / "no-kernel-cache"  # missing, and read-only where it would be made: the lab is off
    node = None
    if os.geteuid() == 0 and shutil.which("losetup") and shutil.which("mkfs.ext4"):
        img = root / "canary-dev.img"
        img.write_bytes(b"\0" * (4 << 20))
        subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True, capture_output=True)
        r = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True)
        node = r.stdout.strip() if r.returncode == 0 else None
    w["CANARY_DEV"] = Path(node) if node else canary  # without a loop device the file stands in
    w["hashes"] = {"canary file": digest(canary), "canary device": digest(w["CANARY_DEV"]),
                   "run-a": tree(w["RUN_A"]), "run-b": tree(w["RUN_B"])}
    # what the children would otherwise import on every case
    import flashbed.commands.probe  # noqa: F401
    import flashbed.crashreplay  # noqa: F401
    import flashbed.execute  # noqa: F401
    import flashbed.lab.labexec  # noqa: F401
    import flashbed.plan  # noqa: F401
    import flashbed.report  # noqa: F401
    import flashbed.report.build  # noqa: F401
    import flashbed.report.load  # noqa: F401
    yield w
    if node:
        subprocess.run(["losetup", "-d", node], check=True)


def case_dir(w: dict, n: int) -> Path:
    """A case's scratch (writable in its sandbox), with the user's own things in it."""
    d = w["ROOT"] / "cases" / f"{n:06d}"
    shutil.rmtree(d, ignore_errors=True)
    (d / "docs" / "report-figures").mkdir(parents=True)
    for name in ("report.md", "report.html", "summary.json", "report-figures/chart.svg", "notes.txt"):
        (d / "docs" / name).write_text(f"the user's {name}\n")
    (d / "mine.toml").write_text((repo_root() / "presets" / "emmc-8g.toml").read_text())
    (d / "blk.toml").symlink_to(w["CANARY_DEV"])
    (d / "file-link.toml").symlink_to(w["CANARY_FILE"])
    (d / "runlink").symlink_to(w["RUN_B"])
    (d / "devdir").mkdir()
    os.mkfifo(d / "fifo")
    junk = d / "junk-exec"
    junk.write_bytes(bytes(range(1, 200)))
    junk.chmod(0o755)
    (d / "escape.fio").write_text("[../../tmp/escape]\nrw=write\nsize=1M\n")
    (d / "only-global.fio").write_text("[global]\nrw=write\n")
    return d


# --- what a hostile user gives ------------------------------------------------------------------

names = st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=1, max_size=8).filter(
    lambda n: n not in (".", ".."))


def _join(parts) -> str:
    base, tail = parts
    return base + tail


def under(bases: list[str]) -> st.SearchStrategy[str]:
    """A path at or under one of `bases`, however it is written (a trailing /, a /./, a name or two)."""
    tails = st.one_of(st.sampled_from(["", "/", "/.", "/./x"]), names.map(lambda n: f"/{n}"),
                      st.tuples(names, names).map(lambda t: f"/{t[0]}/{t[1]}"))
    return st.tuples(st.sampled_from(bases), tails).map(_join)


# inside a run that is not the command's own (the case's runlink is a symlink to run-b)
IN_RUNS = ["{RUN_B}", "{RUN_B}/cells", "{RUN_B}/logs", "{CASE}/runlink", "{RUN_B}/../run-b", "{RUN_A}/cells"]
PSEUDO = ["/proc", "/sys", "/dev", "/dev/shm/..", "/proc/self", "/sys/kernel", "/dev/disk"]
DEVICES = ["{CANARY_DEV}", "{CASE}/blk.toml", "{CASE}/devdir/../blk.toml", "/dev/null", "/dev/zero"]
CANARY = ["{CANARY_FILE}", "{CASE}/file-link.toml"]
# an output file flashbed must not write there: a device, under a run or the kernel's trees, an existing file
# (without --force), a path through a file, the user's folder
OUT_FILE = st.one_of(st.sampled_from(DEVICES + CANARY + ["{CASE}/mine.toml", "{REPO}/presets/emmc-8g.toml",
                                                         "{CASE}/fifo", "{CASE}/docs", "{CASE}/docs/report.md",
                                                         "", " "]),
                     under(IN_RUNS + ["{RUN_A}"]), under(PSEUDO), under(CANARY).map(lambda p: p + "/x.toml"),
                     names.map(lambda n: "{CASE}/no/such/" + n + ".toml"))
# an output directory flashbed must not fill there
OUT_DIR = st.one_of(st.sampled_from(DEVICES + CANARY + ["{CASE}/docs", "{CASE}/fifo", "", " "]),
                    under(IN_RUNS), under(PSEUDO), under(CANARY).map(lambda p: p + "/x"))
# RUN_A is the report's own run: writing there is allowed (and read-only here)
REPORT_OUT = st.one_of(st.sampled_from(DEVICES + CANARY + ["{CASE}/docs", "{CASE}/fifo", "", " "]),
                       under([p for p in IN_RUNS if "RUN_A" not in p]), under(PSEUDO),
                       under(CANARY).map(lambda p: p + "/x"))
INPUT_FILE = ["{CANARY_FILE}", "{CASE}/docs", "/dev/null", "{CASE}/junk-exec", "{CASE}/escape.fio",
              "{CASE}/only-global.fio", "{CASE}/fifo", "{CASE}/none.sh", "{CANARY_DEV}", "", " "]
NUMBER = ["nan", "inf", "-inf", "-1", "0", "x", "1e", "", " ", "1.5", "99999999999999999999999"]
SECONDS = ["nan", "inf", "-inf", "-1", "0", "x", "", " ", "1e999"]
words = st.text(alphabet=string.ascii_letters + string.digits + "-_+.:@ /\x1b\x07", min_size=1, max_size=10)

RUN = ["run", "--fs", "ext4", "--study", "mkfs", "--device", "plain-file@64M", "--no-report"]


def one_of(values):
    return st.sampled_from(values)


def bad_int(option):
    return one_of(NUMBER).map(lambda v: [f"{option}={v}"])


@st.composite
def run_case(draw):
    which = draw(one_of(["out", "target", "workload", "check", "device", "set", "daily", "age", "ssh", "resume",
                         "destroy", "numbers"]))
    if which == "out":
        return [*RUN, "--out", draw(st.one_of(OUT_DIR, under(["{RUN_A}/logs"]), st.just("{CASE}/docs/report.md")))]
    if which == "target":
        t = draw(st.one_of(one_of(["", " ", "ssh://-V", "ssh://root@-oProxyCommand=x", "ssh://", "root@h",
                                   "ssh://h:0", "ssh://h:99999"]), words.map(lambda w: f"ssh://{w}")))
        return [*RUN, "--out", "r", "--target", t, "--device", "/dev/mmcblk0p3"]
    if which in ("workload", "check"):
        f = draw(one_of(INPUT_FILE))
        extra = ["--workload", "{CASE}/junk-exec"] if which == "check" else []
        return [*RUN[:-5], "--fs", "ext4", "--out", "r", *extra, f"--{which}", f]
    if which == "device":
        dev = draw(one_of(["{CANARY_DEV}", "{CANARY_FILE}", "{CASE}/blk.toml", "/dev/null", "/dev/mmcblk9",
                           "{CASE}/docs", "real:nothing", "emmc-8g@", "emmc-8g@-1G", ""]))
        return [*RUN[:-3], "--out", "r", "--no-report", "--device", dev]
    if which == "destroy":  # a --destroy-data-on that names something else: no permission
        return [*RUN[:-3], "--out", "r", "--device", "{CANARY_DEV}", "--destroy-data-on", "/dev/sdz"]
    if which == "set":
        return [*RUN, "--out", "r", "--set", draw(st.one_of(bad_setting(), one_of(
            ["workload.file=/etc/passwd", "workload.kind=fio", "appcheck.check=/bin/true", "mount.fills=10", "",
             "bigfile.size=1G"])))]
    if which == "daily":
        return [*RUN, "--out", "r", "--workload", "{CASE}/none.sh", "--daily-writes", draw(one_of(["", "x", "-1G"]))]
    if which == "age":
        return [*RUN, "--out", "r", "--age", draw(one_of(["0", "96", "-1", "x", "", "nan"]))]
    if which == "ssh":
        return [*RUN, "--out", "r", draw(one_of(["--ssh-key", "--ssh-config", "--power-cmd"])),
                draw(one_of(["{CANARY_FILE}", "", " ", "relay {action}"]))]
    if which == "resume":
        return ["run", "--resume", draw(one_of(["{RUN_A}/cells", "{CANARY_FILE}", "{CASE}/docs", "", "/proc",
                                                "{CANARY_DEV}"]))]
    option = draw(one_of(["--repeat", "--jobs", "--cpus", "--seed", "--iterations"]))
    return [*RUN, "--out", "r", *draw(bad_int(option))]


@st.composite
def report_case(draw):
    which = draw(one_of(["one", "two", "run"]))
    if which == "one":
        return ["report", "{RUN_A}", "--out", draw(REPORT_OUT)]
    if which == "two":
        return ["report", "{RUN_A}", "{RUN_B}", "--out", draw(st.one_of(REPORT_OUT, under(["{RUN_A}"])))]
    return ["report", draw(one_of(["{CANARY_FILE}", "{CASE}/docs", "/dev/null", "", "{CANARY_DEV}", "{RUN_A}/cells"]))]


@st.composite
def probe_case(draw):
    which = draw(one_of(["preset", "out", "device", "runtime", "max-open"]))
    base = ["probe", "plain-file@64M"]
    if which == "preset":
        return [*base, "--write-preset", draw(OUT_FILE)]
    if which == "out":
        return [*base, "--out", draw(OUT_DIR)]
    if which == "device":
        return ["probe", draw(one_of(["{CANARY_DEV}", "{CASE}/blk.toml", "{CANARY_FILE}", "nand-2g-4k@128M", "",
                                      "/dev/null"]))]
    if which == "runtime":
        return [*base, f"--runtime={draw(one_of(SECONDS))}"]
    return [*base, *draw(bad_int("--max-open"))]


@st.composite
def lab_case(draw):
    which = draw(one_of(["disk", "timeout", "cpus", "destroy", "smoke-out", "smoke-jobs", "smoke-fs"]))
    if which == "disk":
        return ["lab", "exec", "--disk", draw(one_of(["{CANARY_DEV}", "{CASE}/blk.toml", "/dev/null", "/proc/x",
                                                      "{CASE}/docs", "{CASE}/none.img", "{CASE}/fifo", "",
                                                      "/dev/mmcblk9"])), "--", "true"]
    if which == "timeout":
        return ["lab", "exec", f"--timeout={draw(one_of(SECONDS))}", "--", "true"]
    if which == "cpus":
        return ["lab", "exec", *draw(bad_int("--cpus")), "--", "true"]
    if which == "destroy":
        return ["lab", "exec", "--disk", "{CANARY_DEV}", "--destroy-data-on", draw(one_of(["/dev/sdz", "{CASE}"])),
                "--", "true"]
    if which == "smoke-out":
        return ["lab", "smoke", "--out", draw(OUT_DIR)]
    if which == "smoke-jobs":
        return ["lab", "smoke", *draw(bad_int("--jobs"))]
    return ["lab", "smoke", "--fs", draw(words)]


@st.composite
def bench_case(draw):
    which = draw(one_of(["presets", "clock", "keep", "cpu", "crashstates", "fuse", "hostcall", "powercut", "lab"]))
    if which == "presets":
        return ["bench", "presets", *draw(st.one_of(one_of(SECONDS).map(lambda v: [f"--runtime={v}"]),
                                                     bad_int("--runs")))]
    if which == "clock":
        return ["bench", "clock", *draw(st.one_of(one_of(SECONDS).map(lambda v: [f"--runtime={v}"]),
                                                   bad_int("--runs"), one_of(["x", ""]).map(
                                                       lambda v: ["--profile", v])))]
    if which == "keep":
        return ["bench", "clock", "--profile", "quick", "--keep", draw(OUT_DIR)]
    if which == "cpu":
        return ["bench", "cpu", *draw(st.one_of(bad_int("--calls"), one_of(SECONDS).map(
            lambda v: [f"--runtime={v}"])))]
    if which == "crashstates":
        return ["bench", "crashstates", *draw(bad_int("--ops"))]
    if which == "fuse":
        return ["bench", "fuse", *draw(bad_int("--runs"))]
    if which == "hostcall":
        return ["bench", "hostcall", *draw(bad_int("--calls"))]
    if which == "powercut":
        return ["bench", "powercut", *draw(bad_int("--cycles"))]
    return ["bench", "lab", "--parts", draw(one_of(["", ",", "x", "lab,,device"]))]


@st.composite
def crashstate_case(draw):
    which = draw(one_of(["image", "force", "destroy", "state"]))
    base = ["crashstate", "replay", "{RUN_A}", "{STATE}"]
    if which == "image":
        return [*base, "--image", draw(OUT_FILE)]
    if which == "force":  # --force replaces a file, never a device, a run's file or one under /dev
        return [*base, "--force", "--image", draw(one_of(["{CANARY_DEV}", "{CASE}/blk.toml", "{RUN_B}/x.img",
                                                          "{RUN_A}/manifest.json", "/dev/null", "/dev/x.img",
                                                          "/proc/x", "{CASE}/docs", "{CASE}/fifo"]))]
    if which == "destroy":
        return [*base, "--image", "{CANARY_DEV}", "--destroy-data-on", draw(one_of(["/dev/sdz", "{CANARY_FILE}",
                                                                                    "{CASE}/x.img"]))]
    return ["crashstate", "replay", "{RUN_A}", draw(st.one_of(one_of(["", "x:y", ":", "12+k3x"]), words)),
            "--image", "{CASE}/s.img"]


@st.composite
def devices_case(draw):
    return ["devices", "show", draw(st.one_of(one_of(["{CANARY_DEV}", "{CANARY_FILE}", "{CASE}/blk.toml",
                                                      "/dev/null", "{CASE}/docs", "{CASE}/fifo", "", " ",
                                                      "{CASE}/junk-exec", "emmc-8g@0", "emmc-8g@x"]),
                                                 words.filter(lambda w: w.strip() and not w.startswith("-"))))]


COMMANDS = {"run": run_case(), "report": report_case(), "probe": probe_case(), "lab": lab_case(),
            "bench": bench_case(), "crashstate": crashstate_case(), "devices": devices_case()}
ORDER = sorted(COMMANDS)


def fill(argv: list[str], w: dict, case: Path) -> list[str]:
    subs = {k: str(v) for k, v in w.items() if isinstance(v, (str, Path))} | {"CASE": str(case)}
    out = []
    for a in argv:
        for k, v in subs.items():
            a = a.replace("{" + k + "}", v)
        out.append(a)
    return out


def check_case(w: dict, command: str, argv: list[str]) -> None:
    n = sum(COUNTS.values())
    COUNTS[command] = COUNTS.get(command, 0) + 1
    case = case_dir(w, n)
    mine = tree(case)
    argv = fill(argv, w, case)
    env = {"FLASHBED_CACHE": str(w["NOCACHE"]), "MPLCONFIGDIR": str(case / ".mpl"), "COLUMNS": "200"}
    o = sandbox.run(argv, case, w["ROOT"] / "outputs" / f"{n:06d}", env=env)
    TIMES.append(o.seconds)
    said = o.err + o.out
    assert o.code == 2, (" ".join(argv), o.code, o.err[-2000:])
    assert "Traceback" not in said and o.err.endswith("\n"), (" ".join(argv), o.err)
    if str(w["NOCACHE"]) in o.err.splitlines()[-1]:  # input that passed every check: refused where the lab
        LAB_OFF[command] = LAB_OFF.get(command, 0) + 1  # would boot (after the notes a run prints first)
        assert all(ln.startswith("flashbed: ") for ln in o.err.splitlines()), (" ".join(argv), o.err)
    else:
        assert o.err.count("\n") == 1, (" ".join(argv), o.err)
        assert "Read-only file system" not in said, (" ".join(argv), "a write outside its scratch", said[-500:])
    assert digest(w["CANARY_FILE"]) == w["hashes"]["canary file"], argv
    assert digest(w["CANARY_DEV"]) == w["hashes"]["canary device"], argv
    assert tree(w["RUN_A"]) == w["hashes"]["run-a"] and tree(w["RUN_B"]) == w["hashes"]["run-b"], argv
    after = tree(case)
    assert {k: after.get(k) for k in mine} == mine, (argv, "the user's files in the working directory changed")
    shutil.rmtree(case)


SHARE = -(-EXAMPLES // len(ORDER))  # each command's cases: EXAMPLES over the commands, rounded up


def _fuzz_command(command: str):
    """One command's test: its share of the cases, from its own strategy (as many for each)."""
    @settings(max_examples=SHARE, derandomize=not MORE, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(argv=COMMANDS[command])
    def test(world, argv):
        if not STARTED:
            STARTED.append(time.monotonic())
        check_case(world, command, argv)
    return test


test_fuzz_run_in_a_sandbox = _fuzz_command("run")
test_fuzz_report_in_a_sandbox = _fuzz_command("report")
test_fuzz_probe_in_a_sandbox = _fuzz_command("probe")
test_fuzz_lab_in_a_sandbox = _fuzz_command("lab")
test_fuzz_bench_in_a_sandbox = _fuzz_command("bench")
test_fuzz_crashstate_in_a_sandbox = _fuzz_command("crashstate")
test_fuzz_devices_in_a_sandbox = _fuzz_command("devices")


def test_sandboxed_fuzz_case_count(world, capsys, record_property):
    total = sum(COUNTS.values())
    record_property("sandboxed_fuzz_cases", total)
    took = time.monotonic() - STARTED[0] if STARTED else 0.0
    with capsys.disabled():
        print(f"\nsandboxed fuzz: {total} cases refused (exit 2, one line), nothing written outside their scratch, "
              f"canaries unchanged ({', '.join(f'{k}: {n}' for k, n in sorted(COUNTS.items()))}); "
              f"{took:.0f} s, median {1000 * sorted(TIMES)[len(TIMES) // 2] if TIMES else 0:.0f} ms a case; "
              f"canary device {world['CANARY_DEV']}; reached the lab (off here): "
              f"{', '.join(f'{k}: {n}' for k, n in sorted(LAB_OFF.items())) or 'none'}")
    # a process counts the cases it ran: under pytest -n without make test's loadgroup the commands' tests
    # may have run on other workers than this one, so each command counted here is held to its own share
    # (all of them here: EXAMPLES in all; with more asked for, at least the default's 1 000's share)
    assert all(n >= min(SHARE, -(-1000 // len(ORDER))) for n in COUNTS.values()), COUNTS
