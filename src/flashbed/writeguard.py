"""What flashbed may write: one decision per path a user can name, made before anything is
written, after symlinks are resolved.

Every command's outputs go through `check`: run directories (`run --out`), reports (`report
--out`), crash-state images (`crashstate replay --image`), presets (`probe --write-preset`),
the probe's and the smoke test's output directories, a kept bench run (`bench clock --keep`)
and the lab's disks (`lab exec --disk`). The rules, in this order:

  - a character device never; a block device only where the command writes devices (an
    image, a lab disk), when --destroy-data-on names the resolved device, and when the
    real-device checks pass (devices/realdev.py: not mounted, not the host's root, boot or
    swap, not held by device-mapper, md or LVM, writable);
  - never a new file under /dev, /proc or /sys;
  - never inside a run directory other than the command's own (its results, another run's
    report);
  - a file written whole (an image, a preset): new, or an existing regular file with --force;
  - never inside a run directory below its top, not even the command's own: a run's cells/
    and logs/ are nobody's output directory;
  - a directory filled with the command's own files: new, empty, or one this command made
    (its index, DIR_INDEX, written when the directory was taken: a file of the command's
    output's name is no proof), or any directory with --force (then the command's index
    replaces whatever stood there under its name); a run directory: new, empty, or a flashbed run (its
    manifest): a directory that is not a run never becomes one;
  - a report's directory: the run's own, or any other (report/output.py writes only the
    files it owns there, and refuses to replace a file of the same name it did not write);
  - a lab disk (a file or device the lab writes in place): it must exist; a file not named by
    --destroy-data-on is not written (the lab gets a copy-on-write overlay of it).

The result names the resolved path and pins the directory the writer writes in (its device
and inode): the writers here (`write_file`, `place`, `make_dir`, the run store's cells and
manifest) open that directory again with no symlink followed on any component (`open_dir`:
openat2's RESOLVE_NO_SYMLINKS, else component by component with O_NOFOLLOW), check it is
the pinned one, and write relative to that descriptor: a parent swapped for a symlink after
the check is refused, not followed. `write_file` never replaces a file it was not allowed to.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import stat
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from .errors import FlashbedError

PSEUDO_ROOTS = ("/dev", "/proc", "/sys")  # the kernel's own trees: flashbed makes nothing there
RUN_MARK = "manifest.json"  # what makes a directory a flashbed run (store.RunStore)
OWN_FILES = frozenset({".lock"})  # what a run directory may hold before its manifest is written
DIR_INDEX = ".flashbed-dir.json"  # in a directory a command filled: which command took it (`make_dir`)


class Output(Enum):
    """What the command writes at the path."""

    FILE = "file"  # a file written whole, tmp + rename: an image, a preset
    DIR = "directory"  # a directory filled with the command's own files
    RUN = "run directory"
    REPORT = "report directory"
    DISK = "disk"  # a file or block device the lab writes in place


@dataclass(frozen=True)
class Allowed:
    """A path the command may write, as decided: where to write (resolved) and how."""

    given: str  # as the user gave it (for messages)
    path: Path  # resolved
    exists: bool
    device: bool = False  # a block device (checked, named by --destroy-data-on)
    replace: bool = False  # an existing file the user let flashbed replace (--force)
    in_place: bool = True  # a lab disk the lab may write itself (else an overlay takes its writes)
    mark: str = ""  # a directory's: the command's name for it in DIR_INDEX (`make_dir` writes it)
    # the existing directory the writer writes in (a file's parent; a directory itself, or its
    # nearest existing parent when it is new) and its (st_dev, st_ino) when checked
    anchor: Path | None = None
    pin: tuple[int, int] | None = None


def _refuse(option: str, given: str, why: str) -> FlashbedError:
    """`why` goes on from the path: "is ...", "exists ...", or ": ..." for anything else."""
    return FlashbedError(f"{option} {given}{'' if why.startswith(':') else ' '}{why}")


def run_dir_of(path: Path) -> Path | None:
    """The flashbed run directory `path` is in or is (the nearest with a manifest), or None."""
    for d in (path, *path.parents):
        with contextlib.suppress(OSError):
            if (d / RUN_MARK).is_file():
                return d
    return None


def _under_pseudo(real: Path) -> str | None:
    for root in PSEUDO_ROOTS:
        if real == Path(root) or Path(root) in real.parents:
            return root
    return None


def _nearest_existing(real: Path) -> Path:
    for d in (real, *real.parents):
        if os.path.lexists(d):
            return d
    return Path("/")


def names(destroy: tuple[str, ...], path: str | Path) -> bool:
    """Whether a --destroy-data-on entry names `path` (the same node once resolved)."""
    return any(os.path.realpath(d) == os.path.realpath(path) for d in destroy)


def check(path: str | Path, option: str, output: Output, *, force: bool = False, devices: bool = False,
          destroy: tuple[str, ...] = (), own_run: Path | None = None, noun: str = "", mark: str = "") -> Allowed:
    """May this command write `path` (given to `option`) as `output`? One line if not.

    `devices`: the command writes block devices here (with --destroy-data-on `destroy`);
    `own_run`: the run directory the command works on (a report's run); `noun`: what
    would land on a device (e.g. "the image"); `mark`: the file by which a directory this
    command filled before is known (it may fill it again: its own files)."""
    given = str(path)
    if not given.strip():
        raise FlashbedError(f"{option} is empty: give a path, or leave {option} out for the default")
    real = Path(os.path.realpath(given))
    shown = given if str(real) == os.path.abspath(given) else f"{given} (that is {real})"
    try:
        st: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _refuse(option, shown, f": cannot look at it: {e.strerror}") from None
    if st is not None and stat.S_ISCHR(st.st_mode):
        raise _refuse(option, shown, "is a character device: flashbed writes none; give a file path")
    if st is not None and stat.S_ISBLK(st.st_mode):
        return _device(given, shown, real, option, output, devices, destroy, noun or f"the {output.value}")
    if destroy and output is not Output.DISK:
        raise _refuse(option, shown, "is not a block device, and --destroy-data-on is for one: drop it")
    pseudo = _under_pseudo(real)
    if pseudo is not None and (st is None or output is not Output.DISK):
        raise _refuse(option, shown, f"is under {pseudo}, the kernel's own tree: flashbed makes nothing there; "
                      f"give a path in a directory of yours")
    run = run_dir_of(real if st is not None and stat.S_ISDIR(st.st_mode) else real.parent)
    if output is Output.RUN and run == real:
        run = run_dir_of(real.parent)  # the run itself: resumed; only a run around it is another's
    if run is not None and run != own_run:
        raise _refuse(option, shown, f"is inside run directory {run}, whose files are that run's results: give "
                      f"a path outside it")
    if run is not None and real != run:
        raise _refuse(option, shown, f"is inside run directory {run} ({real.relative_to(run)}), whose files are "
                      f"that run's results: give the run directory itself, or a path outside it")
    if output is Output.DISK:
        return _disk(given, shown, real, option, st, destroy)
    if st is not None and output is Output.FILE:
        if stat.S_ISDIR(st.st_mode):
            raise _refuse(option, shown, f"is a directory: give a file path, e.g. {Path(given) / 'out'}")
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(option, shown, "exists and is not a regular file: give a new file path")
        if not force:
            raise _refuse(option, shown, "exists: add --force to replace it, or give a new file path")
    elif st is not None:
        if not stat.S_ISDIR(st.st_mode):
            raise _refuse(option, shown, f"exists and is not a directory: cannot write the {output.value}'s files "
                          f"into it; give a directory")
        if output in (Output.DIR, Output.RUN) and not _empty_or_ours(real, output, mark) and \
                not (force and mark and output is Output.DIR):
            if output is Output.RUN:
                what = "is not a flashbed run (no manifest.json) and holds files: give a new or empty directory"
            elif mark:  # a command that keeps an index: its --force takes the directory anyway
                what = (f"holds files and no index of this command's ({DIR_INDEX}): give a new or empty directory, "
                        f"or add --force to write {mark} and its other files there (files of their names are "
                        f"replaced)")
            else:
                what = "holds files: give a new or empty directory"
            raise _refuse(option, shown, what)
    parent = real.parent if output is Output.FILE or st is None else real
    base = _nearest_existing(parent)
    if not base.is_dir():
        raise _refuse(option, shown, f": {base} is not a directory: give another path")
    if output is Output.FILE and base != parent:
        raise _refuse(option, shown, f": directory {Path(given).parent} does not exist: create it (mkdir -p "
                      f"{Path(given).parent}) or give another path")
    if not os.access(base, os.W_OK | os.X_OK):
        raise _refuse(option, shown, f": cannot write to {base}: give a path you can write")
    anchor = base if output is Output.FILE or st is None else real
    pinned = os.stat(anchor)
    # a file: an existing one replaced (--force); a command's directory: taken with --force, its index
    # (a forged one among them) replaced by the command's own
    replace = st is not None and (output is Output.FILE or (output is Output.DIR and force and bool(mark)))
    return Allowed(given, real, exists=st is not None, replace=replace,
                   mark=mark if output is Output.DIR else "", anchor=anchor, pin=(pinned.st_dev, pinned.st_ino))


def _empty_or_ours(d: Path, output: Output, mark: str = "") -> bool:
    try:
        entries = {p.name for p in d.iterdir()}
    except OSError:
        return False
    if output is Output.RUN:
        return RUN_MARK in entries or entries <= OWN_FILES
    return not entries or (bool(mark) and taken_by(d) == mark)


def taken_by(d: Path) -> str | None:
    """The command that took directory `d` (its DIR_INDEX, a regular file), or None."""
    try:
        fd = os.open(d / DIR_INDEX, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            made = json.loads(f.read(4096)).get("made_by")
    except (OSError, ValueError, AttributeError):
        return None
    return made if isinstance(made, str) else None


def _device(given: str, shown: str, real: Path, option: str, output: Output, devices: bool,
            destroy: tuple[str, ...], noun: str) -> Allowed:
    if not devices or output not in (Output.FILE, Output.DISK):
        raise _refuse(option, shown, f"is a block device: flashbed writes a {output.value} here, never a device; "
                      f"give a {'file' if output is Output.FILE else 'directory'} path")
    if not names(destroy, real):
        raise _refuse(option, shown, f"is a block device: {noun} would overwrite it; if that is what you want, "
                      f"add --destroy-data-on {given}")
    from .devices import realdev
    realdev.load(str(real), (str(real),))  # not mounted, not the host's, not held, writable: as `run` checks it
    return Allowed(given, real, exists=True, device=True)


def _disk(given: str, shown: str, real: Path, option: str, st: os.stat_result | None,
          destroy: tuple[str, ...]) -> Allowed:
    if st is None:
        raise _refuse(option, shown, ": no such file: give an existing disk image (or a block device)")
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(option, shown, "is not a regular file or a block device: give a disk image")
    return Allowed(given, real, exists=True, in_place=names(destroy, real))


def unused_destroy(destroy: tuple[str, ...], written: list[str | Path]) -> str | None:
    """A --destroy-data-on entry that names nothing the command writes (a typo must not pass for
    permission), or None."""
    for d in destroy:
        if not any(os.path.realpath(d) == os.path.realpath(w) for w in written):
            return d
    return None


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


SYS_OPENAT2 = 437  # the same number on every architecture (new system calls share one table)
RESOLVE_NO_SYMLINKS = 0x04
_openat2_missing = False


def _openat2(path: Path) -> int | None:
    """A directory descriptor through openat2 with no symlink on the way; None where the kernel or
    libc has no openat2 (the caller walks the components itself)."""
    global _openat2_missing
    if _openat2_missing:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        _openat2_missing = True
        return None
    how = _OpenHow(os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, 0, RESOLVE_NO_SYMLINKS)
    fd = libc.syscall(SYS_OPENAT2, -100, os.fsencode(str(path)), ctypes.byref(how), ctypes.sizeof(how))
    if fd >= 0:
        return fd
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM):  # an old kernel, or a seccomp filter that refuses it
        _openat2_missing = True
        return None
    raise OSError(err, os.strerror(err), str(path))


def open_dir(path: Path, pin: tuple[int, int] | None = None, given: str = "") -> int:
    """A descriptor of directory `path` (absolute) opened without following a symlink on any of
    its components, and (with `pin`) the directory of that device and inode: one line if either is
    no longer so. The caller closes it."""
    path = Path(os.path.abspath(path))
    try:
        fd = _openat2(path)
        if fd is None:
            fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            for part in path.parts[1:]:
                try:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                finally:
                    os.close(fd)
                fd = nxt
    except OSError as e:
        why = "a symlink or not a directory" if e.errno in (errno.ELOOP, errno.ENOTDIR) else e.strerror
        raise FlashbedError(f"{given or path}: {path} changed since flashbed checked it (a directory on the way is now "
                            f"{why}): nothing was written there; look at what replaced it, then run again") from None
    st = os.fstat(fd)
    if pin is not None and (st.st_dev, st.st_ino) != pin:
        os.close(fd)
        raise FlashbedError(f"{given or path}: {path} is no longer the directory flashbed checked (it was replaced "
                            f"since): nothing was written there; look at what replaced it, then run again")
    return fd


def _open_parent(allowed: Allowed) -> int:
    """The directory the allowed file is written in, opened as checked (see open_dir); a file no
    check pinned (a report's own file in the directory its check allowed) where its path leads now."""
    if allowed.pin is None:
        return open_dir(Path(os.path.realpath(allowed.path.parent)), None, allowed.given)
    pin = allowed.pin if allowed.anchor == allowed.path.parent else None
    return open_dir(allowed.path.parent, pin, allowed.given)


def make_dir(allowed: Allowed) -> Path:
    """The allowed directory, made (with its parents) if it is new, from the directory the check
    pinned, one component at a time, no symlink followed; its index written when it is a
    command's (`mark`): from then on that command may fill it again."""
    anchor = allowed.anchor or allowed.path
    try:
        fd = open_dir(anchor, allowed.pin, allowed.given)
        try:
            for part in allowed.path.relative_to(anchor).parts:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = nxt
            if allowed.mark and taken_by(allowed.path) != allowed.mark:
                _write_at(fd, DIR_INDEX, json.dumps({"made_by": allowed.mark}).encode(), replace=allowed.replace)
        finally:
            os.close(fd)
    except FileExistsError:
        raise FlashbedError(f"{allowed.given}: its index appeared while flashbed worked: give a new directory") \
            from None
    except OSError as e:
        raise FlashbedError(f"cannot create {allowed.given}: {e.strerror or e}: give a directory you can write") \
            from None
    return allowed.path


def temp_path(allowed: Allowed) -> Path:
    """Where a file is written before `place` puts it at the allowed path (beside it)."""
    return allowed.path.with_name(f".{allowed.path.name}.tmp{os.getpid()}")


def place(allowed: Allowed, tmp: Path) -> None:
    """A whole file written at `tmp` (beside the allowed path) renamed to the allowed path, in the
    directory the check pinned: never over a file that appeared since the check unless the user
    let it be replaced. `tmp` is gone afterwards."""
    try:
        fd = _open_parent(allowed)
    except FlashbedError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    try:
        _rename_at(fd, tmp.name, allowed.path.name, allowed.replace)
    except FileExistsError:
        raise FlashbedError(f"{allowed.given} appeared while flashbed worked: nothing was written over it; "
                            f"give a new path, or --force") from None
    except OSError as e:
        raise FlashbedError(f"cannot write {allowed.given}: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp.name, dir_fd=fd)
        os.close(fd)


def _rename_at(fd: int, tmp: str, name: str, replace: bool) -> None:
    """`tmp` renamed to `name` in directory `fd`; only if nothing is there unless `replace`: a
    hard link fails on an existing name; where a filesystem has no hard links (FAT), a rename
    after a last look."""
    if replace:
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        return
    try:
        os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        with contextlib.suppress(FileNotFoundError):
            os.stat(name, dir_fd=fd, follow_symlinks=False)
            raise FileExistsError(errno.EEXIST, "exists", name) from None
        os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)


def _write_at(fd: int, name: str, raw: bytes, replace: bool) -> None:
    """`raw` written whole as `name` in directory `fd` (a temporary file beside it, then renamed)."""
    tmp = f".{name}.tmp{os.getpid()}"
    try:
        f = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
        with os.fdopen(f, "wb") as out:
            out.write(raw)
            out.flush()
            os.fsync(out.fileno())
        _rename_at(fd, tmp, name, replace)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)


def write_file(allowed: Allowed, data: bytes | str) -> None:
    """The allowed file written whole (a temporary file beside it, then renamed), in the directory
    the check pinned."""
    raw = data.encode() if isinstance(data, str) else data
    fd = _open_parent(allowed)
    try:
        _write_at(fd, allowed.path.name, raw, allowed.replace)
    except FileExistsError:
        raise FlashbedError(f"{allowed.given} appeared while flashbed worked: nothing was written over it; "
                            f"give a new path, or --force") from None
    except OSError as e:
        raise FlashbedError(f"cannot write {allowed.given}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def write_into(directory: Path, name: str, data: bytes | str, given: str = "") -> None:
    """`data` written whole as `name` in `directory`, a directory the guard allowed and `make_dir`
    made (a smoke test's smoke.json, a probe's raw outputs): opened with no symlink followed on any
    component, so a directory on the way swapped since is refused, not written through; a file of
    that name there is the command's own and is replaced."""
    raw = data.encode() if isinstance(data, str) else data
    fd = open_dir(directory, None, given or str(directory))
    try:
        _write_at(fd, name, raw, replace=True)
    except OSError as e:
        raise FlashbedError(f"cannot write {Path(given or directory) / name}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def make_sub(directory: Path, *parts: str, new: bool = False, given: str = "") -> Path:
    """`directory/parts...` made where it is missing, from `directory` (one the guard allowed, or a
    run the store created) opened with no symlink followed, one component at a time: a symlink put
    on the way is refused, never followed (a lab's log directory, a cell's attempt directory).
    `new`: the last component must not exist yet (FileExistsError, for the caller to take the next
    name)."""
    fd = open_dir(directory, None, given or str(directory))
    try:
        for i, part in enumerate(parts):
            if "/" in part or part in ("", ".", ".."):
                raise ValueError(f"not one path component: {part!r}")
            try:
                os.mkdir(part, 0o777, dir_fd=fd)
            except FileExistsError:
                if new and i == len(parts) - 1:
                    raise
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as e:
                why = "a symlink or not a directory" if e.errno in (errno.ELOOP, errno.ENOTDIR) else e.strerror
                raise FlashbedError(f"{Path(given or directory).joinpath(*parts[:i + 1])} is not flashbed's own "
                                    f"directory ({why}): nothing was written there; look at what replaced it") \
                    from None
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    return Path(directory).joinpath(*parts)


def write_at(fd: int, name: str, raw: bytes) -> None:
    """`raw` written whole as `name` in directory `fd` (opened by `open_dir`), replacing a file
    or a symlink of that name (the link itself, never what it points to)."""
    _write_at(fd, name, raw, replace=True)


def create_at(fd: int, name: str) -> int:
    """`name` in directory `fd` opened for writing, new and empty: what stood there under that
    name (an older log, a symlink put in its place) removed first, never followed."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=fd)
    return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
