"""Cell results: the data every renderer reads. Versioned; written atomically.

One JSON file per cell. A cell is one (device, filesystem variant, study, case,
repeat); its result holds tidy measurements (one row per case × metric, with
units), the emulator's statistics per workload phase, and how it was obtained.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .status import CellStatus

SCHEMA_VERSION = 1
# why a study was left out for a filesystem, as a run's manifest stores it (plan.NotApplicable.why)
READ_ONLY = "read-only"


def printable(text: str) -> str:
    """Text from outside flashbed (a user's check or workload, a guest's output) as one line of
    printable characters: control characters (a terminal escape, a NUL, a newline) written out
    as escapes, so it can neither drive the terminal nor break report.md."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclass(frozen=True)
class CellKey:
    device: str  # device label: preset name, with capacity when not the preset's own
    fs: str  # filesystem variant name (ext4, ext4+noatime, ext2@f2fs, ...)
    study: str
    case: str = ""  # a study's sub-case when it splits into several cells ("" if one)
    repeat: int = 0
    # the lab kernel's label (7.3, 6.12, 7.3:ptrace) when the run has several, else "": a run
    # of one kernel keeps the ids it had before the kernel axis (the manifest names its kernel)
    kernel: str = ""
    # the lab's clock (real, virtual) when the run has both, else "": likewise
    clock: str = ""
    # the CPU profile of a virtual-time cell when the run has several, else "": likewise
    cpu: str = ""

    @property
    def id(self) -> str:
        parts = [self.device] + ([f"kernel-{self.kernel}"] if self.kernel else []) \
            + ([f"clock-{self.clock}"] if self.clock else []) + ([f"cpu-{self.cpu}"] if self.cpu else []) \
            + [self.fs, self.study]
        parts += ([self.case] if self.case else []) + [f"r{self.repeat}"]
        return "/".join(parts)

    @property
    def file_name(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.+@=-]", "_", self.id.replace("/", "__")) + ".json"


@dataclass(frozen=True)
class Measurement:
    """One figure: e.g. case 'randwrite 4k direct', metric 'bandwidth', 12.3 'MB/s'."""

    case: str
    metric: str
    value: float
    unit: str


@dataclass
class CellResult:
    key: CellKey
    status: CellStatus
    measurements: list[Measurement] = field(default_factory=list)
    headline: str = ""  # one line for progress and `flashbed results`
    error: str = ""
    seconds: float = 0.0  # wall time of the whole cell
    # emulator statistics per workload phase (write amplification, NAND programs, ...)
    device_stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    # how it was obtained: preset, capacity, kernel release, tool versions
    provenance: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # study-specific raw data (fio JSON excerpts)
    logs: dict[str, str] = field(default_factory=dict)  # name -> path (the console log of each boot)
    # the directory of the attempt that made this result, relative to the run directory (each
    # attempt has its own: store.new_attempt); "" in runs made before: logs/<cell>
    attempt_dir: str = ""
    schema: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        self.status = CellStatus(self.status)

    @property
    def ok(self) -> bool:
        return self.status.ok

    def value(self, case: str, metric: str) -> float | None:
        return next((m.value for m in self.measurements if m.case == case and m.metric == metric), None)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if not self.key.kernel:
            del d["key"]["kernel"]  # one kernel: the cell file as it was before the kernel axis
        if not self.key.clock:
            del d["key"]["clock"]  # one clock: likewise, as before the clock axis
        if not self.key.cpu:
            del d["key"]["cpu"]  # one CPU profile: likewise
        d["id"] = self.key.id
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> "CellResult":
        if not isinstance(d, dict):
            raise ValueError("not a JSON object")
        if d.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"cell result schema {d.get('schema')} is not {SCHEMA_VERSION}")
        if not isinstance(d.get("key"), dict) or not isinstance(d.get("measurements"), list):
            raise ValueError("no key or measurements")
        d = dict(d)
        d.pop("id", None)
        d["key"] = CellKey(**d["key"])
        d["measurements"] = [Measurement(**m) for m in d["measurements"]]
        return CellResult(**d)


def write_json_atomic(path: Path, data: Any, dir_fd: int | None = None) -> None:
    """Write-then-rename with fsync: a crash leaves the old file or the new, never half. With
    `dir_fd`, `path` is a name in that directory (opened by the caller as the guard checked it)."""
    if dir_fd is not None:
        name, tmp_name = path.name, f"{path.name}.tmp{os.getpid()}"
        try:
            fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=dir_fd)
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=False)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp_name, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            os.fsync(dir_fd)
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name, dir_fd=dir_fd)
            if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
                from .errors import FlashbedError
                raise FlashbedError("the disk holding the run directory is full: free some space, then run the "
                                    "same command again (finished cells are kept)") from None
            raise
        return
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)  # no half-written file left beside the results
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            from .errors import FlashbedError
            raise FlashbedError(f"the disk holding {path.parent} is full: free some space, then run the same "
                                f"command again (finished cells are kept)") from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
