"""The probe in virtual time: request-counted random jobs, the lab kernel of the probe's clock."""
import dataclasses


def test_in_virtual_time_a_random_job_counts_requests_not_seconds():
    from flashbed.devices.rates import MAX_GUEST_SECONDS, RatePlan, random_job
    plan = RatePlan(capacity=512 << 20, erase_unit=4 << 20, span=512 << 20, seq_bytes=512 << 20, runtime=5)
    timed = random_job(plan, "randwrite", "au")
    assert timed["runtime"] == 5 and timed["time_based"] == 1 and "number_ios" not in timed
    counted = random_job(dataclasses.replace(plan, ios=1000), "randwrite", "au")
    assert counted["number_ios"] == 1000 and "time_based" not in counted
    # the bytes of its requests, not its region's size, end it (a region smaller than them: it wraps)
    assert counted["io_size"] == 1000 * 4096 and counted["size"] == 4 << 20
    assert counted["runtime"] == MAX_GUEST_SECONDS


def test_the_probe_runs_the_lab_kernel_of_its_clock(monkeypatch):
    """The lab's probe site is made for the probe's clock (issue 32: the probe has no lab of its
    own, so a kernel of the other clock cannot be handed to it, as it could before)."""

    from flashbed.clock import Clock
    from flashbed.devices import presets
    from flashbed.lab import kernel
    from flashbed.probe import lab
    from flashbed.targets import LabTarget
    monkeypatch.setattr(lab, "tool_versions", lambda: {})
    asked = []
    monkeypatch.setattr(kernel, "ensure_kernel", lambda label=None, log=None, time_travel=False:
                        asked.append(time_travel) or _info(time_travel))
    dev = presets.load_spec("emmc-8g@64M")
    for clock in (Clock.VIRTUAL, Clock.REAL):
        site = LabTarget().probe_site(dev, clock)
        assert site.clock is clock and site.lab.kernel.time_travel == clock.time_travel
    # issue 40: in real time too the time-travel build (time travel off): the probe builds no SMP kernel
    assert asked == [True, True] and site.lab.kernel.provenance()["time_travel"] == "off"


def _info(time_travel: bool):
    from flashbed.lab import kernel
    return kernel.KernelInfo(path="linux", key=f"k{int(time_travel)}", name="7.3", source_package="p",
                             source_version="v", release="7.3.4", patches=[], boot_mode="seccomp",
                             max_cpus=1 if time_travel else 8, build_seconds=1.0, built_at="now",
                             flavour=kernel.TIME_TRAVEL if time_travel else "")
