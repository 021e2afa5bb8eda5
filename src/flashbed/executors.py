"""Where independent pieces of work run: a local pool of threads (one lab
kernel each) or a Dask cluster. `flashbed run` runs cells with them, `flashbed
lab smoke` filesystems.

An executor calls `task(item, on_part)` for every item and hands each result
to `on_result(item, result)` in this process, one at a time, which returns the
progress line to print: the caller alone writes its results. `on_part(done,
total, what, note)` reports progress inside an item in its own unit (a power-cut
cell's boots, a crash-state cell's states) where the executor can pass it back
(locally); on Dask it is None.

An item may offer more work while it runs (a crash-state cell offers helpers that check
some of its states: crashhost/share.py) through `spawner()`: locally the pool's own, which runs
such work only on a slot no item waits for; on a Dask worker the cluster's, at a lower
priority than the items. Offered work that has not started by the time its item no longer
wants it is cancelled.
"""

from __future__ import annotations

import collections
import contextvars
import os
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, TypeVar

from .errors import FlashbedError
from .progress import Progress

T = TypeVar("T")
R = TypeVar("R")
OnPart = Callable[[int, int], None]
Task = Callable[[T, OnPart | None], R]

WORKER_WAIT = 60.0  # seconds a new Dask cluster gets to show a worker
POLL = 0.5  # s between looks for offered work while items run (local pool)
HELPER_PRIORITY = -10  # offered work on Dask: after every item the scheduler holds


class Offered(Protocol):
    def cancel(self) -> Any:
        """Do not start it (one already started runs to its end)."""
        ...


class Spawner(Protocol):
    """Where an item running on an executor offers more work (crashhost/share.py)."""

    def capacity(self) -> int:
        """How many pieces of work could run beside the item at most."""
        ...

    def spawn(self, fn: Callable[[], Any], name: str) -> Offered:
        ...


_spawner: contextvars.ContextVar["Spawner | None"] = contextvars.ContextVar("flashbed_spawner", default=None)


def spawner() -> Spawner | None:
    """The spawner of the executor running this item: the local pool's, or on a Dask worker
    the cluster's; None elsewhere (a cell run alone, a benchmark)."""
    local = _spawner.get()
    if local is not None:
        return local
    try:
        from distributed import get_client, get_worker
        get_worker()
    except (ImportError, ValueError):
        return None
    return _DaskSpawner(get_client())


class _Queued:
    """Work offered to the local pool, waiting for a free slot."""

    def __init__(self, fn: Callable[[], Any], name: str):
        self.fn, self.name, self.cancelled = fn, name, False

    def cancel(self) -> bool:
        self.cancelled = True
        return True


class _LocalSpawner:
    def __init__(self, jobs: int):
        self.jobs = jobs
        self._queue: collections.deque[_Queued] = collections.deque()
        self._lock = threading.Lock()

    def capacity(self) -> int:
        return self.jobs - 1

    def spawn(self, fn: Callable[[], Any], name: str) -> _Queued:
        q = _Queued(fn, name)
        with self._lock:
            self._queue.append(q)
        return q

    def next(self) -> _Queued | None:
        with self._lock:
            while self._queue:
                q = self._queue.popleft()
                if not q.cancelled:
                    return q
        return None


class _DaskSpawner:
    def __init__(self, client: Any):
        self.client = client

    def capacity(self) -> int:
        return max(0, sum(self.client.nthreads().values()) - 1)

    def spawn(self, fn: Callable[[], Any], name: str) -> Any:
        return self.client.submit(fn, pure=False, priority=HELPER_PRIORITY, key=f"flashbed-{name}")


def _with_spawner(sp: Spawner, fn: Callable[..., R], *args: Any) -> R:
    token = _spawner.set(sp)
    try:
        return fn(*args)
    finally:
        _spawner.reset(token)


class Executor(Protocol):
    def run(self, task: Task, items: Sequence[T], name: Callable[[T], str],
            on_result: Callable[[T, R], str], progress: Progress) -> None:
        """Every item through `task`; `name(item)` names it in progress lines."""
        ...


@dataclass(frozen=True)
class LocalExecutor:
    """`jobs` threads, each running one item (one lab kernel) at a time."""

    jobs: int

    def run(self, task: Task, items: Sequence[T], name: Callable[[T], str],
            on_result: Callable[[T, R], str], progress: Progress) -> None:
        pending = list(items)
        progress.slots = self.jobs
        running: dict[Future, Any] = {}  # an item, or offered work (_Queued)
        offers = _LocalSpawner(self.jobs)
        pool = ThreadPoolExecutor(max_workers=self.jobs)
        try:
            while pending or running:
                while len(running) < self.jobs:
                    if pending:  # items first: offered work takes only slots no item waits for
                        item = pending.pop(0)
                        progress.start(name(item))
                        on_part = (lambda done, total, what="boots", note="", weights=None, n=name(item):
                                   progress.part(n, done, total, what, note, weights))
                        running[pool.submit(_with_spawner, offers, task, item, on_part)] = item
                    elif (extra := offers.next()) is not None:
                        running[pool.submit(extra.fn)] = extra
                    else:
                        break
                finished, _ = wait(running, timeout=POLL, return_when=FIRST_COMPLETED)
                for f in finished:
                    item = running.pop(f)
                    if isinstance(item, _Queued):
                        f.exception()  # it records its own end; its item reads that
                        continue
                    progress.finish(name(item), on_result(item, f.result()))
        except KeyboardInterrupt:
            from .stopping import kill_all
            kill_all()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class DaskExecutor:
    """A Dask cluster's workers. Each needs flashbed, the host tools and the lab
    kernel installed, and the run directory at the same path (a shared filesystem
    beyond one machine). `task` must pickle: a module-level function or a partial
    of one."""

    scheduler: str

    def reach(self) -> None:
        """One line if nothing listens at the scheduler's address (said before the run directory is made)."""
        check_scheduler(self.scheduler)

    def run(self, task: Task, items: Sequence[T], name: Callable[[T], str],
            on_result: Callable[[T, R], str], progress: Progress) -> None:
        try:
            from distributed import Client, as_completed
        except ImportError:
            raise FlashbedError("the Dask executor needs the 'distributed' package: run `make setup`") from None
        try:
            client = Client(self.scheduler, timeout=20)
        except OSError as e:
            raise FlashbedError(f"cannot reach the Dask scheduler at {self.scheduler}: {e}") from None
        with client:
            try:
                # a worker started just before may still be registering
                client.wait_for_workers(1, timeout=WORKER_WAIT)
            except TimeoutError:
                raise FlashbedError(f"the Dask scheduler at {self.scheduler} has no workers after "
                                    f"{WORKER_WAIT:.0f}s: start `dask worker {self.scheduler}`") from None
            progress.slots = max(1, sum(client.nthreads().values()))
            futures = {}
            for item in items:
                # pure=False: a rerun of the same item is real work, not a cached value
                f = client.submit(task, item, None, pure=False, key=f"flashbed-{name(item)}")
                futures[f] = item
                progress.start(name(item))
            for f in as_completed(futures):
                item = futures[f]
                progress.finish(name(item), on_result(item, f.result()))


def make_executor(kind: str, jobs: int | None = None, scheduler: str | None = None) -> Executor:
    """The executor `--executor kind` names, checked (one clear line)."""
    if jobs is not None and jobs < 1:
        raise FlashbedError("--jobs must be at least 1")
    if kind == "local":
        if scheduler:
            raise FlashbedError("--scheduler goes with --executor dask")
        return LocalExecutor(jobs or os.cpu_count() or 1)
    if kind == "dask":
        if not scheduler:
            raise FlashbedError("--executor dask needs --scheduler ADDR (e.g. tcp://127.0.0.1:8786)")
        return DaskExecutor(check_scheduler(scheduler, reach=False))
    raise FlashbedError(f"unknown executor '{kind}': choose local or dask")


# the schemes of a Dask scheduler flashbed's cells can reach from other processes (inproc:// is one
# process's own, and a lab's cell runs in a worker process)
SCHEDULER_SCHEMES = ("tcp", "tls")
REACH_TIMEOUT = 5.0  # seconds to connect to the scheduler before the run directory is made


def check_scheduler(addr: str, timeout: float = REACH_TIMEOUT, reach: bool = True) -> str:
    """--scheduler, parsed (one line if not): SCHEME://HOST:PORT with a scheme of SCHEDULER_SCHEMES;
    with `reach`, something listening there too (DaskExecutor.reach: before the run directory)."""
    import socket
    from urllib.parse import urlsplit
    example = "e.g. tcp://127.0.0.1:8786"
    try:
        u = urlsplit(addr if "://" in addr else f"tcp://{addr}")  # HOST:PORT is tcp's, as Dask reads it
        host, port = u.hostname, u.port
    except ValueError as e:
        raise FlashbedError(f"--scheduler '{addr}' is not a scheduler address ({e}): give SCHEME://HOST:PORT, "
                            f"{example}") from None
    if u.scheme not in SCHEDULER_SCHEMES or not host or port is None or u.path not in ("", "/") or u.query:
        why = (f"scheme {u.scheme}:// cannot reach workers in other processes" if u.scheme == "inproc" else
               f"scheme '{u.scheme}' is not one of {', '.join(s + '://' for s in SCHEDULER_SCHEMES)}"
               if u.scheme not in SCHEDULER_SCHEMES else "it needs a host and a port")
        raise FlashbedError(f"--scheduler '{addr}': {why}: give SCHEME://HOST:PORT, {example}")
    if not reach:
        return addr
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise FlashbedError(f"cannot reach the Dask scheduler at {addr}: {getattr(e, 'strerror', None) or e} "
                            f"(start `dask scheduler` there, or check the address)") from None
    return addr
