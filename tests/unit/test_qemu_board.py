"""The emulated board's driver (flashbed.boards.qemu) without QEMU: its command line, its
power cut, its refusals."""

import gzip
import hashlib
import json
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from flashbed.boards import qemu
from flashbed.errors import FlashbedError


def _board(tmp_path: Path, full: bool = True) -> qemu.BoardDir:
    b = qemu.BoardDir(tmp_path / "board")
    b.dir.mkdir()
    b.config.write_text(json.dumps({"recipe": "debian" if full else "busybox", "image": str(tmp_path / "img"),
                                    "port": 40022, "card_bytes": 512 << 20, "full": full}))
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
