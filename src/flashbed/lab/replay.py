"""Recorded lab boots of real runs, served again without a kernel.

`RecordingLabs(inner, root)` wraps a real lab factory and keeps every boot of
cell C under root/<C>/ (C: the cell's file name without .json):

    boots.json      what the host saw of each boot (BootResult: status, steps, ...)
    files/<i>/      the files boot i's run directory held afterwards: result.json,
                    the guest's outputs (fio JSON, power-cut logs and facts), the
                    host's cut.json, the tail of the console log

`ReplayLabs(root)` serves them back: the cell's i-th boot copies files/<i>/ into
the boot's run directory and returns the recorded BootResult, so a study's
parse() reads what the real guest wrote. The steps asked for must be the
recorded ones, by name: a study whose steps changed needs a new recording
(tests/replay.py records). Host calls are not made again: their answers are
in the recorded steps.
"""

from __future__ import annotations

import json
import shutil
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..clock import Clock, Pace
from ..errors import FlashbedError
from .boundary import BootResult, BootSpec, DeviceSession, HostHandler, LabFactory, StepResult

KEEP_BYTES = 2 << 20  # files larger than this are not kept (images)
CONSOLE_TAIL = 16 << 10  # bytes kept of a console log


def cell_dir(root: Path, cell: Any) -> Path:
    return root / cell.key.file_name.removesuffix(".json")


class RecordingLab:
    """A real lab that keeps what each boot produced."""

    def __init__(self, inner: Any, where: Path):
        self.inner = inner
        self.where = where
        self.boots: list[dict] = []

    @property
    def release(self) -> str:
        return self.inner.release

    def open_session(self, device: Any, scratch: Path, seed: int = 1, pace: Pace = Pace.REAL,
                     clock: Clock = Clock.REAL) -> DeviceSession:
        return self.inner.open_session(device, scratch, seed=seed, pace=pace, clock=clock)

    def boot(self, spec: BootSpec, host: HostHandler | None = None,
             kill: threading.Event | None = None) -> BootResult:
        res = self.inner.boot(spec, host=host, kill=kill)
        files = self.where / "files" / str(len(self.boots))
        shutil.rmtree(files, ignore_errors=True)
        files.mkdir(parents=True)
        for f in sorted(spec.run_dir.iterdir()):
            if f.is_file() and f.stat().st_size <= KEEP_BYTES:
                data = f.read_bytes()
                if f.name == Path(res.console_log).name:
                    data = data[-CONSOLE_TAIL:]
                (files / f.name).write_bytes(data)
        rec = asdict(res)
        rec["console_log"] = Path(res.console_log).name
        self.boots.append(rec)
        (self.where / "boots.json").write_text(json.dumps({"release": self.release, "boots": self.boots}, indent=1))
        return res


class RecordingLabs:
    def __init__(self, inner: LabFactory, root: Path):
        self.inner = inner
        self.root = root

    def __call__(self, cell: Any) -> RecordingLab:
        where = cell_dir(self.root, cell)
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        return RecordingLab(self.inner(cell), where)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


class ReplayLab:
    """One cell's recorded boots, in order."""

    def __init__(self, where: Path):
        self.where = where
        try:
            data = json.loads((where / "boots.json").read_text())
        except FileNotFoundError:
            raise FlashbedError(f"no recorded boots in {where}: record them (tests/replay.py)") from None
        self._release = data["release"]
        self.boots = data["boots"]
        self.served = 0

    @property
    def release(self) -> str:
        return self._release

    def open_session(self, device: Any, scratch: Path, seed: int = 1, pace: Pace = Pace.REAL,
                     clock: Clock = Clock.REAL) -> DeviceSession:
        """No device: the recorded boots hold what the guest saw, and host calls are
        not made again (a replayed emulator cell needs no emulator): a session without
        capabilities."""
        from ..devices.session import _Session
        return _Session(device, scratch, seed=seed, pace=pace, clock=clock)

    def boot(self, spec: BootSpec, host: HostHandler | None = None,
             kill: threading.Event | None = None) -> BootResult:
        if self.served >= len(self.boots):
            raise FlashbedError(f"{self.where}: only {len(self.boots)} boots were recorded")
        i, rec = self.served, dict(self.boots[self.served])
        self.served += 1
        recorded = [s["name"] for s in json.loads((self.where / "files" / str(i) / "steps.json").read_text())["steps"]]
        asked = [s.name for s in spec.steps]
        if asked != recorded:
            raise FlashbedError(f"{self.where}: boot {i} was recorded with steps {recorded}, now asked for {asked}: "
                                f"record it again (tests/replay.py)")
        spec.run_dir.mkdir(parents=True, exist_ok=True)
        for f in sorted((self.where / "files" / str(i)).iterdir()):
            shutil.copyfile(f, spec.run_dir / f.name)
        rec["steps"] = [StepResult(**s) for s in rec["steps"]]
        rec["console_log"] = str(spec.run_dir / rec["console_log"])
        return BootResult(**rec)


class ReplayLabs:
    """Every cell's recorded boots under `root`, and the recorded run's kernel."""

    def __init__(self, root: Path):
        self.root = root

    def __call__(self, cell: Any) -> ReplayLab:
        return ReplayLab(cell_dir(self.root, cell))

    def describe(self) -> dict[str, Any]:
        man = json.loads((self.root / "manifest.json").read_text())
        return {"kernel": man["kernel"], "kernels": man.get("kernels") or {man["kernel"].get("name", "?"): man["kernel"]}}
