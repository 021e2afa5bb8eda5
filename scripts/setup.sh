#!/bin/sh
# Idempotent setup: Debian packages, the Python package, the emulator, the YAFFS2 daemon, the lab kernel.
# Safe to run again: each stage skips what is already there.
set -eu
cd "$(dirname "$0")/.."

# linux-source-6.12 is the 6.12 lab kernel's source; the 7.3 one is fetched with
# apt into flashbed's cache on first use (never installed), checked against
# debian-archive-keyring
APT_PACKAGES="linux-source-6.12 debian-archive-keyring build-essential bc bison flex libelf-dev xz-utils patch
 e2fsprogs btrfs-progs xfsprogs f2fs-tools nilfs-tools dosfstools exfatprogs squashfs-tools erofs-utils
 mtd-utils fio flashbench sqlite3
 util-linux fuse3 libfuse3-dev pkg-config dmsetup psmisc
 openssh-client openssh-server
 chromium fonts-dejavu-core"

missing=""
for p in $APT_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing Debian packages:$missing"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

PY=${PYTHON:-python3}
# (re)install when flashbed is missing, is installed from another checkout, or
# pyproject.toml changed since the last install from this one
if ! $PY -c 'import os, sys, flashbed, pytest
here = os.path.realpath("src") + os.sep
sys.exit(0 if os.path.realpath(flashbed.__file__).startswith(here) else 1)' 2>/dev/null \
    || [ ! -e .setup-python-stamp ] || [ pyproject.toml -nt .setup-python-stamp ]; then
    echo "setup: installing the flashbed Python package"
    $PY -m pip install -q --disable-pip-version-check -e '.[test]'
    touch .setup-python-stamp
fi

if [ -f emulator/Cargo.toml ]; then
    echo "setup: building the emulator (cargo build --release)"
    cargo build -q --release --manifest-path emulator/Cargo.toml
fi

# YAFFS2 (in no kernel): its core from Debian's u-boot source, fetched with apt into
# flashbed's cache, built with flashbed's MTD driver and FUSE front
echo "setup: YAFFS2 daemon"
$PY -m flashbed.yaffs2 >/dev/null

echo "setup: lab kernel (the default one; the other is built on first use)"
$PY -m flashbed.cli kernel build >/dev/null
echo "setup: done"
