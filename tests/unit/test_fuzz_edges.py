"""Fuzz the edges (issue 19): generated bad argument values, preset files and run
directories. Each must be refused with exit 2 and exactly one line on stderr, no
traceback, no file written outside the run directory, and nothing under an existing
run directory changed.

Hypothesis generates the cases (a fixed seed, so the unit suite is repeatable and
fast); FLASHBED_FUZZ_EXAMPLES=N runs N cases per edge from a fresh seed instead.
The cases run are counted and printed by the last test.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flashbed.cli import main
from flashbed.filesystems import CATALOGUE
from flashbed.lab.kernel import KERNELS
from flashbed.paths import repo_root
from flashbed.studies import STUDIES
from flashbed.studies import params as P

pytestmark = pytest.mark.long

MORE = int(os.environ.get("FLASHBED_FUZZ_EXAMPLES", "0"))
COUNTS: dict[str, int] = {}
# the cases each edge's test asks for (each edge is one test's)
SHARES = {"argument values": 150, "lab exec timeouts": 40, "preset files": 120, "run directories": 100}
PLAIN = "plain-file@256M"


def fuzz(examples: int):
    return settings(max_examples=MORE or examples, derandomize=not MORE, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck))


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def refused(edge: str, argv: list[str], where: Path, run_dir: Path | None = None) -> None:
    """`argv` run in directory `where`: exit 2, one line, no traceback, nothing written in
    `where` (a default run directory goes there), nothing changed under `run_dir`."""
    COUNTS[edge] = COUNTS.get(edge, 0) + 1
    before = tree(where)
    err, out = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(where)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                code = main(argv)
            except SystemExit as e:  # argparse
                code = e.code
    finally:
        os.chdir(cwd)
    text = err.getvalue()
    assert code == 2, (argv, code, text, out.getvalue())
    assert text.count("\n") == 1 and text.endswith("\n") and "Traceback" not in text, (argv, text)
    after = tree(where)
    assert after == before, (argv, sorted(set(after) ^ set(before)))
    if run_dir is not None:
        assert not (where / "runs").exists()


# --- argument values ---------------------------------------------------------------------

words = st.text(alphabet=string.ascii_letters + string.digits + "-_+.:@ ", min_size=0, max_size=12)
junk = st.text(min_size=0, max_size=12).filter(lambda s: "\x00" not in s)


def bad_number(kind: P.Kind) -> st.SearchStrategy[str]:
    """Text no number of `kind` reads as: out of its range, not finite, or not a number."""
    outs = [st.sampled_from(["nan", "inf", "-inf", "", "1e", "0x", "one", "--1", "1..2"])]
    if kind.low is not None:
        outs.append(st.integers(max_value=int(kind.low) - 1, min_value=int(kind.low) - 10**9).map(str))
    if kind.above is not None:
        outs.append(st.floats(max_value=kind.above, min_value=-1e9, allow_nan=False).map(repr))
    if kind.high is not None:
        outs.append(st.integers(min_value=int(kind.high) + 1, max_value=int(kind.high) + 10**9).map(str))
    if kind.base is int and kind.unit != "bytes":
        outs.append(st.sampled_from(["1.5", "2.25", "1k"]))
    return st.one_of(outs)


@st.composite
def bad_setting(draw) -> str:
    study = draw(st.sampled_from(sorted(STUDIES)))
    ks = {k: kind for k, kind in P.kinds(STUDIES[study].Params).items() if not kind.per_case}
    if not ks:
        return f"{study}.{draw(words.filter(lambda w: '=' not in w))}=1"
    key = draw(st.sampled_from(sorted(ks)))
    kind = ks[key]
    if kind.numeric:
        value = draw(bad_number(kind))
    elif kind.choices:
        value = draw(words.filter(lambda w: w.strip() and all(x.strip() not in map(str, kind.choices)
                                                              for x in w.split(","))))
    elif kind.base is bool:
        value = draw(words.filter(lambda w: w.strip().lower() not in ("true", "false", "yes", "no", "on", "off",
                                                                      "1", "0")))
    elif kind.pattern:
        value = draw(words.filter(lambda w: not all(__import__("re").fullmatch(kind.pattern, x.strip())
                                                    for x in w.split(","))))
    else:
        value = ""
    if kind.many and draw(st.booleans()):
        value = f"{value},"  # a value left out
    return f"{study}.{key}={value}"


BASE = ["run", "--fs", "ext4", "--study", "mkfs", "--device", PLAIN]
preset_names = {p.stem for p in (repo_root() / "presets").glob("*.toml")}
# hypothesis draws string constants from the code under test too: a real study,
# filesystem or kernel name is not an unknown one
known_names = preset_names | set(STUDIES) | set(CATALOGUE) | set(KERNELS)
unknown = words.filter(lambda w: w.strip() and "/" not in w and "," not in w and not w.endswith(".toml")
                       and w.split("@")[0].strip() not in known_names)


@st.composite
def bad_run_args(draw) -> list[str]:
    which = draw(st.sampled_from(["set", "repeat", "jobs", "cpus", "seed", "pace", "fs", "study", "device", "size",
                                  "kernel", "iterations", "executor", "empty", "profile"]))
    if which == "set":
        return [*BASE, "--set", draw(bad_setting())]
    if which in ("repeat", "jobs", "cpus", "iterations"):
        n = draw(st.one_of(st.integers(max_value=0, min_value=-10**6).map(str), junk.filter(
            lambda s: not s.strip().lstrip("+-").isdigit())))
        extra = ["--study", "powercut"] if which == "iterations" else []
        return [*BASE, *extra, f"--{which}", n] if n else [*BASE, f"--{which}="]
    if which == "seed":
        return [*BASE, "--seed", draw(junk.filter(lambda s: not s.strip().lstrip("+-").isdigit()))]
    if which == "pace":
        return [*BASE, "--pace", draw(words.filter(lambda w: w not in ("auto", "real", "none")))]
    if which == "executor":
        return [*BASE, "--executor", draw(words.filter(lambda w: w not in ("local", "dask")))]
    if which == "profile":
        return [*BASE, "--profile", draw(words.filter(lambda w: w not in ("quick", "paper")))]
    if which in ("fs", "study", "kernel"):
        return [*BASE, f"--{which}", draw(unknown)]
    if which == "device":
        return [*BASE[:-2], "--device", draw(unknown)]
    if which == "size":
        size = draw(st.one_of(st.sampled_from(["", "-1G", "1.5Q", "99T", "0", "G", "@", "1 G B"]), junk))
        return [*BASE[:-2], "--device", f"emmc-8g@{size}"]  # the emulator's own limits too
    option = draw(st.sampled_from(["--fs", "--study", "--device", "--kernel"]))
    return [*BASE, option, draw(st.sampled_from(["", ",", " , ", "ext4,,f2fs"]))]


@fuzz(SHARES["argument values"])
@given(argv=bad_run_args())
def test_fuzz_bad_argument_values(argv):
    with tempfile.TemporaryDirectory() as tmp:
        refused("argument values", [*argv, "--out", str(Path(tmp) / "run")], Path(tmp))
        assert not (Path(tmp) / "run").exists()


@fuzz(SHARES["lab exec timeouts"])
@given(timeout=st.one_of(st.floats(max_value=0, allow_nan=False), st.sampled_from(["nan", "inf", "-0", "x"])))
def test_fuzz_lab_exec_timeout(timeout):
    with tempfile.TemporaryDirectory() as tmp:
        refused("lab exec timeouts", ["lab", "exec", "--timeout", str(timeout), "true"], Path(tmp))


# --- preset files ------------------------------------------------------------------------

NANDSIM = {"name": "n", "kind": "nandsim", "description": "d", "nandsim": {"id_bytes": [32, 170, 0, 21]},
           "ubi": {"vid_hdr_offset": 2048},
           "geometry": {"capacity_bytes": 268435456, "page_size": 2048, "erase_block_bytes": 131072, "cell": "slc"}}
FILE = {"name": "f", "kind": "file", "geometry": {"capacity_bytes": 1 << 30, "page_size": 4096,
                                                  "erase_block_bytes": 1 << 20}}
bad_values = st.one_of(st.integers(max_value=-1, min_value=-10**12), st.text(max_size=8), st.booleans(),
                       st.floats(allow_nan=False, allow_infinity=False), st.lists(st.integers(), max_size=3))
NO_ZERO = ("capacity_bytes", "page_size", "erase_block_bytes")  # 0 is no size (vid_hdr_offset 0: UBI's default)


def toml(d: dict) -> str:
    def val(v):
        return json.dumps(v) if not isinstance(v, bool) else ("true" if v else "false")
    top = [f"{k} = {val(v)}" for k, v in d.items() if not isinstance(v, dict)]
    tables = [f"[{k}]\n" + "\n".join(f"{kk} = {val(vv)}" for kk, vv in v.items()) for k, v in d.items()
              if isinstance(v, dict)]
    return "\n".join(top + tables) + "\n"


@st.composite
def bad_preset(draw) -> bytes:
    how = draw(st.sampled_from(["bytes", "rename", "value", "geometry"]))
    if how == "bytes":  # not text, or text that is no TOML table
        return draw(st.one_of(st.binary(min_size=1, max_size=64).filter(lambda b: not _is_text(b)),
                              st.sampled_from([b"[", b"= 1", b"kind = ", b'kind = "nandsim"\n[[geometry]]'])))
    base = json.loads(json.dumps(draw(st.sampled_from([NANDSIM, FILE]))))
    table = draw(st.sampled_from([k for k, v in base.items() if isinstance(v, dict)]))
    key = draw(st.sampled_from(sorted(base[table])))
    if how == "rename":  # a misspelt key
        new = draw(st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=12)
                   .filter(lambda k: k not in base[table]))
        base[table][new] = base[table].pop(key)
    elif how == "value":
        key = draw(st.sampled_from([k for k in base[table] if k not in ("cell",)] or [key]))
        bad = st.one_of(bad_values, st.just(0)) if key in NO_ZERO else bad_values
        base[table][key] = draw(bad.filter(lambda v: v != base[table][key] and not (key == "id_bytes" and v == [])
                                           ))
    else:  # numbers of the right type that make no device
        g = base["geometry"]
        g[draw(st.sampled_from(["capacity_bytes", "erase_block_bytes"]))] += draw(st.integers(1, 4095))
    return toml(base).encode()


def _is_text(b: bytes) -> bool:
    try:
        b.decode()
        return True
    except UnicodeDecodeError:
        return False


@fuzz(SHARES["preset files"])
@given(content=bad_preset(), how=st.sampled_from(["show", "run"]))
def test_fuzz_bad_preset_files(content, how):
    with tempfile.TemporaryDirectory() as tmp:
        preset = Path(tmp) / "mine.toml"
        preset.write_bytes(content)
        argv = ["devices", "show", str(preset)] if how == "show" else \
            ["run", "--fs", "ext4", "--study", "mkfs", "--device", str(preset), "--out", str(Path(tmp) / "run")]
        refused("preset files", argv, Path(tmp))


# --- run directories ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def a_run(tmp_path_factory) -> Path:
    from flashbed.execute import execute
    from flashbed.executors import LocalExecutor
    from flashbed.lab.replay import ReplayLabs
    from flashbed.plan import PlanRequest, make_plan
    from flashbed.store import RunStore
    from tests.replay import DATA
    store = RunStore(tmp_path_factory.mktemp("fuzz") / "run")
    req = PlanRequest(fs=("ext4",), devices=(PLAIN,), studies=("bigfile",),
                      overrides={"bigfile": {"size": 16 << 20}}, pace="none")
    execute(make_plan(req), store, ReplayLabs(DATA), LocalExecutor(1), stream=io.StringIO())
    global MANIFEST
    MANIFEST = store.manifest_path.read_text()  # the damage strategy mutates it
    return store.root


json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                                     st.text(max_size=6)),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                           max_leaves=6)
MANIFEST_KEYS = ("request", "devices", "kernels", "kernel", "cells", "cpus", "run_id", "skipped", "not_applicable")


@st.composite
def damage(draw) -> tuple[str, bytes, tuple[str, ...]]:
    """(file under the run, its new content, the commands it must be refused by)."""
    every = ("results", "report", "resume")
    how = draw(st.sampled_from(["manifest bytes", "manifest json", "manifest field", "request", "stray cell"]))
    if how == "manifest bytes":
        return "manifest.json", draw(st.binary(max_size=40).filter(lambda b: not _json_object(b))), every
    if how == "manifest json":
        return "manifest.json", json.dumps(draw(json_values.filter(lambda v: not isinstance(v, dict)))).encode(), \
            every
    if how in ("manifest field", "request"):
        man = json.loads(MANIFEST)
        if how == "manifest field":
            key = draw(st.sampled_from(MANIFEST_KEYS))
            want = type(man[key]) if key in man else dict
            man[key] = draw(json_values.filter(lambda v: v is not None and (not isinstance(v, want)
                                                                           or isinstance(v, bool))))
            return "manifest.json", json.dumps(man).encode(), every
        req = man["request"]
        key = draw(st.sampled_from(sorted(req) + ["bogus"]))
        good = type(req.get(key, 0))
        req[key] = draw(json_values.filter(lambda v: v is not None and not isinstance(v, good)))
        return "manifest.json", json.dumps(man).encode(), ("resume",)
    value = draw(st.one_of(json_values.filter(lambda v: not isinstance(v, dict)),
                           st.dictionaries(st.sampled_from(["schema", "key", "measurements", "status"]),
                                           json_values, max_size=3)))
    return "cells/zz-stray.json", json.dumps(value).encode(), every


def _json_object(b: bytes) -> bool:
    try:
        return isinstance(json.loads(b), dict)
    except ValueError:
        return False


MANIFEST = ""


@fuzz(SHARES["run directories"])
@given(case=damage(), pick=st.integers(0, 2))
def test_fuzz_damaged_run_directories(a_run, case, pick):
    path, content, commands = case
    command = commands[pick % len(commands)]
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(a_run, run)
        (run / path).write_bytes(content)
        argv = {"results": ["results", str(run)], "report": ["report", str(run)],
                "resume": ["run", "--resume", str(run)]}[command]
        before = tree(run)
        refused("run directories", argv, Path(tmp), run_dir=run)
        assert tree(run) == before


def test_fuzz_case_count(capsys, record_property):
    total = sum(COUNTS.values())
    record_property("fuzz_cases", total)
    with capsys.disabled():
        print(f"\nfuzz: {total} generated bad inputs refused in one line "
              f"({', '.join(f'{k}: {n}' for k, n in COUNTS.items())})")
    # a process counts the cases it ran: under pytest -n without make test's loadgroup the edges' tests
    # may have run on other workers than this one, so each edge counted here is held to its own share
    # (FLASHBED_FUZZ_EXAMPLES=N: a fresh seed, whose strategies may run out before N)
    assert MORE or all(n >= SHARES[edge] for edge, n in COUNTS.items()), COUNTS
