"""Host-call round trip: how long a guest program waits for the host's answer.

  flashbed bench hostcall [--calls 300]

One lab boot; a guest program makes --calls calls of a call the host answers at
once, and prints the median and 90th percentile round trip (request written,
answer read) and the split: writing the request, waiting for the answer.
Every study's host calls (statistics, power cuts, crash-state switches) pay it.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from ..errors import FlashbedError
from ..lab import uml
from ..lab.boundary import BootSpec, Step
from ..lab.kernel import ensure_kernel
from ..shellwords import TOOLS

GUEST = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import guestlib
from protocol import HostCall
run, n = sys.argv[2], int(sys.argv[3])
post, wait, total = [], [], []
for i in range(n):
    t0 = time.monotonic()
    resp = guestlib.post_call(run, "b%06d" % i, HostCall("noop"))
    t1 = time.monotonic()
    guestlib.wait_file(resp, t1 + 30)
    json.load(open(resp))
    t2 = time.monotonic()
    post.append(t1 - t0); wait.append(t2 - t1); total.append(t2 - t0)
q = lambda x, f: sorted(x)[int(len(x) * f)] * 1e3
print(json.dumps({"median_ms": q(total, .5), "p90_ms": q(total, .9), "post_ms": q(post, .5), "wait_ms": q(wait, .5)}))
"""


def bench(calls: int, out=sys.stdout) -> dict:
    kernel = ensure_kernel()
    with tempfile.TemporaryDirectory(prefix="flashbed-bench-hc-") as tmp:
        (Path(tmp) / "hc.py").write_text(GUEST)
        cmd = (f"/usr/bin/python3 -S -I \"$FLASHBED_RUN/hc.py\" {TOOLS} "
               f"\"$FLASHBED_RUN\" {calls}")
        res = uml.boot(BootSpec(run_dir=Path(tmp), steps=(Step("calls", cmd, timeout=600),), timeout=700),
                       kernel, host=lambda call, args: {})
        s = res.step("calls")
        if not res.ok or s is None:
            raise FlashbedError(f"host-call benchmark: lab {res.status}: {res.error or (s and s.stderr[-300:])}")
        row = json.loads(s.stdout.strip().splitlines()[-1])
    print(f"host-call round trip ({calls} calls, one lab, kernel {kernel.release}): median {row['median_ms']:.2f} ms, "
          f"p90 {row['p90_ms']:.2f} ms (writing the request {row['post_ms']:.2f} ms, waiting for the answer "
          f"{row['wait_ms']:.2f} ms)", file=out, flush=True)
    return row
