"""Issue 42: the write guard fuzzed by the classes of paths it failed on. Each case builds a
small tree of its own (a user's files, a run directory, a victim directory standing for
/dev/shm or a user's home), asks the guard for a path made of one class's parts, and lets
the guard's own writers (write_file, make_dir, the run store) write what it allowed. The
one rule every case checks: the guard refuses in one line, or the bytes land at the path
it resolved and nowhere else; the victim, the run's results and the user's files are
never changed.

Classes: `~` (expanded at the edge, options.path), `..` components, symlinks at every level
(to the victim, to the run, dangling, loops), a run's subdirectories, directories holding
files of the command's names without its index, a swap of a directory on the way for a
symlink between the check and the write, and an ordinary user: any of those cases in a
process that dropped root (uid and gid 65534, no supplementary groups; the machine's tests
run as root, who can search and write every directory), with directories on the way the user
cannot search or cannot write (mode 000 or 555) until the write is done. A guard that lets a
PermissionError through fails the case: the user would get it as the command's last word.

1 000 cases in every `make test` (a fixed seed, about a second or two);
FLASHBED_GUARD_FUZZ_CASES=N runs N from a fresh seed. The last test prints the cases per
class and the time they took.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import tempfile
import time
import traceback
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
CLASSES = ("tilde", "dotdot", "symlinks", "run subdirectories", "same names", "swap", "ordinary user")
PATH_CLASSES = CLASSES[:-1]
NOBODY = 65534  # the unprivileged user and group of the ordinary-user class
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
        self.moved: tuple[Path, Path] | None = None  # the directory a swap moved aside, and where
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
    try:
        d.rename(d.with_name(d.name + ".moved"))
        w.moved = (d, d.with_name(d.name + ".moved"))
    except PermissionError:  # an ordinary user's directory it cannot write: no one of its rights swaps it
        return
    d.symlink_to(w.rnd.choice([w.victim, w.run.root]))


def _lock_out(w: World) -> list[tuple[Path, int]]:
    """Directories on the way the user cannot search (000) or cannot write (555): the user's own
    (home, cwd and below; never the victim, the run or the docs, whose bytes are compared);
    returns them with their modes, to be given back before the comparison."""
    out = []
    picked = w.rnd.sample([w.home, w.cwd, w.cwd / "a", w.cwd / "a" / "b", w.root], w.rnd.randint(1, 2))
    for d in sorted(picked, key=lambda p: len(p.parts), reverse=True):  # the deeper first: still reachable
        if d.is_dir() and not d.is_symlink():
            out.append((d, d.stat().st_mode & 0o7777))
            d.chmod(w.rnd.choice([0o000, 0o555, 0o111]))
    return out


def one_case(case: Path, rnd: random.Random, cls: str) -> None:
    as_user = cls == "ordinary user"
    if as_user:
        cls = rnd.choice(PATH_CLASSES)
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
    locked = _lock_out(w) if as_user else []
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
        kind = "ordinary user" if as_user else cls
        REFUSED[kind] = REFUSED.get(kind, 0) + 1
        written = None
    else:
        # written where the guard resolved, never into the run, the victim or the user's docs
        assert case in written.parents, (cls, given, written)
        if target is writeguard.Output.RUN and written == w.run.root:  # the run itself, resumed: its manifest
            before["run"] = w.protected(False)["run"]
        assert cls != "swap" or not str(written).startswith(str(w.victim)), (cls, given, written)
    finally:
        for d, mode in reversed(locked):
            if w.moved is not None and (d == w.moved[0] or w.moved[0] in d.parents):
                d = w.moved[1] / d.relative_to(w.moved[0])  # a swapped one was moved aside, with what is in it
            d.chmod(mode)
    after = w.protected(cls == "swap")
    assert after == before, (cls, given, target, {k for k in after if after[k] != before[k]})


def _cases(top: Path, cls: str, n: int) -> None:
    rnd = random.Random(f"{SEED}-{cls}")
    for i in range(n):
        root = top / f"case{i}"
        root.mkdir()
        os.chdir(root)
        try:
            one_case(root, rnd, cls)
        finally:
            os.chdir(top)
        COUNTS[cls] = COUNTS.get(cls, 0) + 1


def _as_nobody(cls: str, n: int) -> None:
    """The cases run in a child that dropped root, in a directory of its own (the test's tmp_path
    is root's, which the user cannot search); its counts, or the failing case, come back by pipe."""
    top = Path(tempfile.mkdtemp(prefix="guard-fuzz-user-"))
    os.chown(top, NOBODY, NOBODY)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(r)
        code, said = 1, ""
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            _cases(top, cls, n)
            code, said = 0, json.dumps([COUNTS.get(cls, 0), REFUSED.get(cls, 0)])
        except BaseException:  # noqa: BLE001 - everything goes back to the parent, which fails the test
            said = traceback.format_exc()
        finally:
            os.write(w, said.encode())
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read().decode()
    _, status = os.waitpid(pid, 0)
    for d, dirs, _ in os.walk(top):  # modes the failing case may have left, so the tree can go
        for x in dirs:
            if not (Path(d) / x).is_symlink():
                with contextlib.suppress(OSError):
                    os.chmod(Path(d) / x, 0o700)
    shutil.rmtree(top, ignore_errors=True)
    assert os.waitstatus_to_exitcode(status) == 0, said
    COUNTS[cls], REFUSED[cls] = json.loads(said)


def _share(cls: str) -> int:
    """The cases of class `cls`: CASES spread over the classes, the first ones one more."""
    return CASES // len(CLASSES) + (1 if CLASSES.index(cls) < CASES % len(CLASSES) else 0)


@pytest.mark.parametrize("cls", CLASSES)
def test_the_guard_refuses_or_writes_exactly_where_it_checked(cls, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", os.environ.get("HOME", "/"))  # restored afterwards
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # where the bytes land is the question, not their durability
    monkeypatch.chdir(tmp_path)
    n = _share(cls)
    start = time.monotonic()
    if cls == "ordinary user":
        if os.geteuid() != 0:
            pytest.skip("drops root to an ordinary user: the tests run as one already")
        _as_nobody(cls, n)
    else:
        _cases(tmp_path, cls, n)
    TIMES.append(time.monotonic() - start)


def test_guard_fuzz_case_count(capsys, record_property):
    total = sum(COUNTS.values())
    record_property("guard_fuzz_cases", total)
    with capsys.disabled():
        print(f"\nguard fuzz (seed {SEED}): {total} cases in {sum(TIMES):.1f} s, each refused in one line or "
              f"written only where the guard resolved ("
              f"{', '.join(f'{k}: {n} ({REFUSED.get(k, 0)} refused)' for k, n in COUNTS.items())})")
    # a process counts the cases it ran: under pytest -n without make test's loadgroup the classes' tests
    # may have run on other workers than this one, so each class counted here is held to its own share
    # (the shares make CASES: all of them here, CASES in all)
    assert all(n >= _share(cls) for cls, n in COUNTS.items()), COUNTS
