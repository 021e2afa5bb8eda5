#!/bin/sh
# Idempotent setup: Debian packages, a Rust toolchain, the project environment (.venv) with
# flashbed and its test extras, the emulator, the YAFFS2 daemon, the default lab kernel.
# Safe to run again: each stage skips what is already there.
#
# Runs as an ordinary user: sudo only for apt-get, nothing else; the system Python is never
# written to (flashbed goes into .venv), the kernels and YAFFS2 into the user's cache.
# A stage that fails says what failed and what to do in one line (its output is in
# .setup.log) and exits 2; the Rust toolchain is chosen before anything is installed.
set -eu
cd "$(dirname "$0")/.."

LOG=.setup.log
VENV=.venv
PY=${PYTHON:-python3}
: >"$LOG"

# linux-source-6.12 is the 6.12 lab kernel's source; the 7.3 one is fetched with
# apt into flashbed's cache on first use (never installed), checked against
# debian-archive-keyring
APT_PACKAGES="linux-source-6.12 debian-archive-keyring build-essential bc bison flex libelf-dev xz-utils patch
 e2fsprogs btrfs-progs xfsprogs f2fs-tools nilfs-tools dosfstools exfatprogs squashfs-tools erofs-utils
 mtd-utils fio flashbench sqlite3
 util-linux fuse3 libfuse3-dev pkg-config dmsetup psmisc
 openssh-client openssh-server
 qemu-system-arm qemu-utils mmdebstrap genext2fs cpio
 chromium fonts-dejavu-core"
# qemu-system-arm ... cpio: the emulated arm64 board of the board path's tests (scripts/qemu-board.sh)
# what a registry that cannot be reached looks like in apt's, pip's and cargo's output
NET_ERRORS='Temporary failure resolving|Temporary failure in name resolution|Could not resolve|resolve host|Name or service not known|Network is unreachable|No route to host|Connection refused|Connection timed out|timed out|Failed to establish a new connection|Could not connect|Failed to fetch|spurious network error'

die() { echo "setup: $*" >&2; exit 2; }
say() { echo "setup: $*"; }

# stage WHAT FIX CMD...: CMD's output to the log; if it fails, one line (a registry out of
# reach is named as such) and exit 2
stage() {
    what=$1 fix=$2
    shift 2
    out=$(mktemp)
    if "$@" >"$out" 2>&1; then
        { echo "\$ $*"; cat "$out"; } >>"$LOG"
        rm -f "$out"
        return 0
    fi
    { echo "\$ $*"; cat "$out"; } >>"$LOG"
    net=$(grep -o -E "$NET_ERRORS" "$out" | head -n 1)
    last=$(grep -E '^[[:space:]]*(ERROR|error|E)(:|\[)' "$out" | grep -v 'subprocess-exited-with-error' | tail -n 1 |
        sed 's/^[[:space:]]*//' | cut -c1-200)
    [ -n "$last" ] || last=$(grep -v '^[[:space:]]*$' "$out" | tail -n 1 | sed 's/^[[:space:]]*//' | cut -c1-200)
    rm -f "$out"
    if [ -n "$net" ]; then
        die "$what: cannot reach the package registry ($net): check the network or the proxy, then run make setup again (log: $LOG)"
    fi
    die "$what failed ($last): $fix (log: $LOG)"
}

# version_ge A B: is version A (1.85.0) at least B (1.85)?
version_ge() {
    "$PY" -c 'import sys
t = lambda v: tuple(int(x) for x in v.split("+")[0].split("~")[0].split("-")[0].split(".")[:3])
sys.exit(0 if t(sys.argv[1]) >= t(sys.argv[2]) else 1)' "$1" "$2"
}

# --- what is needed, checked before anything is installed -------------------------------------
command -v "$PY" >/dev/null || die "no $PY: install python3 (3.11 or newer), or give PYTHON=/path/to/python3"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "flashbed needs Python 3.11 or newer; $PY is $("$PY" -c 'import platform; print(platform.python_version())'): install a newer python3 or give PYTHON=/path/to/python3"
command -v apt-get >/dev/null && command -v dpkg-query >/dev/null ||
    die "setup installs Debian packages with apt, and this system has no apt-get: use the container image instead (make image; README, Hosts)"

missing=""
for p in $APT_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done

# the project environment needs venv's ensurepip, which Debian ships apart (python3.X-venv)
if [ ! -x "$VENV/bin/python" ] && ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
    ver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    case "$(readlink -f "$(command -v "$PY")")" in
        /usr/bin/python3*) missing="$missing python$ver-venv" ;;
        *) die "$PY has no venv/ensurepip module to make the project environment: install it, or give PYTHON=/usr/bin/python3" ;;
    esac
fi

# Rust: a cargo on PATH that meets the emulator's rust-version, else this suite's packages
# (cargo and rustc, or Debian 12's newer cargo-web and rustc-web); a too-old cargo is never replaced
RUST_NEED=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' emulator/Cargo.toml)
[ -n "$RUST_NEED" ] || die "emulator/Cargo.toml declares no rust-version"
rust_pkgs=""
if command -v cargo >/dev/null; then
    have=$(${RUSTC:-rustc} --version 2>/dev/null | awk '{print $2}')
    if [ -z "$have" ] || ! version_ge "$have" "$RUST_NEED"; then
        owner=$(dpkg-query -S "$(readlink -f "$(command -v cargo)")" 2>/dev/null | cut -d: -f1 || true)
        if [ -n "$owner" ]; then
            die "cargo on PATH is Debian's $owner package with Rust ${have:-of unknown version}; the emulator needs Rust $RUST_NEED or newer (emulator/Cargo.toml): install a newer one (on Debian 12: sudo apt-get install cargo-web rustc-web) or use rustup (https://rustup.rs), then run make setup again"
        fi
        die "cargo on PATH ($(command -v cargo)) has Rust ${have:-of unknown version}; the emulator needs Rust $RUST_NEED or newer (emulator/Cargo.toml): update it (rustup update) and run make setup again"
    fi
else
    rust_pkgs=suite
fi

SUDO=""
# apt-get as root, or through sudo (sudo runs nothing else); never reading a terminal (a
# question gets its default answer)
apt_get() {
    if [ -n "$SUDO" ]; then
        sudo apt-get "$@" </dev/null
    else
        DEBIAN_FRONTEND=noninteractive apt-get "$@" </dev/null
    fi
}
if [ -n "$missing" ] || [ -n "$rust_pkgs" ]; then
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || die "installing Debian packages needs root:$missing${rust_pkgs:+ and a Rust toolchain}: install sudo, or run make setup as root once"
        SUDO=sudo
    fi
    say "updating the package lists (apt-get update${SUDO:+, with sudo})"
    stage "apt-get update" "check the apt sources" apt_get update -q --error-on=any
fi

if [ -n "$rust_pkgs" ]; then
    candidate() { apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '(none)' || true; }
    rust_pkgs=""
    for pair in "cargo rustc" "cargo-web rustc-web"; do
        cand=$(candidate "${pair#* }")
        if [ -n "$cand" ] && [ -n "$(candidate "${pair% *}")" ] && version_ge "$cand" "$RUST_NEED"; then
            rust_pkgs=$pair
            break
        fi
    done
    [ -n "$rust_pkgs" ] || die "the emulator needs Rust $RUST_NEED or newer (emulator/Cargo.toml); no cargo is on PATH and this suite's rustc is $(candidate rustc | sed 's/+.*//' | grep . || echo 'not packaged'): install Rust with rustup (https://rustup.rs), then run make setup again"
    missing="$missing $rust_pkgs"
fi

if [ -n "$missing" ]; then
    say "installing Debian packages:$missing"
    # --no-remove: a package that would replace one of the user's is a failure, not a removal
    stage "apt-get install" "install them by hand to see why (sudo apt-get install$missing)" \
        apt_get install -y -q --no-install-recommends --no-remove $missing
fi

# --- the project environment ------------------------------------------------------------------
if [ -e "$VENV" ] && ! "$VENV/bin/python" -c '' 2>/dev/null; then
    # made by a Python that is gone (an upgrade): made again
    [ -f "$VENV/pyvenv.cfg" ] || die "$VENV exists and is not a Python virtual environment: move it away, then run make setup again"
    say "the project environment's Python is gone: making $VENV again"
    rm -rf "$VENV"
fi
if [ ! -e "$VENV" ]; then
    say "making the project environment ($PY -m venv $VENV)"
    stage "$PY -m venv $VENV" "remove $VENV and run make setup again" "$PY" -m venv "$VENV"
fi
# (re)install when flashbed is missing, is installed from another checkout, or
# pyproject.toml changed since the last install from this one
STAMP=$VENV/.flashbed-installed
if ! "$VENV/bin/python" -c 'import os, sys, flashbed, pytest
here = os.path.realpath("src") + os.sep
sys.exit(0 if os.path.realpath(flashbed.__file__).startswith(here) else 1)' 2>/dev/null \
    || [ ! -e "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    say "installing flashbed and its test extras into $VENV (pip)"
    stage "pip install" "see the log" "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]'
    touch "$STAMP"
fi

# --- builds -----------------------------------------------------------------------------------
say "building the emulator (cargo build --release, Rust $(${RUSTC:-rustc} --version | awk '{print $2}'))"
stage "cargo build" "see the log" cargo build -q --release --locked --manifest-path emulator/Cargo.toml

# YAFFS2 (in no kernel): its core from Debian's u-boot source, fetched with apt into
# flashbed's cache, built with flashbed's MTD driver and FUSE front
say "YAFFS2 daemon"
"$VENV/bin/python" -m flashbed.yaffs2 >/dev/null

# the default kernel's time-travel build: every cell of make demo runs on it (virtual time, and the
# cpu study with time travel off); the kernel as configured (SMP, for --clock real and several
# vCPUs) is built on first use. A build stopped midway (Ctrl-C) resumes here.
say "lab kernel (its time-travel build, which make demo runs on; the SMP one is built on first use)"
"$VENV/bin/python" -m flashbed.cli kernel build --clock virtual >/dev/null
say "done: run flashbed as .venv/bin/flashbed, or after . .venv/bin/activate"
