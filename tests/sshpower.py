"""The power switch of the localhost "board" (tests/sshboard.py), for --power-cmd:

    python3 tests/sshpower.py SSHD_DIR DELAY {on|off|cycle}

This machine cannot lose power, so this is the nearest honest thing, and no more:
  off    SIGSTOPs the boot's processes below the private sshd (the workload and its
         agent: no write or acknowledgement after this command returns), then SIGKILLs
         the sshd (its listener and every session process): the SSH session of the
         running boot drops at once, as it drops when a board dies. The boot's own
         side (boardrun.py, left running) sees its session gone and does what it
         does when a session ends: shuts the filesystem on the device down without
         flushing its log (FS_IOC_SHUTDOWN, NOLOGFLUSH), then SIGKILLs the workload.
         What the filesystem had not written to the device stays unwritten.
  on     starts the sshd again DELAY seconds later, in the background, so flashbed's
         SSH retry (a board still booting refuses connections) is exercised.
  cycle  off, then on.
Not simulated: the device's own volatile cache and the host's page cache of the loop
device's backing file (both survive: the host kernel keeps running), a kernel that
stops mid-write, a board's real boot. The workload's log on the "board" is fsync'ed as
on a real board, but this host never loses it.
"""
import os
import signal
import subprocess
import sys
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(ppid, []).append(int(d))
    return out


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def off(where: Path) -> None:
    try:
        listener = int((where / "sshd.pid").read_text())
    except (OSError, ValueError):
        return  # already off
    kids = children()
    todo, sshd, boot = [listener], [], []
    while todo:  # the listener and the sshd processes below it; the boot's own processes below those
        p = todo.pop()
        if p == listener or comm(p).startswith("sshd"):
            sshd.append(p)
        else:
            boot.append(p)
        todo += kids.get(p, [])
    # the workload stops now (the power is off when this command returns); boardrun.py
    # itself, which is to shut the filesystem down once its session is gone, runs on
    for p in boot:
        try:
            if b"boardrun.py" not in Path(f"/proc/{p}/cmdline").read_bytes():
                os.kill(p, signal.SIGSTOP)
        except (OSError, ProcessLookupError):
            pass
    for p in sshd:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    (where / "sshd.pid").unlink(missing_ok=True)


def on(where: Path, delay: float) -> None:
    # daemonised: sshd writes its pid file (sshd_config PidFile), which `off` and the test read
    subprocess.Popen(["sh", "-c", f"sleep {delay}; exec {SSHD} -f {where / 'sshd_config'}"],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=open(where / "sshd.log", "a"))


def main() -> int:
    where, delay, action = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    if action in ("off", "cycle"):
        off(where)
    if action in ("on", "cycle"):
        on(where, delay)
    if action not in ("on", "off", "cycle"):
        print(f"unknown action {action}", file=sys.stderr)
        return 2
    (where / "power.log").open("a").write(action + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
