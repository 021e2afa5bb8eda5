"""The guest CPU cost model of virtual time end to end (issue 17, lab patch 0008): a
syscall-heavy guest loop takes the profile's syscall cost per call in guest time, the
`none` profile leaves a device-bound fio figure as it is without any profile, and the
default profile's figure is the same on a second run under load."""

import pytest

from flashbed.bench import clock as clock_bench
from flashbed.bench import cpu as cpu_bench
from flashbed.lab import cpuprofile

pytestmark = [pytest.mark.lab, pytest.mark.emulator, pytest.mark.spread]

N = 50_000


def test_a_null_syscall_loop_costs_the_profiles_syscall_cost_per_call(tmp_path):
    loops = {name: cpu_bench.null_loop(cpuprofile.get(name).costs, tmp_path / name, N)
             for name in ("cortex-a8", "cortex-a72", "none")}
    for name in ("cortex-a8", "cortex-a72"):
        loop, costs = loops[name], cpuprofile.get(name).costs
        assert loop.syscalls >= N, f"{name}: the kernel counted {loop.syscalls} syscalls for {N} getppid calls"
        # within a few %: the loop's own page faults, the two clock reads and any switch come on top
        assert loop.guest_ns == pytest.approx(N * costs.syscall_ns, rel=0.03), \
            f"{name}: {loop.per_call_ns:.1f} ns per call, the profile charges {costs.syscall_ns}"
        # in inf-cpu time only the charges move guest time (the counts are read just outside the loop)
        assert loop.charged_ns == pytest.approx(loop.guest_ns, rel=0.01)
    # proportional: the heavier profile's loop takes longer by the ratio of their costs
    ratio = loops["cortex-a8"].guest_ns / loops["cortex-a72"].guest_ns
    want = cpuprofile.get("cortex-a8").costs.syscall_ns / cpuprofile.get("cortex-a72").costs.syscall_ns
    assert ratio == pytest.approx(want, rel=0.03)
    # none charges nothing: the loop costs only the clock reads around it
    assert loops["none"].charged_ns == 0 and loops["none"].guest_ns < 0.01 * N * 390


def test_none_leaves_a_device_bound_figure_as_without_a_profile_and_a_cost_lowers_it(tmp_path):
    preset = "emmc-8g@128M"
    without = cpu_bench.randread(preset, None, tmp_path / "without", runtime=0.5)
    none = cpu_bench.randread(preset, cpuprofile.get("none").costs, tmp_path / "none", runtime=0.5)
    a8 = cpu_bench.randread(preset, cpuprofile.get("cortex-a8").costs, tmp_path / "a8", runtime=0.5)
    assert none.iops == pytest.approx(without.iops, rel=1e-3), f"none {none.iops} IO/s, no profile {without.iops}"
    assert none.cpu_pct == 0 and none.busy_pct > 50, f"device busy {none.busy_pct:.0f} %: not device-bound"
    assert a8.iops < none.iops and a8.cpu_pct > 0


def test_the_default_profile_gives_the_same_figure_twice_under_load(tmp_path):
    """A CPU cost keeps virtual time deterministic: the default profile charges every
    syscall, page fault and switch, and its fio figure is the same to the last digit on
    a second run while every host CPU is busy (busy loops where other work leaves one
    free). (With a random hash seed in the guest agent, the faults it took before the job
    varied, and with them the job's start by a microsecond: about one run in three read
    0.1 % apart.)"""
    prof = cpuprofile.default()
    # run directories of one length: their paths are on the guest's command line, and a
    # path a byte longer can move a charged fault (as any other input to the guest can)
    quiet = cpu_bench.randread("emmc-8g@128M", prof.costs, tmp_path / "a", runtime=2.0)
    with clock_bench.every_cpu_busy():
        loaded = cpu_bench.randread("emmc-8g@128M", prof.costs, tmp_path / "b", runtime=2.0)
    assert quiet.cpu_pct > 1, f"{prof.name}: {quiet.cpu_pct:.2f} % of the job's guest time charged"
    assert (loaded.iops, loaded.cpu_pct) == (quiet.iops, quiet.cpu_pct), \
        f"{prof.name}: {quiet.iops} IO/s ({quiet.cpu_pct:.3f} % CPU) quiet, {loaded.iops} ({loaded.cpu_pct:.3f} %) under load"
