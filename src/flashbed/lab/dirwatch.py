"""Names arriving in a directory, as they arrive (Linux inotify through ctypes).

The guest's host calls are files it renames into the run directory's host-calls/
(through hostfs, a real rename on the host). Polling that directory every few
milliseconds made each call wait for the next poll; a watch wakes the server when
the name appears and costs nothing while nothing happens.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import struct
from pathlib import Path

IN_MOVED_TO = 0x00000080
IN_Q_OVERFLOW = 0x00004000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


class DirWatch:
    """A watch on one directory for names renamed into it (how a reader never sees half a file)."""

    def __init__(self, fd: int):
        self.fd = fd

    @classmethod
    def open(cls, path: Path) -> "DirWatch | None":
        """The watch, or None where inotify is not available (then poll)."""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        if libc.inotify_add_watch(fd, os.fsencode(path), IN_MOVED_TO) < 0:
            os.close(fd)
            return None
        return cls(fd)

    def wait(self, timeout: float) -> list[str] | None:
        """Names renamed in (waiting up to `timeout` s for the first; [] if none
        did), or None when the kernel dropped events (queue overflow): then the
        caller must look at the whole directory."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        names: list[str] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    break
                raise
            off = 0
            while off + _EVENT.size <= len(data):
                _, mask, _, n = _EVENT.unpack_from(data, off)
                if mask & IN_Q_OVERFLOW:
                    return None
                name = data[off + _EVENT.size:off + _EVENT.size + n].rstrip(b"\0")
                if name:
                    names.append(os.fsdecode(name))
                off += _EVENT.size + n
        return names

    def close(self) -> None:
        os.close(self.fd)
