"""Run directories: a manifest, one JSON file per finished cell, the logs.

A run is resumable: a cell whose result file exists (and parses) is finished
and never run again; results are written atomically, so a killed run loses at
most the cells that were running.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .errors import FlashbedError
from .locks import try_lock
from .results import CellKey, CellResult, write_json_atomic

ATTEMPT = re.compile(r"attempt-(\d+)")  # an attempt's directory in a cell's logs

# the manifest's fields its readers rely on, and their JSON types (execute.manifest_for writes them)
MANIFEST_FIELDS: dict[str, type] = {
    "schema": int, "run_id": str, "created": str, "profile": str, "request": dict, "repeats": int, "kernel": dict,
    "kernels": dict, "cpus": int, "skipped": list, "tools": dict, "devices": dict, "presets": dict,
    "filesystems": list, "read_only": list, "not_applicable": list, "host": dict, "cells": int}


# a stored request's fields and their JSON types (plan.PlanRequest as asdict writes it)
REQUEST_TEXTS = ("profile", "pace", "target")
REQUEST_LISTS = ("fs", "devices", "studies", "kernels", "clocks", "cpu_profiles")
REQUEST_NUMBERS = ("repeat", "seed", "cpus")


def request_problem(req: dict) -> str:
    """What is wrong with a manifest's stored request ('' if nothing): every reader (the report,
    the results, a resume) relies on its fields' types."""
    for k in REQUEST_TEXTS:
        if k in req and not isinstance(req[k], str):
            return f"{k} is not text"
    for k in REQUEST_LISTS:
        if k in req and not (isinstance(req[k], list) and all(isinstance(x, str) for x in req[k])):
            return f"{k} is not a list of names"
    for k in REQUEST_NUMBERS:
        if k in req and type(req[k]) is not int:
            return f"{k} is not a whole number"
    over = req.get("overrides", {})
    if not (isinstance(over, dict) and all(isinstance(v, dict) for v in over.values())):
        return "overrides are not settings per study"
    if req.get("robust") is not None and type(req["robust"]) is not int:
        return "robust is not a whole number of draws"
    if "tune" in req and type(req["tune"]) is not bool:
        return "tune is not true or false"
    return ""


@dataclass
class RunStore:
    root: Path
    # the run directory as created (resolved) and its (st_dev, st_ino): the manifest and the cells
    # are written there, no symlink followed on the way (writeguard.open_dir)
    pinned: tuple[Path, int, int] | None = field(default=None, compare=False, repr=False)

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    @property
    def cells_dir(self) -> Path:
        return self.root / "cells"

    def logs_dir(self, key: CellKey) -> Path:
        """The cell's directory of logs: each attempt at the cell has its own directory in it
        (new_attempt); a run made before attempts had their own kept its files here."""
        return self.root / "logs" / key.file_name.removesuffix(".json")

    def new_attempt(self, key: CellKey) -> Path:
        """A new, empty directory for one attempt at the cell, `logs/<cell>/attempt-N`. An
        attempt a kill cut short left its files in its own directory, where no later attempt
        reads or appends to them; mkdir fails on a number another process took, so two
        attempts never share one (a Dask worker may still run a dead client's). Made from the
        run directory as created, no symlink followed on the way (writeguard.make_sub): a logs/
        swapped for a link to elsewhere is refused, not written through."""
        from . import writeguard
        cell = self.logs_dir(key)
        base = self.pinned[0] if self.pinned is not None else Path(os.path.realpath(self.root))
        parts = ("logs", cell.name)
        writeguard.make_sub(base, *parts, given=str(self.root))
        taken = [int(m.group(1)) for p in cell.iterdir() if (m := ATTEMPT.fullmatch(p.name))]
        n = max(taken, default=0) + 1
        while True:
            try:
                writeguard.make_sub(base, *parts, f"attempt-{n}", new=True, given=str(self.root))
                return cell / f"attempt-{n}"
            except FileExistsError:
                n += 1

    def attempt_dir(self, result: CellResult) -> Path:
        """Where the attempt that made `result` kept its files."""
        return self.root / result.attempt_dir if result.attempt_dir else self.logs_dir(result.key)

    def prune_attempts(self, result: CellResult) -> None:
        """Everything in the cell's logs but the attempt of its result: attempts that were
        killed, or whose error the result replaces (their write logs can be large). Removed
        through the cell's directory opened with no symlink followed on the way: a logs/ swapped
        for a link to elsewhere removes nothing."""
        from . import writeguard
        keep = self.attempt_dir(result)
        cell = self.logs_dir(result.key)
        if keep == cell or not cell.is_dir():
            return
        base = self.pinned[0] if self.pinned is not None else Path(os.path.realpath(self.root))
        try:
            fd = writeguard.open_dir(base / cell.relative_to(self.root), None, str(cell))
        except FlashbedError:
            return  # not the run's own directory now: nothing of it is removed
        try:
            for name in os.listdir(fd):
                if keep.parent == cell and name == keep.name:
                    continue
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(name, ignore_errors=True, dir_fd=fd)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def create(self, option: str = "the run directory") -> None:
        """Make the run directory, or say in one line why it cannot be made: writeguard decides
        where a run may be (a new or empty directory, or this run; never inside another run,
        never a directory of files that is not a run)."""
        from . import writeguard
        allowed = writeguard.check(self.root, option, writeguard.Output.RUN)
        real = writeguard.make_dir(allowed)
        if not os.access(real, os.W_OK | os.X_OK):
            raise FlashbedError(f"cannot write to the run directory {self.root}: give --out a directory you can write")
        if self.pinned is None or self.pinned[0] != real:
            st = os.stat(real, follow_symlinks=False)
            self.pinned = (real, st.st_dev, st.st_ino)

    def _write_json(self, sub: str, name: str, data: Any) -> None:
        """`data` written as `name` in the run directory (`sub`: a directory of it, made if new),
        opened as created: a run directory, or a directory on its way, swapped for a symlink since
        is refused, not followed."""
        if self.pinned is None:  # a store that was not created here (a test's, a tool's)
            write_json_atomic(self.root / sub / name if sub else self.root / name, data)
            return
        from . import writeguard
        real, dev, ino = self.pinned
        fd = writeguard.open_dir(real, (dev, ino), str(self.root))
        try:
            if sub:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(sub, 0o777, dir_fd=fd)
                try:
                    nxt = os.open(sub, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError as e:
                    raise FlashbedError(f"{self.root / sub} is not the run's own directory now ({e.strerror}): "
                                        f"nothing was written there; look at what replaced it") from None
                os.close(fd)
                fd = nxt
            write_json_atomic(Path(name), data, dir_fd=fd)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Held while cells of this run execute: a second flashbed on the same run
        would start the same cells on the same scratch state."""
        self.create()
        fd = try_lock(self.root / ".lock")
        if fd is None:
            raise FlashbedError(f"run {self.root.name} is being run by another flashbed process: let it finish, "
                                f"or stop it (Ctrl-C) and run this command again to resume")
        try:
            yield
        finally:
            os.close(fd)

    def manifest(self) -> dict[str, Any]:
        try:
            man = json.loads(self.manifest_path.read_text())
        except FileNotFoundError:
            raise FlashbedError(f"{self.root} is not a flashbed run (no manifest.json)") from None
        except (OSError, ValueError) as e:  # empty, garbage, not text, a directory
            why = e.strerror if isinstance(e, OSError) else "not JSON"
            raise FlashbedError(f"{self.manifest_path}: not a flashbed manifest ({why}): this run directory is "
                                f"damaged; start a new run with --out DIR") from None
        if not isinstance(man, dict):
            raise FlashbedError(f"{self.manifest_path}: not a flashbed manifest (not a JSON object): this run "
                                f"directory is damaged; start a new run with --out DIR")
        for key, kind in MANIFEST_FIELDS.items():
            if man.get(key) is not None and (not isinstance(man[key], kind) or isinstance(man[key], bool)):
                raise FlashbedError(f"{self.manifest_path}: field {key} is not a {kind.__name__}: this run directory "
                                    f"is damaged; start a new run with --out DIR")
        bad = request_problem(man.get("request") or {})
        if bad:
            raise FlashbedError(f"{self.manifest_path}: its request's {bad}: this run directory is damaged; start a "
                                f"new run with --out DIR")
        return man

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        self._write_json("", "manifest.json", manifest)

    def cell_path(self, key: CellKey) -> Path:
        return self.cells_dir / key.file_name

    def load(self, key: CellKey) -> CellResult | None:
        p = self.cell_path(key)
        if not p.exists():
            return None
        try:
            return CellResult.from_json(json.loads(p.read_text()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # unreadable: treated as not run

    def finished(self, key: CellKey) -> bool:
        # an infrastructure error (e.g. the emulator did not start) is retried on
        # resume; every other status is a result of the cell
        r = self.load(key)
        return r is not None and not r.status.retryable

    def write(self, result: CellResult) -> None:
        self._write_json("cells", result.key.file_name, result.to_json())

    def results(self) -> Iterator[CellResult]:
        if not self.cells_dir.is_dir():
            return
        for p in sorted(self.cells_dir.glob("*.json")):
            yield self.read_cell(p)

    @staticmethod
    def read_cell(p: Path) -> CellResult:
        """One cell file; one line if it is not a cell result."""
        try:
            return CellResult.from_json(json.loads(p.read_text()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            why = e.strerror if isinstance(e, OSError) else type(e).__name__ if isinstance(e, AttributeError) \
                else str(e) or type(e).__name__
            raise FlashbedError(f"{p}: not a flashbed cell result ({why}): move it out of the run directory "
                                f"or delete it") from None


def resolve_run(ref: str, runs_root: Path = Path("runs")) -> RunStore:
    """A run given as a directory path or as an id under runs/."""
    for cand in (Path(ref), runs_root / ref):
        if (cand / "manifest.json").exists():
            return RunStore(cand)
    raise FlashbedError(f"no run '{ref}': give a run directory or an id under {runs_root}/ "
                        f"(see `ls {runs_root}`)")
