"""The synthetic report runs of tests/fixtures/report/make_runs.py, for the report tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "report"


def generator():
    """make_runs.py, loaded once per process (it caches generated reports)."""
    name = "flashbed_report_test_fixtures"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, FIXTURES / "make_runs.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
