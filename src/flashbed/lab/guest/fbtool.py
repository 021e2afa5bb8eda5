"""Guest-side helpers the steps call. Each prints one JSON object on stdout.

Standard library only (runs on the host's Debian python3 inside the lab).

  write-tree DIR MANIFEST [--dirs N] [--files N] [--file-kb K] [--big-mb M] [--seed S]
  verify-tree DIR MANIFEST
  gen-tree DIR --dirs N --files N [--mean-bytes B] [--seed S]   (smallfiles source tree)
  gen-rootfs DIR LIST --mb M [--text PCT] [--seed S]         (boot study tree + init's read list)
  read-list ROOT LIST                                        (read the files an init reads)
  fill DIR --bytes N [--file-mb 1]                           (fill with 1 MB files)
  appio FILE --size BYTES --record BYTES [--fsync]           (iozone-style operations)
  overwrite FILE --mb N --unit BYTES [--fsync]               (overwrite at a fixed place)
  timed -- CMD...                                            (wall, user, sys of a command)
  cpu -- CMD...                                              (command and kernel-thread CPU, ns)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time

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


def emit(obj: dict) -> int:
    print(json.dumps(obj))
    return 0


def now() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def gen_tree(args: argparse.Namespace) -> int:
    """A deterministic tree of many very small files (the USB-stick study's 1019/4499)."""
    rng = random.Random(args.seed)
    dirs = [args.dir]
    os.makedirs(args.dir, exist_ok=True)
    for i in range(args.dirs):
        parent = dirs[rng.randrange(len(dirs))] if i else args.dir
        d = os.path.join(parent, f"dir{i:04d}")
        os.mkdir(d)
        dirs.append(d)
    total = 0
    for i in range(args.files):
        size = min(int(rng.expovariate(1 / args.mean_bytes)), 64 * args.mean_bytes)
        with open(os.path.join(dirs[1 + rng.randrange(len(dirs) - 1)] if args.dirs else args.dir,
                               f"file{i:05d}"), "wb") as f:
            f.write(rng.randbytes(size))
        total += size
    return emit({"dirs": args.dirs, "files": args.files, "bytes": total})


# a small embedded root filesystem: (top dir, share of bytes, file count, read at boot)
ROOTFS_LAYOUT = [("lib", 0.55, 120, 0.25), ("bin", 0.12, 160, 0.08), ("sbin", 0.05, 60, 0.1),
                 ("usr/lib", 0.18, 140, 0.05), ("usr/share", 0.06, 300, 0.0), ("etc", 0.04, 160, 0.5)]


def rootfs_bytes(rng: random.Random, size: int, text_pct: float, words: list[str], zipf: list[float]) -> bytes:
    """`size` bytes in 4 KiB pieces, each (with chance `text_pct` %) text of words drawn
    Zipf-like from a small vocabulary, which compresses as real files do (about 3:1 with
    gzip, better with xz), or random bytes (compressed or encrypted content)."""
    out = bytearray()
    while len(out) < size:
        n = min(4096, size - len(out))
        if rng.random() * 100 < text_pct:
            out += " ".join(rng.choices(words, cum_weights=zipf, k=n // 4)).encode()[:n].ljust(n, b"\n")
        else:
            out += rng.randbytes(n)
    return bytes(out)


def gen_rootfs(args: argparse.Namespace) -> int:
    """A rootfs-like tree of about --mb MB, and the list of files an init reads."""
    rng = random.Random(args.seed)
    letters = "abcdefghijklmnopqrstuvwxyz_./0123456789"
    words = ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(4096)]
    zipf = [0.0] * len(words)  # cumulative weights
    acc = 0.0
    for i in range(len(words)):
        acc += 1.0 / (i + 1)
        zipf[i] = acc
    budget = args.mb * CHUNK
    read_list, total, count = [], 0, 0
    for top, share, n, read_frac in ROOTFS_LAYOUT:
        d = os.path.join(args.dir, top)
        os.makedirs(d, exist_ok=True)
        weights = [rng.paretovariate(1.2) for _ in range(n)]
        scale = budget * share / sum(weights)
        for i, w in enumerate(weights):
            size = max(64, int(w * scale))
            name = os.path.join(d, f"{top.replace('/', '_')}{i:03d}")
            with open(name, "wb") as f:
                f.write(rootfs_bytes(rng, size, args.text, words, zipf) if args.text else rng.randbytes(size))
            total += size
            count += 1
            if rng.random() < read_frac:
                read_list.append(os.path.relpath(name, args.dir))
    with open(args.list, "w") as f:
        f.write("\n".join(read_list) + "\n")
    return emit({"files": count, "bytes": total, "read_list": len(read_list)})


def read_list(args: argparse.Namespace) -> int:
    with open(args.list) as f:
        names = [l.strip() for l in f if l.strip()]
    t0 = now()
    total = 0
    for n in names:
        with open(os.path.join(args.root, n), "rb") as f:
            while chunk := f.read(CHUNK):
                total += len(chunk)
    return emit({"files": len(names), "bytes": total, "seconds": now() - t0})


def fill(args: argparse.Namespace) -> int:
    """Fill with --file-mb files until --bytes (or --percent of the filesystem's
    size) are written (incompressible data)."""
    os.makedirs(args.dir, exist_ok=True)
    if args.percent is not None:
        st = os.statvfs(args.dir)
        args.bytes = int(st.f_blocks * st.f_frsize * args.percent / 100)
    rng = random.Random(args.seed)
    size = args.file_mb * CHUNK
    block = rng.randbytes(CHUNK)
    written, i = 0, 0
    while written + size <= args.bytes:
        with open(os.path.join(args.dir, f"fill{i:06d}"), "wb") as f:
            for j in range(args.file_mb):
                # vary each MiB so no filesystem can deduplicate or compress it
                f.write(block[j + i:] + block[:j + i])
        written += size
        i += 1
    os.sync()
    return emit({"files": i, "bytes": written})


def _timed(fn) -> float:
    t0 = now()
    fn()
    return now() - t0


def appio(args: argparse.Namespace) -> int:
    """iozone-style operations on one file with fixed-size records (KB/s each).

    With --fsync every writing operation ends with fsync inside its timing, as
    iozone -e does. Reads are timed after dropping caches (read, random read,
    fread) or straight after a read (reread, freread: the cache's speed).
    """
    size, rec = args.size, args.record
    n = size // rec
    rng = random.Random(args.seed)
    data = rng.randbytes(rec)
    offsets = [i * rec for i in range(n)]
    rand = offsets[:]
    rng.shuffle(rand)
    path = args.file
    res: dict[str, float] = {}

    def sync_if(fd: int) -> None:
        if args.fsync:
            os.fsync(fd)

    def w_seq(flags: int) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
        for _ in range(n):
            os.write(fd, data)
        sync_if(fd)
        os.close(fd)

    def r_seq() -> None:
        fd = os.open(path, os.O_RDONLY)
        while os.read(fd, rec):
            pass
        os.close(fd)

    def r_rand() -> None:
        fd = os.open(path, os.O_RDONLY)
        for off in rand:
            os.pread(fd, rec, off)
        os.close(fd)

    def w_rand() -> None:
        fd = os.open(path, os.O_WRONLY)
        for off in rand:
            os.pwrite(fd, data, off)
        sync_if(fd)
        os.close(fd)

    def w_record() -> None:
        fd = os.open(path, os.O_WRONLY)
        for _ in range(n):
            os.pwrite(fd, data, 0)
        sync_if(fd)
        os.close(fd)

    def fw(mode: str) -> None:
        with open(path, mode) as f:
            for _ in range(n):
                f.write(data)
            f.flush()
            sync_if(f.fileno())

    def fr() -> None:
        with open(path, "rb") as f:
            while f.read(rec):
                pass

    kb = size / 1024
    if os.path.exists(path):
        os.unlink(path)
    drop_caches()
    res["write"] = kb / _timed(lambda: w_seq(os.O_TRUNC))
    res["rewrite"] = kb / _timed(lambda: w_seq(0))
    drop_caches()
    res["read"] = kb / _timed(r_seq)
    res["reread"] = kb / _timed(r_seq)
    drop_caches()
    res["random-read"] = kb / _timed(r_rand)
    res["random-write"] = kb / _timed(w_rand)
    res["record-rewrite"] = kb / _timed(w_record)
    os.unlink(path)
    drop_caches()
    res["fwrite"] = kb / _timed(lambda: fw("wb"))
    res["frewrite"] = kb / _timed(lambda: fw("r+b"))
    drop_caches()
    res["fread"] = kb / _timed(fr)
    res["freread"] = kb / _timed(fr)
    os.unlink(path)
    return emit({"size": size, "record": rec, "fsync": args.fsync, "kBps": res})


def overwrite(args: argparse.Namespace) -> int:
    """Create an n MB file, then overwrite n MB of it in small units at one place."""
    size = args.mb * CHUNK
    rng = random.Random(args.seed)
    fd = os.open(args.file, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, rng.randbytes(size))
    os.fsync(fd)
    unit = rng.randbytes(args.unit)
    count = size // args.unit
    t0 = now()
    for _ in range(count):
        os.pwrite(fd, unit, 0)
        if args.fsync:
            os.fsync(fd)
    os.fsync(fd)  # both cases end durable, so they are compared on equal terms
    secs = now() - t0
    os.close(fd)
    return emit({"bytes": size, "unit": args.unit, "writes": count, "seconds": secs,
                 "MBps": size / 1e6 / secs})


def _run_with_rusage(cmd: list[str]) -> tuple[int, float, float, float]:
    t0 = now()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), now() - t0, ru.ru_utime, ru.ru_stime


def timed(args: argparse.Namespace) -> int:
    rc, wall, user, sys_ = _run_with_rusage(args.cmd)
    emit({"rc": rc, "real": wall, "user": user, "sys": sys_})
    return rc


def schedstat_ns(text: str) -> int:
    """A task's run time in ns from its /proc/<pid>/schedstat text ("run wait slices"): the
    scheduler's sum_exec_runtime (the lab's sched_clock reads the host's clock, lab patch 0004)."""
    return int(text.split()[0])


def kthread_name(stat: str) -> str | None:
    """The name of a kernel thread from its /proc/<pid>/stat text; None for a user task. The
    name is between the first '(' and the last ')' (it may hold spaces and parentheses)."""
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    pid, ppid, flags = stat.split(None, 1)[0], int(fields[1]), int(fields[6])
    return name if flags & 0x00200000 or ppid == 2 or pid == "2" else None  # PF_KTHREAD, kthreadd's


def run_ns(pid: int | str) -> int | None:
    """A task's run time in ns (None once it has gone)."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return schedstat_ns(f.read())
    except (OSError, ValueError, IndexError):
        return None


def kthread_ns() -> dict[int, tuple[str, int]]:
    """Every kernel thread's name and run time (ns)."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                name = kthread_name(f.read())
        except (OSError, ValueError, IndexError):
            continue
        ns = run_ns(pid) if name is not None else None
        if ns is not None:
            out[int(pid)] = (name, ns)
    return out


def thread_group(name: str) -> str:
    """How kernel threads are counted together: workers by the workqueue they last ran work
    for ('kworker/0:1H-kblockd' -> 'kworker (kblockd)'), writeback workers as one whatever
    device they last wrote back for (a worker serves every device's writeback, and takes the
    name of the last: 'kworker/u2:1-flush-98:0' -> 'kworker (writeback)'), per-CPU threads
    without their CPU ('ksoftirqd/1' -> 'ksoftirqd'); a filesystem's own threads keep their names."""
    if name.startswith("kworker/"):
        wq = name.split("-", 1)[1] if "-" in name else ""
        return "kworker (writeback)" if wq.startswith("flush-") else f"kworker ({wq})" if wq else "kworker"
    head, _, tail = name.rpartition("/")
    return head if head and tail.isdigit() else name


def cpu(args: argparse.Namespace) -> int:
    """Run a command; its CPU time and every kernel thread's while it ran (and the sync after
    it), in ns from the scheduler (/proc/<pid>/schedstat), not in 10 ms ticks."""
    # write back what earlier steps left dirty (their output on the lab's hostfs, the fresh
    # filesystem) first, so that its writeback is not counted as this command's
    os.sync()
    before = kthread_ns()
    t0 = now()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(args.cmd[0], args.cmd)
        finally:
            os._exit(127)
    # exited but not reaped: its own run time is still readable
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    wall = now() - t0
    work = run_ns(pid)
    _, status, ru = os.wait4(pid, 0)
    os.sync()
    after = kthread_ns()
    per: dict[str, int] = {}
    for tid, (name, ns) in after.items():
        d = ns - before.get(tid, (name, 0))[1]  # a thread started meanwhile counts from 0
        if d > 0:
            key = thread_group(name)
            per[key] = per.get(key, 0) + d
    top = sorted(per.items(), key=lambda kv: -kv[1])
    rc = os.waitstatus_to_exitcode(status)
    # workload: the command's own run time (rusage adds its children, with user/sys split in ticks)
    workload = work / 1e9 if work is not None else ru.ru_utime + ru.ru_stime
    emit({"rc": rc, "real": wall, "user": ru.ru_utime, "sys": ru.ru_stime, "workload_cpu": workload,
          "kthread_cpu": sum(per.values()) / 1e9, "kthreads_ran": len(per),
          "kthreads": {n: v / 1e9 for n, v in top[:20]}, "clock": "schedstat"})
    return rc


def main() -> int:
    p = argparse.ArgumentParser(prog="fbtool")
    sub = p.add_subparsers(dest="command", required=True)
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
    g = sub.add_parser("gen-tree")
    g.add_argument("dir")
    g.add_argument("--dirs", type=int, default=1019)
    g.add_argument("--files", type=int, default=4499)
    g.add_argument("--mean-bytes", type=int, default=2048)
    g.add_argument("--seed", type=int, default=1)
    r = sub.add_parser("gen-rootfs")
    r.add_argument("dir")
    r.add_argument("list")
    r.add_argument("--text", type=float, default=0.0, help="percent of the bytes that is text (compressible)")
    r.add_argument("--mb", type=int, default=15)
    r.add_argument("--seed", type=int, default=1)
    rl = sub.add_parser("read-list")
    rl.add_argument("root")
    rl.add_argument("list")
    f = sub.add_parser("fill")
    f.add_argument("dir")
    f.add_argument("--bytes", type=int, default=0)
    f.add_argument("--percent", type=float)
    f.add_argument("--file-mb", type=int, default=1)
    f.add_argument("--seed", type=int, default=1)
    a = sub.add_parser("appio")
    a.add_argument("file")
    a.add_argument("--size", type=int, required=True)
    a.add_argument("--record", type=int, default=4096)
    a.add_argument("--fsync", action="store_true")
    a.add_argument("--seed", type=int, default=1)
    o = sub.add_parser("overwrite")
    o.add_argument("file")
    o.add_argument("--mb", type=int, required=True)
    o.add_argument("--unit", type=int, default=1024)
    o.add_argument("--fsync", action="store_true")
    o.add_argument("--seed", type=int, default=1)
    for name in ("timed", "cpu"):
        t = sub.add_parser(name)
        t.add_argument("cmd", nargs=argparse.REMAINDER)
    args = p.parse_args()
    if getattr(args, "cmd", None) and args.cmd[:1] == ["--"]:
        args.cmd = args.cmd[1:]
    return {"write-tree": write_tree, "verify-tree": verify_tree, "gen-tree": gen_tree,
            "gen-rootfs": gen_rootfs, "read-list": read_list, "fill": fill, "appio": appio,
            "overwrite": overwrite, "timed": timed, "cpu": cpu}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
