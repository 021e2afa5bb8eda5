"""`flashbed crashstate replay RUN STATE --image FILE [--check]`: a failed crash state
of a run, rebuilt as a device image from the write log its cell kept.

The image is written to a temporary file beside FILE and renamed into place, so a
failure (a full disk) leaves nothing behind. FILE is never inside a run directory,
never an existing file without --force, and never a block device unless
--destroy-data-on names it (then the real-device checks of `run` apply: not
mounted, not in use, writable).

STATE is `CELL:ID` as the run's results list it (the cell's id, the state's id:
its log position and damage choice), or the state's ID alone when one crash-state
cell of the run has it; `ID+u` names its undamaged twin (the same cut without its
flash damage). The image is what the device held in that state; units a
torn program damaged are zeroes in it (they read as EIO on the served device):
the reply lists their byte ranges. With --check the lab boots on a copy of the
image (dm-dust maps the damaged ranges bad, so they read as EIO again), recovers
and verifies it exactly as the cell did, and says whether the outcome is the one
recorded; a damaged state's undamaged twin is rebuilt into a temporary file and
checked too, which says whose loss it was (the device's, or the filesystem's).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import variants, writeguard
from .clock import from_emulator_pace
from .devices import emulator, presets
from .errors import FlashbedError
from .lab.boundary import BlockDevice, BootSpec, Step
from .lab.guest.guestlib import read_log
from .lab.guest.protocol import UNDAMAGED, StateFacts
from .results import CellResult
from .store import RunStore, resolve_run
from .studies import STUDIES
from .studies.base import CRASHLOG, CellSpec
from .studies.crashstates import (
    CHECKED_FILE,
    CSW,
    LOG_FILE,
    STATES_FILE,
    CrashStates,
    attribute,
    cause_text,
    evidence_text,
    state_ref,
)

STAGED_FILES = ("check.sh", "workload.sh", "workload.fio")
from .status import PowerCutClass
from .studies.failures import shell_arg

DUST_DEVICE = "/dev/mapper/csdust"


@dataclass(frozen=True)
class ReplayState:
    """The crash state a replay rebuilds, found by its reference: its run, its cell's result, its id,
    and the cell's record of its failure."""

    store: RunStore
    result: CellResult
    state: str
    failure: dict[str, Any] | None  # as the cell recorded it (None: a state that did not fail)

    @property
    def logs(self) -> Path:
        return self.store.attempt_dir(self.result)

    @property
    def base(self) -> str:
        """The listed state this one is (itself, or the state an undamaged twin ID+u is of)."""
        return self.state.removesuffix(UNDAMAGED)

    @property
    def is_twin(self) -> bool:
        return self.state != self.base


def find(run: str, ref: str) -> ReplayState:
    """The cell and state `ref` names in run `run` (one clear line if none)."""
    store = resolve_run(run)
    cells = [r for r in store.results() if _crash_study(r.key.study)]
    cell_id, sep, state = ref.rpartition(":")
    if not sep:
        state = ref
        base = state.removesuffix(UNDAMAGED)
        having = [r for r in cells if any(f["state"] == base for f in r.extra.get("failures", []))]
        if len(having) != 1:
            where = ", ".join(state_ref(r.key.id, state) for r in having) or "none of its crash-state cells"
            raise FlashbedError(f"state {state} of run {store.root.name} is failed in {where}: give it as CELL:{state}"
                                f" (the results list each failure that way)")
        cells, cell_id = having, having[0].key.id
    match = [r for r in cells if r.key.id == cell_id]
    if not match:
        raise FlashbedError(f"run {store.root.name} has no crash-state cell {cell_id}: `flashbed results "
                            f"{store.root.name}` lists its failures with their commands")
    r = match[0]
    failure = next((f for f in r.extra.get("failures", []) if f["state"] == state.removesuffix(UNDAMAGED)), None)
    return ReplayState(store, r, state, failure)


def image_target(image: Path, destroy: tuple[str, ...] = (), force: bool = False) -> writeguard.Allowed:
    """--image checked before anything is read or written (writeguard): one line on a path it
    must not write."""
    other = writeguard.unused_destroy(destroy, [image])
    if other is not None:  # a typo must not pass for permission
        raise FlashbedError(f"--destroy-data-on {other} is not the --image {image}: repeat the --image path exactly")
    return writeguard.check(image, "--image", writeguard.Output.FILE, force=force, devices=True, destroy=destroy,
                            noun="the image")


def _full(e: str | OSError) -> bool:
    return (isinstance(e, OSError) and e.errno == errno.ENOSPC) or "os error 28" in str(e)


def rebuild(t: ReplayState, target: writeguard.Allowed) -> dict[str, Any]:
    """The state's image written to `target`, whole or not at all."""
    log = t.logs / CRASHLOG
    if not log.is_dir():
        raise FlashbedError(f"cell {t.result.key.id} kept no write log ({log} is missing): a cell keeps it only "
                            f"when a state failed")
    if target.device:
        with tempfile.TemporaryDirectory(prefix="flashbed-image-") as tmp:
            reply = _rebuild_file(t, log, Path(tmp) / "state.img", target.path)
            _copy_to_device(Path(tmp) / "state.img", target.path)
        return reply
    tmp = writeguard.temp_path(target)
    try:
        reply = _rebuild_file(t, log, tmp, Path(target.given))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    writeguard.place(target, tmp)
    return reply


def _rebuild_file(t: ReplayState, log: Path, path: Path, shown: Path) -> dict[str, Any]:
    try:
        return emulator.rebuild_image(log, t.state, path)
    except emulator.EmulatorError as e:
        if _full(str(e)):
            raise FlashbedError(f"the disk holding {path.parent} is full: free some space or give --image another "
                                f"path (the image of {shown} was not written)") from None
        raise FlashbedError(f"cannot rebuild state {t.state}: {e}") from None


def _copy_to_device(src: Path, node: Path) -> None:
    size = src.stat().st_size
    fd = os.open(node, os.O_WRONLY | os.O_EXCL | os.O_CLOEXEC)
    try:
        have = os.lseek(fd, 0, os.SEEK_END)
        if have < size:
            raise FlashbedError(f"--image {node} holds {have} bytes, less than the {size}-byte image: use a larger "
                                f"device or a file")
        os.lseek(fd, 0, os.SEEK_SET)
        with open(src, "rb") as f:
            while chunk := f.read(1 << 20):
                os.write(fd, chunk)
        os.fsync(fd)
    except OSError as e:
        raise FlashbedError(f"--image {node}: writing the image failed: {e.strerror}") from None
    finally:
        os.close(fd)


def _crash_study(name: str) -> bool:
    """crashstates, or a study on its machinery (appcheck: the user's workload and check)."""
    return isinstance(STUDIES.get(name), CrashStates)


def cell_spec(r: CellResult) -> CellSpec:
    study = STUDIES[r.key.study]
    dev = presets.load_spec(r.key.device)
    stored = {k: v for k, v in r.provenance.get("params", {}).items() if k in study.param_names()}
    clock, pace = from_emulator_pace(r.provenance.get("pace"))
    return CellSpec(key=r.key, device=dev, variant=variants.parse(r.key.fs, dev), params=study.params(**stored),
                    seed=int(r.provenance.get("seed", 1)), pace=pace, clock=clock)


def _on(rs: dict, dev: str, under: str) -> dict:
    """The recovery spec with every mention of disk `under` now naming `dev`."""
    return json.loads(json.dumps(rs).replace(json.dumps(under)[1:-1], dev))


def check(t: ReplayState, image: Path, damaged: list[list[int]], out=sys.stdout) -> tuple[str, str]:
    """Boot the lab on a copy of the image and recover it as the cell did: (class, why)."""
    return check_record(t, image, damaged)[0:2]


def check_record(t: ReplayState, image: Path, damaged: list[list[int]]) -> tuple[str, str, dict]:
    """Boot the lab on a copy of the image and recover it as the cell did: (class, why, its record)."""
    from .lab.kernel import lab_kernel
    from .lab.labs import UmlLab
    study = STUDIES[t.result.key.study]
    spec = cell_spec(t.result)
    v = study.run_variant(spec)
    listed = {s["id"]: s for s in json.loads((t.logs / STATES_FILE).read_text())["states"]}
    if t.base not in listed:
        raise FlashbedError(f"state {t.base} is not among the {len(listed)} states cell {t.result.key.id} listed")
    listed[t.state] = {**listed[t.base], "id": t.state} | ({"damaged": 0} if t.is_twin else {})
    work = study.work_spec(spec, v)
    c = study.check_spec(spec, v, work)
    under = v.device_path()
    if damaged:
        c = dataclasses.replace(c, recover=_on(c.recover, DUST_DEVICE, under), device=DUST_DEVICE, dust=damaged,
                                dust_under=under)
    with tempfile.TemporaryDirectory(prefix="flashbed-replay-") as tmp:
        run_dir = Path(tmp)
        disk = run_dir / "device.img"
        shutil.copyfile(image, disk)  # the lab's recovery writes (journal replay, repair): not to the user's image
        shutil.copyfile(t.logs / LOG_FILE, run_dir / LOG_FILE)
        for staged in STAGED_FILES:  # appcheck: the user's check (and workload) as the cell staged them
            if (t.logs / staged).is_file():
                shutil.copy2(t.logs / staged, run_dir / staged)
        # this state itself, even when the cell shared another's verdict with it or left it out of a sample
        alone = {k: v for k, v in listed[t.state].items() if k not in ("same", "out")}
        (run_dir / STATES_FILE).write_text(json.dumps({"states": [alone]}))
        c = dataclasses.replace(c, serve=False, claim=False)
        res = UmlLab(lab_kernel()).boot(BootSpec(run_dir=run_dir, steps=(Step("check", f"{CSW} check {shell_arg(c)}",
                                                                                  timeout=3600),),
                                                    disks=(BlockDevice(disk),), timeout=3700))
        facts = [StateFacts.from_json(x) for x in read_log(str(run_dir / CHECKED_FILE))]
        if not facts:
            s = res.step("check")
            raise FlashbedError(f"the lab did not check the image: {res.status} "
                                f"{(s.stderr if s else res.error).strip()[-300:]}")
    rec = study._record(facts[0], spec.variant.base.fstype)
    return rec["class"], rec["why"], rec


TWIN_IMAGE = "twin.img"


def check_twin(t: ReplayState, out) -> dict:
    """The state's undamaged twin rebuilt into a temporary file and checked in the lab: its record."""
    twin = dataclasses.replace(t, state=t.base + UNDAMAGED)
    with tempfile.TemporaryDirectory(prefix="flashbed-twin-") as tmp:
        img = Path(tmp) / TWIN_IMAGE
        rebuild(twin, image_target(img))  # a new file in a directory of our own
        print(f"its undamaged twin {twin.state} (the same cut without the flash damage): checking it in the lab",
              file=out)
        return check_record(twin, img, [])[2]


def replay(run: str, ref: str, image: Path, lab_check: bool, out=None, destroy_data_on: tuple[str, ...] = (),
           force: bool = False) -> int:
    out = out or sys.stdout
    image = Path(image)
    target = image_target(image, tuple(destroy_data_on), force)  # before anything is read or written
    t = find(run, ref)
    reply = rebuild(t, target)
    damaged = reply.get("damaged_ranges") or []
    f = t.failure
    print(f"{image}: crash state {t.state} of {t.result.key.id} ({reply.get('kind')}: cut after log record "
          f"{reply.get('pos')}, {reply.get('acked')} records acknowledged, {reply.get('kept')} of "
          f"{reply.get('volatile')} volatile writes kept, {len(damaged)} damaged units)", file=out)
    if f and t.is_twin:
        print(f"the undamaged twin of {t.base}, whose recorded outcome is {f['class']} ({f.get('why', '')})"
              + (f"; {cause_text(f)}" if cause_text(f) else ""), file=out)
    elif f:
        print(f"recorded outcome: {f['class']} ({f.get('why', '')})", file=out)
        if evidence_text(f):
            print(f"the write log: {evidence_text(f)}", file=out)
        if cause_text(f):
            print(f"whose loss: {cause_text(f)}", file=out)
    else:
        print("recorded outcome: none (this state did not fail, or the cell listed only the first failures)",
              file=out)
    if damaged:
        print("damaged byte ranges (zeroes in the image; they read as EIO on the device): "
              + ", ".join(f"{o}+{n}" for o, n in damaged[:20]) + (" ..." if len(damaged) > 20 else ""), file=out)
    print(f"look at it: losetup -f --show {image}, then mount -t {variants.parse(t.result.key.fs).base.fstype} "
          f"that loop device (a journal replay writes to the image: use a copy to keep it as it was)"
          + (", or run this command with --check (the lab, with the damaged ranges as EIO)" if damaged else ""),
          file=out)
    if damaged and not lab_check:
        print(f"whose loss it is: its undamaged twin, `flashbed crashstate replay {run} "
              f"{state_ref(t.result.key.id, t.base + UNDAMAGED)} --image FILE --check`, or this command with --check",
              file=out)
    if not lab_check:
        return 0
    cls, why, rec = check_record(t, image, damaged)
    if t.is_twin:
        print(f"replayed in the lab: {cls} ({why})", file=out)
        return 0
    same = f is not None and cls == f["class"]
    print(f"replayed in the lab: {cls} ({why})" + ("" if f is None else
                                                   " — the same outcome" if same else
                                                   f" — NOT the recorded {f['class']}"), file=out)
    rec["damaged"] = len(damaged)
    tw = check_twin(t, out) if damaged and not PowerCutClass(cls).good else None
    cause = attribute(rec, tw)
    if cause is not None:
        print(f"whose loss, replayed: {cause}" + (f" (its undamaged twin: {tw['class']})" if tw else
                                                  " (no flash damage in this state)"), file=out)
    return 0 if (same or f is None) else 1
