"""Each study owns its definition: the facts the report and the CLI read from it are complete and agree."""

import dataclasses
from pathlib import Path

import pytest

from flashbed.errors import FlashbedError
from flashbed.report.load import OUTCOME_PREFIXES
from flashbed.report.weights import load_weights
from flashbed.studies import STUDIES
from flashbed.studies.base import claimed_metrics

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_study_states_its_facts_once_and_in_a_distinct_order():
    orders = [s.order for s in STUDIES.values()]
    assert len(set(orders)) == len(orders) and orders == sorted(orders)
    for name, s in STUDIES.items():
        assert s.name == name and s.title and s.description and s.primary_metric, name
        assert dataclasses.is_dataclass(s.Params), name
        p = s.params()  # the defaults alone make valid parameters
        if "file" in s.param_names():  # the user's own workload: nothing to run without its file
            with pytest.raises(FlashbedError, match="--workload FILE"):
                s.cases(p, _device(s))
            p = s.params(file=str(EXAMPLES / "sqlite-logger.sh"), check=str(EXAMPLES / "sqlite-check.sh")) \
                if "check" in s.param_names() else s.params(file=str(EXAMPLES / "sqlite-logger.sh"))
        assert s.min_capacity(s.cases(p, _device(s))[0].params) >= 0


def test_every_outcome_a_study_counts_is_classified_in_the_weights():
    outcomes = load_weights().outcomes
    for name, s in STUDIES.items():
        if not s.outcome_tables:
            continue
        spec = outcomes[name]
        known = set(spec["good"]) | set(spec["bad"]) | set(spec["ignore"])
        # the counts "survived" is computed from (load.OUTCOME_PREFIXES)
        counted = tuple(t for t in s.outcome_tables if t.prefix in OUTCOME_PREFIXES)
        named = {m.split(":", 1)[1] for m in claimed_metrics(counted)}
        assert named <= known, (name, named - known)
        assert s.good_outcomes and s.good_outcomes <= set(spec["good"]), name


def _device(study):
    from flashbed.devices import presets
    return presets.load_spec("plain-file@1G" if "block" in study.media else "nand-slc-256m@64M")
