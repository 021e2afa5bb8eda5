"""Guest-side helpers the steps call: make a deterministic file tree, verify it.

Standard library only (runs on the host's Debian python3 inside the lab).

  fbtool.py write-tree DIR MANIFEST [--dirs N] [--files N] [--file-kb K] [--big-mb M] [--seed S]
  fbtool.py verify-tree DIR MANIFEST
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys

CHUNK = 1024 * 1024


def write_file(path: str, rng: random.Random, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(CHUNK, left)
            data = rng.randbytes(n)
            f.write(data)
            h.update(data)
            left -= n
    return h.hexdigest()


def write_tree(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    files: dict[str, dict] = {}
    for d in range(args.dirs):
        sub = os.path.join(args.dir, f"d{d:03d}")
        os.makedirs(sub, exist_ok=True)
    for i in range(args.files):
        rel = f"d{i % max(args.dirs, 1):03d}/f{i:05d}" if args.dirs else f"f{i:05d}"
        size = rng.randint(0, 2 * args.file_kb * 1024)
        files[rel] = {"size": size, "sha256": write_file(os.path.join(args.dir, rel), rng, size)}
    if args.big_mb:
        size = args.big_mb * CHUNK
        files["big.bin"] = {"size": size, "sha256": write_file(os.path.join(args.dir, "big.bin"), rng, size)}
    tmp = args.manifest + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"files": files}, f)
    os.replace(tmp, args.manifest)
    total = sum(v["size"] for v in files.values())
    print(f"wrote {len(files)} files, {total} bytes")
    return 0


def verify_tree(args: argparse.Namespace) -> int:
    with open(args.manifest) as f:
        files = json.load(f)["files"]
    bad = []
    for rel, want in sorted(files.items()):
        path = os.path.join(args.dir, rel)
        try:
            h = hashlib.sha256()
            size = 0
            with open(path, "rb") as f:
                while chunk := f.read(CHUNK):
                    h.update(chunk)
                    size += len(chunk)
        except OSError as e:
            bad.append(f"{rel}: {e.strerror}")
            continue
        if size != want["size"]:
            bad.append(f"{rel}: size {size} != {want['size']}")
        elif h.hexdigest() != want["sha256"]:
            bad.append(f"{rel}: content differs")
    print(json.dumps({"files": len(files), "bad": len(bad), "problems": bad[:50]}))
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(prog="fbtool")
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write-tree")
    w.add_argument("dir")
    w.add_argument("manifest")
    w.add_argument("--dirs", type=int, default=10)
    w.add_argument("--files", type=int, default=100)
    w.add_argument("--file-kb", type=int, default=8, help="mean small-file size")
    w.add_argument("--big-mb", type=int, default=0)
    w.add_argument("--seed", type=int, default=1)
    v = sub.add_parser("verify-tree")
    v.add_argument("dir")
    v.add_argument("manifest")
    args = p.parse_args()
    return write_tree(args) if args.cmd == "write-tree" else verify_tree(args)


if __name__ == "__main__":
    sys.exit(main())
