"""Issue 42: the write guard fuzzed by the classes of paths it failed on. Each case builds a
small tree of its own (a user's files, a run directory, a victim directory standing for
/dev/shm or a user's home), asks the guard for a path made of one class's parts, and lets
the guard's own writers (write_file, make_dir, the run store) write what it allowed. The
one rule every case checks: the guard refuses in one line, or the bytes land at the path
it resolved and nowhere else; the victim, the run's results and the user's files are
never changed.

Classes: `~` (expanded at the edge, options.path), `..` components, symlinks at every level
(to the victim, to the run, dangling, loops), a run's subdirectories, directories holding
files of the command's names without its index, and a swap of a directory on the way for a
symlink between the check and the write.

1 000 cases in every `make test` (a fixed seed, about a second or two);
FLASHBED_GUARD_FUZZ_CASES=N runs N from a fresh seed. The last test prints the cases per
class and the time they took.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

from flashbed import writeguard
from flashbed.errors import FlashbedError
from flashbed.options import BadValue
from flashbed.options import path as option_path
from flashbed.store import RunStore

MORE = int(os.environ.get("FLASHBED_GUARD_FUZZ_CASES", "0"))
CASES = MORE or 1000
SEED = random.randrange(1 << 30) if MORE else 42
CLASSES = ("tilde", "dotdot", "symlinks", "run subdirectories", "same names", "swap")
COUNTS: dict[str, int] = {}
REFUSED: dict[str, int] = {}
TIMES: list[float] = []
MARKS = ("smoke.json", "probe.json", "fusecost.json")
NAMES = ("smoke.json", "probe.json", "manifest.json", "report.md", "summary.json", "cells", "logs", ".lock",
         writeguard.DIR_INDEX, "p.toml")


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root`, not following symlinks: a file by its bytes, a link by its target."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = Path(d) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_file():
                out[rel] = p.read_bytes().hex()
            else:
                out[rel] = "dir"
    return out


class World:
    """One case's tree: home/ (with the user's files), cwd/, a run, a victim, a few links."""

    def __init__(self, root: Path, rnd: random.Random):
        self.root, self.rnd = root, rnd
        self.home, self.cwd, self.victim = root / "home", root / "cwd", root / "victim"
        for d in (self.home / "docs", self.cwd / "a" / "b", self.victim):
            d.mkdir(parents=True)
        (self.home / "docs" / "report.md").write_text("my notes")
        (self.victim / "keep").write_text("the victim's bytes")
        self.run = RunStore(root / "run")
        (self.run.root / "cells").mkdir(parents=True)
        (self.run.root / "manifest.json").write_text(json.dumps({"run_id": "run"}))
        (self.run.root / "cells" / "one.json").write_text("{}")
        (self.run.root / "logs").mkdir()

    def dirs(self) -> list[Path]:
        return [self.home, self.home / "docs", self.cwd, self.cwd / "a", self.cwd / "a" / "b", self.run.root,
                self.run.root / "cells", self.run.root / "logs", self.victim]

    def protected(self, whole_victim: bool) -> dict[str, str]:
        """What no case may change: the run, the user's file, the victim's file; and the whole
        victim where nothing but a swap after the check leads there."""
        return {"victim": json.dumps(snapshot(self.victim)) if whole_victim else (self.victim / "keep").read_text(),
                "run": json.dumps(snapshot(self.run.root)), "docs": (self.home / "docs" / "report.md").read_text()}


def _component(w: World) -> str:
    return w.rnd.choice(["a", "b", "x", "new", "..", ".", "cells", "logs", "docs", "run", "~", "p.toml",
                         "probe.json"])


def _links(w: World, victim: bool) -> None:
    """Symlinks at a random level: to the victim (a user's own link: it is decided by what it
    points to), to the run or its cells, dangling, to itself."""
    for _ in range(w.rnd.randint(1, 4)):
        where = w.rnd.choice(w.dirs()[:5]) / w.rnd.choice(["l1", "l2", "x", "new"])
        if os.path.lexists(where):
            continue
        to = w.rnd.choice([w.victim] * victim + [w.run.root, w.run.root / "cells", w.root / "nowhere", where,
                                                 w.home / "docs", w.cwd / "a"])
        where.symlink_to(to)


def _path(w: World, cls: str) -> str:
    rnd = w.rnd
    parts = [_component(w) for _ in range(rnd.randint(1, 4))]
    if cls == "tilde":
        # ~user is the passwd's home, outside the case's tree: only ~ (its $HOME) and a user nobody is
        return rnd.choice(["~", "~/", "~/", "~nosuchuser42/"]) + "/".join(parts)
    if cls == "run subdirectories":
        return str(w.run.root / rnd.choice(["cells", "logs", "new", "cells/deeper", "logs/x/y", "."]))
    base = rnd.choice(w.dirs()[:5] + [w.run.root])
    return str(base / "/".join(parts))


def _same_names(w: World, d: Path) -> None:
    """A directory of the user's holding files of flashbed's names (no index of a command's)."""
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:  # a link on the way (dangling, a loop, to a file): that case is the symlink class's
        return
    for n in w.rnd.sample(NAMES, w.rnd.randint(1, 3)):
        p = d / n
        if n == writeguard.DIR_INDEX:  # a forged index: a symlink to one, or one naming another command
            if w.rnd.random() < 0.5:
                (w.victim / "index").write_text(json.dumps({"made_by": w.rnd.choice(MARKS)}))
                p.symlink_to(w.victim / "index")
                continue
            p.write_text(json.dumps({"made_by": "someone"}))
        elif not os.path.lexists(p):
            p.write_text("the user's " + n)


def _swap(w: World, allowed: writeguard.Allowed) -> None:
    """A directory on the way to what the guard allowed, inside the case's tree, moved aside and
    replaced by a symlink to the victim (or the run)."""
    keep = (w.home, w.home / "docs", w.run.root)  # the protected ones stay where they are to be looked at
    on_way = [d for d in (allowed.path, *allowed.path.parents) if w.root in d.parents and d.is_dir()
              and not d.is_symlink() and d != allowed.path and not any(k == d or k in d.parents for k in keep)]
    if allowed.anchor is not None and allowed.anchor == allowed.path and allowed.path.is_dir() and \
            w.root in allowed.path.parents and not any(k == allowed.path or k in allowed.path.parents for k in keep):
        on_way.append(allowed.path)
    if not on_way:
        return
    d = w.rnd.choice(on_way)
    d.rename(d.with_name(d.name + ".moved"))
    d.symlink_to(w.rnd.choice([w.victim, w.run.root]))


def one_case(case: Path, rnd: random.Random, cls: str) -> None:
    w = World(case / "u" / "v" / "w" / "z", rnd)  # four `..` from anywhere in it stay in the case
    if cls in ("symlinks", "swap") or rnd.random() < 0.3:
        _links(w, victim=cls != "swap")
    os.environ["HOME"] = str(w.home)
    given = _path(w, cls)
    target = rnd.choice([writeguard.Output.FILE, writeguard.Output.DIR, writeguard.Output.RUN,
                         writeguard.Output.REPORT])
    mark = rnd.choice(MARKS) if target is writeguard.Output.DIR else ""
    if cls == "same names":
        _same_names(w, Path(os.path.normpath(given)))
    if cls == "run subdirectories":
        target = rnd.choice([writeguard.Output.REPORT, writeguard.Output.DIR, writeguard.Output.FILE])
    before = w.protected(cls == "swap")
    try:
        p = option_path(given)  # the edge: `~` expanded here, or refused
        allowed = writeguard.check(p, "--out", target, mark=mark, force=rnd.random() < 0.3,
                                   own_run=w.run.root if target is writeguard.Output.REPORT else None)
        assert not str(p).startswith("~") or not given.startswith("~"), given
        assert allowed.path == Path(os.path.realpath(p)), (given, allowed.path)
        swapped = cls == "swap"
        if swapped and target is not writeguard.Output.RUN:  # a run store checks again when it creates: after it
            _swap(w, allowed)
        if target is writeguard.Output.FILE:
            writeguard.write_file(allowed, b"flashbed's bytes")
            written = allowed.path
        elif target is writeguard.Output.RUN:
            store = RunStore(p)
            store.create()
            if swapped:
                _swap(w, writeguard.Allowed(str(p), store.pinned[0], True, anchor=store.pinned[0]))
            store.write_manifest({"run_id": "fuzz"})
            written = store.pinned[0]
        else:
            written = writeguard.make_dir(allowed)
            writeguard.write_file(writeguard.check(written / "out.txt", "--out", writeguard.Output.FILE,
                                                   force=True, own_run=w.run.root if target is
                                                   writeguard.Output.REPORT else None), b"flashbed's bytes")
    except (FlashbedError, BadValue) as e:
        assert "\n" not in str(e) and str(e), (cls, given, str(e))
        REFUSED[cls] = REFUSED.get(cls, 0) + 1
    else:
        # written where the guard resolved, never into the run, the victim or the user's docs
        assert case in written.parents, (cls, given, written)
        if target is writeguard.Output.RUN and written == w.run.root:  # the run itself, resumed: its manifest
            before["run"] = w.protected(False)["run"]
        assert cls != "swap" or not str(written).startswith(str(w.victim)), (cls, given, written)
    after = w.protected(cls == "swap")
    assert after == before, (cls, given, target, {k for k in after if after[k] != before[k]})


@pytest.mark.parametrize("cls", CLASSES)
def test_the_guard_refuses_or_writes_exactly_where_it_checked(cls, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", os.environ.get("HOME", "/"))  # restored afterwards
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # where the bytes land is the question, not their durability
    monkeypatch.chdir(tmp_path)
    rnd = random.Random(f"{SEED}-{cls}")
    n = CASES // len(CLASSES) + (1 if CLASSES.index(cls) < CASES % len(CLASSES) else 0)
    start = time.monotonic()
    for i in range(n):
        root = tmp_path / f"case{i}"
        root.mkdir()
        os.chdir(root)
        try:
            one_case(root, rnd, cls)
        finally:
            os.chdir(tmp_path)
        COUNTS[cls] = COUNTS.get(cls, 0) + 1
    TIMES.append(time.monotonic() - start)


def test_guard_fuzz_case_count(capsys, record_property):
    total = sum(COUNTS.values())
    record_property("guard_fuzz_cases", total)
    with capsys.disabled():
        print(f"\nguard fuzz (seed {SEED}): {total} cases in {sum(TIMES):.1f} s, each refused in one line or "
              f"written only where the guard resolved ("
              f"{', '.join(f'{k}: {n} ({REFUSED.get(k, 0)} refused)' for k, n in COUNTS.items())})")
    assert total >= CASES or not COUNTS
