"""Build the lab kernel (user-mode Linux) from Debian's linux-source-6.12, once.

The result is cached outside the repository under a key made of the source
version, the config fragment, the patches and this recipe's version, so a
second build with nothing changed returns at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from ..errors import FlashbedError
from ..paths import cache_dir
from ..progress import format_duration

SOURCE_PACKAGE = "linux-source-6.12"
SOURCE_TARBALL = Path("/usr/src/linux-source-6.12.tar.xz")
HERE = Path(__file__).resolve().parent
CONFIG_FRAGMENT = HERE / "config" / "lab.config"
PATCH_DIR = HERE / "patches"
# bump when the build procedure itself changes in a way that changes the binary
RECIPE_VERSION = "1"
# objects compiled by a full build of this config; only used for the first ETA
DEFAULT_OBJECT_ESTIMATE = 1160


@dataclass(frozen=True)
class KernelInfo:
    """A built lab kernel and how it was made."""

    path: str
    key: str
    source_package: str
    source_version: str
    release: str
    patches: list[str]
    build_seconds: float
    built_at: str

    @staticmethod
    def load(path: Path) -> "KernelInfo":
        return KernelInfo(**json.loads(path.read_text()))


def source_version() -> str:
    """Debian version of the installed kernel source package."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", SOURCE_PACKAGE],
            capture_output=True, text=True, check=False,
        )
    except FileNotFoundError:
        out = None
    if out is None or out.returncode != 0 or not out.stdout.strip() or not SOURCE_TARBALL.exists():
        raise FlashbedError(
            f"{SOURCE_PACKAGE} is not installed (no {SOURCE_TARBALL}): "
            f"run `make setup` or `apt-get install {SOURCE_PACKAGE}`"
        )
    return out.stdout.strip()


def patches() -> list[Path]:
    return sorted(PATCH_DIR.glob("*.patch"))


def required_options() -> dict[str, str]:
    """Every CONFIG_X=v line of the fragment: all must hold in the final .config."""
    want: dict[str, str] = {}
    for line in CONFIG_FRAGMENT.read_text().splitlines():
        line = line.strip()
        if line.startswith("CONFIG_"):
            name, value = line.split("=", 1)
            want[name] = value
    return want


def read_config(path: Path) -> dict[str, str]:
    have: dict[str, str] = {}
    for line in path.read_text().splitlines():
        m = re.match(r"# (CONFIG_\w+) is not set", line)
        if m:
            have[m.group(1)] = "n"
        elif line.startswith("CONFIG_"):
            name, value = line.split("=", 1)
            have[name] = value
    return have


def missing_options(config: Path) -> list[str]:
    have = read_config(config)
    return [
        f"{name}={value} (got {have.get(name, 'unset')})"
        for name, value in required_options().items()
        if have.get(name, "n") != value
    ]


def cache_key(version: str) -> str:
    h = hashlib.sha256()
    h.update(f"recipe {RECIPE_VERSION}\nsource {SOURCE_PACKAGE} {version}\n".encode())
    h.update(CONFIG_FRAGMENT.read_bytes())
    for p in patches():
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def kernel_root() -> Path:
    return cache_dir() / "kernel"


def cached_kernel() -> KernelInfo | None:
    """The kernel for the current source/config/patches, if already built."""
    key = cache_key(source_version())
    info = kernel_root() / key / "info.json"
    if info.exists() and Path(KernelInfo.load(info).path).exists():
        return KernelInfo.load(info)
    return None


def ensure_kernel(log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> KernelInfo:
    """Return the cached lab kernel, building it first if needed."""
    version = source_version()
    key = cache_key(version)
    out = kernel_root() / key
    out.mkdir(parents=True, exist_ok=True)
    # one builder at a time per key; a second caller waits and then finds it built
    with open(out / ".lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        info_path = out / "info.json"
        if info_path.exists():
            info = KernelInfo.load(info_path)
            if Path(info.path).exists():
                return info
        return _build(version, key, out, log)


def _run(cmd: list[str], cwd: Path, log_file: Path, what: str) -> None:
    with open(log_file, "a") as lf:
        lf.write(f"$ {' '.join(cmd)}\n")
        lf.flush()
        r = subprocess.run(cmd, cwd=cwd, stdout=lf, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise FlashbedError(f"kernel build: {what} failed (exit {r.returncode}); see {log_file}: {_last_error(log_file)}")


def _last_error(log_file: Path) -> str:
    lines = log_file.read_text(errors="replace").splitlines()
    errs = [l for l in lines if "error" in l.lower()]
    return (errs or lines or ["(empty log)"])[-1].strip()[:300]


def _build(version: str, key: str, out: Path, log: Callable[[str], None]) -> KernelInfo:
    started = time.monotonic()
    work = out / "build"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    log_file = out / "build.log"
    log_file.write_text("")
    log(f"kernel: building {SOURCE_PACKAGE} {version} for ARCH=um (key {key}); log: {log_file}")

    log("kernel: extracting source")
    with tarfile.open(SOURCE_TARBALL) as tar:
        tar.extractall(work, filter="fully_trusted")
    src = work / SOURCE_PACKAGE
    if not src.is_dir():
        raise FlashbedError(f"kernel build: {SOURCE_TARBALL} did not contain {SOURCE_PACKAGE}/")

    for p in patches():
        log(f"kernel: applying {p.name}")
        _run(["patch", "-p1", "--forward", "-i", str(p)], src, log_file, f"patch {p.name}")

    obj = work / "obj"
    _run(["make", "ARCH=um", f"O={obj}", "allnoconfig", f"KCONFIG_ALLCONFIG={CONFIG_FRAGMENT}"],
         src, log_file, "configuration")
    missing = missing_options(obj / ".config")
    if missing:
        raise FlashbedError("kernel config: required options did not stick: " + ", ".join(missing))

    estimate_file = kernel_root() / "objects-estimate"
    estimate = int(estimate_file.read_text()) if estimate_file.exists() else DEFAULT_OBJECT_ESTIMATE
    jobs = os.cpu_count() or 2
    compiled = _make_with_progress(src, obj, jobs, estimate, log_file, log)
    estimate_file.write_text(str(compiled))

    missing = missing_options(obj / ".config")
    if missing:
        raise FlashbedError("kernel config: required options missing after build: " + ", ".join(missing))
    binary = out / "linux"
    shutil.copy2(obj / "linux", binary)
    shutil.copy2(obj / ".config", out / "config")
    release = (obj / "include/config/kernel.release").read_text().strip()
    info = KernelInfo(
        path=str(binary), key=key, source_package=SOURCE_PACKAGE, source_version=version,
        release=release, patches=[p.name for p in patches()],
        build_seconds=round(time.monotonic() - started, 1),
        built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    tmp = out / "info.json.tmp"
    tmp.write_text(json.dumps(asdict(info), indent=2))
    os.replace(tmp, out / "info.json")
    shutil.rmtree(work)  # ~1.5 GB of objects; the binary and config are kept
    log(f"kernel: built {release} in {format_duration(info.build_seconds)}: {binary}")
    return info


def _make_with_progress(src: Path, obj: Path, jobs: int, estimate: int,
                        log_file: Path, log: Callable[[str], None]) -> int:
    cmd = ["make", "ARCH=um", f"O={obj}", f"-j{jobs}", "linux"]
    started = time.monotonic()
    compiled = 0
    last = 0.0
    with open(log_file, "a") as lf:
        lf.write(f"$ {' '.join(cmd)}\n")
        proc = subprocess.Popen(cmd, cwd=src, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            lf.write(line)
            if line.lstrip().startswith(("CC ", "AS ")):
                compiled += 1
                now = time.monotonic()
                if now - last >= 5:
                    last = now
                    elapsed = now - started
                    frac = min(compiled / max(estimate, 1), 0.99)
                    eta = elapsed * (1 - frac) / frac if frac > 0 else 0
                    log(f"kernel: compiled {compiled}/~{estimate} objects ({frac:.0%}), "
                        f"elapsed {format_duration(elapsed)}, ETA {format_duration(eta)}")
        rc = proc.wait()
    if rc != 0:
        raise FlashbedError(f"kernel build: make failed (exit {rc}); see {log_file}: {_last_error(log_file)}")
    return compiled
