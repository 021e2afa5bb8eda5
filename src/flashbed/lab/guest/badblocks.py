"""Guest side of the `badblocks` study on block devices: find where files live
(FIEMAP, else FIBMAP) and put seeded bad blocks under them and elsewhere in
dm-dust. (The files are written and inspected by corruption.py's cwork and
inspect; raw NAND's faults are nandsim parameters the host sets.)

Standard library only: it runs as `/usr/bin/python3 -S -I badblocks.py ...`
inside the lab.

  dust DIR TARGET --sectors N --seed S [--file-blocks K] [--random-blocks R]
                          Add seeded bad blocks (some under DIR's files) to dm-dust TARGET.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

if __package__:  # on the host, as flashbed.lab.guest.badblocks
    from .guestlib import BLOCK, run
else:  # in the guest: this directory is not on sys.path by itself (-S -I)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from guestlib import BLOCK, run


FS_IOC_FIEMAP = 0xC020660B


def extents(path: str, max_extents: int = 256) -> list[tuple[int, int]]:
    """(physical byte offset, length) of a file's data: FIEMAP, else FIBMAP; [] if neither works."""
    import fcntl
    import struct
    head = struct.pack("=QQIIII", 0, 2 ** 64 - 1, 1, 0, max_extents, 0)  # FIEMAP_FLAG_SYNC
    buf = bytearray(head + b"\0" * (56 * max_extents))
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
        finally:
            os.close(fd)
    except OSError:
        return fibmap_extents(path)
    n = struct.unpack_from("=I", buf, 20)[0]
    out = []
    for i in range(n):
        _logical, phys, length = struct.unpack_from("=QQQ", buf, 32 + 56 * i)
        out.append((phys, length))
    return out or fibmap_extents(path)


FIBMAP, FIGETBSZ = 1, 2


def fibmap_extents(path: str) -> list[tuple[int, int]]:
    """Block by block with FIBMAP, for filesystems without FIEMAP (FAT)."""
    import fcntl
    import struct
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return []
    try:
        bsz = struct.unpack("i", fcntl.ioctl(fd, FIGETBSZ, struct.pack("i", 0)))[0]
        nblocks = (os.fstat(fd).st_size + bsz - 1) // bsz
        out = []
        for i in range(nblocks):
            b = struct.unpack("i", fcntl.ioctl(fd, FIBMAP, struct.pack("i", i)))[0]
            if b:
                out.append((b * bsz, bsz))
        return out
    except OSError:
        return []
    finally:
        os.close(fd)


def dust(args: argparse.Namespace) -> int:
    """Pick bad blocks (seeded): some under the files' data, some anywhere in the
    used part of the device; hand them to dm-dust (enabling it is the caller's)."""
    rng = random.Random(args.seed)
    data_blocks = set()
    for name in sorted(os.listdir(args.dir)):
        for phys, length in extents(os.path.join(args.dir, name)):
            data_blocks.update(range(phys // BLOCK, (phys + length + BLOCK - 1) // BLOCK))
    total = args.sectors * 512 // BLOCK
    if data_blocks:
        top = max(data_blocks) + 1
    else:  # where the files are is unknown (squashfs maps none): the space the filesystem uses
        st = os.statvfs(args.dir)
        top = max(1, (st.f_blocks - st.f_bfree) * st.f_frsize // BLOCK)
    picked = set(rng.sample(sorted(data_blocks), min(args.file_blocks, len(data_blocks))))
    picked |= {rng.randrange(0, min(top, total)) for _ in range(args.random_blocks)}
    for b in sorted(picked):
        r = run(f"dmsetup message {args.target} 0 addbadblock {b}", 30)
        if not r["status"].ok:
            print(json.dumps({"error": r["out"][-300:], "block": b}))
            return 1
    print(json.dumps({"blocks": sorted(picked), "under_files": len(picked & data_blocks),
                      "file_blocks_known": len(data_blocks)}))
    return 0



def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="badblocks")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("dust")
    s.add_argument("dir")
    s.add_argument("target")
    s.add_argument("--sectors", type=int, required=True)
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--file-blocks", type=int, default=8)
    s.add_argument("--random-blocks", type=int, default=32)
    args = p.parse_args(argv)
    return {"dust": dust}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
