"""Boot the real lab kernel."""
import pytest

from flashbed.lab.boundary import BlockDevice, BootSpec, Step
from flashbed.lab.uml import boot

pytestmark = [pytest.mark.lab, pytest.mark.spread]


def test_guest_runs_steps_with_a_readonly_host_root_and_writable_etc(kernel, tmp_path):
    r = boot(BootSpec(run_dir=tmp_path, steps=(
        Step("uname", "uname -r"),
        Step("root-ro", "touch /usr/flashbed-must-fail", may_fail=True),
        Step("etc-rw", "echo x > /etc/flashbed-probe && cat /etc/flashbed-probe"),
        Step("run-dir", "echo from-guest > $FLASHBED_RUN/out.txt"),
        Step("python", "/usr/bin/python3 -c 'print(6*7)'"),
    ), timeout=120), kernel)
    assert r.ok, (r.status, r.error, r.console_log)
    assert r.step("uname").stdout.strip() == kernel.release
    assert r.step("root-ro").rc != 0
    assert r.step("etc-rw").stdout.strip() == "x"
    assert (tmp_path / "out.txt").read_text() == "from-guest\n"
    assert r.step("python").stdout.strip() == "42"
    assert r.boot_seconds is not None and r.boot_seconds < r.total_seconds


def test_a_hung_lab_is_killed_and_recorded_with_its_console(kernel, tmp_path):
    r = boot(BootSpec(run_dir=tmp_path, steps=(Step("ok", "true"), Step("stuck", "sleep 600", timeout=900)),
                      timeout=8), kernel)
    assert r.status == "hang"
    assert "stuck" in r.error
    assert [s.name for s in r.steps] == ["ok"]  # what finished before is kept
    assert "FLASHBED-AGENT STEP stuck" in open(r.console_log).read()


def test_discard_reaches_the_backing_file(kernel, tmp_path):
    """mkfs.ext4 discards the device by default: TRIM must work, not panic."""
    img = tmp_path / "d.img"
    img.write_bytes(b"\xff" * (64 << 20))  # every block allocated
    before = img.stat().st_blocks
    r = boot(BootSpec(run_dir=tmp_path, steps=(Step("mkfs", "mkfs.ext4 -F -q /dev/ubda"),),
                      disks=(BlockDevice(img),), timeout=120), kernel)
    assert r.ok, (r.status, r.error, r.console_log)
    # mke2fs discards the whole device, then writes a few MiB of metadata
    assert img.stat().st_blocks < before / 2


def test_guest_host_calls_are_answered(kernel, tmp_path):
    seen = []

    def handler(call, args):
        seen.append((call, args))
        if call == "boom":
            raise RuntimeError("no such thing")
        return {"echo": args["x"] * 2}

    r = boot(BootSpec(run_dir=tmp_path, steps=(
        Step("ask", host="double", args={"x": 21}),
        Step("bad", host="boom", may_fail=True),
    ), timeout=60), kernel, host=handler)
    assert r.ok, (r.status, r.error)
    assert r.step("ask").stdout.strip() == '{"echo": 42}'
    assert r.step("bad").status == "failed" and "no such thing" in r.step("bad").stderr
    assert seen == [("double", {"x": 21}), ("boom", {})]


def test_a_boot_leaves_no_uml_directory_and_a_killed_one_s_is_swept_next_time(kernel, tmp_path):
    """Issue 42, 13: UML was booted without uml_dir=, so every lab stopped by a signal left
    ~/.uml/<umid>/. Each boot's directory is its own (lab/umldir.py): gone after the boot; one
    left by a flashbed killed with SIGKILL is removed by the next boot."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from flashbed import owner
    from flashbed.lab import umldir

    home = Path.home() / ".uml"
    before = set(home.iterdir()) if home.is_dir() else set()
    mine = set(umldir.base().glob(umldir.PREFIX + "*"))
    r = boot(BootSpec(run_dir=tmp_path / "one", steps=(Step("s", "true"),), timeout=120),
             kernel)
    assert r.ok, r.error
    cd, cmd = (tmp_path / "one" / "console.log").read_text().splitlines()[:2]
    # the lab kernel runs in its own directory (lab/labview.py), which keeps its pid file and socket
    assert cd.startswith(f"$ cd {umldir.base() / umldir.PREFIX}") and " uml_dir=. " in cmd
    assert (set(home.iterdir()) if home.is_dir() else set()) == before
    # a flashbed killed mid-boot (SIGKILL: nothing of it runs again; its lab dies with it)
    code = ("import sys; from pathlib import Path; from flashbed.lab.uml import boot; from flashbed.lab.kernel import "
            "ensure_kernel; from flashbed.lab.boundary import BootSpec, Step; "
            "boot(BootSpec(run_dir=Path(sys.argv[1]), steps=(Step('s', 'sleep 600'),), timeout=900), "
            "ensure_kernel(time_travel=True).in_real_time())")
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "two")], env=dict(os.environ))
    deadline = time.monotonic() + 120
    def its_own() -> set:  # the killed process's directory, not one of a lab another test worker runs meanwhile
        return {d for d in set(umldir.base().glob(umldir.PREFIX + "*")) - mine
                if (d / owner.MARK).is_file() and f" {p.pid} " in (d / owner.MARK).read_text()}
    while not (new := its_own()):
        assert time.monotonic() < deadline and p.poll() is None, "the killed boot made no UML directory"
        time.sleep(0.2)
    time.sleep(2)  # UML up: its umid directory made
    p.send_signal(signal.SIGKILL)
    p.wait()
    (left,) = new
    assert left.is_dir()
    time.sleep(1)  # the lab dies with its parent (PR_SET_PDEATHSIG)
    umldir._swept.clear()  # this process's first boot already swept: as a new flashbed's would
    r = boot(BootSpec(run_dir=tmp_path / "three", steps=(Step("s", "true"),), timeout=120), kernel)
    assert r.ok and not left.exists()
    assert (set(home.iterdir()) if home.is_dir() else set()) == before
