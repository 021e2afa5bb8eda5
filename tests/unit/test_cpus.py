"""CPU leases: one CPU per lab, spread across threads and processes, re-entrant."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from flashbed import cpus


@pytest.fixture(autouse=True)
def _own_lock_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHBED_CACHE", str(tmp_path))
    monkeypatch.delenv("FLASHBED_PIN", raising=False)


def test_a_lease_is_one_of_the_allowed_cpus_and_nests():
    with cpus.lease() as cpu:
        assert cpu in os.sched_getaffinity(0)
        assert cpus.current() == cpu
        with cpus.lease() as inner:
            assert inner == cpu
    assert cpus.current() is None


def test_two_threads_get_different_cpus_when_there_are_two():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    got: list[int | None] = []
    inside = threading.Barrier(2)

    def hold() -> None:
        with cpus.lease() as cpu:
            got.append(cpu)
            inside.wait(timeout=10)

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 2


def test_more_labs_than_cpus_share_the_cpus_evenly():
    n = len(os.sched_getaffinity(0))
    got: list[int | None] = []
    inside = threading.Barrier(2 * n)

    def hold() -> None:
        with cpus.lease() as cpu:
            got.append(cpu)
            inside.wait(timeout=10)

    threads = [threading.Thread(target=hold) for _ in range(2 * n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(list(os.sched_getaffinity(0)) * 2)


def test_a_released_cpu_can_be_leased_again():
    with cpus.lease() as first:
        pass
    with cpus.lease() as again:
        assert again == first  # same process id, same starting CPU, lock free again


def test_pinning_can_be_switched_off(monkeypatch):
    with cpus.unpinned(), cpus.lease() as cpu:
        assert cpu is None
    monkeypatch.setenv("FLASHBED_PIN", "0")
    with cpus.lease() as cpu:
        assert cpu is None


def test_a_child_started_in_a_lease_runs_on_that_cpu_only():
    with cpus.lease() as cpu:
        out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                             preexec_fn=lambda: cpus.pin_child(cpu), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str([cpu])


def test_a_set_lease_holds_distinct_cpus_and_extends_a_held_one():
    n = len(os.sched_getaffinity(0))
    if n < 2:
        pytest.skip("needs two CPUs")
    with cpus.lease() as first:
        with cpus.lease_set(2) as both:
            assert len(set(both)) == 2 and both[0] == first
            assert cpus.current_set() == both
        assert cpus.current_set() == (first,)


def test_a_child_of_a_set_lease_runs_on_all_of_its_cpus():
    n = len(os.sched_getaffinity(0))
    with cpus.lease_set(n) as held:
        out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                             preexec_fn=lambda: cpus.pin_child(held), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(sorted(held))


def test_more_vcpus_than_host_cpus_are_refused_in_one_line():
    from flashbed.errors import FlashbedError
    n = len(os.sched_getaffinity(0))
    with pytest.raises(FlashbedError) as e:
        with cpus.lease_set(n + 1):
            pass
    assert f"{n + 1} guest vCPUs need {n + 1} host CPUs" in str(e.value) and "\n" not in str(e.value)
