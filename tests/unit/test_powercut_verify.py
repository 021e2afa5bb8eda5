"""The power-cut verifier (guest pcwork.py) on fake logs and files: no kernel."""
import importlib.util
import json
from pathlib import Path

import pytest

from flashbed.lab.boundary import GUEST_DIR

PCWORK = GUEST_DIR / "powercut.py"
CORRUPTION_GUEST = GUEST_DIR / "corruption.py"

def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


pcwork = _load("pcwork", PCWORK)
corruption = _load("corruption_guest", CORRUPTION_GUEST)

SEED = 11


def rec(**kw):
    return kw


def log_of(*recs):
    return [{"e": "begin", "seed": SEED, "dir": "x"}, {"e": "dir-ack"}, *recs]


def data(name, ver, size):
    return pcwork.content(SEED, name, ver, size)


def write(d: Path, name: str, b: bytes):
    (d / name).write_bytes(b)


def test_acked_file_intact_is_ok(tmp_path):
    write(tmp_path, "f1", data("f1", 1, 10000))
    v = pcwork.verify_dir(str(tmp_path), log_of(rec(e="intent", n=1, op="create", name="f1", ver=1, size=10000),
                                                 rec(e="ack", n=1)))
    assert v["n_loss"] == 0 and v["n_garbage"] == 0 and v["ok"] == {"intact": 1}


@pytest.mark.parametrize("damage, why", [
    (lambda b: None, "missing"),
    (lambda b: b[:5000], "truncated"),
    (lambda b: b"\x00" + b[1:], "differs"),
    (lambda b: b"\x00" * len(b), "differs"),
])
def test_acked_file_damaged_is_data_loss(tmp_path, damage, why):
    good = data("f1", 1, 10000)
    bad = damage(good)
    if bad is not None:
        write(tmp_path, "f1", bad)
    v = pcwork.verify_dir(str(tmp_path), log_of(rec(e="intent", n=1, op="create", name="f1", ver=1, size=10000),
                                                 rec(e="ack", n=1)))
    assert v["n_loss"] == 1 and why in v["loss"][0]


def test_unacked_create_may_be_absent_empty_partial_or_zero_blocks(tmp_path):
    new = data("f1", 1, 3 * 4096 + 100)
    cases = [None, b"", new[:4096], b"\x00" * 4096 + new[4096:8192], new]
    for actual in cases:
        (tmp_path / "f1").unlink(missing_ok=True)
        if actual is not None:
            write(tmp_path, "f1", actual)
        v = pcwork.verify_dir(str(tmp_path), log_of(
            rec(e="intent", n=1, op="create", name="f1", ver=1, size=len(new), fsync=True)))
        assert v["n_loss"] == 0 and v["n_garbage"] == 0, (actual and len(actual), v)


def test_unacked_create_with_foreign_bytes_is_garbage(tmp_path):
    new = data("f1", 1, 8192)
    write(tmp_path, "f1", new[:4096] + data("other", 1, 4096))
    v = pcwork.verify_dir(str(tmp_path), log_of(rec(e="intent", n=1, op="create", name="f1", ver=1, size=8192)))
    assert v["n_garbage"] == 1 and v["n_loss"] == 0


def test_append_in_flight_keeps_the_acked_prefix(tmp_path):
    base = data("f1", 1, 5000)
    add = data("f1", 2, 3000)
    log = log_of(rec(e="intent", n=1, op="create", name="f1", ver=1, size=5000), rec(e="ack", n=1),
                 rec(e="intent", n=2, op="append", name="f1", ver=2, add=3000))
    for actual, want in [(base, 0), (base + add[:1000], 0), (base + add, 0), (base[:4000], 1),
                         (b"\x01" + base[1:] + add, 1)]:
        write(tmp_path, "f1", actual)
        assert pcwork.verify_dir(str(tmp_path), log)["n_loss"] == want


def test_replace_in_flight_is_old_or_new_never_a_mix(tmp_path):
    old, new = data("f1", 1, 6000), data("f1", 2, 7000)
    log = log_of(rec(e="intent", n=1, op="create", name="f1", ver=1, size=6000), rec(e="ack", n=1),
                 rec(e="intent", n=2, op="replace", name="f1", ver=2, size=7000, tmp="f1.tmp"))
    for actual, loss in [(old, 0), (new, 0), (new[:4096] + old[4096:], 1)]:
        write(tmp_path, "f1", actual)
        write(tmp_path, "f1.tmp", new[:100])  # the temporary copy may be anything it was on its way to
        v = pcwork.verify_dir(str(tmp_path), log)
        assert (v["n_loss"], v["n_garbage"]) == (loss, 0)


def test_acked_delete_must_stay_deleted_and_unknown_files_are_garbage(tmp_path):
    log = log_of(rec(e="intent", n=1, op="create", name="f1", ver=1, size=100), rec(e="ack", n=1),
                 rec(e="intent", n=2, op="delete", name="f1"), rec(e="ack", n=2))
    assert pcwork.verify_dir(str(tmp_path), log)["n_loss"] == 0
    write(tmp_path, "f1", data("f1", 1, 100))
    assert pcwork.verify_dir(str(tmp_path), log)["n_loss"] == 1
    (tmp_path / "f1").unlink()
    write(tmp_path, "zz", b"hello")
    v = pcwork.verify_dir(str(tmp_path), log)
    assert v["n_garbage"] == 1 and "unknown" in v["garbage"][0]


def test_missing_directory_with_acked_files_is_data_loss(tmp_path):
    log = log_of(rec(e="intent", n=1, op="create", name="f1", ver=1, size=100), rec(e="ack", n=1))
    v = pcwork.verify_dir(str(tmp_path / "gone"), log)
    assert v["n_loss"] >= 1


def test_torn_last_log_line_is_ignored(tmp_path):
    p = tmp_path / "log"
    p.write_bytes(b'{"e":"begin","seed":1,"dir":"x"}\n{"e":"intent","n":1,"op":"cre')
    assert pcwork.read_log(str(p)) == [{"e": "begin", "seed": 1, "dir": "x"}]


def run_work(tmp_path, seconds=0.3):
    d = tmp_path / "mnt" / "pc" / "0"
    log = tmp_path / "log.jsonl"
    assert pcwork.main(["work", str(d), str(log), "--seed", "5", "--stop-after", str(seconds),
                        "--max-bytes", "2000000", "--max-file", "65536"]) == 0
    return d, log


def test_real_workload_then_verify_is_clean_and_sabotage_is_data_loss(tmp_path, capsys):
    d, log = run_work(tmp_path)
    recs = pcwork.read_log(str(log))
    v = pcwork.verify_dir(str(d), recs)
    assert v["ops"] > 10 and v["acks"] > 5
    assert v["n_loss"] == 0 and v["n_garbage"] == 0, v
    victim = pcwork.sabotage_dir(str(d), recs)
    assert victim
    v = pcwork.verify_dir(str(d), recs)
    assert v["n_loss"] == 1 and victim in v["loss"][0]


def test_workload_is_deterministic_for_a_seed(tmp_path):
    _, la = run_work(tmp_path / "a", 0.2)
    _, lb = run_work(tmp_path / "b", 0.2)
    ra = [r for r in pcwork.read_log(str(la)) if r["e"] == "intent"]
    rb = [r for r in pcwork.read_log(str(lb)) if r["e"] == "intent"]
    n = min(len(ra), len(rb))
    assert n > 5 and ra[:n] == rb[:n]


def test_corruption_file_classes():
    want = corruption.content(1, "c0000", 1, 3 * 4096)
    c = corruption.classify_file
    assert c(want, "", want) == "intact"
    assert c(None, "EIO", want) == "io-error"
    assert c(None, "", want) == "missing"
    assert c(want[:4096], "", want) == "truncated"
    assert c(want[:4096] + b"\x00" * 4096 + want[8192:], "", want) == "zeroed"
    assert c(b"\x00" + want[1:], "", want) == "silently-corrupted"
    old = corruption.content(1, "c0000", 0, 3 * 4096)
    assert c(old, "", want, (old,)) == "stale"


def test_prepare_reuses_a_sound_filesystem_and_remakes_a_full_or_broken_one(tmp_path, capsys):
    prev = tmp_path / "previous.json"
    spec = {"previous": str(prev), "mkfs": ["echo mkfs"], "mount": ["true"], "umount": ["true"], "timeout": 10,
            "mnt": str(tmp_path), "min_free": 1}
    prev.write_text(json.dumps({"reusable": True}))
    assert pcwork.main(["prepare", json.dumps(spec)]) == 0
    assert json.loads(capsys.readouterr().out)["fresh"] is False
    assert pcwork.main(["prepare", json.dumps({**spec, "min_free": 1 << 60})]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fresh"] is True and "free" in out["reason"] and out["mkfs"]["status"] == "ok"
    prev.write_text(json.dumps({"reusable": False}))
    assert pcwork.main(["prepare", json.dumps(spec)]) == 0
    assert json.loads(capsys.readouterr().out)["reason"] == "previous recovery left it unusable"


def test_the_workload_asks_the_host_for_its_cut(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHBED_RUN", str(tmp_path))
    d = tmp_path / "mnt" / "pc" / "0"
    assert pcwork.main(["work", str(d), str(tmp_path / "log"), "--seed", "1", "--stop-after", "0.05",
                        "--cut-in", "1.25"]) == 0
    req = json.loads((tmp_path / "host-calls" / "9000-cut.req").read_text())
    assert req == {"call": "cut-power-in", "args": {"seconds": 1.25}}
