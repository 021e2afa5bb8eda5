"""The integration tests' "under load": every CPU busy, with busy loops only on the CPUs the
host's other runnable work leaves free (under the test suite its other workers)."""

import contextlib
import io
import os

from flashbed.bench import clock


def _loops(monkeypatch, others: int) -> tuple[int, int]:
    started = []
    monkeypatch.setattr(clock, "runnable_others", lambda: others)
    monkeypatch.setattr(clock, "cpu_hog", lambda n: started.append(n) or contextlib.nullcontext())
    with clock.every_cpu_busy() as n:
        pass
    return n, started[0]


def test_a_loop_on_every_cpu_when_nothing_else_runs_and_none_where_others_fill_them(monkeypatch):
    cpus = len(os.sched_getaffinity(0))
    assert _loops(monkeypatch, 0) == (cpus, cpus)
    assert _loops(monkeypatch, cpus) == (0, 0)
    assert _loops(monkeypatch, cpus + 5) == (0, 0)
    if cpus > 1:
        assert _loops(monkeypatch, 1) == (cpus - 1, cpus - 1)


def test_the_runnable_count_leaves_out_the_caller_and_reads_the_kernels(monkeypatch):
    reads = iter(["0.5 0.4 0.3 3/200 99\n"] * 2 + ["0.5 0.4 0.3 1/200 99\n"] * 3)
    monkeypatch.setattr(clock, "open", lambda *_: io.StringIO(next(reads)), raising=False)
    assert clock.runnable_others(gap=0) == 0  # median of 3,3,1,1,1 is 1: the caller alone
