"""The lab kernels themselves: the default (7.3, seccomp) with guest vCPUs and
nanosecond CPU accounting, and request-sized block I/O through the emulator."""
import json

import pytest

from flashbed.devices import presets
from flashbed.devices.session import open_session
from flashbed.lab import kernel as kernels
from flashbed.lab.boundary import BootSpec, Step
from flashbed.lab.uml import boot

pytestmark = [pytest.mark.lab, pytest.mark.spread]

MiB = 1 << 20


def test_the_default_kernel_is_7_3_in_seccomp_mode_and_runs_two_vcpus(smp_kernel, tmp_path):
    kernel = smp_kernel  # the SMP build: two vCPUs
    assert kernel.name == kernels.DEFAULT_KERNEL == "7.3" and kernel.boot_mode == "seccomp"
    r = boot(BootSpec(run_dir=tmp_path, steps=(
        Step("nproc", "nproc"),
        Step("uname", "uname -r"),
        # CONFIG_SCHEDSTATS: per-task run time in ns, the first of three fields;
        # a shell that ran a loop, then slept (so its run time was brought up to date)
        Step("schedstat", "sh -c 'i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 0.05; "
                          "cat /proc/$$/schedstat'"),
    ), cpus=2, timeout=120), kernel)
    assert r.ok, (r.status, r.error, r.console_log)
    assert r.step("nproc").stdout.strip() == "2"
    assert r.step("uname").stdout.strip() == kernel.release and kernel.release.startswith("7.3")
    # run time in ns from the host clock (patch 0004), not whole 10 ms jiffies
    run_ns = int(r.step("schedstat").stdout.split()[0])
    assert 0 < run_ns < 60 * 10**9 and run_ns % 10_000_000 != 0
    # UML takes seccomp=on off the guest's /proc/cmdline; its console says it
    assert "Checking that seccomp filters can be installed...OK" in open(r.console_log).read()


def test_the_built_config_has_what_the_kernel_promises(smp_kernel):
    from pathlib import Path
    kernel = smp_kernel  # the SMP build's own config
    have = kernels.read_config(Path(kernel.path).with_name("config"))
    assert have.get("CONFIG_SCHEDSTATS") == "y" and have.get("CONFIG_SMP") == "y"
    assert int(have["CONFIG_NR_CPUS"]) == kernel.max_cpus >= 2


@pytest.mark.emulator
def test_a_sequential_write_reaches_the_emulator_in_request_sized_pieces(kernel, tmp_path):
    """One ubd request is one host call of up to 512 KiB (it was one per 4 KiB)."""
    size = 64 * MiB
    with open_session(presets.load_spec("ideal@256M"), tmp_path / "scratch", pace="none") as s:
        def host(call, args):
            if call == "reset":
                return s.reset_stats()
            return s.emu.stats()

        r = boot(BootSpec(run_dir=tmp_path / "lab", steps=(
            Step("reset", host="reset"),
            Step("write", f"dd if=/dev/zero of=/dev/ubda bs=1M count={size // MiB} conv=fsync status=none"),
            Step("stats", host="stats"),
            Step("max", "cat /sys/block/ubda/queue/max_hw_sectors_kb /sys/block/ubda/queue/max_segments"),
        ), disks=s.disks(), timeout=300), kernel, host=host)
    assert r.ok, (r.status, r.error, r.console_log)
    stats = json.loads(r.step("stats").stdout)
    writes = stats["request_sizes"]["write"]
    assert sum(writes.values()) == stats["host"]["writes"]
    assert stats["host"]["write_bytes"] >= size
    # 4 KiB per host call would be 16 384 calls; 512 KiB requests make 128
    assert stats["host"]["writes"] <= size // (256 * 1024), writes
    assert max(int(k) for k in writes) == 512 * 1024, writes
    assert r.step("max").stdout.split() == ["512", "128"]

