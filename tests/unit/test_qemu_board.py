"""The emulated board's driver (flashbed.boards.qemu) without QEMU: its command line, its
power cut, its refusals."""

import gzip
import hashlib
import json
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from flashbed.boards import qemu
from flashbed.errors import FlashbedError


def _board(tmp_path: Path, full: bool = True, name: str = "board", port: int = 40022, card_bytes: int = 512 << 20,
           pristine: bool = False) -> qemu.BoardDir:
    b = qemu.BoardDir(tmp_path / name)
    b.dir.mkdir()
    b.config.write_text(json.dumps({"recipe": "debian" if full else "busybox", "image": str(tmp_path / "img"),
                                    "port": port, "card_bytes": card_bytes, "full": full,
                                    **({"pristine": True} if pristine else {})}))
    return b


def test_the_card_is_an_sd_card_with_no_cache_of_qemus_own(tmp_path):
    """raw (no qcow2 metadata in QEMU's memory for a SIGKILL to lose), and through this machine's page
    cache, which survives the QEMU process's death: cache=none's O_DIRECT made the card about 1 MB/s."""
    cmd = qemu.qemu_command(_board(tmp_path))
    card = next(a for a in cmd if a.startswith(f"file={tmp_path / 'board' / 'card.img'}"))
    assert "cache=writeback" in card and "format=raw" in card
    assert "sdhci-pci" in cmd and "sd-card,drive=card" in cmd


def test_only_ssh_is_forwarded_and_only_on_loopback(tmp_path):
    cmd = qemu.qemu_command(_board(tmp_path))
    net = cmd[cmd.index("-netdev") + 1]
    assert net.count("hostfwd=") == 1 and "hostfwd=tcp:127.0.0.1:40022-:22" in net


def test_the_busybox_board_has_no_root_disk(tmp_path):
    cmd = qemu.qemu_command(_board(tmp_path, full=False))
    assert "virtio-blk-pci,drive=root" not in cmd
    assert "root=" not in cmd[cmd.index("-append") + 1]


def test_off_is_a_sigkill_of_the_qemu_process(tmp_path):
    b = _board(tmp_path)
    # a stand-in process whose command line names QEMU, that ignores SIGTERM: only SIGKILL ends it
    p = subprocess.Popen(["bash", "-c", f"trap '' TERM; exec -a {qemu.QEMU} sleep 60"])
    try:
        b.pidfile.write_text(f"{p.pid}\n")
        deadline = time.monotonic() + 5
        while b.pid() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert b.pid() == p.pid
        qemu.power_off(b)
        assert p.wait(5) == -9
        assert b.pid() is None and not b.pidfile.exists()
        # counted from QEMU's side: the power log names the process the cut killed
        assert b.power_log.read_text().split()[1:] == ["off", "(SIGKILL)", "qemu", "pid", str(p.pid)]
    finally:
        p.kill()


def test_off_never_kills_a_process_that_is_not_qemu(tmp_path):
    b = _board(tmp_path)
    p = subprocess.Popen(["sleep", "60"])
    try:
        b.pidfile.write_text(f"{p.pid}\n")
        qemu.power_off(b)
        assert p.poll() is None and not b.power_log.exists()
    finally:
        p.kill()


def test_a_card_size_that_is_not_a_power_of_two_is_refused_in_one_line(tmp_path):
    with pytest.raises(FlashbedError, match="power of two"):
        qemu.create(tmp_path / "b", qemu.RECIPES["debian"], card_bytes=3 << 20)
    assert not (tmp_path / "b").exists()


def test_sizes():
    assert qemu._size("512M") == 512 << 20 and qemu._size("1G") == 1 << 30 and qemu._size("1GiB") == 1 << 30
    with pytest.raises(FlashbedError, match="--card-size"):
        qemu._size("big")


def test_the_image_key_follows_the_recipe():
    r = qemu.RECIPES["debian"]
    assert r.key == qemu.RECIPES["debian"].key
    assert replace(r, packages=r.packages + ("zstd",)).key != r.key
    assert qemu.image_for(r).dir.name.startswith("debian-bookworm-arm64-")
    # sqlite3 goes onto the built image: its key is its own, the base's the one it was built under
    # before packages could be added (its 43-minute build not made again)
    assert "sqlite3" in r.added and r.base.added == () and r.key != r.base.key
    old = json.dumps({"name": "debian", "suite": "bookworm", "arch": "arm64", "packages": list(r.packages),
                      "build": qemu.BUILD_VERSION}, sort_keys=True)
    assert r.base.key == hashlib.sha256(old.encode()).hexdigest()[:16]


def test_added_packages_go_onto_the_built_base_image(tmp_path, monkeypatch):
    monkeypatch.setattr(qemu, "cache_dir", lambda: tmp_path)
    r = qemu.RECIPES["debian"]
    base = qemu.image_for(r.base)
    base.dir.mkdir(parents=True)
    (base.dir / "image.json").write_text("{}")  # built
    onto = []
    monkeypatch.setattr(qemu, "build_added", lambda recipe, b, say: onto.append((recipe, b)) or qemu.image_for(recipe))
    assert qemu.build(r, say=lambda *_: None) == qemu.image_for(r)
    assert onto == [(r, base)]


def test_an_image_is_ready_only_once_its_build_ended_and_is_built_once(tmp_path, monkeypatch):
    """The frame both builds share (qemu._building): a fresh work directory and log; image.json, which
    makes the image ready, written only after the build ends without an error, with what the build
    found; and nothing to do where another process built it meanwhile."""
    monkeypatch.setattr(qemu, "cache_dir", lambda: tmp_path)
    img = qemu.image_for(qemu.RECIPES["debian"])
    facts = {"base": "b"}
    with pytest.raises(FlashbedError):
        with qemu._building(img, facts) as fresh:
            (fresh[0] / "half").write_text("")
            raise FlashbedError("mmdebstrap failed")
    assert not img.ready
    with qemu._building(img, facts) as fresh:
        work, log = fresh
        assert work.is_dir() and not any(work.iterdir())  # the failed build's files: gone
        assert log.f.name == str(img.dir / "build.log")
        facts["release"] = "6.1.0-arm64"
        assert not img.ready
    built = json.loads((img.dir / "image.json").read_text())
    assert img.ready and not work.exists()
    assert built["key"] == img.recipe.key and built["base"] == "b" and built["release"] == "6.1.0-arm64"
    with qemu._building(img, facts) as fresh:
        assert fresh is None


def test_an_action_on_a_board_never_made_says_how_to_make_it(tmp_path, capsys):
    assert qemu.main(["--dir", str(tmp_path / "none"), "status"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "start" in err
    assert not (tmp_path / "none").exists()


def _tar(path: Path, files: dict[str, bytes], links: dict[str, str]) -> Path:
    import io
    import tarfile
    with tarfile.open(path, "w") as t:
        for name, data in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size, info.mode = len(data), 0o755
            t.addfile(info, io.BytesIO(data))
        for name, target in links.items():
            info = tarfile.TarInfo("./" + name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            t.addfile(info)
    return path


@pytest.mark.skipif(not qemu._have("cpio"), reason="the initramfs is made with cpio")
def test_the_busybox_boards_dropbear_gets_its_loader_from_a_merged_or_a_split_usr_tar(tmp_path):
    """bookworm's mmdebstrap (1.3) gives a merged-/usr tar; trixie's (1.5.7), for the same bookworm board,
    keeps lib/ a directory of its own, libc.so.6 and the loader in it. The initramfs was missing both
    then, and the board said "dropbear: not found" at boot and never answered SSH (make test in a stock
    Debian 13 root). Either tar gives the initramfs the same dropbear, libraries and loader."""
    gnu = "aarch64-linux-gnu"
    common = {"bin/busybox": b"busybox", "usr/sbin/dropbear": b"dropbear", f"usr/lib/{gnu}/libz.so.1": b"z"}
    layouts = {
        "merged": ({**common, f"usr/lib/{gnu}/libc.so.6": b"libc", f"usr/lib/{gnu}/ld-linux-aarch64.so.1": b"ld"},
                   {"lib": "usr/lib", "usr/lib/ld-linux-aarch64.so.1": f"{gnu}/ld-linux-aarch64.so.1"}),
        "split": ({**common, f"lib/{gnu}/libc.so.6": b"libc", f"lib/{gnu}/ld-linux-aarch64.so.1": b"ld"},
                  {"lib/ld-linux-aarch64.so.1": f"{gnu}/ld-linux-aarch64.so.1"}),
    }
    (tmp_path / "id_ed25519.pub").write_bytes(b"ssh-ed25519 AAAA test\n")
    seen = {}
    for name, (files, links) in layouts.items():
        tar = _tar(tmp_path / f"{name}.tar", files, links)
        got = dict(qemu._dropbear_files(tar, tmp_path))
        assert got[f"usr/lib/{gnu}/libc.so.6"] == b"libc" and got["usr/lib/ld-linux-aarch64.so.1"] == b"ld", name
        assert got["usr/sbin/dropbear"] == b"dropbear" and got[f"usr/lib/{gnu}/libz.so.1"] == b"z"
        initrd = tmp_path / f"{name}.initrd"
        qemu._write_initramfs(initrd, tar, "6.1.0-50-arm64", "#!/bin/sh\n", extra=list(got.items()))
        listing = subprocess.run(["cpio", "-t", "-v", "--quiet"], input=gzip.decompress(initrd.read_bytes()),
                                 capture_output=True, check=True).stdout.decode()
        names = {line.split()[8]: line for line in listing.splitlines()}
        # /lib/ld-linux-aarch64.so.1, dropbear's interpreter, through lib -> usr/lib
        assert names["lib"].startswith("l") and names["lib"].endswith("-> usr/lib"), names.get("lib")
        assert "usr/lib/ld-linux-aarch64.so.1" in names and f"usr/lib/{gnu}/libc.so.6" in names
        seen[name] = sorted(n for n in names if n.startswith(("usr/", "lib")))
    assert seen["merged"] == seen["split"]


def _image(tmp_path: Path) -> Path:
    img = tmp_path / "img"
    img.mkdir()
    for name in ("image.json", "root.img", "vmlinuz", "initrd"):
        (img / name).write_text(name)
    return img


def test_a_saved_machine_states_key_is_what_the_state_depends_on_not_what_is_the_boards_own(tmp_path, monkeypatch):
    """QEMU's version, the machine's command line, the card's size, the image's files; not the board's
    directory or SSH port, which a board resumed from another's state has its own of."""
    monkeypatch.setattr(qemu, "_qemu_version", lambda: "QEMU emulator version 7.2.22")
    img = _image(tmp_path)
    key = qemu.state_key(_board(tmp_path, name="a"))
    assert key and key == qemu.state_key(_board(tmp_path, name="b", port=40023))
    assert qemu.state_key(_board(tmp_path, name="c", card_bytes=1 << 30)) != key
    monkeypatch.setattr(qemu, "MEM_MB", 1024)
    assert qemu.state_key(_board(tmp_path, name="d")) != key
    monkeypatch.undo()
    monkeypatch.setattr(qemu, "_qemu_version", lambda: "QEMU emulator version 8.2.2")
    assert qemu.state_key(_board(tmp_path, name="e")) != key
    monkeypatch.setattr(qemu, "_qemu_version", lambda: "QEMU emulator version 7.2.22")
    os.utime(img / "root.img", ns=(1, 1))  # the image's root changed since
    assert qemu.state_key(_board(tmp_path, name="f")) != key
    monkeypatch.setattr(qemu, "_qemu_version", lambda: "")  # no QEMU that says its version: no state
    assert qemu.state_key(_board(tmp_path, name="g")) is None


@pytest.fixture
def fake_qemu(tmp_path, monkeypatch):
    """QEMU's starts (cold, or resuming a state) as stand-in processes that name QEMU; what each got."""
    monkeypatch.setattr(qemu, "_need", lambda *_: None)
    monkeypatch.setattr(qemu, "_qemu_version", lambda: "QEMU emulator version 7.2.22")
    _image(tmp_path)
    seen: dict[str, list] = {"cold": [], "resumed": [], "blank": []}
    procs = []

    def stand_in(b):
        procs.append(subprocess.Popen([qemu.QEMU, "60"], executable="sleep"))
        b.pidfile.write_text(f"{procs[-1].pid}\n")
        deadline = time.monotonic() + 5
        while b.pid() is None and time.monotonic() < deadline:  # its command line QEMU's once it ran exec
            time.sleep(0.01)

    def start(b, cmd):
        seen["cold"].append(cmd)
        stand_in(b)

    def resume(b, state):
        seen["resumed"].append(state)
        stand_in(b)
        if getattr(resume, "fails", False):
            raise FlashbedError("QEMU ended while reading it")

    monkeypatch.setattr(qemu, "_start", start)
    monkeypatch.setattr(qemu, "_resume", resume)
    monkeypatch.setattr(qemu, "_blank", lambda b, card_bytes, root: seen["blank"].append((card_bytes, root)))
    seen["resume"], seen["procs"] = [resume], procs
    yield seen
    for p in procs:
        p.kill()
        p.wait()


def _saved(b: qemu.BoardDir) -> Path:
    state = Path(b.load()["image"]) / "states" / qemu.state_key(b)
    state.mkdir(parents=True)
    (state / "ram").write_text("")
    (state / "root.qcow2").write_text("")
    return state


def _on_lines(b: qemu.BoardDir) -> list[str]:
    return [" ".join(x.split()[1:3]) for x in b.power_log.read_text().splitlines()]


def test_only_a_pristine_boards_first_power_on_resumes_a_saved_state(tmp_path, fake_qemu):
    """The first power-on of a board never powered on resumes its configuration's state; every later one,
    after a cut above all, boots cold on what the cut left, though the state is there. One "on" line each."""
    b = _board(tmp_path, pristine=True)
    state = _saved(b)
    qemu.power_on(b, say=pytest.fail)
    assert fake_qemu["resumed"] == [state] and fake_qemu["cold"] == []
    assert "pristine" not in b.load() and "save_state" not in b.load()
    qemu.power_off(b)
    qemu.power_on(b, say=pytest.fail)
    assert fake_qemu["resumed"] == [state] and len(fake_qemu["cold"]) == 1
    assert "-incoming" not in fake_qemu["cold"][0] and "save_state" not in b.load()
    assert _on_lines(b) == ["on qemu", "off (SIGKILL)", "on qemu"]


def test_a_pristine_boards_cold_boot_is_marked_to_be_saved_and_no_later_one_is(tmp_path, fake_qemu):
    b = _board(tmp_path, pristine=True)
    qemu.power_on(b, say=pytest.fail)
    assert len(fake_qemu["cold"]) == 1 and fake_qemu["resumed"] == []
    assert b.load()["save_state"] == {"key": qemu.state_key(b), "pid": b.pid()} and "pristine" not in b.load()
    qemu.power_off(b)  # cut before SSH answered: the next boot is of what the cut left, never saved
    qemu.power_on(b, say=pytest.fail)
    assert len(fake_qemu["cold"]) == 2 and "save_state" not in b.load()


def test_a_state_that_does_not_resume_is_removed_and_the_board_boots_cold_saying_so_in_one_line(tmp_path, fake_qemu):
    b = _board(tmp_path, pristine=True, card_bytes=128 << 20)
    state = _saved(b)
    fake_qemu["resume"][0].fails = True
    said = []
    qemu.power_on(b, say=said.append)
    assert len(said) == 1 and "did not resume" in said[0] and "booting cold" in said[0] and "\n" not in said[0]
    assert not state.exists() and not list(state.parent.iterdir())
    # the failed resume's QEMU gone (not a power action: one "on" line), the board's card and root made
    # again as new, then a cold boot, whose state is saved in place of the broken one
    assert fake_qemu["blank"] == [(128 << 20, Path(b.load()["image"]) / "root.img")]
    assert len(fake_qemu["cold"]) == 1 and b.load()["save_state"]["pid"] == b.pid()
    assert fake_qemu["procs"][0].wait(5) == -9 and b.pid() == fake_qemu["procs"][1].pid
    assert _on_lines(b) == ["on qemu"]


def test_a_new_debian_board_is_pristine_and_the_busybox_board_never_is(tmp_path, monkeypatch):
    """Only the Debian board resumes a saved state: the busybox board's cold boot is short."""
    monkeypatch.setattr(qemu, "_need", lambda *_: None)
    monkeypatch.setattr(qemu, "_blank", lambda *_: None)
    monkeypatch.setattr(qemu, "build", lambda recipe, say: qemu.Image(_image(tmp_path / recipe.name), recipe))
    for name, pristine in (("debian", True), ("busybox", False)):
        (tmp_path / name).mkdir()
        b = qemu.create(tmp_path / name / "board", qemu.RECIPES[name], say=None)
        assert b.load().get("pristine", False) is pristine, name


def test_a_boards_state_is_saved_once_and_only_after_waiting_for_its_first_boot(tmp_path, fake_qemu):
    """Saved where SSH answered after the wait of the cold boot its power-on marked: where it answered at
    once the board was up before, and may have been used. The mark goes at the first answer either way."""
    b = _board(tmp_path, pristine=True)
    qemu.power_on(b, say=pytest.fail)
    key = b.load()["save_state"]["key"]
    assert qemu._pending_save(b, waited=True) == key
    assert qemu._pending_save(b, waited=True) is None and "save_state" not in b.load()
    c = b.load()
    for mark, waited in (({"key": key, "pid": b.pid()}, False), ({"key": key, "pid": 1}, True)):
        b.config.write_text(json.dumps({**c, "save_state": mark}))
        assert qemu._pending_save(b, waited) is None and "save_state" not in b.load()



def test_the_image_keeps_its_most_recently_used_saved_states_and_a_resume_counts_as_a_use(tmp_path, fake_qemu):
    """A QEMU upgrade or another card size makes a new state (about 250 MB); the image keeps
    KEEP_STATES of them, the most recently saved or resumed, and removes the rest when it saves one."""
    b = _board(tmp_path, pristine=True)
    state = _saved(b)
    others = []
    for age in range(qemu.KEEP_STATES + 1):
        d = state.parent / f"{age:016x}"
        d.mkdir()
        os.utime(d, (time.time() - 3600 * (age + 1),) * 2)
        others.append(d)
    os.utime(state, (time.time() - 3600 * 10,) * 2)  # the oldest, until resumed
    qemu.power_on(b, say=pytest.fail)
    assert fake_qemu["resumed"] == [state]
    qemu._prune(state.parent)
    kept = sorted(p.name for p in state.parent.iterdir())
    assert kept == sorted([state.name] + [d.name for d in others[:qemu.KEEP_STATES - 1]]), kept
