"""On a board: one boot's agent, with the host's calls relayed over this program's
stdin and stdout (the SSH session that started it).

    python3 -S -I boardrun.py RUN_DIR

Runs agent.py on RUN_DIR in its own process group and passes its console lines
on. A host call the agent posts (RUN_DIR/host-calls/NAME.req) goes out as one
line, `FLASHBED-CALL NAME {json}`; the host's line `ANSWER NAME {json}` becomes
NAME.resp. `KILL` (or the session closing) stops the boot at once, as a power
cut stops a board: every filesystem on the device under test ($FLASHBED_DEV) is
shut down without flushing its log (FS_IOC_SHUTDOWN, the ioctl xfstests' godown
uses), then the agent's processes are killed.

Standard library only: it runs on the board's python3.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time

FS_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
SHUTDOWN_NOLOGFLUSH = 2


def say(line: str) -> None:
    """A line to the host; lost when the host has gone (a power switch took the SSH session
    down first): what follows, shutting down and killing, must still happen."""
    with LOCK:
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, OSError, ValueError):
            sys.stdout = open(os.devnull, "w")  # nobody listens: nor will the exit's flush fail


LOCK = threading.Lock()


def mounts_of(device: str) -> list[str]:
    """Mount points of `device` (by device number) in this mount namespace."""
    try:
        want = os.stat(device).st_rdev
    except OSError:
        return []
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            major, _, minor = fields[2].partition(":")
            if os.makedev(int(major), int(minor)) == want:
                points.append(fields[4].replace("\\040", " "))
    return points


def shutdown(device: str) -> None:
    for point in mounts_of(device):
        try:
            fd = os.open(point, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.ioctl(fd, FS_IOC_SHUTDOWN, struct.pack("I", SHUTDOWN_NOLOGFLUSH))
                say(f"FLASHBED-BOARD shut down {point} (no log flush)")
            finally:
                os.close(fd)
        except OSError as e:
            say(f"FLASHBED-BOARD cannot shut down {point}: {e.strerror}")


def kill_tree(root: int) -> None:
    """SIGKILL `root` and every process below it (each step runs in a session of its own).
    The tree is frozen (SIGSTOP) first, so nothing forks or is re-parented while it is listed."""
    tree: set[int] = set()
    while True:
        parent: dict[int, int] = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    pass
        found, todo = set(), [root]
        while todo:
            p = todo.pop()
            found.add(p)
            todo += [c for c, pp in parent.items() if pp == p and c not in found]
        found &= set(parent)
        if found <= tree:
            break
        for p in found - tree:
            _signal(p, signal.SIGSTOP)
        tree |= found
    for p in tree:
        _signal(p, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def relay(calls: str, agent: subprocess.Popen) -> None:
    sent: set[str] = set()
    while agent.poll() is None:
        for name in sorted(os.listdir(calls)) if os.path.isdir(calls) else []:
            if name.endswith(".req") and name not in sent:
                sent.add(name)
                with open(os.path.join(calls, name)) as f:
                    say(f"FLASHBED-CALL {name[:-4]} {json.dumps(json.load(f))}")
        time.sleep(0.005)


def answer(calls: str, name: str, body: str) -> None:
    tmp = os.path.join(calls, name + ".resp.tmp")
    with open(tmp, "w") as f:
        f.write(body)
    os.replace(tmp, os.path.join(calls, name + ".resp"))


def main() -> int:
    run = sys.argv[1]
    calls = os.path.join(run, "host-calls")
    os.makedirs(calls, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    agent = subprocess.Popen([sys.executable, "-S", "-I", os.path.join(here, "agent.py"), run],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)

    def pump() -> None:
        for raw in agent.stdout:
            say(raw.decode("utf-8", "replace").rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    threading.Thread(target=relay, args=(calls, agent), daemon=True).start()

    def listen() -> None:
        for line in sys.stdin:
            word, _, rest = line.strip().partition(" ")
            if word == "ANSWER":
                name, _, body = rest.partition(" ")
                answer(calls, name, body)
            elif word == "KILL":
                break
        # KILL, or the host went away: the boot ends now, as a power cut ends it
        if agent.poll() is None:
            shutdown(os.environ.get("FLASHBED_DEV", ""))
            kill_tree(agent.pid)

    threading.Thread(target=listen, daemon=True).start()
    rc = agent.wait()
    time.sleep(0.05)  # the pump's last lines
    say(f"FLASHBED-BOARD agent exit {rc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
