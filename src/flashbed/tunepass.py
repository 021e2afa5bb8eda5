"""The tuning pass of `flashbed run --tune`: the search's next option sets as cells of the run.

After the plain cells, the run asks the search (tune.py, judged from the run's results by
report/tuning.py) what is still to run, plans those option sets' cells with the planner every
run uses (plan.make_plan, one request per option set: its studies, the run's devices, profile,
parameters, seed and clocks), and runs them with the run's executor into the same run directory;
then asks again. The same results give the same next step, so a killed run resumes where it
was: its finished cells are skipped and the search picks up from them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .plan import Plan, make_plan
from .store import RunStore

# singles, then the combination, then (--robust) the answers on the twin's variants; one more for
# a cell an error left to retry
MAX_STEPS = 4


def check(plan: Plan, target) -> int:
    """Every option set the pass may try, planned once before any cell runs (its options checked as
    any variant's: one line, exit 2, nothing run), then checked by the target as any plan (the lab
    makes and mounts each on a trial device, optiontrial.py: a value the kernel refuses is one line
    now, not a failed step later); how many single options there are."""
    from . import tune
    singles = []
    for spec in dict.fromkeys(c.variant.spec for c in plan.cells if not c.device.variant):
        for o in tune.catalogue(spec):
            one = tune.OptionSet(spec, (o,)).spec
            make_plan(dataclasses.replace(plan.request, fs=(one,), robust=None, tune=False), target)
            singles.append(one)
    if singles and target is not None:
        # one plan of them all, so that the trial makes and mounts them in one boot (cached after)
        every = make_plan(dataclasses.replace(plan.request, fs=tuple(singles), robust=None, tune=False), target)
        target.check_plan(every)
    return len(singles)


def next_plan(plan: Plan, store: RunStore, target) -> tuple[Plan | None, int]:
    """The cells of the option sets still to run (None: the search is done), and how many sets."""
    from .report.load import load_run
    from .report.recommend import recommend
    from .report.tuning import Tuning
    run = load_run(store.root)
    tn = Tuning(run, recommend(run))
    pending, robust = tn.search.pending(), None
    if not pending and plan.request.robust is not None:
        # the search is done: each tuned answer on its twin's variants, like any answer of --robust
        pending, robust = tn.robust_pending(), plan.request.robust
    if not pending:
        return None, 0
    cells = []
    for (device, spec), studies in pending.items():
        sub = dataclasses.replace(plan.request, fs=(spec,), studies=studies, robust=robust, tune=False)
        cells += [c for c in make_plan(sub, target).cells if _device_of(c) == device
                  and (robust is None or c.device.variant)]  # its nominal cells ran in the search
    return dataclasses.replace(plan, cells=cells, not_applicable=[], skipped=[], real_time=[], notes=[]), \
        len(pending)


def _device_of(cell) -> str:
    """The nominal device a cell measures: its own, or the twin a variant device is of."""
    return (cell.device.info.get("variant") or {}).get("of") or cell.key.device


def run_tuning(plan: Plan, store: RunStore, labs, target, execute: Callable, say: Callable[[str], None]) -> list:
    """Every step of the search, each planned from the cells before it; the run's results."""
    results = list(store.results())
    seen: set[str] = set()
    sets = 0
    for _step in range(MAX_STEPS + 1):
        step, n = next_plan(plan, store, target)
        if step is None:
            if seen:
                say(f"tuning: done, {sets} option set{'s' if sets != 1 else ''} tried in {len(seen)} cells "
                    f"(the plain run: {len(plan.cells)} cells)")
            return results
        ids = {c.key.id for c in step.cells}
        if ids <= seen:  # the same cells again: an error the executor could not get past
            say(f"tuning: {n} option sets did not finish (their cells ended in errors): run the same command "
                f"again to retry them")
            return results
        seen |= ids
        sets += n
        on = " on the twin's variants (--robust)" if any(c.device.variant for c in step.cells) else ""
        say(f"tuning: {n} option set{'s' if n != 1 else ''} to try{on}, {len(step.cells)} cells")
        results = execute(step, store, labs, target.executor)
    return results
