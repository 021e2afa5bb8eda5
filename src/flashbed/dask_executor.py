"""Cells on a Dask cluster (`--executor dask --scheduler ADDR`).

Each worker runs `flashbed.run.cell_task` like a local pool thread would: it
needs flashbed, the host tools and the lab kernel installed, and the run
directory at the same path (a shared filesystem beyond one machine). Results
come back to this process, which alone writes the run directory's cell files.
"""

from __future__ import annotations

from .errors import FlashbedError
from .lab.kernel import KernelInfo
from .progress import Progress
from .store import RunStore
from .studies.base import CellSpec

WORKER_WAIT = 60.0  # seconds


def run_dask(todo: list[CellSpec], kernel: KernelInfo, store: RunStore, prov: dict, scheduler: str,
             progress: Progress) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise FlashbedError("the Dask executor needs the 'distributed' package: run `make setup`") from None
    from .run import cell_task

    try:
        client = Client(scheduler, timeout=20)
    except OSError as e:
        raise FlashbedError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
    with client:
        try:
            # a worker started just before may still be registering
            client.wait_for_workers(1, timeout=WORKER_WAIT)
        except TimeoutError:
            raise FlashbedError(f"the Dask scheduler at {scheduler} has no workers after {WORKER_WAIT:.0f}s: "
                                f"start `dask worker {scheduler}`") from None
        futures = {}
        for spec in todo:
            # pure=False: a rerun of the same cell is real work, not a cached value
            f = client.submit(cell_task, spec, kernel, store.root, prov, pure=False, key=f"cell-{spec.key.id}")
            futures[f] = spec
            progress.start(spec.key.id)
        for f in as_completed(futures):
            spec = futures[f]
            result = f.result()
            store.write(result)
            progress.finish(spec.key.id, result.headline if result.ok else f"{result.status.upper()} {result.headline}")
