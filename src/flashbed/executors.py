"""Where independent pieces of work run: a local pool of threads (one lab
kernel each) or a Dask cluster. `flashbed run` runs cells with them, `flashbed
lab smoke` filesystems.

An executor calls `task(item, on_part)` for every item and hands each result
to `on_result(item, result)` in this process, one at a time, which returns the
progress line to print: the caller alone writes its results. `on_part(done,
total)` reports progress inside an item (a power-cut cell's boots) where the
executor can pass it back (locally); on Dask it is None.
"""

from __future__ import annotations

import os
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence, TypeVar

from .errors import FlashbedError
from .progress import Progress

T = TypeVar("T")
R = TypeVar("R")
OnPart = Callable[[int, int], None]
Task = Callable[[T, OnPart | None], R]

WORKER_WAIT = 60.0  # seconds a new Dask cluster gets to show a worker


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
        running: dict[Future, T] = {}
        pool = ThreadPoolExecutor(max_workers=self.jobs)
        try:
            while pending or running:
                while pending and len(running) < self.jobs:
                    item = pending.pop(0)
                    progress.start(name(item))
                    on_part = (lambda done, total, what="boots", n=name(item): progress.part(n, done, total, what))
                    running[pool.submit(task, item, on_part)] = item
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in finished:
                    item = running.pop(f)
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
        return DaskExecutor(scheduler)
    raise FlashbedError(f"unknown executor '{kind}': choose local or dask")
