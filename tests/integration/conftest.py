import os
import subprocess
from pathlib import Path

import pytest

from flashbed.devices.emulator import Emulator, EmulatorError, EmulatorSpec, find_binary
from flashbed.lab.kernel import ensure_kernel

PRESETS = Path(__file__).resolve().parents[2] / "presets"
MiB = 1 << 20


@pytest.fixture(scope="session")
def kernel():
    """The lab kernel for a test in real time: the time-travel build booted with time travel off
    (its clocks the host's, lab patches 0004 and 0007; what the cpu study runs on), the one kernel
    setup builds, so a fresh clone's suite builds no other for tests that need no more than one
    vCPU. A test of several vCPUs, or of 7.3 as configured, takes smp_kernel."""
    return ensure_kernel(time_travel=True).in_real_time()


@pytest.fixture(scope="session")
def smp_kernel():
    """7.3 as configured (SMP, real time), built on first use: for tests of guests of several
    vCPUs or of that build itself."""
    return ensure_kernel()


@pytest.fixture(scope="session")
def tt_kernel():
    """The lab kernel's time-travel flavour, for cells in virtual time (issue 17): a test whose
    subject is not the real-time path runs there, its waits on the device's model and the
    guest's sleeps skipped instead of spent."""
    return ensure_kernel(time_travel=True)


@pytest.fixture
def spec_for(tmp_path, monkeypatch):
    """Makes emulator specs for presets/; skips without the binary or FUSE."""
    try:
        find_binary()
    except EmulatorError as e:
        pytest.skip(str(e))
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse on this machine")
    # Whatever a failing test leaves running is stopped at teardown.
    started: list[Emulator] = []
    real_start = Emulator.start

    def tracked_start(self):
        started.append(self)
        return real_start(self)

    monkeypatch.setattr(Emulator, "start", tracked_start)

    def make(preset: str = "ideal", capacity: int = 64 * MiB, pace: str = "none") -> EmulatorSpec:
        return EmulatorSpec(preset=PRESETS / f"{preset}.toml", state_dir=tmp_path / "state", mount_dir=tmp_path / "mnt",
                            control=tmp_path / "ctl.sock", capacity=capacity, pace=pace, seed=7)

    yield make
    for emu in started:
        if emu.running:
            emu._proc.kill()
            emu._proc.wait()
        if os.path.ismount(emu.spec.mount_dir):
            subprocess.run(["umount", "-l", str(emu.spec.mount_dir)], check=False)
