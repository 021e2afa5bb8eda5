"""The run's ETA weighs cells by their expected work (progress.py): a long crash-state cell
is projected from its own rate in states, cells not started from their study's."""

from __future__ import annotations

import io

import pytest

from flashbed import progress as prog
from flashbed.progress import Progress


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(prog.time, "monotonic", c)
    return c


def test_a_long_crash_state_cell_is_projected_from_its_states_not_counted_as_one(clock):
    kinds = {f"w{i}": "workload" for i in range(6)} | {"ext4": "appcheck", "f2fs": "appcheck",
                                                        "vfat": "appcheck", "btrfs": "appcheck"}
    out = io.StringIO()
    p = Progress(len(kinds), stream=out, kinds=kinds, slots=2)
    for name in list(kinds)[:6]:  # six quick cells, 5 s each
        p.start(name)
        clock.t += 5
        p.finish(name, "ok")
    p.start("ext4")
    p.start("f2fs")
    for name in ("ext4", "f2fs"):
        p.part(name, 0, 3495, "crash states", note="3495 crash states found, 1210 distinct, 1210 to check")
    clock.t += 1200  # twenty minutes: 1386 of them taken, one a second per lab as in the issue
    for name in ("ext4", "f2fs"):
        p.part(name, 1200, 3495, "crash states")
    eta = p.eta()
    # each running cell has 2295 s left; vfat and btrfs are expected to take what ext4 will
    # (1200 + 2295 s) each: (2 x 2295 + 2 x 3495) / 2 slots
    assert eta == pytest.approx((2 * 2295 + 2 * 3495) / 2, rel=1e-6)
    assert "expected 38m15s more for it" in out.getvalue()  # said once, when the rate was known
    assert out.getvalue().count("3495 crash states found") == 2


def test_unknown_work_falls_back_to_counting_and_says_so_when_nothing_is_known(clock):
    p = Progress(3, stream=io.StringIO())
    assert p.eta() is None
    p.start("a")
    clock.t += 10
    p.finish("a", "ok")
    assert p.eta() == pytest.approx(20)  # no kinds given: each cell alike
    q = Progress(2, stream=io.StringIO(), kinds={"a": "x", "b": "y"})
    q.start("a")
    clock.t += 10
    assert q.eta() is None  # neither a rate nor a finished cell of its kind: "?"


def test_eta_of_units_whose_cost_grows_with_their_weight():
    """States whose check reads every acknowledged record: late ones cost more. A constant rate
    promises too early an end; the weighted fit projects the true one."""
    from flashbed.progress import _Units

    total = 400
    weights = tuple(i // 50 for i in range(total))  # acknowledgements before each state
    cost = [0.05 + 0.2 * w for w in weights]  # s each: recovery, then the check per acknowledgement
    t0 = 1000.0
    u = _Units("crash states", total, 0, 0, t0, weights=weights)
    t = t0
    for n in range(1, 201):
        t += cost[n - 1]
        u.done = n
        u.seen.append((n, t))
    true_left = sum(cost[200:])
    plain = (total - 200) / u.rate(t)
    fitted = u.left(t)
    assert abs(fitted - true_left) / true_left < 0.05
    assert plain < 0.7 * true_left  # what the constant rate said


def test_eta_without_weights_is_the_rate():
    from flashbed.progress import _Units

    u = _Units("crash states", 100, 0, 0, 0.0)
    for n in range(1, 51):
        u.done = n
        u.seen.append((n, n * 2.0))
    assert abs(u.left(100.0) - 100.0) < 1e-6
