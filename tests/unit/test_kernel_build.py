import os
from pathlib import Path

import pytest


def test_source_extraction_uses_only_what_this_python_accepts():
    """Bookworm's Python 3.11.2 has no `filter` argument to extractall (3.11.4 added it): the
    kernel build passed it anyway and died with a TypeError on a stock Debian 12."""
    import inspect
    import tarfile

    from flashbed.lab.kernel import TAR_TRUSTED

    accepted = inspect.signature(tarfile.TarFile.extractall).parameters
    assert set(TAR_TRUSTED) <= set(accepted)


FAKE_MAKE = """#!/bin/sh
# a kernel build of six objects: each one not there yet is compiled (the file, then its line);
# $STOP_AFTER objects in, it stops for good (the test stops it meanwhile)
echo $$ >> "$PIDS"
echo "$* | ${CCACHE_DIR:-} | ${CCACHE_BASEDIR:-}" >> "$PIDS.make"
obj=${2#O=}
n=0
for i in 1 2 3 4 5 6; do
    [ -e "$obj/f$i.o" ] && continue
    touch "$obj/f$i.o"
    echo "  CC      f$i.o"
    n=$((n + 1))
    [ "$n" = "${STOP_AFTER:-0}" ] && sleep 600
done
mkdir -p "$obj/include/config"
echo 7.3.4-um > "$obj/include/config/kernel.release"
echo linux > "$obj/linux"
"""


def _fake_build(tmp_path, monkeypatch):
    """kernel._build on a fake source and a fake make: what it extracted, configured and compiled."""
    import tarfile

    from flashbed.lab import kernel

    monkeypatch.setenv("FLASHBED_CACHE", str(tmp_path / "cache"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "make").write_text(FAKE_MAKE)
    (bin_dir / "make").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("PIDS", str(tmp_path / "pids"))
    spec = kernel.KERNELS["7.3"]
    tree = tmp_path / "tree" / spec.package
    tree.mkdir(parents=True)
    (tree / "Makefile").write_text("")
    tarball = tmp_path / "src.tar"
    with tarfile.open(tarball, "w") as tar:
        tar.add(tree, arcname=spec.package)
    seen = {"extracted": 0, "configured": 0}

    def source(spec, log):
        seen["extracted"] += 1
        return tarball

    def run(cmd, cwd, log_file, what, env=None):
        if what == "configuration":
            seen["configured"] += 1
            obj = Path(cmd[2].removeprefix("O="))
            obj.mkdir(parents=True, exist_ok=True)
            (obj / ".config").write_text("")

    monkeypatch.setattr(kernel, "source_tarball", source)
    monkeypatch.setattr(kernel, "_run", run)
    monkeypatch.setattr(kernel, "missing_options", lambda config, spec=None: [])
    out = kernel.kernel_root() / "k"
    out.mkdir(parents=True)
    return kernel, spec, out, seen


def test_an_interrupted_kernel_build_resumes_and_its_half_is_never_used(tmp_path, monkeypatch):
    """Ctrl-C during make: make and its compilers are stopped, no kernel is there to use; the next
    build neither extracts nor configures again, and compiles only the objects it lacks."""

    kernel, spec, out, seen = _fake_build(tmp_path, monkeypatch)
    monkeypatch.setenv("STOP_AFTER", "2")
    lines: list[str] = []

    def ctrl_c(line):
        lines.append(line)
        if "compiled 2/" in line:
            raise KeyboardInterrupt

    monkeypatch.setattr(kernel.time, "monotonic", iter(range(0, 10**6, 10)).__next__)  # a progress line each object
    with pytest.raises(KeyboardInterrupt):
        kernel._build(spec, "7.3.4-1", "k", out, ctrl_c)
    assert kernel._built(out) is None and not (out / "info.json").exists()
    (pid,) = (tmp_path / "pids").read_text().split()
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)  # make was stopped with the build (reaped: gone)
    assert seen == {"extracted": 1, "configured": 1}

    monkeypatch.delenv("STOP_AFTER")
    lines.clear()
    info = kernel._build(spec, "7.3.4-1", "k", out, lines.append)
    assert seen == {"extracted": 1, "configured": 1}  # neither done again
    assert lines[0].startswith("kernel 7.3: resuming the interrupted build of linux-source-7.3 7.3.4-1") and \
        ": 2 objects already compiled (key k)" in lines[0], lines
    assert sum(line.lstrip().startswith("CC ") for line in (out / "build.log").read_text().splitlines()) == 2 + 4
    assert kernel._built(out) == info and Path(info.path).read_text() == "linux\n"
    assert not (out / "build").exists()  # the objects go once the kernel is built


def test_a_kernel_build_from_nothing_prepares_once(tmp_path, monkeypatch):
    kernel, spec, out, seen = _fake_build(tmp_path, monkeypatch)
    (out / "build").mkdir()
    (out / "build" / "stale").write_text("")  # a build stopped before its source was configured
    info = kernel._build(spec, "7.3.4-1", "k", out, lambda line: None)
    assert seen == {"extracted": 1, "configured": 1} and info.release == "7.3.4-um"
    assert int((kernel.kernel_root() / "objects-estimate-7.3").read_text()) == 6


@pytest.mark.parametrize("ccache", [True, False])
def test_make_compiles_through_ccache_where_it_is_installed(tmp_path, monkeypatch, ccache):
    """With ccache on PATH make's compiler is `ccache gcc`, its cache flashbed's and its base the key's
    build directory (so another key's build finds the same objects); without it, gcc as is."""
    kernel, spec, out, seen = _fake_build(tmp_path, monkeypatch)
    bin_dir = Path(os.environ["PATH"].split(":")[0])
    if ccache:
        (bin_dir / "ccache").write_text("#!/bin/sh\nexec \"$@\"\n")
        (bin_dir / "ccache").chmod(0o755)
    else:
        monkeypatch.setattr(kernel.shutil, "which", lambda name: None)
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    kernel._build(spec, "7.3.4-1", "k", out, lambda line: None)
    (args,) = (tmp_path / "pids.make").read_text().splitlines()
    make_args, cache, base = (part.strip() for part in args.split("|"))
    if ccache:
        assert "CC=ccache gcc" in make_args
        assert cache == str(kernel.cache_dir() / "ccache") and base == str(out / "build")
    else:
        assert "CC=" not in make_args and cache == "" and base == ""
