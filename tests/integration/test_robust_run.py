"""`flashbed run --robust` end to end in the lab: a twin's variants are devices of the run (their own
cell keys, their fields reaching the emulator), killed midway the same command finishes only the
rest, and the report says what each answer rests on."""

from __future__ import annotations

import json
import signal
import time

import pytest

from flashbed.devices import presets
from flashbed.plan import PlanRequest, make_plan
from flashbed.report.load import load_run
from flashbed.store import RunStore
from tests.integration.test_run import cell_files, flashbed

pytestmark = pytest.mark.lab

# emmc-8g with two of its assumptions: the SLC bypass (its timing: a variant gives other figures)
# and paired-page protection (which no power cut reaches here: a variant gives the same figures)
ASSUMED = '''
[assumptions."ftl.slc_bypass"]
range = ["64K", "4M"]
source = "the test's"

[assumptions."nand.protect_paired_pages"]
range = [false, true]
source = "the test's"
'''


@pytest.fixture
def preset(tmp_path):
    text = presets.preset_path("emmc-8g").read_text()
    fitted = text[text.index("[fitted]"):text.index('[assumptions."ftl.slc_cache"]')]
    body = text[:text.index("# What the values above rest on")] + text[text.index("[published]"):]
    p = tmp_path / "twin.toml"
    p.write_text(body + "\n" + fitted + ASSUMED)
    return p


def test_a_robust_pass_runs_variants_as_devices_resumably(tt_kernel, preset, tmp_path):
    out = tmp_path / "run"
    # (f2fs holds no 16 MiB file on a 64 MiB device: it keeps a large share of a small one for itself)
    args = ["--robust", "1", "--device", f"{preset}@64M", "--fs", "ext4,f2fs", "--study", "bigfile,caps",
            "--set", "bigfile.size=8M", "--out", str(out)]
    proc = flashbed(*args, "--jobs", "1")
    deadline = time.monotonic() + 600
    # a variant's cell file: its label's "~" is "_" in a file name (twin@64M_draw-1__ext4__bigfile__r0.json)
    while not any(n.startswith("twin@64M_") for n in cell_files(out)) and time.monotonic() < deadline \
            and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = cell_files(out)
    time.sleep(1)

    proc = flashbed(*args)
    _stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-3000:]
    assert f"{len(before)} already finished" in stderr and "robust pass: " in stderr
    after = cell_files(out)
    assert {n: after[n] for n in before} == before  # finished cells were not redone
    results = list(RunStore(out).results())
    assert all(r.ok for r in results)
    by = {(r.key.device, r.key.fs, r.key.study): r for r in results}
    devices = sorted({r.key.device for r in results})
    plan = make_plan(PlanRequest(fs=("ext4", "f2fs"), devices=(f"{preset}@64M",), studies=("bigfile", "caps"),
                                 overrides={"bigfile": {"size": 8 << 20}}, robust=1))
    assert devices == sorted({c.key.device for c in plan.cells})
    assert {"twin@64M~protect_paired_pages-low", "twin@64M~slc_bypass-high", "twin@64M~slc_bypass-low"} < set(devices)
    assert not any(s == "caps" for d, _f, s in by if "~" in d)  # the filesystem alone: not run again

    def seconds(device, fs):
        return next(m.value for m in by[(device, fs, "bigfile")].measurements if m.metric == "seconds"
                    and m.case == "write")
    # virtual time: a variant the workload cannot see gives the nominal's figures to the digit, one
    # whose model differs gives others (its fields reached the emulator)
    for fs in ("ext4", "f2fs"):
        assert seconds("twin@64M~protect_paired_pages-low", fs) == seconds("twin@64M", fs)
    assert any(seconds(f"twin@64M~slc_bypass-{end}", fs) != seconds("twin@64M", fs)
               for end in ("low", "high") for fs in ("ext4", "f2fs"))
    # the report: the variants are the footing of the nominal twin's answers, not devices of their own
    run = load_run(out)
    assert run.devices() == ["twin@64M"]
    summary = json.loads((out / "summary.json").read_text())
    media = summary["footing"]["twin@64M"]["media"]
    assert media["winner"] in ("ext4", "f2fs") and len(media["variants"]) == len(devices) - 1
    md = (out / "report.md").read_text().split("## ", 2)[1]
    line = next(x for x in md.splitlines() if "Media recording" in x)
    assert ("Holds in" in line or "depends on" in line) and "variants of this part" in line
