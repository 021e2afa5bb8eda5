"""What the report knows of each study, read from the study itself.

A run may hold studies this flashbed does not know (made by another version):
they get neutral defaults (their name as title, after the known ones, no figure
spec), so any run renders.
"""

from __future__ import annotations

from ..studies import STUDIES
from ..studies.base import Reproducer, Study


def study(name: str) -> Study | None:
    return STUDIES.get(name)


def known() -> list[str]:
    """Every study flashbed has, in order."""
    return list(STUDIES)


def title(name: str) -> str:
    s = STUDIES.get(name)
    return s.title if s is not None and s.title else name


def description(name: str) -> str:
    s = STUDIES.get(name)
    return s.description if s is not None else ""


def sort_key(name: str) -> tuple:
    s = STUDIES.get(name)
    return (0, s.order, name) if s is not None else (1, 0, name)


def primary_metric(name: str) -> str | None:
    s = STUDIES.get(name)
    return s.primary_metric or None if s is not None else None


def case_words(name: str) -> tuple[str, ...]:
    s = STUDIES.get(name)
    return s.case_order if s is not None else ()


def tools(name: str | None) -> tuple[str, ...]:
    s = STUDIES.get(name or "")
    return s.tools if s is not None else ()


def good_outcomes(name: str) -> frozenset[str]:
    s = STUDIES.get(name)
    return s.good_outcomes if s is not None else frozenset()


def reproducers(run_id: str, result) -> list[Reproducer]:
    """A cell result's failures with the command that reproduces each."""
    s = STUDIES.get(result.key.study)
    return s.reproducers(run_id, result) if s is not None else []
