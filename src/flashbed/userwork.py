"""The user's own workload and check (`--workload FILE`, `--check FILE`), checked once at the edge.

A workload is a fio job file (`.fio`) or an executable script; a check is an executable.
What a cell needs of either is a `UserFile`: its absolute path, its kind and the hash of its
content. The hash goes into the run's request (hence its id): a file edited after a run
started makes a new run, never a resumed one that mixes results; the cell copies the file
into its run directory and refuses one whose content no longer matches (studies/workload.py).

fio options that would take the job outside the filesystem under test are refused: flashbed
sets `directory=` itself, so a job names its files relative to it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from .errors import FlashbedError


# the lifetime phase's passes of the workload that --age implies (unless --set workload.passes=N)
AGE_PASSES = 6


class Kind(StrEnum):
    FIO = "fio"
    SCRIPT = "script"


@dataclass(frozen=True)
class UserFile:
    path: str  # absolute
    kind: Kind
    digest: str  # sha256 of the content, 16 hex digits

    @property
    def name(self) -> str:
        return Path(self.path).name


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


# fio engines that do I/O through the filesystem's files (the rest reach a device, the
# network or run programs: exec, sg, rbd, nbd, http, spdk, ...)
FIO_ENGINES = frozenset({
    "sync", "psync", "vsync", "pvsync", "pvsync2", "libaio", "io_uring", "posixaio", "mmap", "splice",
    "falloc", "ftruncate", "filecreate", "filestat", "filedelete", "dircreate", "dirstat", "dirdelete", "null",
})
# options whose value names files: they must stay under directory= (relative, no ..)
FIO_PATHS = frozenset({
    "filename", "filename_format", "opendir", "read_iolog", "write_iolog", "verify_state_save",
    "write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log", "lockfile_path",
})
# options that escape the filesystem under test whatever their value
FIO_REFUSED = {
    "directory": "flashbed sets directory= to the filesystem under test",
    "exec_prerun": "it runs a program outside fio's job",
    "exec_postrun": "it runs a program outside fio's job",
    "replay_redirect": "it sends the I/O to another device",
    "ioscheduler": "it changes the lab's block layer, not the job",
    "include": "an included file is not part of the workload's content hash",
    "mem": "a memory-mapped file can live outside the filesystem",
    "iomem": "a memory-mapped file can live outside the filesystem",
}
_LINE = re.compile(r"^(?:\[(?P<section>[^\]]+)\]|(?P<key>[A-Za-z0-9_]+)\s*(?:=\s*(?P<value>.*))?)$")
# fio's own expansions in a file name (filename_format): the job's name and numbers, not the environment
FIO_KEYWORDS = re.compile(r"\$(jobname|jobnum|filenum|clientuid)\b")


def fio_problems(text: str) -> list[str]:
    """What in a fio job file escapes the filesystem under test or is not fio syntax (one line each)."""
    out: list[str] = []
    sections = jobs = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("include "):
            out.append(f"line {n}: include: {FIO_REFUSED['include']}")
            continue
        mt = _LINE.match(line)
        if not mt:
            out.append(f"line {n}: '{line[:60]}' is not a [section], an option or option=value")
            continue
        if mt["section"]:
            sections += 1
            name = mt["section"].strip()
            if name != "global":
                jobs += 1
                if "/" in name:
                    out.append(f"line {n}: job name [{name}]: fio names a job's files after it (with no "
                               f"filename=), so it must not hold a /")
            continue
        if not sections:
            out.append(f"line {n}: option '{mt['key']}' before any [section]")
            continue
        key, value = mt["key"].lower(), (mt["value"] or "").strip()
        if key in FIO_REFUSED:
            out.append(f"line {n}: {key}= is not allowed: {FIO_REFUSED[key]}")
        elif key.startswith("exec_"):
            out.append(f"line {n}: {key}= is not allowed: it runs a program outside fio's job")
        elif key == "ioengine" and value.split(":")[0] not in FIO_ENGINES:
            out.append(f"line {n}: ioengine={value} does not do its I/O through the filesystem's files: "
                       f"use one of {', '.join(sorted(FIO_ENGINES))}")
        elif key in FIO_PATHS or key.endswith("_log") and value:
            for part in value.split(":"):
                if part.startswith("/") or ".." in Path(part).parts or "$" in FIO_KEYWORDS.sub("", part):
                    out.append(f"line {n}: {key}={value} leaves the filesystem under test: name files "
                               f"relative to it (no leading /, no .., no $ but fio's $jobname, $jobnum, "
                               f"$filenum)")
                    break
    if not jobs and not out:
        out.append("it has no [job] section" + (" (only [global])" if sections else ""))
    return out


def _fio_parse(path: Path) -> str:
    """fio's own reading of the job file ('' if it takes it)."""
    if shutil.which("fio") is None:
        raise FlashbedError("fio is not installed (Debian package fio): it is needed to run a .fio workload")
    r = subprocess.run(["fio", "--parse-only", "--warnings-fatal", str(path)], capture_output=True, text=True,
                       timeout=60, cwd=path.parent)
    if r.returncode == 0:
        return ""
    lines = [ln.strip() for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
    return lines[0] if lines else f"fio --parse-only exited {r.returncode}"


def load(path_text: str, option: str, *, fio_allowed: bool = True) -> UserFile:
    """The file given to `option` (--workload, --check), checked; one clear line if it cannot run."""
    path = Path(path_text).expanduser()
    if not path.is_file():
        why = ("no such file" if not os.path.lexists(path) else "is a directory: give a file" if path.is_dir()
               else "is not a regular file: give a file" if path.exists() else "is a broken symbolic link")
        raise FlashbedError(f"{option} {path_text}: {why}")
    path = path.resolve()
    if fio_allowed and path.suffix == ".fio":
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise FlashbedError(f"{option} {path_text}: cannot read it as a fio job file ({e})") from None
        problems = fio_problems(text)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise FlashbedError(f"{option} {path_text}: {problems[0]}{more}")
        why = _fio_parse(path)
        if why:
            raise FlashbedError(f"{option} {path_text}: fio does not accept it: {why}")
        return UserFile(str(path), Kind.FIO, digest(path))
    if not os.access(path, os.X_OK):
        what = "a fio job file (.fio) or an executable script" if fio_allowed else "an executable"
        raise FlashbedError(f"{option} {path_text} is not executable: chmod +x it (it must be {what})")
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise FlashbedError(f"{option} {path_text}: cannot read it ({e.strerror})") from None
    if not (head.startswith(b"#!") or head == b"\x7fELF"):  # what the lab's kernel can execute
        raise FlashbedError(f"{option} {path_text} is neither a script (its first line #!/bin/sh or the like) nor "
                            f"a program (ELF): the lab could not run it")
    return UserFile(str(path), Kind.SCRIPT, digest(path))


def overrides(workload: UserFile, check: UserFile | None) -> dict[str, dict[str, object]]:
    """The --set values of the studies that run them (the run id covers every one of them)."""
    w = {"file": workload.path, "digest": workload.digest, "kind": str(workload.kind)}
    out: dict[str, dict[str, object]] = {"workload": dict(w)}
    if check is not None:
        out["appcheck"] = {**w, "check": check.path, "check_digest": check.digest}
    elif workload.kind is Kind.FIO:
        out["appcheck"] = dict(w)  # crash states with fio's own verification (studies/appcheck.py)
    return out


def check_resumable(overrides: dict[str, dict]) -> None:
    """One line if a run's workload or check file (its request's overrides) is gone or changed
    since the run started: a resume needs the files its id was made of (else every cell would
    fail on its own, one after another)."""
    for values in overrides.values():
        for key, dkey, option in (("file", "digest", "--workload"), ("check", "check_digest", "--check")):
            path, want = values.get(key), values.get(dkey)
            if not path or not want:
                continue
            try:
                have = digest(Path(path))
            except OSError as e:
                raise FlashbedError(f"this run's {option} {path} cannot be read ({e.strerror}): restore it to "
                                    f"resume the run") from None
            if have != want:
                raise FlashbedError(f"this run's {option} {path} changed since the run started (content hash "
                                    f"{want}): restore it to resume, or run the command again without --resume "
                                    f"for a new run of the new content")


def stage(path: str, want: str, dest: Path) -> Path:
    """Copy the user's file into a cell's run directory (the guest's way to it), refusing one
    edited since the run started (its content hash is part of the run's identity)."""
    src = Path(path)
    try:
        data = src.read_bytes()
    except OSError as e:
        raise FlashbedError(f"{path}: cannot read it ({e}): the run needs the file it started with") from None
    if hashlib.sha256(data).hexdigest()[:16] != want:
        raise FlashbedError(f"{path} changed since this run started (content hash {want}): run it again without "
                            f"--resume for a new run of the new content")
    dest.write_bytes(data)
    dest.chmod(0o755)
    return dest
