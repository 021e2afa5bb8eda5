"""flashbed guest agent: runs inside the lab kernel as the last stage of init.

Reads `steps.json` from the shared run directory (protocol.Step, checked for the
protocol's version), runs each step as a shell command with its own timeout,
timing it with CLOCK_MONOTONIC, or asks the host (protocol.HostCall), and
rewrites `result.json` atomically after every step so that a killed lab still
leaves everything that finished. Then powers the lab kernel off.

Standard library only: it runs on the host's Debian python3 with -S -s -P (-I
without -E: init.sh gives it a fixed hash seed), and must not import flashbed
(the guest sees the host's files, not its venv).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time

# run as `python3 -S -I`: this directory is not on sys.path by itself
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guestlib  # noqa: E402
from guestlib import now  # noqa: E402
from protocol import AgentStatus, Call, HostCall, Step, StepStatus, read_env, read_steps  # noqa: E402

SCHEMA = 1
OUTPUT_LIMIT = 256 * 1024  # bytes kept of each step's stdout/stderr (the tail)
RB_POWER_OFF = 0x4321FEDC


def write_json_atomic(path: str, data: dict) -> None:
    guestlib.write_json_atomic(path, data, indent=1)


def tail(data: bytes) -> str:
    if len(data) > OUTPUT_LIMIT:
        data = b"[...truncated...]\n" + data[-OUTPUT_LIMIT:]
    return data.decode("utf-8", "replace")


def host_call(step: Step, run_dir: str, seq: int) -> dict:
    """Ask the host to do something (e.g. sample the emulator's statistics).

    The request is a file in the shared run directory; the host answers with a
    response file. The answer becomes the step's stdout (JSON).
    """
    started = now()
    args = dict(step.args)
    if step.host in (Call.RESET_STATS, Call.STATS) and (cpu := guestlib.cpu_counts()) is not None:
        # where the guest's clock and its CPU charge stand: the host takes a phase's
        # share of guest time charged to the CPU from two of these
        args["guest"] = {"ns": time.clock_gettime_ns(time.CLOCK_MONOTONIC), "cpu_ns": cpu.get("charged_ns", 0)}
    answer = guestlib.call_host(run_dir, f"{seq:04d}", HostCall(step.host, args), float(step.timeout))
    if answer is None:
        return {"name": step.name, "cmd": "host:" + step.host, "status": StepStatus.TIMEOUT,
                "rc": None, "seconds": round(now() - started, 6), "started": round(started, 6),
                "stdout": "", "stderr": "host did not answer"}
    return {"name": step.name, "cmd": "host:" + step.host,
            "status": StepStatus.OK if answer.ok else StepStatus.FAILED,
            "rc": 0 if answer.ok else 1, "seconds": round(now() - started, 6), "started": round(started, 6),
            "stdout": json.dumps(answer.data), "stderr": answer.error}


# in virtual time fio must time with clock_gettime: its default clock source, the
# CPU's TSC, runs in wall-clock time against the guest's virtual clock (fio hangs)
VIRTUAL_BIN = "/tmp/flashbed-virtual-bin"
FIO_WRAPPER = '#!/bin/sh\nexec /usr/bin/fio --clocksource=clock_gettime "$@"\n'


def step_path() -> str:
    path = "/usr/sbin:/usr/bin:/sbin:/bin"
    if not guestlib.virtual_time():
        return path
    fio = os.path.join(VIRTUAL_BIN, "fio")
    if not os.path.exists(fio):
        os.makedirs(VIRTUAL_BIN, exist_ok=True)
        with open(fio + ".tmp", "w") as f:
            f.write(FIO_WRAPPER)
        os.chmod(fio + ".tmp", 0o755)
        os.replace(fio + ".tmp", fio)
    return f"{VIRTUAL_BIN}:{path}"


def run_step(step: Step, run_dir: str, layout: dict[str, str], seq: int = 0) -> dict:
    env = dict(os.environ)
    env.update({"FLASHBED_RUN": run_dir, "PATH": step_path(), "HOME": "/root",
                "LC_ALL": "C.UTF-8"})
    env.update(layout)  # the lab's layout: FLASHBED_DEV, FLASHBED_TOOLS
    env.update({k: str(v) for k, v in step.env.items()})
    # the limit's host calls stay outside what the step measures (its guest time and CPU charge)
    with guestlib.wall_limit(run_dir, f"w{seq:04d}", f"step '{step.name}'", float(step.timeout)):
        started = now()
        before = guestlib.cpu_counts()
        status, rc, out, err, elapsed = guestlib.run_shell(step.cmd, float(step.timeout), cwd=run_dir, env=env)
        after = guestlib.cpu_counts()
    rec = {
        "name": step.name,
        "cmd": step.cmd,
        "status": status,
        "rc": rc,
        "seconds": round(elapsed, 6),
        "started": round(started, 6),
        "stdout": tail(out),
        "stderr": tail(err),
    }
    if before is not None and after is not None:  # virtual time: the step's guest time charged to the CPU
        rec["cpu_seconds"] = round((after.get("charged_ns", 0) - before.get("charged_ns", 0)) / 1e9, 9)
    return rec


def main() -> int:
    run_dir = sys.argv[1]
    result_path = os.path.join(run_dir, "result.json")
    result = {"schema": SCHEMA, "status": AgentStatus.RUNNING, "steps": [], "uname": os.uname().release}
    try:
        with open(os.path.join(run_dir, "steps.json")) as f:
            data = json.load(f)
        steps, layout = read_steps(data), read_env(data)
        print(f"FLASHBED-AGENT READY {now():.6f}", flush=True)
        result["ready_monotonic"] = now()
        write_json_atomic(result_path, result)
        for seq, step in enumerate(steps):
            print(f"FLASHBED-AGENT STEP {step.name}", flush=True)
            rec = host_call(step, run_dir, seq) if step.host else run_step(step, run_dir, layout, seq)
            result["steps"].append(rec)
            write_json_atomic(result_path, result)
            ended = AgentStatus.after(StepStatus(rec["status"]), step.may_fail)
            if ended is not None:
                result["status"] = ended
                break
        else:
            result["status"] = AgentStatus.DONE
    except Exception as e:  # the agent must always leave a result and halt
        result["status"] = AgentStatus.AGENT_ERROR
        result["error"] = f"{type(e).__name__}: {e}"
    result["finished_monotonic"] = now()
    try:
        write_json_atomic(result_path, result)
    except OSError as e:
        print(f"FLASHBED-AGENT cannot write result: {e}", flush=True)
    print(f"FLASHBED-AGENT DONE {result['status']}", flush=True)
    return 0


def pid1() -> None:
    """As the lab's PID 1: run the agent in a child and reap every orphan.

    Daemons that steps start (nilfs_cleanerd) are re-parented to PID 1; left
    unreaped they stay zombies that still "exist", and umount.nilfs2 then waits
    for them in vain.
    """
    agent = os.fork()
    if agent == 0:
        try:
            main()
        finally:
            os._exit(0)
    while True:
        try:
            pid, _ = os.wait()
        except ChildProcessError:
            break
        if pid == agent:
            break
    os.sync()
    ctypes.CDLL(None, use_errno=True).reboot(RB_POWER_OFF)


if __name__ == "__main__":
    # only as the lab's PID 1 does it power off: run anywhere else (a unit test
    # on the host, as root) it must never touch the machine
    if os.getpid() == 1:
        pid1()
    else:
        main()
