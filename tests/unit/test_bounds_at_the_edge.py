"""Inputs bounded at the edge, each refused in one line before the run directory is made:
--robust's draws, the Dask scheduler's address (parsed, and reached)."""

from __future__ import annotations

import socket

import pytest

from flashbed.cli import main
from flashbed.executors import check_scheduler
from flashbed.robust import MAX_DRAWS


@pytest.mark.parametrize("given", ["99999999999999999999999", "-1", str(MAX_DRAWS + 1), "1e3", "8.0", "½"])
def test_robust_takes_a_whole_number_of_draws_within_its_bound(tmp_path, capsys, given):
    out = tmp_path / "run"
    assert main(["run", "--fs", "ext4", "--study", "mkfs", "--out", str(out), "--robust", given]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"give a whole number of joint draws from 0 to {MAX_DRAWS}" in err
    assert not out.exists()


def test_an_empty_robust_says_how_to_get_its_default(tmp_path, capsys):
    assert main(["run", "--fs", "ext4", "--study", "mkfs", "--out", str(tmp_path / "r"), "--robust", ""]) == 2
    err = capsys.readouterr().err
    assert "give --robust alone for its default" in err and "leave --robust out" not in err


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("addr,said", [("not a url", "needs a host and a port"), ("http://h:1", "is not one of tcp://, tls://"),
                                       ("inproc://x", "cannot reach workers in other processes"),
                                       ("tcp://127.0.0.1", "needs a host and a port"),
                                       ("tcp://[::1", "is not a scheduler address")])
def test_a_scheduler_address_that_is_not_one_is_refused_before_the_run_directory(tmp_path, capsys, addr, said):
    out = tmp_path / "run"
    assert main(["run", "--fs", "ext4", "--study", "mkfs", "--out", str(out), "--executor", "dask",
                 "--scheduler", addr]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err and not out.exists()


def test_an_unreachable_scheduler_is_refused_before_the_run_directory(tmp_path, capsys):
    addr = f"tcp://127.0.0.1:{_closed_port()}"
    out = tmp_path / "run"
    assert main(["run", "--fs", "ext4", "--study", "mkfs", "--out", str(out), "--executor", "dask",
                 "--scheduler", addr]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach the Dask scheduler at {addr}" in err and not out.exists()


def test_a_listening_scheduler_passes_as_given_and_host_port_is_tcp():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        port = s.getsockname()[1]
        assert check_scheduler(f"tcp://127.0.0.1:{port}") == f"tcp://127.0.0.1:{port}"
        assert check_scheduler(f"127.0.0.1:{port}") == f"127.0.0.1:{port}"
    finally:
        s.close()
