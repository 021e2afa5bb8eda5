"""The flashbed-emu wrapper and the emulator's command line (fast; uses the
built binary, skipped with a reason when it is absent)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from flashbed.devices import emulator
from flashbed.devices.emulator import Emulator, EmulatorError, EmulatorSpec, describe, find_binary

REPO = Path(__file__).resolve().parents[2]
PRESETS = REPO / "presets"
BLOCK_PRESETS = ["ideal", "emmc-8g", "lexar-c10-16g", "stick-1au-inorder", "samsung-evo-plus-32g",
                 "sandisk-extreme-pro-a1-32g", "sandisk-ultra-fit-32g"]


def _binary() -> Path:
    try:
        return find_binary()
    except EmulatorError as e:
        pytest.skip(f"{e}")


def test_find_binary_reports_how_to_build(monkeypatch, tmp_path):
    monkeypatch.delenv("FLASHBED_EMU", raising=False)
    monkeypatch.setattr(emulator, "DEFAULT_BINARY", tmp_path / "nope")
    with pytest.raises(EmulatorError, match=r"flashbed-emu is not built: run `make setup`"):
        find_binary()
    monkeypatch.setenv("FLASHBED_EMU", str(tmp_path / "missing"))
    with pytest.raises(EmulatorError, match="FLASHBED_EMU"):
        find_binary()


@pytest.mark.emulator
@pytest.mark.parametrize("name", BLOCK_PRESETS)
def test_describe_is_consistent_for_any_capacity(name):
    _binary()
    preset = PRESETS / f"{name}.toml"
    own = describe(preset)
    small = describe(preset, 256 << 20)
    for info in (own, small):
        assert info["kind"] == "block" and info["name"] == name
        # The FTL's erase unit is one block per plane, written in stripes.
        assert info["physical_block_bytes"] == info["pages_per_block"] * info["page_size"]
        assert info["erase_block_bytes"] == info["physical_block_bytes"] * info["planes"]
        assert info["capacity_bytes"] % info["map_unit"] == 0
        physical = info["blocks"] * info["physical_block_bytes"]
        assert physical >= info["capacity_bytes"] * (1 + info["over_provisioning"])
    assert small["capacity_bytes"] <= 256 << 20
    assert small["capacity_bytes"] > (256 << 20) - small["erase_block_bytes"]
    # Capacity scales the block count, not the geometry.
    for k in ("page_size", "pages_per_block", "planes", "erase_block_bytes", "cache_bytes"):
        assert small[k] == own[k]
    assert small["blocks"] < own["blocks"]
    if own["ftl"] == "hybrid":
        assert own["open_aus"] >= 1
        assert own["capacity_bytes"] % own["erase_block_bytes"] == 0


@pytest.mark.emulator
def test_declared_figures_required_by_the_presets():
    _binary()
    emmc = describe(PRESETS / "emmc-8g.toml")
    assert emmc["ftl"] == "page" and emmc["cell"] == "mlc" and emmc["cache_bytes"] > 0
    sd = describe(PRESETS / "lexar-c10-16g.toml")  # the log-block card: flashbench saw 5 open AUs
    assert sd["ftl"] == "hybrid" and sd["erase_block_bytes"] == 4 << 20 and sd["open_aus"] == 5
    assert sd["declared"]["seq_write_mb_s"] >= 10
    assert sd["declared"]["sources"]["seq_write_mb_s"] and sd["part"]["model"]
    usb = describe(PRESETS / "stick-1au-inorder.toml")
    assert usb["ftl"] == "hybrid" and usb["erase_block_bytes"] == 8 << 20 and usb["open_aus"] == 1
    assert describe(PRESETS / "ideal.toml")["ftl"] == "page"


@pytest.mark.emulator
def test_presets_check_accepts_every_preset():
    binary = _binary()
    files = sorted(str(p) for p in PRESETS.glob("*.toml"))
    proc = subprocess.run([str(binary), "presets-check", *files], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.emulator
def test_raw_nand_presets_are_refused_in_one_line():
    _binary()
    nandsim = [p for p in PRESETS.glob("*.toml") if 'kind = "nandsim"' in p.read_text()]
    if not nandsim:
        pytest.skip("no nandsim preset in presets/")
    with pytest.raises(EmulatorError) as e:
        describe(nandsim[0])
    name = e.value.args[0].split()[1]
    assert str(e.value) == f"preset {name} is a raw NAND preset for nandsim in the lab; flashbed-emu serves block devices"


@pytest.mark.emulator
@pytest.mark.parametrize(
    "edit, field",
    [
        (("page_size = 4096", "page_size = 4000"), "nand.page_size"),
        (("program_us = [0]", "program_us = [0, 1]"), "nand.timing.program_us"),
        (("type = \"page\"", "type = \"fancy\""), "ftl.type"),
        (("cache = 0", "cache = \"lots\""), "ftl.cache"),
        (("endurance = 10000000", "endurance = 10000000\nendurence = 3"), "nand.endurence"),
    ],
)
def test_bad_preset_gets_one_line_naming_file_and_field(tmp_path, edit, field):
    binary = _binary()
    text = (PRESETS / "ideal.toml").read_text()
    assert edit[0] in text
    bad = tmp_path / "broken.toml"
    bad.write_text(text.replace(edit[0], edit[1], 1))
    proc = subprocess.run([str(binary), "presets-check", str(bad)], capture_output=True, text=True)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("flashbed-emu: error: ")
    assert str(bad) in lines[0] and f"`{field}`" in lines[0]
    assert "panicked" not in proc.stderr


@pytest.mark.emulator
def test_too_small_capacity_is_a_clear_error():
    _binary()
    with pytest.raises(EmulatorError, match="too small"):
        describe(PRESETS / "lexar-c10-16g.toml", 1 << 20)


@pytest.mark.emulator
def test_start_failure_raises_the_emulators_error_line(tmp_path):
    _binary()
    busy = tmp_path / "mnt"
    busy.mkdir()
    (busy / "something").write_text("x")
    spec = EmulatorSpec(preset=PRESETS / "ideal.toml", state_dir=tmp_path / "state", mount_dir=busy,
                        control=tmp_path / "ctl.sock", capacity=64 << 20, pace="none", seed=1)
    with pytest.raises(EmulatorError, match="not empty"):
        Emulator(spec, ready_timeout=20).start()


@pytest.mark.emulator
def test_start_stats_stop(tmp_path):
    _binary()
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse on this machine")
    spec = EmulatorSpec(preset=PRESETS / "ideal.toml", state_dir=tmp_path / "state", mount_dir=tmp_path / "mnt",
                        control=tmp_path / "ctl.sock", capacity=64 << 20, pace="none", seed=3)
    with Emulator(spec) as emu:
        assert emu.info["capacity_bytes"] == 64 << 20 and emu.info["preset"] == "ideal"
        assert emu.device_path.stat().st_size == 64 << 20
        s = emu.stats()
        assert s["host"]["writes"] == 0 and s["powered"] is True
        with pytest.raises(EmulatorError, match="unknown inject kind"):
            emu.inject("meteor", block=0)
    assert not emu.running
    assert not os.path.ismount(tmp_path / "mnt")


def test_a_control_socket_too_long_for_unix_goes_to_a_short_private_directory(tmp_path):
    """A Unix socket path holds 108 bytes: a long case label in a deep run directory must not
    make the emulator unreachable (its socket then lives in a private temporary directory)."""
    from flashbed.devices import presets
    from flashbed.devices.session import EmulatorSession
    dev = presets.load_spec("ideal@64M")
    short = EmulatorSession(dev, tmp_path)
    assert short._control_path() == tmp_path / "control.sock"
    deep = tmp_path / ("x" * 60) / ("y" * 60)
    s = EmulatorSession(dev, deep)
    path = s._control_path()
    assert len(str(path)) < 100 and path.name == "control.sock" and path.parent.is_dir()
    s._close()
    assert not path.parent.exists()
