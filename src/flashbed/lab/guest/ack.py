"""`$FLASHBED_ACK LABEL...`: a user workload's acknowledgement in a crash-state cell.

The workload calls it right after an operation it counts on returned (a COMMIT, an
fsync): the device's write log gets a mark here, and the workload's log (the first
argument) a record {"e": "ack", "labels": [...], "m": position}. Every crash state
at or after the mark acknowledged it: the check finds its labels in $FLASHBED_ACKED.
Call it from one process at a time (the records must be in the order of their marks).

Standard library only: it runs as `/usr/bin/python3 -S -I ack.py LOG LABEL...`.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from guestlib import call_host, push  # noqa: E402
from protocol import Call, HostCall  # noqa: E402

TIMEOUT = 120.0


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: $FLASHBED_ACK LABEL... (e.g. committed=17)", file=sys.stderr)
        return 2
    log, labels = argv[0], argv[1:]
    name = f"ack-{os.getpid()}-{time.monotonic_ns()}"
    a = call_host(os.environ.get("FLASHBED_RUN", "."), name,
                  HostCall(Call.LOG_MARK, {"label": "ack " + " ".join(labels)}), TIMEOUT, keep=False)
    if a is None or not a.ok:
        print(f"flashbed ack: the host did not mark the write log: {a.error if a else 'no answer'}", file=sys.stderr)
        return 1
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        rec = {"e": "ack", "labels": labels, "m": a.data["pos"], "t": round(time.time(), 6)}
        os.write(fd, (json.dumps(rec, separators=(",", ":")) + "\n").encode())
        push(fd)
    finally:
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
