"""Build flashbed-yaffs2, the YAFFS2 daemon, into the cache.

YAFFS2 is in no Linux kernel and no Debian binary package, but Debian's u-boot
source package carries its core and its "direct" (POSIX-like) interface. Those
files are compiled unmodified, beside flashbed's own shim headers, OS glue, MTD
driver and FUSE front (csrc/). The result is cached like the lab kernels, keyed
by the source version and flashbed's own C sources; the lab's guest runs the
same binary, since its root is the host's / through hostfs.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import FlashbedError
from ..lab import debsource
from ..paths import build_lock, cache_dir

HERE = Path(__file__).resolve().parent
CSRC = HERE / "csrc"
BINARY = "flashbed-yaffs2"
# bump when the build procedure itself changes in a way that changes the binary
RECIPE_VERSION = "1"

Log = Callable[[str], None]


@dataclass(frozen=True)
class SourceSpec:
    """Where YAFFS2's source comes from: a pinned Debian source package."""

    package: str
    version: str
    suite: str
    subdir: str  # YAFFS2's directory in the source tree


SOURCE = SourceSpec(package="u-boot", version="2023.01+dfsg-2+deb12u3", suite="bookworm", subdir="fs/yaffs2")

# YAFFS2's core and direct interface; u-boot's glue and its MTD interfaces are left
# out (flashbed brings its own)
CORE_FILES = (
    "yaffs_allocator", "yaffs_attribs", "yaffs_bitmap", "yaffs_checkptrw", "yaffs_ecc", "yaffs_error",
    "yaffsfs", "yaffs_guts", "yaffs_nameval", "yaffs_nand", "yaffs_packedtags1", "yaffs_packedtags2",
    "yaffs_qsort", "yaffs_summary", "yaffs_tagscompat", "yaffs_verify", "yaffs_yaffs1", "yaffs_yaffs2",
)
OWN_FILES = ("yfb_yaffs", "yfb_mtd", "yfb_file", "yfb_fuse")
DEFINES = ("-DCONFIG_YAFFS_DIRECT", "-DCONFIG_YAFFS_PROVIDE_DEFS")
# the core's own warnings (its 32-bit casts and printf formats) are not ours to fix
CORE_WARNINGS = ("-Wno-format", "-Wno-stringop-truncation", "-Wno-pointer-to-int-cast")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def own_sources() -> list[Path]:
    return sorted(p for p in CSRC.rglob("*") if p.suffix in (".c", ".h"))


def cache_key(spec: SourceSpec = SOURCE) -> str:
    h = hashlib.sha256()
    h.update(f"recipe {RECIPE_VERSION}\nsource {spec.package} {spec.version} {spec.subdir}\n".encode())
    for p in own_sources():
        h.update(str(p.relative_to(CSRC)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def build_root() -> Path:
    return cache_dir() / "yaffs2"


def daemon_path(spec: SourceSpec = SOURCE) -> Path:
    """Where the daemon for the current source and C files is (built or not)."""
    return build_root() / cache_key(spec) / BINARY


def cached_daemon(spec: SourceSpec = SOURCE) -> Path | None:
    """The built daemon for the current source and C files, if there."""
    path = daemon_path(spec)
    return path if path.exists() else None


def ensure_daemon(spec: SourceSpec = SOURCE, log: Log = _stderr) -> Path:
    """The daemon's path, building it first if needed (one builder per key)."""
    out = build_root() / cache_key(spec)
    if (out / BINARY).exists():  # read as it is (a cache this user cannot write serves too)
        return out / BINARY
    with build_lock(out, "the YAFFS2 daemon"):
        binary = out / BINARY
        if binary.exists():
            return binary
        _build(spec, out, log)
        return binary


def _source_dir(spec: SourceSpec, log: Log) -> Path:
    root = cache_dir() / "debian"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lockf:  # apt's own lock would fail a second fetcher
        fcntl.flock(lockf, fcntl.LOCK_EX)
        tree = debsource.fetch_source(spec.package, spec.version, spec.suite, root, log,
                                      pinned_in="flashbed's YAFFS2 build (flashbed/yaffs2/build.py)")
    src = tree / spec.subdir
    missing = [f for f in CORE_FILES if not (src / f"{f}.c").exists()]
    if missing:
        raise FlashbedError(f"{spec.package} {spec.version} has no {spec.subdir}/{missing[0]}.c")
    return src


def _fuse_flags(what: str) -> list[str]:
    r = subprocess.run(["pkg-config", what, "fuse3"], capture_output=True, text=True)
    if r.returncode != 0:
        raise FlashbedError("libfuse3's build files are missing: run `make setup` or "
                            "`apt-get install libfuse3-dev pkg-config`")
    return r.stdout.split()


def _build(spec: SourceSpec, out: Path, log: Log) -> None:
    if shutil.which("gcc") is None:
        raise FlashbedError("gcc is not installed: run `make setup` or `apt-get install build-essential`")
    src = _source_dir(spec, log)
    log(f"yaffs2: building {BINARY} from {spec.package} {spec.version} {spec.subdir} (key {out.name})")
    work = out / "obj"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    common = ["gcc", "-c", "-O2", "-g", "-Wall", "-Werror=implicit-function-declaration", *DEFINES,
              f"-I{CSRC / 'shim'}", f"-I{src}", f"-I{CSRC}"]
    objs = []
    for name in CORE_FILES:
        objs.append(_compile([*common, *CORE_WARNINGS], src / f"{name}.c", work, out))
    fuse = _fuse_flags("--cflags")
    for name in OWN_FILES:
        objs.append(_compile([*common, "-Werror", *fuse], CSRC / f"{name}.c", work, out))
    tmp = out / f"{BINARY}.tmp"
    _run(["gcc", "-o", str(tmp), *map(str, objs), *_fuse_flags("--libs"), "-lpthread"], out)
    (out / "source").write_text(f"{spec.package} {spec.version} {spec.suite} {spec.subdir}\n")
    tmp.rename(out / BINARY)  # the binary appears only once it is whole


def _compile(cmd: list[str], source: Path, work: Path, out: Path) -> Path:
    obj = work / f"{source.stem}.o"
    _run([*cmd, str(source), "-o", str(obj)], out)
    return obj


def _run(cmd: list[str], out: Path) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    with open(out / "build.log", "a") as f:
        f.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    if r.returncode != 0:
        lines = [l for l in r.stderr.splitlines() if "error" in l] or r.stderr.splitlines() or ["no output"]
        raise FlashbedError(f"building {BINARY} failed: {lines[0]} (log: {out / 'build.log'})")
