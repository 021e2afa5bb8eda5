"""Issue 19: bad inputs and faults, each refused in one line (exit 2) or handled without
destroying or silently dropping anything. One test per defect; the fuzz test of the same
edges is test_fuzz_edges.py."""

from __future__ import annotations

import dataclasses

import pytest

from flashbed.cli import main
from flashbed.errors import FlashbedError

PLAIN = "plain-file@512M"


def one_line(capsys, words: str) -> str:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert words in err, err
    return err


# --- 4. --set values parsed by their field's kind ---------------------------------------

def test_set_values_are_read_by_their_fields_kind():
    from flashbed.cli import _overrides
    got = _overrides(["bandwidth.bs=4k,4M", "bigfile.size=256M", "powercut.cut_min=0.7", "mount.fills=0,50",
                      "crashstates.sabotage=true", "bandwidth.rw=write"])
    # a block size stays the word fio takes: the cases read "randwrite 4k direct"
    assert got["bandwidth"] == {"bs": ["4k", "4M"], "rw": "write"}
    assert got["bigfile"] == {"size": 256 << 20}
    assert got["powercut"] == {"cut_min": 0.7}
    assert got["mount"] == {"fills": [0, 50]}
    assert got["crashstates"] == {"sabotage": True}


def test_set_block_sizes_reach_the_cases_as_given():
    from flashbed.cli import _overrides
    from flashbed.plan import PlanRequest, make_plan
    from flashbed.studies.bandwidth import case_name
    plan = make_plan(PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("bandwidth",),
                                 overrides={**_overrides(["bandwidth.bs=4k,4M", "bandwidth.size=64M"])}))
    p = plan.cells[0].params
    assert p.bs == ("4k", "4M")
    assert case_name("randwrite", p.bs[0], 1) == "randwrite 4k direct"


# --- 9, 10. every parameter's range, and its form, checked at the edge ----------------------

@pytest.mark.parametrize("setting", [
    "powercut.iterations=0", "bigfile.size=0", "bandwidth.runtime=-5", "crashstates.step_timeout=nan",
    "crashstates.step_timeout=inf", "mount.fills=200", "mount.fills=0,-1", "boot.text=101", "corruption.tail=0",
    "bandwidth.bs=bogus", "bandwidth.bs=4k,", "bandwidth.bs=", "mixed.scale_bs=0k", "powercut.max_bytes=0",
])
def test_set_values_out_of_range_or_form_are_refused_before_anything_runs(tmp_path, setting, capsys):
    out_dir = tmp_path / "run"
    argv = ["run", "--fs", "ext4", "--study", "bigfile", "--device", PLAIN, "--set", setting, "--out", str(out_dir)]
    assert main(argv) == 2
    one_line(capsys, f"for {setting.split('=')[0]}: expected")
    assert not out_dir.exists()


def test_every_number_declares_its_range():
    from flashbed.studies import STUDIES
    from flashbed.studies import params as P
    missing = [f"{n}.{k}" for n, st in STUDIES.items() for k, kind in P.kinds(st.Params).items()
               if kind.numeric and kind.low is None and kind.above is None]
    assert not missing
    for n, st in STUDIES.items():  # and every default lies in it
        st.params(**{f.name: f.default for f in dataclasses.fields(st.Params)})


def test_a_range_is_said_in_the_refusal_and_in_the_listing():
    from flashbed.studies import STUDIES
    with pytest.raises(FlashbedError, match=r"from 0 to 100"):
        STUDIES["mount"].params_at_edge({"fills": "200"})
    assert any("from 0 to 100" in line for line in STUDIES["mount"].param_lines())
