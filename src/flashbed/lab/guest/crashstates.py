"""Guest side of the `crashstates` study: the workload, run once with the device's
write log on, and the loop that checks every crash state of it in the same boot.
The host builds the commands (studies/crashstates.py); their JSON arguments are
the protocol's CrashWorkSpec and CrashCheckSpec.

  work WORK_SPEC    Mount (the real mount helper), run the workload: the powercut
                    study's (powercut.workload) or the B3-style sequences
                    (sequences.py), and unmount. Every record of its log (an
                    intent before an operation, an acknowledgement once its
                    persistence point returned) first puts a mark into the
                    device's write log (a host call) and carries its position
                    ("m"): a crash state that acknowledged the records before
                    position P acknowledged exactly the log lines with m < P.
  check CHECK_SPEC  For each listed state: ask the host to serve it, drop the
                    block device's buffers, recover as after a power cut (mount,
                    verify against the log as acknowledged at that state, unmount,
                    check, repair: powercut.recover_facts) and write one
                    StateFacts line. Stops at a hang (the kernel holds a stuck
                    filesystem; the host sees which states were left).

Standard library only: it runs as `/usr/bin/python3 -S -I crashstates.py ...`.
"""

from __future__ import annotations

import bisect
import fcntl
import json
import os
import re
import sys

if __package__:  # on the host, as flashbed.lab.guest.crashstates
    from . import powercut, sequences
    from .guestlib import ContentCache, call_host, now, push, read_log, run, run_shell, wall_limit
    from .protocol import Call, CrashCheckSpec, CrashWorkSpec, HostCall, RecoverFacts, RecoverSpec, StateFacts, Workload
else:  # in the guest: this directory is not on sys.path by itself (-S -I)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import powercut
    import sequences
    from guestlib import ContentCache, call_host, now, push, read_log, run, run_shell, wall_limit
    from protocol import Call, CrashCheckSpec, CrashWorkSpec, HostCall, RecoverFacts, RecoverSpec, StateFacts, Workload

BLKFLSBUF = 0x1261  # ioctl: write back and drop a block device's buffers
CALL_TIMEOUT = 120.0
KEEP_OUT = 300  # characters kept of a command's output per state
KEEP_KMSG = 20  # kernel lines kept per command per state


def run_dir() -> str:
    return os.environ.get("FLASHBED_RUN", ".")


def host(name: str, call: Call, **args) -> dict:
    """A host call that must succeed (the workload cannot go on without it)."""
    a = call_host(run_dir(), name, HostCall(call, args), CALL_TIMEOUT, keep=False)
    if a is None:
        raise RuntimeError(f"host call {call}: no answer within {CALL_TIMEOUT:.0f} s")
    if not a.ok:
        raise RuntimeError(f"host call {call}: {a.error}")
    return a.data


class MarkedLog(powercut.Log):
    """The workload's log; each record first marks the device's write log."""

    def __init__(self, path: str):
        super().__init__(path)
        self.marks = 0
        self.seconds = 0.0  # spent in the mark calls

    def write(self, rec: dict) -> None:
        t = now()
        label = " ".join([rec["e"], *(f"{k}={rec[k]}" for k in ("n", "seq", "k") if k in rec)])
        pos = host(f"mark{self.marks:06d}", Call.LOG_MARK, label=label)["pos"]
        self.marks += 1
        self.seconds += now() - t
        super().write({**rec, "m": pos})


def sequence_list(w: CrashWorkSpec) -> list:
    return sequences.generate(w.exhaustive, w.sequences, w.max_len, w.seed, tuple(w.skip))


def work(w: CrashWorkSpec) -> dict:
    out: dict = {}
    for c in w.mount:
        r = run(c, w.timeout)
        if not r["status"].ok:
            raise RuntimeError(f"mount failed: {r['out'].strip()[-300:]}")
    d = os.path.expandvars(w.dir)
    os.makedirs(os.path.dirname(d), exist_ok=True)
    log = MarkedLog(os.path.expandvars(w.log))
    t = now()
    if w.workload == Workload.USER:
        os.makedirs(d, exist_ok=True)
        os.sync()  # the empty starting state is durable before the first mark
        log.write({"e": "begin", "dir": d})
        out.update(user_work(w, d, log))
        log.write({"e": "end"})
    elif w.workload == Workload.POWERCUT:
        log.write({"e": "begin", "seed": w.seed, "dir": d})
        out["ops"], out["skipped_fsync"] = powercut.workload(
            d, log, w.seed, max_bytes=w.max_bytes, max_files=w.max_files, max_file=w.max_file, max_ops=w.ops,
            skip_fsync=w.skip_fsync)
    else:
        seqs = sequence_list(w)
        os.makedirs(d, exist_ok=True)
        sequences.lay_out(d, w.seed, len(seqs))
        os.sync()  # the starting state is durable before the first mark
        log.write({"e": "begin", "seed": w.seed, "dir": d, "sequences": len(seqs)})
        out["sequences"] = len(seqs)
        out["ops"] = sequences.run_all(d, w.seed, seqs, log)
        log.write({"e": "end", "ops": out["ops"]})
    out["seconds"] = round(now() - t, 6)
    out["marks"], out["mark_seconds"] = log.marks, round(log.seconds, 6)
    for c in w.umount:
        r = run(c, w.timeout)
        if not r["status"].ok:
            raise RuntimeError(f"umount failed: {r['out'].strip()[-300:]}")
    return out


ACK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ack.py")
WORK_OUT, ACKED = "workload.out", "acked.txt"


def user_env(d: str, **more: str) -> dict[str, str]:
    return {**os.environ, "FLASHBED_MNT": d, **more}


def user_work(w: CrashWorkSpec, d: str, log: MarkedLog) -> dict:
    """The user's workload in `d`; `$FLASHBED_ACK LABEL...` marks an acknowledgement (ack.py).
    Its output goes to the run directory; a workload that fails or overruns stops the cell."""
    ack = f"/usr/bin/python3 -S -I {ACK} {os.path.expandvars(w.log)}"
    with wall_limit(run_dir(), "uwork", "your workload", w.timeout):
        r = run_shell(w.command, w.timeout, cwd=d, env=user_env(d, FLASHBED_ACK=ack))
    status, rc, so, se, secs = r
    with open(os.path.join(run_dir(), WORK_OUT), "wb") as f:
        f.write(so + se)
    if not status.ok:
        tail = (so + se).decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(f"the workload {status} (rc {rc}): {tail[-1] if tail else ''}"[:300])
    acks = sum(1 for r in read_log(os.path.expandvars(w.log)) if r.get("e") == "ack")
    return {"workload_seconds": round(secs, 6), "acks": acks}


def user_check(w: CrashWorkSpec, d: str, recs: list[dict]) -> dict:
    """The user's check on the recovered filesystem: exit 0 = consistent. It reads the labels
    the workload acknowledged before this state from $FLASHBED_ACKED (one a line)."""
    acked = os.path.join(run_dir(), ACKED)
    with open(acked, "w") as f:
        f.writelines(" ".join(r.get("labels", [])) + "\n" for r in recs if r.get("e") == "ack")
    with wall_limit(run_dir(), "ucheck", "your check", w.check_timeout):
        status, rc, so, se, secs = run_shell(w.check, w.check_timeout, cwd=d,
                                             env=user_env(d, FLASHBED_ACKED=acked))
    lines = (so + se).decode("utf-8", "replace").strip().splitlines()
    last = lines[-1][:200] if lines else ""
    v: dict = {"check": {"status": str(status), "rc": rc, "out": last, "seconds": round(secs, 6)},
               "n_garbage": 0, "garbage": []}
    if status.ok:
        return {**v, "n_loss": 0, "loss": []}
    if status.is_hang:
        return {**v, "n_loss": 1, "check_timeout": True,
                "loss": [f"the check did not finish within {w.check_timeout:g} s"]}
    return {**v, "n_loss": 1, "loss": [f"the check failed (exit {rc}): {last}"]}


def verifier(w: CrashWorkSpec):
    """(workload directory, log records up to the crash) -> verdict."""
    if w.workload == Workload.USER:
        return lambda d, recs: user_check(w, d, recs)
    if w.workload == Workload.POWERCUT:
        return powercut.verify_dir
    seqs = sequence_list(w)
    return lambda d, recs: sequences.verify_dir(d, recs, seqs, w.seed)


def trim(facts: RecoverFacts, keep: re.Pattern) -> dict:
    """The facts, small: each command's output tail and the filesystem's own kernel lines."""
    def cut(r: dict | None) -> None:
        if r:
            if "out" in r:
                r["out"] = r["out"][-KEEP_OUT:]
            if "kmsg" in r:
                r["kmsg"] = [ln for ln in r["kmsg"] if keep.search(ln)][-KEEP_KMSG:]
    for r in facts.runs.values():
        cut(r)
    cut(facts.verify)
    for k in ("check", "repair"):
        cut((facts.fsck or {}).get(k))
    if facts.verify:
        facts.verify.pop("ok", None)
        for k in ("loss", "garbage"):
            facts.verify[k] = facts.verify.get(k, [])[:5]
    return facts.to_json()


def drop_buffers(device: str) -> None:
    fd = os.open(device, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, BLKFLSBUF)
    finally:
        os.close(fd)


def split(facts: RecoverFacts) -> dict[str, float]:
    """Where a recovery's time went (s)."""
    def s(tag: str) -> float:
        return float(facts.run(tag).get("seconds") or 0.0)
    return {"mount": s("mount1") + s("mount2"), "verify": float((facts.verify or {}).get("seconds") or 0.0),
            "umount": s("umount1") + s("umount2"), "fsck": float((facts.fsck or {}).get("seconds") or 0.0)}


DUST = "csdust"


def dust(under: str, ranges: list[list[int]], timeout: float) -> None:
    """dm-dust over `under` with `ranges` bad, as /dev/mapper/csdust (the spec's device
    and commands name it already)."""
    blk = 4096 if all(o % 4096 == 0 and n % 4096 == 0 for o, n in ranges) else 512
    under = os.path.realpath(os.path.expandvars(under))  # the lab's device ($FLASHBED_DEV)
    with open(f"/sys/class/block/{os.path.basename(under)}/size") as f:
        sectors = int(f.read())
    # no udev in the lab: make the node if dmsetup did not (as the badblocks study does)
    cmds = [f"dmsetup --noudevsync create {DUST} --table '0 {sectors} dust {under} 0 {blk}' && "
            f"{{ [ -b /dev/mapper/{DUST} ] || dmsetup mknodes; }}"]
    cmds += [f"dmsetup message {DUST} 0 addbadblock {b}" for o, n in ranges for b in range(o // blk, (o + n) // blk)]
    cmds.append(f"dmsetup message {DUST} 0 enable")
    for cmd in cmds:
        r = run(cmd, timeout)
        if not r["status"].ok:
            raise RuntimeError(f"{cmd}: {r['out'].strip()[-300:]}")


def check(c: CrashCheckSpec) -> dict:
    w = CrashWorkSpec.from_json(c.work)
    rspec = RecoverSpec.from_json(c.recover)
    with open(os.path.expandvars(c.states)) as f:
        states = json.load(f)["states"]
    recs = read_log(os.path.expandvars(w.log))
    marks = [r["m"] for r in recs]  # in order: one workload, one log
    judge = verifier(w)
    powercut.Content.source = ContentCache()  # the same versions, state after state
    keep = re.compile(c.kmsg_pattern or ".")
    if c.dust:
        dust(c.dust_under, c.dust, rspec.timeout)
    kmsg = powercut.Kmsg()
    end = len(states) if not c.limit else min(len(states), c.limit)
    out_fd = os.open(os.path.expandvars(c.out), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    checked, stopped = 0, ""
    try:
        for i in range(end):
            st = states[i]
            rec = StateFacts(id=st["id"], kind=st["kind"], acked=st["acked"], damaged=st.get("damaged", 0))
            t0 = now()
            if c.serve:
                a = call_host(run_dir(), f"sw{i:06d}", HostCall(Call.CRASH_SWITCH, {"state": st["id"],
                                                                                    "watchdog": c.watchdog}),
                              CALL_TIMEOUT, keep=False)
                rec.switch = {"error": "no answer"} if a is None else \
                    {"ns": a.data.get("switch_ns")} if a.ok else {"error": a.error}
            t1 = now()
            if not (rec.switch or {}).get("error"):
                drop_buffers(os.path.expandvars(c.device))
                t2 = now()
                upto = recs[:bisect.bisect_left(marks, st["acked"])]
                facts = powercut.recover_facts(rspec, verify=lambda d: judge(d, upto), kmsg=kmsg)
                rec.facts = trim(facts, keep)
                parts = {"switch": t1 - t0, "drop": t2 - t1, **split(facts), "total": now() - t0}
                rec.seconds = {k: round(v, 6) for k, v in parts.items()}
                if facts.hang:
                    stopped = f"state {st['id']}: {facts.hang}"
            os.write(out_fd, (json.dumps(rec.to_json(), separators=(",", ":")) + "\n").encode())
            push(out_fd)  # on the host before the next state: a stuck filesystem may end the lab
            checked += 1
            if stopped:
                break
    finally:
        os.close(out_fd)
    return {"listed": len(states), "checked": checked, "stopped": stopped}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in ("work", "check"):
        print("usage: crashstates.py work WORK_SPEC | check CHECK_SPEC", file=sys.stderr)
        return 2
    if argv[0] == "work":
        res = work(CrashWorkSpec.from_json(json.loads(argv[1])))
    else:
        res = check(CrashCheckSpec.from_json(json.loads(argv[1])))
    print(json.dumps(res))
    sys.stdout.flush()
    if res.get("stopped"):
        os._exit(3)  # a thread stuck in the kernel must not hold us
    return 0


if __name__ == "__main__":
    sys.exit(main())
