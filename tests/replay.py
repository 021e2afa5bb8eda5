"""Recorded real runs of every study, for the tests that need no kernel.

    python3 -m tests.replay            (from the repository root, with the lab kernel)
    python3 -m tests.replay STUDY ...  only the requests that run those studies (the others' recordings stay)

runs REQUESTS in the real lab (small sizes, plain-file and nandsim devices, so
the replay needs neither the emulator nor a kernel) and records every boot under
tests/data/replay/ (flashbed.lab.replay), with the run's manifest and each
cell's result. tests/unit/test_replay.py then runs the same requests through
ReplayLabs: every study's parse() and the whole plan -> cell -> store -> report
path, and compares each cell with its recorded result. Record again when a
study's steps change (the replay refuses other steps).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from flashbed.plan import PlanRequest
from flashbed.studies import edge

DATA = Path(__file__).resolve().parent / "data" / "replay"

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# the figures of the SQLite logger; the check over its unsafe control (failures to read)
_USER = {"workload": edge.overrides({"--workload": str(EXAMPLES / "sqlite-logger.sh")})["workload"],
         "appcheck": edge.overrides({"--workload": str(EXAMPLES / "sqlite-logger-unsafe.sh"),
                                       "--check": str(EXAMPLES / "sqlite-check.sh")})["appcheck"]}
_FAILURE = {
    "powercut": {"iterations": 2, "modes": "async", "cut_min": 0.5, "cut_max": 1.0},
    "badblocks": {"iterations": 1, "files": 4, "file_blocks": 4, "random_blocks": 4, "raw_cases": "bitflips"},
}
REQUESTS = [
    # every study on a block device (a plain file: a power cut is the lab being killed)
    PlanRequest(fs=("ext4",), devices=("plain-file@256M",), studies=(
        "bandwidth", "mixed", "bigfile", "smallfiles", "appio", "overwrite", "sqlite", "mount", "boot", "mkfs", "cpu",
        "powercut", "corruption", "badblocks"), overrides={
        "bandwidth": {"size": 16 << 20, "nrfiles": 4, "runtime": 1, "rw": ["randread", "write"], "bs": "4k",
                      "direct": [1, 0]},
        "mixed": {"size": 16 << 20, "nrfiles": 4, "runtime": 1, "scale_jobs": [1, 2], "scale_cpus": [1, 2]},
        "bigfile": {"size": 16 << 20},
        "smallfiles": {"dirs": 50, "files": 200},
        "appio": {"sizes": 1 << 20},
        "overwrite": {"mb": 1},
        "sqlite": {"transactions": 20},
        "mount": {"fills": [0, 25]},
        "boot": {"mb": 5},
        "cpu": {"size": 16 << 20},
        "corruption": {"iterations": 1, "modes": "after", "features": "corrupt", "corrupt_after": 1, "tail": 2,
                       "big_mb": 8, "many_count": 8},
        **_FAILURE}, pace="none"),
    # read-only images: the studies that read, on an image of their files written to the device
    # (the write studies are n/a for them: the plan leaves them out)
    PlanRequest(fs=("squashfs+zstd", "erofs+lz4"), devices=("plain-file@256M",),
                studies=("bandwidth", "mount", "boot", "mkfs", "powercut", "badblocks"), overrides={
        "bandwidth": {"size": 16 << 20, "nrfiles": 4, "runtime": 1, "bs": "4k"},
        "mount": {"fills": [0, 25]},
        "boot": {"mb": 5}, **_FAILURE,
        "badblocks": {**_FAILURE["badblocks"], "block_cases": ["dust", "flips"]}}, pace="none"),
    # raw NAND: UBI attach and mount, power cuts by UBI's emulation, by freezing JFFS2 and by
    # killing YAFFS2's daemon, bit flips (YAFFS2's read from its daemon's log)
    PlanRequest(fs=("ubifs", "jffs2", "yaffs2"), devices=("nand-slc-256m@64M",),
                studies=("mount", "powercut", "badblocks"),
                overrides={"mount": {"fills": [0]}, **_FAILURE}, pace="none"),
    # capabilities: one filesystem that holds everything, one that holds almost nothing (FAT)
    PlanRequest(fs=("ext4", "vfat"), devices=("plain-file@256M",), studies=("caps",), pace="none"),
    # crash states need the emulator's write log (the replay needs no emulator); the sabotage
    # makes failures, so parse() reads some of every kind
    # (real time, as they were recorded before the auto clock: the recording lab has the plain kernel)
    PlanRequest(fs=("ext4",), devices=("emmc-8g@64M",), studies=("crashstates",), overrides={
        "crashstates": {"ops": 12, "exhaustive": 1, "sequences": 2, "subsets": 2, "sabotage": True}}, pace="none",
        clocks=()),
    # your own workload: the SQLite logger after aging, in a short lifetime phase (a plain file: the
    # replay has no device counters, so the lifetime is tested apart); your check over the logger's
    # unsafe control, on the emulator's write log
    PlanRequest(fs=("ext4",), devices=("plain-file@256M",), studies=("workload",), overrides={
        "workload": {**_USER["workload"], "fill": 30, "churn": 1, "passes": 2}}, pace="none"),
    PlanRequest(fs=("ext4",), devices=("emmc-8g@64M",), studies=("appcheck",), overrides={
        "appcheck": {**_USER["appcheck"], "subsets": 1, "tears": 1}}, pace="none", clocks=()),
]


def record(studies: tuple[str, ...] = ()) -> int:
    from flashbed.execute import execute
    from flashbed.executors import LocalExecutor
    from flashbed.lab.kernel import ensure_kernel
    from flashbed.lab.labs import UmlLabs
    from flashbed.lab.replay import RecordingLabs, cell_dir
    from flashbed.plan import make_plan
    from flashbed.store import RunStore

    if not studies:
        shutil.rmtree(DATA, ignore_errors=True)
    DATA.mkdir(parents=True, exist_ok=True)
    labs = RecordingLabs(UmlLabs(ensure_kernel()), DATA)
    with tempfile.TemporaryDirectory(prefix="flashbed-record-") as tmp:
        for i, req in enumerate(REQUESTS):
            if studies and not set(studies) & set(req.studies):
                continue
            plan = make_plan(req)
            store = RunStore(Path(tmp) / f"run{i}")
            results = execute(plan, store, labs, LocalExecutor(2))
            for spec in plan.cells:
                shutil.copyfile(store.cell_path(spec.key), cell_dir(DATA, spec) / "cell.json")
            shutil.copyfile(store.manifest_path, DATA / "manifest.json")
            bad = [r.key.id for r in results if not r.ok]
            print(f"recorded {len(plan.cells)} cells of request {i}" + (f"; not ok: {bad}" if bad else ""))
        _scrub(DATA, {tmp: "<tmp>"})
    return 0


def _scrub(root: Path, more: dict[str, str]) -> None:
    """This machine's paths and host out of the recording (the replay does not need them)."""
    import json

    from flashbed.paths import cache_dir, repo_root
    subs = {**more, str(repo_root()): "<repo>", str(cache_dir()): "<cache>", str(Path.home()): "<home>"}
    for f in root.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            for a, b in subs.items():
                data = data.replace(a.encode(), b.encode())
            f.write_bytes(data)
    man = json.loads((root / "manifest.json").read_text())
    man["host"] = {}
    (root / "manifest.json").write_text(json.dumps(man, indent=1))


if __name__ == "__main__":
    sys.exit(record(tuple(sys.argv[1:])))
