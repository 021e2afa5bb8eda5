#!/usr/bin/env python3
"""Crash states of a real filesystem, checked in one lab boot (a by-hand check
of the emulator's write log until the crashstates study exists).

The emulator's write log is on from a blank device; the lab makes the
filesystem, the host marks the workload's start, the lab writes and fsyncs
files; the host stops the log and lists the crash states; then, still in the
same boot, for every state the guest asks the host to serve it, drops its
buffers, runs fsck -n, mounts (journal replay goes to the state's scratch
overlay), counts intact files, unmounts and runs fsck -n again. Prints the
outcome per kind of state and states per second with the time split.

  PYTHONPATH=src python3 scripts/crashstates-lab.py [--preset emmc-8g] [--capacity 128M]
      [--files 24] [--subsets 2] [--tears 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from flashbed.devices.emulator import Emulator, EmulatorSpec
from flashbed.lab import uml
from flashbed.lab.target import BlockDevice, BootSpec, Step

REPO = Path(__file__).resolve().parents[1]

# Runs in the guest (python3 -S -I): the workload, and the loop over states.
GUEST = r'''
import json, os, subprocess, sys, time
run, mode = sys.argv[1], sys.argv[2]
DEV, MNT = "/dev/ubda", "/tmp/cs-mnt"

def content(i):
    return (b"file %05d " % i) * (410 * (i % 4 + 1))

def sh(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr

def host(seq, call, **args):
    d = os.path.join(run, "host-calls")
    os.makedirs(d, exist_ok=True)
    req, resp = os.path.join(d, "cs-%06d.req" % seq), os.path.join(d, "cs-%06d.resp" % seq)
    with open(req + ".tmp", "w") as f:
        json.dump({"call": call, "args": args}, f)
    os.replace(req + ".tmp", req)
    while not os.path.exists(resp):
        time.sleep(0.002)
    with open(resp) as f:
        a = json.load(f)
    if not a.get("ok"):
        raise SystemExit("host: " + a.get("error", "?"))
    return a["data"]

os.makedirs(MNT, exist_ok=True)
if mode == "work":
    n = int(sys.argv[3])
    rc, out = sh("mount", DEV, MNT)
    assert rc == 0, out
    for i in range(n):
        p = os.path.join(MNT, "f%05d" % i)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, content(i))
        os.fsync(fd)
        os.close(fd)
        dfd = os.open(MNT, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
    rc, out = sh("umount", MNT)
    assert rc == 0, out
else:
    states = json.load(open(os.path.join(run, "states.json")))["states"]
    out = []
    for k, s in enumerate(states):
        r = {"id": s["id"], "kind": s["kind"]}
        t0 = time.monotonic()
        host(k, "switch", state=s["id"])
        t1 = time.monotonic()
        sh("blockdev", "--flushbufs", DEV)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        t2 = time.monotonic()
        r["fsck"], _ = sh("fsck.ext4", "-fn", DEV)
        t3 = time.monotonic()
        r["mount"], msg = sh("mount", DEV, MNT)
        r["files"] = r["intact"] = r["io_errors"] = 0
        if r["mount"] == 0:
            for name in os.listdir(MNT):
                if name.startswith("f"):
                    r["files"] += 1
                    try:
                        with open(os.path.join(MNT, name), "rb") as f:
                            r["intact"] += f.read() == content(int(name[1:]))
                    except OSError:
                        r["io_errors"] += 1
            sh("umount", MNT)
        else:
            r["mount_error"] = msg.strip()[-200:]
        t4 = time.monotonic()
        r["fsck_after"], _ = sh("fsck.ext4", "-fn", DEV)
        t5 = time.monotonic()
        r["t"] = {"switch": t1 - t0, "drop": t2 - t1, "fsck": t3 - t2, "mount_verify": t4 - t3, "fsck_after": t5 - t4}
        out.append(r)
    with open(os.path.join(run, "checked.json"), "w") as f:
        json.dump(out, f)
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="emmc-8g")
    ap.add_argument("--capacity", default="128M")
    ap.add_argument("--files", type=int, default=24)
    ap.add_argument("--subsets", type=int, default=2)
    ap.add_argument("--tears", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    run = args.out or Path(tempfile.mkdtemp(prefix="flashbed-crashstates-"))
    run.mkdir(parents=True, exist_ok=True)
    (run / "guest.py").write_text(GUEST)
    cap = int(args.capacity[:-1]) << 20 if args.capacity.endswith("M") else int(args.capacity)
    spec = EmulatorSpec(preset=REPO / "presets" / f"{args.preset}.toml", state_dir=run / "state",
                        mount_dir=run / "mnt", control=run / "ctl.sock", capacity=cap, pace="none", seed=1)
    listing_at: list[float] = []

    with Emulator(spec) as emu:
        emu.log_start(run / "crashlog")

        def host(call: str, a: dict) -> object:
            if call == "mark":
                return emu.log_mark(a["label"])
            if call == "states":
                stop = emu.log_stop()
                t = time.monotonic()
                listing = emu.crash_states(subsets=args.subsets, tears=args.tears)
                listing_at.append(time.monotonic() - t)
                states = [{"id": s.id, "kind": s.kind.value} for s in listing.states]
                (run / "states.json").write_text(json.dumps({"states": states}))
                return {"records": stop["records"], "flushes": stop["flushes"], "states": len(states)}
            if call == "switch":
                return emu.crash_switch(a["state"])["switch_ns"]
            raise ValueError(call)

        py = '/usr/bin/python3 -S -I "$FLASHBED_RUN/guest.py" "$FLASHBED_RUN"'  # the run directory, in the guest
        steps = (
            Step("mkfs", "mkfs.ext4 -q -F /dev/ubda", timeout=120),
            Step("mark", host="mark", args={"label": "workload"}),
            Step("work", f"{py} work {args.files}", timeout=300),
            Step("states", host="states", timeout=120),
            Step("check", f"{py} check", timeout=3600),
        )
        disks = (BlockDevice(Path(emu.device_path), shared=True),)
        res = uml.boot(BootSpec(run_dir=run, steps=steps, disks=disks, timeout=4000), host=host)
        for s in res.steps:
            print(f"{s.name}: {s.status} in {s.seconds:.2f} s {s.stdout.strip()[:200]} {s.stderr.strip()[-300:]}")
        if not res.ok:
            print(res.console_log[-3000:] if isinstance(res.console_log, str) else "", file=sys.stderr)
            print(f"lab: {res.status}: {res.error}", file=sys.stderr)
            return 1
        check = res.step("check")
        emu.crash_switch("live")
    checked = json.loads((run / "checked.json").read_text())
    by_kind: dict[str, Counter] = {}
    for r in checked:
        outcome = ("fsck-clean" if r["fsck"] == 0 else f"fsck-rc{r['fsck']}") + \
                  (" mounts" if r["mount"] == 0 else " no-mount") + \
                  (f" {r['io_errors']}-files-EIO" if r["io_errors"] else "") + \
                  (" clean-after" if r["fsck_after"] == 0 else f" after-rc{r['fsck_after']}")
        by_kind.setdefault(r["kind"], Counter())[outcome] += 1
    for kind, c in by_kind.items():
        print(f"{kind:7} {sum(c.values()):4} states: " + ", ".join(f"{n} {o}" for o, n in c.most_common()))
    flush_files = [(r["files"], r["intact"]) for r in checked if r["kind"] == "flush"]
    print(f"flush states: intact files per state {[i for _, i in flush_files]}")
    n = len(checked)
    parts = {k: statistics.median(r["t"][k] for r in checked) for k in checked[0]["t"]}
    total = check.seconds if check else float("nan")
    print(f"{n} states checked in {total:.1f} s in one boot: {n / total:.2f} states/s, {3600 * n / total:.0f} states/hour "
          f"(one lab, pace none, {args.preset} @ {args.capacity}); listing took {listing_at[0] * 1e3:.0f} ms")
    print("median per state: " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in parts.items()))
    print(f"run directory: {run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
