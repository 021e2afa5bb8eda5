"""Issue 40: setup builds the emulator, the YAFFS2 daemon and the lab kernel side by side. The first
build to fail stops the others and setup ends on its one line, exit 2; Ctrl-C stops every build,
exit 130; each stage's time is printed. Run on a copy of setup.sh with fake builds (every Debian
package counted as installed, the project environment already made)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.skipif(not shutil.which("setsid"), reason="setup's jobs need setsid (util-linux)"),
              pytest.mark.long]

# a build that runs until it is told to end ($FAKE_<NAME>: ok, fail or run), its pid in $PIDS/NAME and,
# once stopped by a signal, a file $PIDS/NAME.stopped
FAKE_BUILD = """
fake() {
    name=$1 how=$2
    echo $$ >"$PIDS/$name"
    date +%s.%N >"$PIDS/$name.start"
    trap 'echo >"$PIDS/$name.stopped"; exit 143' TERM
    case $how in
        ok) sleep 3 2>/dev/null; date +%s.%N >"$PIDS/$name.end" ;;
        fail) sleep 1; echo "error: the fake $name build failed" >&2; exit 101 ;;
        fail-later) sleep 3; echo "error: the fake $name failed" >&2; exit 1 ;;
        run) while :; do sleep 0.1 2>/dev/null; done ;;  # (dash says "Terminated" of sleep to its 2)
    esac
}
"""

FAKE_PYTHON = """#!/bin/sh
# the project environment's python: its checks pass; the YAFFS2 build and the kernel job are fakes
""" + FAKE_BUILD + """
case "$1 $2" in
    "-m pip") fake pip "$FAKE_PIP" ;;
    "-m flashbed.yaffs2") fake yaffs2 "$FAKE_YAFFS2" ;;
    "-m flashbed.setupjobs") fake kernel "$FAKE_KERNEL" ;;
esac
"""

FAKE_CARGO = """#!/bin/sh
""" + FAKE_BUILD + """
fake emulator "$FAKE_CARGO"
"""


def tool(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def checkout(tmp_path):
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    (root / "emulator").mkdir()
    (root / "src").mkdir()
    shutil.copy(REPO / "scripts" / "setup.sh", root / "scripts" / "setup.sh")
    shutil.copy(REPO / "emulator" / "Cargo.toml", root / "emulator" / "Cargo.toml")
    (root / "pyproject.toml").write_text("")
    venv = root / ".venv"
    tool(venv / "bin" / "python", FAKE_PYTHON)
    (venv / "pyvenv.cfg").write_text("")
    stamp = venv / ".flashbed-installed"
    stamp.write_text("")
    os.utime(root / "pyproject.toml", (time.time() - 60, time.time() - 60))
    bindir = tmp_path / "bin"
    tool(bindir / "dpkg-query", "#!/bin/sh\necho 'install ok installed'\n")
    tool(bindir / "cargo", FAKE_CARGO)
    tool(bindir / "rustc", "#!/bin/sh\necho 'rustc 1.90.0 (fake)'\n")
    pids = tmp_path / "pids"
    pids.mkdir()
    env = {"PATH": f"{bindir}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp_path), "PYTHON": sys.executable,
           "PIDS": str(pids), "FAKE_PIP": "ok", "FAKE_CARGO": "ok", "FAKE_YAFFS2": "ok", "FAKE_KERNEL": "ok"}
    return root, env, pids


def start(checkout, **fakes) -> subprocess.Popen:
    root, env, _ = checkout
    # SIGINT as from a terminal: a suite started as a background job inherits it ignored, and a
    # non-interactive sh cannot trap a signal ignored at its start, so the Ctrl-C tests would fail there
    return subprocess.Popen(["sh", str(root / "scripts" / "setup.sh")], env={**env, **fakes},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def ctrl_c_once_running(checkout, pids: Path) -> tuple[subprocess.Popen, str, str]:
    """setup with its three builds started (each noted its pid), then the terminal's Ctrl-C."""
    r = start(checkout, FAKE_KERNEL="run", FAKE_CARGO="run", FAKE_YAFFS2="run")
    deadline = time.monotonic() + 30
    while not all((pids / n).exists() for n in ("emulator", "yaffs2", "kernel")) and time.monotonic() < deadline:
        time.sleep(0.05)
    r.send_signal(signal.SIGINT)
    out, err = r.communicate(timeout=60)
    return r, out, err


def gone(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
    except ProcessLookupError:
        return True
    return False


def test_the_builds_run_side_by_side_and_each_stage_is_timed(checkout):
    _, _, pids = checkout
    r = start(checkout)
    out, err = r.communicate(timeout=60)
    assert r.returncode == 0, out + err
    assert err == ""
    for name in ("emulator", "yaffs2", "kernel"):
        assert re.search(rf"^setup: {name} ready in \d+ s$", out, re.M), out
    done = out.splitlines()[-1]
    assert re.match(r"setup: done in \d+ s \(packages \d+ s, environment \d+ s, "
                    r"(emulator|yaffs2|kernel) \d+ s, (emulator|yaffs2|kernel) \d+ s, (emulator|yaffs2|kernel) \d+ s;",
                    done), done
    # side by side: every build started before any ended
    builds = ("emulator", "yaffs2", "kernel")
    starts = [float((pids / f"{n}.start").read_text()) for n in builds]
    ends = [float((pids / f"{n}.end").read_text()) for n in builds]
    assert max(starts) < min(ends), (starts, ends)


@pytest.mark.parametrize("failing, words", [("FAKE_CARGO", "setup: cargo build failed (error: the fake emulator"),
                                            ("FAKE_YAFFS2", "error: the fake yaffs2 build failed")])
def test_the_first_build_to_fail_stops_the_others_in_one_line(checkout, failing, words):
    _, _, pids = checkout
    r = start(checkout, FAKE_KERNEL="run", **{failing: "fail"})
    out, err = r.communicate(timeout=60)
    assert r.returncode == 2, out + err
    assert err.count("\n") == 1 and words in err, err
    assert (pids / "kernel.stopped").exists() and gone(pids / "kernel")  # stopped, not left running
    assert "done in" not in out


def test_a_stage_that_fails_after_a_build_failed_adds_no_line(checkout):
    """The emulator builds while pip installs: cargo fails first and says why; pip's failure after it is
    not a second line."""
    root, _, pids = checkout
    os.utime(root / "pyproject.toml")  # newer than the last install: pip runs
    r = start(checkout, FAKE_CARGO="fail", FAKE_PIP="fail-later")
    out, err = r.communicate(timeout=60)
    assert r.returncode == 2, out + err
    assert err.count("\n") == 1 and "setup: cargo build failed" in err, err
    assert (pids / "pip").exists()  # it did run, and fail


def test_a_killed_build_is_named_in_one_line(checkout):
    _, _, pids = checkout
    r = start(checkout, FAKE_KERNEL="run", FAKE_CARGO="run")
    deadline = time.monotonic() + 30
    while not (pids / "kernel").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(int((pids / "kernel").read_text()), signal.SIGKILL)
    out, err = r.communicate(timeout=60)
    assert r.returncode == 2, out + err
    assert err == "setup: the kernel job was killed (exit 137): run make setup again\n", err
    assert (pids / "emulator.stopped").exists() and gone(pids / "emulator")


def test_ctrl_c_stops_every_build_in_one_line(checkout):
    """The terminal's Ctrl-C reaches setup only (each build runs in a session of its own): setup stops
    them all, waits for them, and says the kernel build resumes."""
    _, _, pids = checkout
    r, out, err = ctrl_c_once_running(checkout, pids)
    assert r.returncode == 130, out + err
    assert err.count("\n") == 1 and "setup: interrupted" in err and "resumes" in err, err
    for name in ("emulator", "yaffs2", "kernel"):
        assert (pids / f"{name}.stopped").exists() and gone(pids / name), name


# setsid that marks which job it starts ($PIDS/NAME-started); and setup's `date +%s` made slow just after
# the kernel job started, which is where the parent notes its start time: the first call once the YAFFS2
# job is started waits up to 5 s for the kernel job's start, and if it came, returns 3 s later (once)
MARKING_SETSID = """#!/bin/sh
touch "$PIDS/$5-started"
exec /usr/bin/setsid "$@"
"""
SLOW_DATE = """#!/bin/sh
if [ "$*" = +%s ] && [ -e "$PIDS/yaffs2-started" ] && [ ! -e "$PIDS/slowed" ]; then
    n=0
    while [ ! -e "$PIDS/kernel-started" ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
    if [ -e "$PIDS/kernel-started" ] && mkdir "$PIDS/slowed" 2>/dev/null; then sleep 3; fi
fi
exec /bin/date "$@"
"""


def test_ctrl_c_just_as_a_build_starts_stops_it_too(checkout):
    """Ctrl-C's trap may run between any two of setup's commands. Setup started a job and then counted it
    as running, so a Ctrl-C in between (here while it noted the kernel job's start time, with a `date`
    made slow there) never stopped the kernel build and waited for its end: a Ctrl-C test failed at its
    60 s limit under pytest -n 6 at a load of 10. A job is counted before it starts, and one whose pid
    stop_jobs could not read yet never starts its build."""
    _, env, pids = checkout
    bindir = Path(env["PATH"].split(":")[0])
    tool(bindir / "setsid", MARKING_SETSID)
    tool(bindir / "date", SLOW_DATE)
    r, out, err = ctrl_c_once_running(checkout, pids)
    assert r.returncode == 130, out + err
    assert err.count("\n") == 1 and "setup: interrupted" in err, err
    for name in ("emulator", "yaffs2", "kernel"):
        assert not (pids / name).exists() or ((pids / f"{name}.stopped").exists() and gone(pids / name)), name


def run_job(fake: str, *args: str) -> subprocess.Popen:
    """setup's job `args` (python -m flashbed.setupjobs ARGS), after the code `fake` has replaced its build;
    started as setup starts it: in the background of a shell, Ctrl-C ignored."""
    code = fake + "import sys\nfrom flashbed import setupjobs\nsys.exit(setupjobs.main(sys.argv[1:]))\n"
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


def run_kernel_job(behaviour: str, *args: str) -> subprocess.Popen:
    """setup's kernel job with ensure_kernel replaced: `sleep` (a long build), `fail`, or `say` (prints
    the build asked for: its keyword arguments)."""
    fake = ("import time\n"
            "from flashbed.errors import FlashbedError\n"
            "from flashbed.lab import kernel\n"
            "def fake(**kw):\n"
            "    if BEHAVIOUR == 'fail':\n"
            "        raise FlashbedError('kernel build: make failed (exit 2); see build.log: oops')\n"
            "    if BEHAVIOUR == 'say':\n"
            "        print(sorted(kw.items()), flush=True)\n"
            "        return\n"
            "    print('started', flush=True)\n"
            "    time.sleep(60)\n"
            "kernel.ensure_kernel = fake\n")
    return run_job(f"BEHAVIOUR = {behaviour!r}\n" + fake, "kernel", *args)


def test_the_kernel_job_builds_the_smp_kernel_after_the_time_travel_one_only_for_the_tests():
    """make demo's setup builds one kernel; make test's (--tests) also 7.3 as configured, which the
    suite's tests of two vCPUs boot, so that no test builds one while the suite runs."""
    out, err = run_kernel_job("say").communicate(timeout=30)
    assert out == "[('time_travel', True)]\n", err
    out, err = run_kernel_job("say", "tests").communicate(timeout=30)
    assert out == "[('time_travel', True)]\n[]\n", err
    text = (REPO / "scripts" / "setup.sh").read_text()
    assert '--tests) APT_PACKAGES="$APT_PACKAGES $TEST_PACKAGES"; export FLASHBED_SETUP_TESTS=1' in text
    assert '-m flashbed.setupjobs kernel ${FLASHBED_SETUP_TESTS:+tests}' in text


def test_the_kernel_job_stops_quietly_on_sigterm_and_fails_in_one_line():
    p = run_kernel_job("sleep")
    assert p.stdout.readline() == "started\n"
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 143 and err == "", err
    p = run_kernel_job("fail")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 1
    assert err == "setup: lab kernel: kernel build: make failed (exit 2); see build.log: oops\n", err


def test_the_boards_job_builds_the_suites_boards_and_fails_in_one_line():
    """make test's setup builds the emulated boards the suite boots (busybox, then Debian), once."""
    text = (REPO / "scripts" / "setup.sh").read_text()
    fake = ("from flashbed.errors import FlashbedError\n"
            "from flashbed.boards import qemu\n"
            "def fake(recipe, say=print):\n"
            "    print(recipe.name, flush=True)\n"
            "    if FAIL and recipe.name == 'debian':\n"
            "        raise FlashbedError('building the emulated board: stage 2 failed')\n"
            "qemu.build = fake\n")
    for fail in (False, True):
        p = run_job(f"FAIL = {fail}\n" + fake, "boards")
        out, err = p.communicate(timeout=60)
        assert out == "busybox\ndebian\n", err
        assert (p.returncode, err) == ((1, "setup: emulated boards: building the emulated board: stage 2 failed\n")
                                       if fail else (0, "")), err
    assert 'boards) exec "$VENV/bin/python" -m flashbed.setupjobs boards ;;' in text
    assert re.search(r'FLASHBED_SETUP_TESTS:-}" ]; then\n(    start_job .*\n){2}else', text)
