"""Guest side of the `corruption` study (and of `badblocks`, which writes and
inspects its files the same way): files rewritten in rounds while dm-flakey
corrupts writes, then each file read back and classified.

Standard library only: it runs as `/usr/bin/python3 -S -I corruption.py ...`
inside the lab.

  cwork DIR STATE --count N --size B --seed S --duration T --round R
                          Rewrite N files of B bytes, then sync, in rounds for T
                          seconds; STATE says what each file should hold.
  inspect DIR STATE --count N --size B --seed S
                          Per file: intact / zeroed / truncated / io-error / stale /
                          silently-corrupted / missing (protocol.FileState).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import time

if __package__:  # on the host, as flashbed.lab.guest.corruption
    from .guestlib import (
        BLOCK,
        LIST_LIMIT,
        content,
        mount_options,
        now,
        probe_write,
        read_file,
        write_all,
        write_json_atomic,
    )
    from .protocol import FileState
else:  # in the guest: this directory is not on sys.path by itself (-S -I)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from guestlib import (
        BLOCK,
        LIST_LIMIT,
        content,
        mount_options,
        now,
        probe_write,
        read_file,
        write_all,
        write_json_atomic,
    )
    from protocol import FileState


def cwork(args: argparse.Namespace) -> int:
    """Rewrite COUNT files of SIZE bytes, then sync, round after round, for DURATION
    seconds (a round starts at most every ROUND seconds); each round's content
    differs, so an old round's bytes are told apart from the last one's."""
    os.makedirs(args.dir, exist_ok=True)
    state = {"rounds": 0, "last": {}, "attempted": {}, "errors": [], "ro": False, "sync_seconds": []}
    t0 = now()
    r = 0
    while not state["errors"]:
        r += 1
        start = now()
        for i in range(args.count):
            name = f"c{i:04d}"
            state["attempted"][name] = r
            try:
                write_all(os.path.join(args.dir, name), content(args.seed, name, r, args.size),
                          os.O_WRONLY | os.O_CREAT | os.O_TRUNC, False)
                state["last"][name] = r
            except OSError as e:
                state["errors"].append(f"round {r} {name}: {errno.errorcode.get(e.errno, e.errno)}")
                state["ro"] = e.errno == errno.EROFS
                break
        t = now()
        os.sync()
        state["sync_seconds"].append(round(now() - t, 6))
        state["rounds"] = r
        write_json_atomic(args.state, state)
        if now() - t0 >= args.duration:
            break
        time.sleep(max(0.0, start + args.round - now()))
    state["seconds"] = round(now() - t0, 6)
    write_json_atomic(args.state, state)
    print(json.dumps({k: v for k, v in state.items() if k not in ("last", "attempted", "sync_seconds")}))
    return 0


def classify_file(actual: bytes | None, err: str, want: bytes, older: tuple = ()) -> FileState:
    """intact / io-error / missing / truncated / zeroed / stale (an older round's
    bytes) / silently-corrupted (other bytes, and no error said so)."""
    if err:
        return FileState.IO_ERROR
    if actual is None:
        return FileState.MISSING
    if actual == want:
        return FileState.INTACT
    if len(actual) < len(want):
        return FileState.TRUNCATED
    if any(actual == o for o in older):
        return FileState.STALE
    for o in range(0, len(actual), BLOCK):
        a = actual[o:o + BLOCK]
        if a != want[o:o + BLOCK] and a.count(0) == len(a):
            return FileState.ZEROED
    return FileState.SILENTLY_CORRUPTED


def inspect(args: argparse.Namespace) -> int:
    try:
        with open(args.state) as f:
            state = json.load(f)
    except (OSError, ValueError):
        state = {"attempted": {}}
    counts: dict[str, int] = {}
    detail = []
    for i in range(args.count):
        name = f"c{i:04d}"
        r = state["attempted"].get(name)
        if r is None:
            continue  # never written: nothing to expect
        actual, err = read_file(os.path.join(args.dir, name))
        older = ()
        if actual is not None and len(actual) == args.size:
            older = tuple(content(args.seed, name, k, args.size) for k in range(max(1, r - 3), r))
        c = classify_file(actual, err, content(args.seed, name, r, args.size), older)
        counts[c] = counts.get(c, 0) + 1
        if c is not FileState.INTACT and len(detail) < LIST_LIMIT:
            detail.append(f"{name}: {c}{' ' + err if err else ''}")
    opts = mount_options(args.mnt) or []
    ro = "ro" in opts
    print(json.dumps({"counts": counts, "detail": detail, "ro": ro,
                      "probe": "EROFS" if ro else probe_write(args.mnt)}))
    return 0



def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="corruption")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("cwork", "inspect"):
        s = sub.add_parser(name)
        s.add_argument("dir")
        s.add_argument("state")
        s.add_argument("--count", type=int, required=True)
        s.add_argument("--size", type=int, required=True)
        s.add_argument("--seed", type=int, required=True)
        if name == "cwork":
            s.add_argument("--duration", type=float, default=10.0)
            s.add_argument("--round", type=float, default=1.0)
        else:
            s.add_argument("--mnt", default="/mnt")
    args = p.parse_args(argv)
    return {"cwork": cwork, "inspect": inspect}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
