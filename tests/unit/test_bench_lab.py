"""bench lab: dd's figures parsed, medians shown per kernel with the goals beside them."""

from __future__ import annotations

import io

import pytest

from flashbed.bench import lab
from flashbed.errors import FlashbedError
from flashbed.lab.kernel import KernelInfo


def test_dd_summary_gives_bytes_and_seconds():
    err = "200000+0 records in\n200000+0 records out\n200000 bytes (200 kB, 195 KiB) copied, 4.2311 s, 47.3 kB/s\n"
    assert lab.dd_seconds(err) == (200000, 4.2311)
    assert lab.dd_seconds("67108864 bytes (67 MB, 64 MiB) copied, 0.5 s, 134 MB/s") == (67108864, 0.5)
    with pytest.raises(FlashbedError, match="no dd summary"):
        lab.dd_seconds("dd: error writing '/dev/null'")


def _info(name: str, mode: str) -> KernelInfo:
    return KernelInfo(path="/x", key="k", name=name, source_package="p", source_version="v", release=name + ".1",
                      patches=[], boot_mode=mode, max_cpus=1, build_seconds=0, built_at="t")


def test_the_table_has_a_column_per_kernel_and_the_goals():
    infos = {"6.12": _info("6.12", "ptrace"), "7.3": _info("7.3", "seccomp")}
    medians = {"6.12": {"syscall_us": 16.4, "write_requests_buffered": 33664.0},
               "7.3": {"syscall_us": 9.8, "write_requests_buffered": 262.0}}
    out = io.StringIO()
    lab._print_table(infos, medians, {k: {m: [v] for m, v in d.items()} for k, d in medians.items()}, 1, out)
    text = out.getvalue()
    row = next(l for l in text.splitlines() if l.startswith("guest syscall"))
    assert "16.4" in row and "9.8" in row and "<= 10 µs" in row
    assert "33664" in text and "<= 1000" in text
    assert "6.12.1 ptrace" in text and "7.3.1 seccomp" in text
    assert "cached read" not in text  # not measured: no row


@pytest.mark.parametrize("kwargs,words", [
    ({"parts": ["lab", "gpu"]}, "unknown bench lab part 'gpu'"),
    ({"runs": 0}, "--runs must be at least 1"),
    ({"cycles": 0}, "--cycles must be at least 1"),
    ({"kernel_names": ["2.6"]}, "unknown lab kernel '2.6'"),
])
def test_bad_options_fail_before_anything_is_built(kwargs, words):
    args = {"kernel_names": ["7.3"], "runs": 1, "parts": ["lab"], "cycles": 1, **kwargs}
    with pytest.raises(FlashbedError, match=words):
        lab.bench(**args)


def test_the_starts_part_is_a_guest_program_whose_figures_each_have_a_row():
    """bench lab --parts starts: the guest's program compiles, and every figure it prints (per fault-around
    window: a shell's fork, a record's fork and exec of dd, a dd start and its page faults) has a row."""
    import ast
    import re
    src = lab._STARTS.format(dd=lab.DD_ONE, windows=lab.FAULT_AROUND, rounds=1)
    ast.parse(src)
    keys = {m.key for m in lab.METRICS}
    printed = {f"{k}_fa{w >> 10}k" for w in lab.FAULT_AROUND for k in
               re.findall(r'\("(\w+)", (?:ms|nf|shell_ms)', src)} | {"fault_us"}
    assert len(printed) == 4 * len(lab.FAULT_AROUND) + 1 and printed <= keys
    assert 65536 in lab.FAULT_AROUND  # Linux's default, the figure before any change
    assert "starts" in lab.PARTS
