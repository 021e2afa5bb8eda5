"""`flashbed bench tune RUN`: what `--tune` would add to a finished run, without running it.

The tuning pass's first step (every single option of each use case's winner and runner-up, on
the use case's decisive studies) planned from the run's own cells, as the run command plans it
(tunepass.next_plan): its option sets and cells against the run's, and the cell-seconds those
cells took for the plain variants they add options to (an option set's cell costs about its
plain variant's: the same study on the same device). The second step (the options that helped,
together) is at most one option set per winner and runner-up, known only once the first ran.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from ..store import RunStore


def bench(run_dir: Path) -> None:
    from ..identity import request_of
    from ..plan import make_plan
    from ..targets import LabTarget
    from ..tunepass import next_plan
    store = RunStore(run_dir)
    store.manifest()  # one line if it is no run
    plan = make_plan(request_of(store), LabTarget())
    cells = list(store.results())
    plain = [c for c in cells if c.key.id in {p.key.id for p in plan.cells}]
    secs: dict[tuple, float] = defaultdict(float)
    for c in plain:
        secs[(c.key.device, c.key.fs, c.key.study, c.key.case, c.key.repeat)] = c.seconds or 0.0
    step, sets = next_plan(plan, store, LabTarget())
    plain_s = sum(secs.values())
    print(f"plain run: {len(plan.cells)} cells planned, {len(plain)} finished, {plain_s:.0f} cell-seconds")
    if step is None:
        print("tuning pass: nothing to try (no decided use case with options to try, or the pass is done)")
        return
    base = {c.variant.spec: c.variant.spec.split("+mkfs:")[0].split("+o:")[0] for c in step.cells}
    cost, per_set = 0.0, Counter()
    for c in step.cells:
        k = c.key
        cost += secs.get((k.device, base[c.variant.spec], k.study, k.case, k.repeat), 0.0)
        per_set[c.variant.spec] += 1
    per_study = Counter(c.key.study for c in step.cells)
    print(f"tuning pass, first step: {sets} option sets, {len(step.cells)} cells "
          f"({', '.join(f'{s} {n}' for s, n in sorted(per_study.items()))}); "
          f"about {cost:.0f} cell-seconds at their plain variants' cost"
          + (f" ({cost / plain_s:.2f}x the plain cells')" if plain_s else ""))
    for spec, n in sorted(per_set.items()):
        print(f"  {spec}: {n} cell{'s' if n != 1 else ''}")
