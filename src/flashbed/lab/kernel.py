"""Build the lab kernels (user-mode Linux) from Debian's kernel sources, once each.

Two kernels, one recipe: linux-source-6.12 (bookworm, installed by setup) and
linux-source-7.3 (trixie-backports, pinned, fetched with apt's own client
into the cache; see debsource). Each is built for ARCH=um from allnoconfig
plus the shared config fragment and its own additions, with its own patch set.

A build is cached outside the repository under a key made of the source
version, the config fragments, the patches and this recipe's version, so a
second build with nothing changed returns at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from ..errors import FlashbedError
from ..paths import build_lock, cache_dir
from ..progress import format_duration
from . import debsource

HERE = Path(__file__).resolve().parent
CONFIG_DIR = HERE / "config"
CONFIG_FRAGMENT = CONFIG_DIR / "lab.config"
# the time-travel flavour's fragment, on top of a kernel's own (virtual time: --clock virtual)
TIME_TRAVEL_FRAGMENT = CONFIG_DIR / "timetravel.config"
TIME_TRAVEL = "timetravel"
PATCH_DIR = HERE / "patches"
# bump when the build procedure itself changes in a way that changes the binary
RECIPE_VERSION = "2"

Log = Callable[[str], None]

# the Debian source tarball is trusted (apt checked its signature): extracted as is, links and
# modes included. Python 3.14 filters extraction by default; bookworm's 3.11.2 predates the
# `filter` argument (3.11.4) and extracts as is anyway.
TAR_TRUSTED = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class BootMode(str, enum.Enum):
    """How UML runs guest processes: traced with ptrace (every UML), or in
    7.x's seccomp mode (a syscall is a signal in the process, not a ptrace stop)."""

    PTRACE = "ptrace"
    SECCOMP = "seccomp"


@dataclass(frozen=True)
class KernelSpec:
    """One lab kernel of the recipe: where its source comes from, what it adds."""

    name: str
    package: str
    modes: tuple[BootMode, ...]  # the first is the default
    # fetched with apt (pinned) when set; otherwise the installed package's tarball
    pinned_version: str | None = None
    suite: str | None = None
    # compile steps of a full build, for the first build's ETA
    object_estimate: int = 1200
    # has a time-travel flavour (virtual time): its ubd patch builds on this kernel
    time_travel_ok: bool = False
    # the flavour this spec builds: None (the kernel as configured) or TIME_TRAVEL,
    # a uniprocessor kernel with UML's time-travel support from the same recipe
    flavour: str | None = None

    @property
    def fragments(self) -> tuple[Path, ...]:
        own = CONFIG_DIR / f"{self.name}.config"
        base = (CONFIG_FRAGMENT, own) if own.exists() else (CONFIG_FRAGMENT,)
        return base + (TIME_TRAVEL_FRAGMENT,) if self.flavour == TIME_TRAVEL else base

    @property
    def time_travel(self) -> bool:
        return self.flavour == TIME_TRAVEL

    def time_travel_flavour(self) -> "KernelSpec":
        """This kernel's time-travel flavour: one clear line if it has none."""
        if not self.time_travel_ok:
            with_tt = " or ".join(n for n, s in KERNELS.items() if s.time_travel_ok)
            raise FlashbedError(f"lab kernel {self.name} has no virtual-time flavour: use --kernel {with_tt} "
                                f"or --clock real")
        return dataclasses.replace(self, flavour=TIME_TRAVEL)

    @property
    def patch_name(self) -> str:
        """How a patch's `Lab-kernels:` line names this build: `7.3`, `7.3+timetravel`."""
        return f"{self.name}+{self.flavour}" if self.flavour else self.name

    @property
    def default_mode(self) -> BootMode:
        return self.modes[0]

    def patch_files(self) -> list[Path]:
        """Every patch of the directory that applies to this kernel, in order."""
        return [p for p in sorted(PATCH_DIR.glob("*.patch"))
                if self.name in (ks := _patch_kernels(p)) or (self.flavour and self.patch_name in ks)]

    def max_cpus(self) -> int:
        """Guest vCPUs this kernel can run (CONFIG_NR_CPUS; 1 without SMP)."""
        opts = required_options(self)
        return int(opts.get("CONFIG_NR_CPUS", "1")) if opts.get("CONFIG_SMP") == "y" else 1


KERNELS: dict[str, KernelSpec] = {
    "6.12": KernelSpec(name="6.12", package="linux-source-6.12", modes=(BootMode.PTRACE,), object_estimate=1160),
    "7.3": KernelSpec(name="7.3", package="linux-source-7.3", modes=(BootMode.SECCOMP, BootMode.PTRACE),
                      pinned_version="7.3.4-1~bpo13+1", suite="trixie-backports", object_estimate=1230,
                      time_travel_ok=True),
}
# seccomp against ptrace on 7.3, and 7.3 against 6.12: `flashbed bench lab`
DEFAULT_KERNEL = "7.3"


def _patch_kernels(patch: Path) -> tuple[str, ...]:
    """The kernels a patch is for: its description's `Lab-kernels:` line, else all.
    `7.3` is every flavour of 7.3; `7.3+timetravel` its time-travel flavour only."""
    for line in patch.read_text(errors="replace").splitlines():
        if line.startswith(("--- ", "diff ")):
            break
        if line.startswith("Lab-kernels:"):
            return tuple(line.split(":", 1)[1].split())
    return tuple(KERNELS)


@dataclass(frozen=True)
class KernelChoice:
    """A kernel and the mode it boots in: `7.3`, `7.3:ptrace`."""

    spec: KernelSpec
    mode: BootMode

    @property
    def label(self) -> str:
        return self.spec.name if self.mode == self.spec.default_mode else f"{self.spec.name}:{self.mode.value}"

    def check_cpus(self, cpus: int) -> None:
        check_cpus(self.spec.name, self.spec.max_cpus(), self.mode.value, cpus)

    def cpus_problem(self, cpus: int) -> str:
        """Why this kernel cannot run `cpus` guest vCPUs ('' if it can)."""
        return cpus_problem(self.spec.name, self.spec.max_cpus(), self.mode.value, cpus)[0]


def cpus_problem(name: str, max_cpus: int, mode: str, cpus: int) -> tuple[str, str]:
    """Why a kernel cannot run `cpus` guest vCPUs, and what to do: ("", "") if it can."""
    if cpus == 1:
        return "", ""
    if max_cpus < 2:
        return (f"lab kernel {name} has no SMP (its UML runs one vCPU)",
                f"drop --cpus {cpus} or use --kernel {_smp_kernels()}")
    if mode != BootMode.SECCOMP.value:
        return f"lab kernel {name} runs several vCPUs in seccomp mode only, not {mode}", \
            f"drop --cpus {cpus} or :{mode}"
    if not 1 <= cpus <= max_cpus:
        return f"lab kernel {name} runs 1 to {max_cpus} vCPUs, not {cpus}", ""
    return "", ""


def check_cpus(name: str, max_cpus: int, mode: str, cpus: int) -> None:
    """One clear line when a kernel cannot run `cpus` guest vCPUs."""
    why, fix = cpus_problem(name, max_cpus, mode, cpus)
    if why:
        raise FlashbedError(f"{why}: {fix}" if fix else why)


def _smp_kernels() -> str:
    return " or ".join(n for n, s in KERNELS.items() if s.max_cpus() > 1)


def labels(texts: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Kernels as given (`6.12`, `7.3:seccomp`, `7.3:ptrace`) in their one spelling each
    (KernelChoice.label), in the order given, each once; one clear line on a bad name."""
    return tuple(dict.fromkeys(choose(t).label for t in texts))


def label_of(name: str, boot_mode: str | None) -> str:
    """The label of kernel `name` booted in `boot_mode` (its default mode: the bare name)."""
    spec = KERNELS.get(name)
    if spec is None or not boot_mode or boot_mode == spec.default_mode.value:
        return name
    return f"{name}:{boot_mode}"


def recorded_label(prov: dict) -> str | None:
    """The label of the kernel a run's manifest (or a result) describes; None if it says
    none. Runs from before the two kernels name no kernel: their release does (6.12.117)."""
    if not isinstance(prov, dict):
        return None
    name = prov.get("name")
    if not name:
        m = re.match(r"(\d+\.\d+)", str(prov.get("release") or ""))
        name = m.group(1) if m else None
    if not name:
        return None
    # before 7.3 there was one kernel in one mode: ptrace, its default
    return label_of(str(name), prov.get("boot_mode"))


def choose(text: str | None = None) -> KernelChoice:
    """Parse NAME[:MODE]; one clear line naming the valid kernels on a bad name."""
    text = (text or DEFAULT_KERNEL).strip()
    name, _, mode_s = text.partition(":")
    spec = KERNELS.get(name)
    if spec is None:
        raise FlashbedError(f"unknown lab kernel '{name}': choose {' or '.join(KERNELS)} "
                            f"(optionally NAME:MODE, e.g. 7.3:ptrace)")
    if not mode_s:
        return KernelChoice(spec, spec.default_mode)
    try:
        mode = BootMode(mode_s)
    except ValueError:
        mode = None
    if mode not in spec.modes:
        raise FlashbedError(f"lab kernel {name} has no boot mode '{mode_s}': choose "
                            + " or ".join(m.value for m in spec.modes))
    return KernelChoice(spec, mode)


@dataclass(frozen=True)
class KernelInfo:
    """A built lab kernel, how it was made and the mode it boots in."""

    path: str
    key: str
    name: str
    source_package: str
    source_version: str
    release: str
    patches: list[str]
    boot_mode: str
    max_cpus: int
    build_seconds: float
    built_at: str
    # the flavour built ("" the kernel as configured; "timetravel": virtual time)
    flavour: str = ""
    # the time-travel build booted with time travel off: real time on one vCPU, its scheduler
    # clock the host's (lab patches 0004, 0007); never in info.json, set by the lab factory
    real_time: bool = False

    @staticmethod
    def load(path: Path) -> "KernelInfo":
        """A cache entry's info.json; its binary is the `linux` beside it, wherever the cache is
        now (another user's copy, a container's), not the path it was built at."""
        info = KernelInfo(**json.loads(path.read_text()))
        return dataclasses.replace(info, path=str(path.parent / "linux"))

    @property
    def label(self) -> str:
        """`7.3`, `7.3:ptrace`: the name, and the boot mode when it is not the kernel's default."""
        return label_of(self.name, self.boot_mode)

    def provenance(self) -> dict[str, object]:
        """What a result says about the kernel that produced it."""
        prov: dict[str, object] = {"name": self.name, "release": self.release,
                                   "source_package": self.source_package, "source_version": self.source_version,
                                   "patches": self.patches, "boot_mode": self.boot_mode, "key": self.key}
        if self.flavour:
            prov["flavour"] = self.flavour
        if self.real_time:
            prov["time_travel"] = "off"
        return prov

    @property
    def time_travel(self) -> bool:
        """Whether its labs run in virtual time."""
        return self.flavour == TIME_TRAVEL and not self.real_time

    def in_real_time(self) -> "KernelInfo":
        """This build booted in real time: the time-travel build with time travel off."""
        return dataclasses.replace(self, real_time=True) if self.flavour == TIME_TRAVEL else self


def installed_version(spec: KernelSpec) -> str:
    """Debian version of the installed kernel source package."""
    tarball = Path("/usr/src") / f"{spec.package}.tar.xz"
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", spec.package],
                             capture_output=True, text=True, check=False)
    except FileNotFoundError:
        out = None
    if out is None or out.returncode != 0 or not out.stdout.strip() or not tarball.exists():
        raise FlashbedError(f"{spec.package} is not installed (no {tarball}): "
                            f"run `make setup` or `apt-get install {spec.package}`")
    return out.stdout.strip()


def source_version(spec: KernelSpec) -> str:
    return spec.pinned_version or installed_version(spec)


def source_tarball(spec: KernelSpec, log: Log = _stderr) -> Path:
    """The .tar.xz of the kernel source: installed, or fetched and unpacked into the cache."""
    if spec.pinned_version is None:
        installed_version(spec)
        return Path("/usr/src") / f"{spec.package}.tar.xz"
    assert spec.suite is not None
    root = cache_dir() / "debian"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lockf:  # apt's own lock would fail a second fetcher
        fcntl.flock(lockf, fcntl.LOCK_EX)
        deb = debsource.fetch_deb(spec.package, spec.pinned_version, spec.suite, root, log)
        unpacked = debsource.unpack(deb, root / "unpacked" / deb.stem)
    tarball = unpacked / "usr" / "src" / f"{spec.package}.tar.xz"
    if not tarball.exists():
        raise FlashbedError(f"{deb.name} has no usr/src/{spec.package}.tar.xz")
    return tarball


def patches(spec: KernelSpec | None = None) -> list[Path]:
    """The patch files of one kernel (default: the default kernel)."""
    return (spec or KERNELS[DEFAULT_KERNEL]).patch_files()


def _fragment_lines(spec: KernelSpec) -> list[str]:
    return [line for f in spec.fragments for line in f.read_text().splitlines()]


def required_options(spec: KernelSpec | None = None) -> dict[str, str]:
    """Every CONFIG_X=v line of the kernel's fragments: all must hold in the final .config."""
    want: dict[str, str] = {}
    for line in _fragment_lines(spec or KERNELS[DEFAULT_KERNEL]):
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


def missing_options(config: Path, spec: KernelSpec | None = None) -> list[str]:
    have = read_config(config)
    return [
        f"{name}={value} (got {have.get(name, 'unset')})"
        for name, value in required_options(spec).items()
        if have.get(name, "n") != value
    ]


def cache_key(version: str, spec: KernelSpec | None = None) -> str:
    spec = spec or KERNELS[DEFAULT_KERNEL]
    h = hashlib.sha256()
    h.update(f"recipe {RECIPE_VERSION}\nsource {spec.package} {version}\n".encode())
    if spec.flavour:  # absent for the plain build, so its key is as before
        h.update(f"flavour {spec.flavour}\n".encode())
    for f in spec.fragments:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    for p in spec.patch_files():
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def kernel_root() -> Path:
    return cache_dir() / "kernel"


def _with_mode(info: KernelInfo, choice: KernelChoice) -> KernelInfo:
    return dataclasses.replace(info, boot_mode=choice.mode.value)


def _flavoured(spec: KernelSpec, time_travel: bool) -> KernelSpec:
    return spec.time_travel_flavour() if time_travel else spec


def cached_kernel(name: str | None = None, time_travel: bool = False) -> KernelInfo | None:
    """The kernel for the current source/config/patches, if already built."""
    choice = choose(name)
    spec = _flavoured(choice.spec, time_travel)
    info = kernel_root() / cache_key(source_version(spec), spec) / "info.json"
    if info.exists() and Path(KernelInfo.load(info).path).exists():
        return _with_mode(KernelInfo.load(info), choice)
    return None


def ensure_kernel(name: str | None = None, log: Log = _stderr, time_travel: bool = False) -> KernelInfo:
    """Return the cached lab kernel `name` (NAME[:MODE], default the default
    kernel), building it first if needed; `time_travel`: its time-travel flavour."""
    choice = choose(name)
    spec = _flavoured(choice.spec, time_travel)
    version = source_version(spec)
    key = cache_key(version, spec)
    out = kernel_root() / key
    built = _built(out)
    if built is not None:  # read as it is (a cache this user cannot write serves too)
        return _with_mode(built, choice)
    with build_lock(out, f"lab kernel {choice.label}"):
        built = _built(out)
        if built is not None:
            return _with_mode(built, choice)
        return _with_mode(_build(spec, version, key, out, log), choice)


def lab_kernel(name: str | None = None, time_travel: bool = False, cpus: int = 1,
               log: Log = _stderr) -> KernelInfo:
    """The build a lab of `cpus` vCPUs boots: in virtual time the time-travel build; in real time
    on one vCPU that same build with time travel off (it reads the host's clock), where the kernel
    has one; the kernel as configured (SMP) only for several vCPUs or a kernel without the flavour.
    So a lab that asks for no SMP never builds the second kernel."""
    choice = choose(name)
    if time_travel or (cpus == 1 and choice.spec.time_travel_ok):
        info = ensure_kernel(name, log=log, time_travel=True)
        return info if time_travel else info.in_real_time()
    return ensure_kernel(name, log=log)


def _built(out: Path) -> KernelInfo | None:
    info_path = out / "info.json"
    if info_path.exists():
        info = KernelInfo.load(info_path)
        if Path(info.path).exists():
            return info
    return None


def _run(cmd: list[str], cwd: Path, log_file: Path, what: str, env: dict[str, str] | None = None) -> None:
    with open(log_file, "a") as lf:
        lf.write(f"$ {' '.join(cmd)}\n")
        lf.flush()
        r = subprocess.run(cmd, cwd=cwd, stdout=lf, stderr=subprocess.STDOUT, env=env)
    if r.returncode != 0:
        raise FlashbedError(f"kernel build: {what} failed (exit {r.returncode}); see {log_file}: {_last_error(log_file)}")


def _last_error(log_file: Path) -> str:
    lines = log_file.read_text(errors="replace").splitlines()
    errs = [l for l in lines if "error" in l.lower()]
    return (errs or lines or ["(empty log)"])[-1].strip()[:300]


# ccache's own bound on its cache: a build's ~1 200 objects take some tens of MB there, compressed
CCACHE_SIZE = "1G"


@dataclass(frozen=True)
class Compiler:
    """How make calls the compiler: through ccache (Debian's package) where it is installed, its
    cache flashbed's own and its paths relative to the build directory, so that the build of
    another key (a new recipe version, a patch that touches a few files) finds the objects of
    one before it whose source, headers and flags are the same; else gcc as is. The kernel built
    is the same either way (the same compiler, the same configuration)."""

    make_args: tuple[str, ...]
    env: dict[str, str] | None

    @staticmethod
    def for_build(work: Path) -> "Compiler":
        if not shutil.which("ccache"):
            return Compiler((), None)
        env = {**os.environ, "CCACHE_DIR": str(cache_dir() / "ccache"), "CCACHE_BASEDIR": str(work),
               # generated headers are newer than the compile's start in every build from nothing
               "CCACHE_SLOPPINESS": "include_file_mtime,include_file_ctime",
               "CCACHE_NOHASHDIR": "true", "CCACHE_MAXSIZE": CCACHE_SIZE}
        return Compiler(("CC=ccache gcc",), env)


# in a key's build directory once its source is extracted, patched and configured: an interrupted
# build (Ctrl-C, a lost session) resumes from there, and make compiles only the objects it lacks
# (make deletes the one it was writing when stopped); the kernel is used only once info.json is
# written, after the link, so a half-built one never is
PREPARED = ".prepared"


def _build(spec: KernelSpec, version: str, key: str, out: Path, log: Log) -> KernelInfo:
    started = time.monotonic()
    work = out / "build"
    src, obj = work / spec.package, work / "obj"
    log_file = out / "build.log"
    what = f" ({spec.flavour} flavour)" if spec.flavour else \
        " (SMP, real time: for cells of several vCPUs)" if spec.time_travel_ok else ""
    if (work / PREPARED).exists():
        done = sum(1 for _ in obj.rglob("*.o"))
        log(f"kernel {spec.name}: resuming the interrupted build of {spec.package} {version}{what}: {done} objects "
            f"already compiled (key {key}); log: {log_file}")
    else:
        _prepare(spec, version, key, work, log_file, what, log)
        done = 0

    estimate_file = kernel_root() / f"objects-estimate-{spec.name}"
    estimate = int(estimate_file.read_text()) if estimate_file.exists() else spec.object_estimate
    jobs = os.cpu_count() or 2
    compiled = _make_with_progress(spec.name, src, obj, jobs, estimate, log_file, log, done,
                                   Compiler.for_build(work))
    estimate_file.write_text(str(compiled))

    missing = missing_options(obj / ".config", spec)
    if missing:
        raise FlashbedError(f"kernel {spec.name} config: required options missing after build: "
                            + ", ".join(missing))
    binary = out / "linux"
    shutil.copy2(obj / "linux", binary)
    shutil.copy2(obj / ".config", out / "config")
    release = (obj / "include/config/kernel.release").read_text().strip()
    info = KernelInfo(
        path=str(binary), key=key, name=spec.name, source_package=spec.package, source_version=version,
        release=release, patches=[p.name for p in spec.patch_files()], boot_mode=spec.default_mode.value,
        max_cpus=spec.max_cpus(), build_seconds=round(time.monotonic() - started, 1),
        built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), flavour=spec.flavour or "",
    )
    tmp = out / "info.json.tmp"
    tmp.write_text(json.dumps(asdict(info), indent=2))
    os.replace(tmp, out / "info.json")
    shutil.rmtree(work)  # ~1.5 GB of objects; the binary and config are kept
    log(f"kernel {spec.name}: built {release} in {format_duration(info.build_seconds)}: {binary}")
    return info


def _prepare(spec: KernelSpec, version: str, key: str, work: Path, log_file: Path, what: str, log: Log) -> None:
    """The build directory from nothing: the source extracted and patched, the configuration made."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    log_file.write_text("")
    log(f"kernel {spec.name}: building {spec.package} {version}{what} for ARCH=um (key {key}); log: {log_file}")
    tarball = source_tarball(spec, log)

    log(f"kernel {spec.name}: extracting source")
    with tarfile.open(tarball) as tar:
        tar.extractall(work, **TAR_TRUSTED)
    src = work / spec.package
    if not src.is_dir():
        raise FlashbedError(f"kernel build: {tarball} did not contain {spec.package}/")

    for p in spec.patch_files():
        log(f"kernel {spec.name}: applying {p.name}")
        _run(["patch", "-p1", "--forward", "--fuzz=0", "-i", str(p)], src, log_file, f"patch {p.name}")

    obj = work / "obj"
    fragment = work / "fragment.config"
    fragment.write_text("\n".join(_fragment_lines(spec)) + "\n")
    cc = Compiler.for_build(work)  # the configuration records the compiler make then builds with
    _run(["make", "ARCH=um", f"O={obj}", *cc.make_args, "allnoconfig", f"KCONFIG_ALLCONFIG={fragment}"],
         src, log_file, "configuration", cc.env)
    missing = missing_options(obj / ".config", spec)
    if missing:
        raise FlashbedError(f"kernel {spec.name} config: required options did not stick: " + ", ".join(missing))
    (work / PREPARED).write_text("")


def _make_with_progress(name: str, src: Path, obj: Path, jobs: int, estimate: int,
                        log_file: Path, log: Log, done: int = 0, cc: Compiler = Compiler((), None)) -> int:
    """make's `linux` target with a progress line every 5 s; `done` objects compiled before (a
    resumed build). Returns the objects the whole build compiled (the next build's estimate)."""
    cmd = ["make", "ARCH=um", f"O={obj}", *cc.make_args, f"-j{jobs}", "linux"]
    started = time.monotonic()
    with open(log_file, "a") as lf:
        lf.write(f"$ {' '.join(cmd)}\n")
        # its own process group: stopped (Ctrl-C, SIGTERM) make and its compilers end together, and make
        # deletes the object it was writing (kbuild recompiles any object without its .cmd record)
        proc = subprocess.Popen(cmd, cwd=src, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True, env=cc.env)
        try:
            compiled = _follow(name, proc, lf, started, estimate, done, log)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
            raise
        rc = proc.wait()
    if rc != 0:
        raise FlashbedError(f"kernel build: make failed (exit {rc}); see {log_file}: {_last_error(log_file)}")
    return compiled


def _follow(name: str, proc: subprocess.Popen, lf, started: float, estimate: int, done: int, log: Log) -> int:
    """make's output into the log, a progress line every 5 s; the objects compiled by the end."""
    compiled, last = done, 0.0
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
                # this run's pace over what is left (a resumed build's earlier objects took none of it)
                eta = elapsed * max(estimate - compiled, 0) / (compiled - done)
                log(f"kernel {name}: compiled {compiled}/~{estimate} objects ({frac:.0%}), "
                    f"elapsed {format_duration(elapsed)}, ETA {format_duration(eta)}")
    return compiled
