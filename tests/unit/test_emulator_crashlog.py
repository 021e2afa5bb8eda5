"""The emulator wrapper's write-log and crash-state calls: what each sends on
the control socket and how replies become data (a fake socket, fast), and the
offline subcommands' errors (the built binary, skipped when absent)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from flashbed.devices.emulator import (
    CrashKind,
    CrashListing,
    Emulator,
    EmulatorError,
    EmulatorSpec,
    crash_states,
    find_binary,
    rebuild_image,
)

STATE = {"id": "12+k3", "pos": 12, "kind": "subset", "acked": 13, "last_flush": 9, "volatile": 7, "kept": 3,
         "damaged": 0, "t_ns": 5_000}
LISTING = {"ok": True, "records": 20, "flushes": 3, "marks": [{"pos": 4, "label": "workload"}], "after": 4,
           "states": [STATE, {**STATE, "id": "15", "pos": 15, "kind": "flush", "kept": 0, "volatile": 0}]}


class FakeControl:
    """A control socket answering each command with a canned reply."""

    def __init__(self, path: Path, replies: dict[str, dict]):
        self.requests: list[dict] = []
        self.replies = replies
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                line = conn.makefile("rb").readline()
                req = json.loads(line)
                self.requests.append(req)
                conn.sendall((json.dumps(self.replies[req["cmd"]]) + "\n").encode())

    def close(self) -> None:
        self.sock.close()


class Running:
    def poll(self):
        return None


@pytest.fixture
def emu_with(tmp_path):
    fakes: list[FakeControl] = []

    def make(replies: dict[str, dict]) -> tuple[Emulator, FakeControl]:
        ctl = tmp_path / "ctl.sock"
        fake = FakeControl(ctl, replies)
        fakes.append(fake)
        spec = EmulatorSpec(preset=Path("ideal.toml"), state_dir=tmp_path / "state", mount_dir=tmp_path / "mnt",
                            control=ctl)
        emu = Emulator(spec)
        emu._proc = Running()  # type: ignore[assignment]
        return emu, fake

    yield make
    for f in fakes:
        f.close()


def test_log_calls_send_what_the_emulator_expects(emu_with, tmp_path):
    emu, fake = emu_with({
        "log-start": {"ok": True, "dir": str(tmp_path / "log")},
        "log-mark": {"ok": True, "pos": 4},
        "log-stop": {"ok": True, "records": 20, "flushes": 3},
    })
    assert emu.log_start(tmp_path / "log") == tmp_path / "log"
    assert emu.log_mark("workload") == 4
    assert emu.log_stop()["records"] == 20
    assert fake.requests == [
        {"cmd": "log-start", "dir": str(tmp_path / "log")},
        {"cmd": "log-mark", "label": "workload"},
        {"cmd": "log-stop"},
    ]


def test_log_start_without_a_directory_uses_the_emulators_default(emu_with):
    emu, fake = emu_with({"log-start": {"ok": True, "dir": "/somewhere/state/crashlog"}})
    assert emu.log_start() == Path("/somewhere/state/crashlog")
    assert fake.requests == [{"cmd": "log-start"}]


def test_crash_states_become_typed_data(emu_with):
    emu, fake = emu_with({"crash-states": LISTING})
    listing = emu.crash_states(after="workload", seed=7, subsets=6, tears=1)
    assert fake.requests == [{"cmd": "crash-states", "after": "workload", "seed": 7, "subsets": 6, "tears": 1}]
    assert isinstance(listing, CrashListing)
    assert listing.marks == ((4, "workload"),) and listing.after == 4 and listing.records == 20
    first, second = listing.states
    assert first.id == "12+k3" and first.kind is CrashKind.SUBSET and first.kept == 3 and first.last_flush == 9
    assert second.kind is CrashKind.FLUSH


def test_image_classes_are_asked_for_and_read_back(emu_with):
    listed = {**LISTING, "images": 1, "states": [{**s, "image": 0} for s in LISTING["states"]]}
    emu, fake = emu_with({"crash-states": listed})
    listing = emu.crash_states(images=True)
    assert fake.requests[0]["images"] is True
    assert listing.images == 1 and [s.image for s in listing.states] == [0, 0]


def test_image_classes_are_not_asked_for_by_default(emu_with):
    emu, fake = emu_with({"crash-states": LISTING})
    assert [s.image for s in emu.crash_states().states] == [None, None]  # not asked: not known
    assert "images" not in fake.requests[0]


def test_switch_and_image_pass_the_state_id(emu_with, tmp_path):
    emu, fake = emu_with({
        "crash-switch": {"ok": True, "state": "12+k3", "switch_ns": 900},
        "crash-image": {"ok": True, "path": str(tmp_path / "s.img"), "damaged_ranges": []},
    })
    assert emu.crash_switch("12+k3")["switch_ns"] == 900
    emu.crash_switch("live")
    assert emu.crash_image("12+k3", tmp_path / "s.img")["damaged_ranges"] == []
    assert fake.requests == [
        {"cmd": "crash-switch", "state": "12+k3"},
        {"cmd": "crash-switch", "state": "live"},
        {"cmd": "crash-image", "state": "12+k3", "path": str(tmp_path / "s.img")},
    ]


def test_a_refused_call_raises_the_emulators_message(emu_with):
    emu, _ = emu_with({"crash-switch": {"ok": False, "error": "crash state 99: the log has 20 records (0..19)"}})
    with pytest.raises(EmulatorError, match=r"^crash state 99: the log has 20 records"):
        emu.crash_switch("99")


def _binary() -> Path:
    try:
        return find_binary()
    except EmulatorError as e:
        pytest.skip(f"{e}")


@pytest.mark.emulator
def test_offline_calls_report_a_missing_log_in_one_line(tmp_path):
    _binary()
    with pytest.raises(EmulatorError) as e:
        rebuild_image(tmp_path / "nolog", "3", tmp_path / "x.img")
    assert "crashlog.events" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(EmulatorError, match="crashlog.events"):
        crash_states(tmp_path / "nolog")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "crashlog.events").write_bytes(b"not a log")
    (tmp_path / "junk" / "crashlog.data").write_bytes(b"")
    with pytest.raises(EmulatorError, match="is not a flashbed crash log"):
        rebuild_image(tmp_path / "junk", "3", tmp_path / "x.img")


@pytest.mark.emulator
def test_offline_image_refuses_a_bad_state_id(tmp_path):
    _binary()
    with pytest.raises(EmulatorError, match=r"crash state `3\+q` is not POS"):
        rebuild_image(tmp_path / "nolog", "3+q", tmp_path / "x.img")
