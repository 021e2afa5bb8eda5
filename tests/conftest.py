import os
import sys
from pathlib import Path

import pytest

from tests.shared import SHARED_ENV

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def pytest_itemcollected(item):
    """For pytest-xdist's `--dist loadgroup` (make test): a module's tests run on one worker, so
    its module-scoped fixtures (a lab run, an sshd, report fixtures) are made once and tests that
    share fixed files never race; a module marked `spread` (slow lab tests, each with its own
    run) lets each test go to any worker, and a test may name its own xdist_group. Without
    xdist the marks change nothing. (Marked as each test is collected: xdist reads the groups in
    its own pytest_collection_modifyitems, which may run before a conftest's.)"""
    if item.get_closest_marker("xdist_group") is None and item.get_closest_marker("spread") is None:
        module = item.nodeid.split("::")[0].removeprefix("tests/").removesuffix(".py")
        item.add_marker(pytest.mark.xdist_group(module.replace("@", "_")))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under xdist's loadgroup (make test), on each worker:

    The emulated board's tests go first: their group (a board booted under TCG, its studies and a
    real restart: minutes on one worker) then starts at once beside the rest, never last and alone
    at the end. The unit modules marked `long` (half a minute or more, mostly waiting on processes
    they start) come next after the lab's, before the quick ones: last, one of them ran alone on a
    worker while the others had finished. `--no-loadscope-reorder` hands the groups out in
    collection order, which every worker makes alike by this stable sort.

    xdist 3.8 names a test's group by appending `@group` to `item._nodeid`, which pytest 9 no
    longer reads (its node ids are `item._id`): without this every test was its own group. Done
    here only where xdist's own renaming did not take."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers only
        return
    def order(item) -> tuple[bool, bool]:
        quick_unit = item.nodeid.startswith("tests/unit/") and item.get_closest_marker("long") is None
        return item.get_closest_marker("qemu_board") is None, quick_unit
    items.sort(key=order)
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # pytest before 9: xdist's renaming works
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid.rsplit("]", 1)[-1]:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """What the suite makes once per test run (tests/shared.py: the report tests' generated runs,
    the probe's lab latency) is shared by pytest-xdist's workers in the run's base temporary
    directory (a worker's is a directory of it), which pytest removes with its old ones."""
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return
    base = factory.getbasetemp()
    shared = base.parent if hasattr(config, "workerinput") else base
    os.environ[SHARED_ENV] = str(shared / "shared")  # a nested run: its own
