"""Precondition a filesystem for a lifetime phase: fill it to FILL % of its blocks with a
file population of the sizes an embedded system keeps (log-uniform from 4 KiB to 8 MiB:
many small configuration and log files, fewer large media and package files, in
directories of 64), then churn it: CHURN rounds of deleting a random quarter of the files
and writing new ones until the fill is back. The device then has live data spread over
it and freed blocks scattered between, as a used one has; the workload that follows
meets garbage collection instead of a blank device.

  age.py DIR FILL SEED CHURN    prints one JSON line: files, bytes written, fill reached

Standard library only: it runs as `/usr/bin/python3 -S -I age.py ...` in the lab.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys

MIN_SIZE, MAX_SIZE = 4 << 10, 8 << 20
PER_DIR = 64
CHUNK = 1 << 20


def used_fraction(path: str) -> float:
    st = os.statvfs(path)
    return 1.0 - st.f_bavail / st.f_blocks if st.f_blocks else 1.0


class Population:
    def __init__(self, root: str, seed: int):
        self.root = root
        self.rng = random.Random(seed)
        self.files: list[str] = []
        self.count = 0
        self.written = 0
        # distinct content per chunk (a device that compressed or deduplicated would see it)
        self.block = bytes(self.rng.getrandbits(8) for _ in range(CHUNK))

    def size(self) -> int:
        return int(math.exp(self.rng.uniform(math.log(MIN_SIZE), math.log(MAX_SIZE))))

    def write_one(self) -> bool:
        d = os.path.join(self.root, f"d{self.count // PER_DIR:04d}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"f{self.count:06d}")
        self.count += 1
        left = self.size()
        try:
            with open(path, "wb") as f:
                while left > 0:
                    n = min(left, CHUNK)
                    off = self.rng.randrange(0, CHUNK - n + 1) if n < CHUNK else 0
                    f.write(self.block[off:off + n])
                    left -= n
                    self.written += n
        except OSError:  # full: the file that did not fit is not part of the population
            try:
                os.unlink(path)
            except OSError:
                pass
            return False
        self.files.append(path)
        return True

    def fill(self, target: float) -> None:
        while used_fraction(self.root) < target:
            if not self.write_one():
                break

    def churn(self) -> None:
        gone = set(self.rng.sample(range(len(self.files)), len(self.files) // 4))
        for i in gone:
            os.unlink(self.files[i])
        self.files = [f for i, f in enumerate(self.files) if i not in gone]
        os.sync()


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: age.py DIR FILL SEED CHURN", file=sys.stderr)
        return 2
    root, fill, seed, churn = argv[0], int(argv[1]) / 100.0, int(argv[2]), int(argv[3])
    os.makedirs(root, exist_ok=True)
    pop = Population(root, seed)
    pop.fill(fill)
    for _ in range(churn):
        pop.churn()
        pop.fill(fill)
    os.sync()
    print(json.dumps({"files": len(pop.files), "written_bytes": pop.written, "fill": round(used_fraction(root), 4),
                      "target": fill, "churn_rounds": churn}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
