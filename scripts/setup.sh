#!/bin/sh
# Idempotent setup: Debian packages, a Rust toolchain, the project environment (.venv) with
# flashbed and its test extras, the emulator, the YAFFS2 daemon, the default lab kernel.
# Safe to run again: each stage skips what is already there.
#
#   scripts/setup.sh [--tests]
#
# --tests (make test) adds the Debian packages only the test suite uses: a browser for the report's
# rendering test, QEMU and what builds the emulated boards' images, an SSH server; the kernel job
# then also builds 7.3 as configured (SMP), which the suite's tests of two vCPUs boot, and a job
# builds the emulated boards' images: the suite never builds a kernel or a board while it runs.
#
# Runs as an ordinary user: sudo only for apt-get, nothing else; the system Python is never
# written to (flashbed goes into .venv), the kernels and YAFFS2 into the user's cache.
# A stage that fails says what failed and what to do in one line (its output is in
# .setup.log) and exits 2; the Rust toolchain is chosen before anything is installed.
# The emulator, the YAFFS2 daemon and the lab kernel are built side by side; each stage's
# time is printed, and a last line sums them up.
set -eu
cd "$(dirname "$0")/.."
SELF=$(pwd)/scripts/setup.sh

LOG=.setup.log
VENV=.venv
PY=${PYTHON:-python3}

# linux-source-6.12 is the 6.12 lab kernel's source; the 7.3 one is fetched with
# apt into flashbed's cache on first use (never installed), checked against
# debian-archive-keyring; ccache lets a kernel rebuilt after a recipe change reuse its objects
APT_PACKAGES="linux-source-6.12 debian-archive-keyring build-essential ccache bc bison flex libelf-dev xz-utils patch
 e2fsprogs btrfs-progs xfsprogs f2fs-tools nilfs-tools dosfstools exfatprogs squashfs-tools erofs-utils
 mtd-utils fio flashbench sqlite3
 util-linux fuse3 libfuse3-dev pkg-config dmsetup psmisc
 openssh-client fonts-dejavu-core systemd"
# systemd: its tmpfiles make /etc/mtab (-> /proc/self/mounts), which mkfs.nilfs2 reads to check that
# its device is not mounted (the guest's root is this machine's /); a stock root or container
# without systemd has none, and every nilfs2 cell failed there ('Error checking mount status of
# /dev/ubda'). It came with chromium and openssh-server before those became the tests' own.
# The test suite's only: chromium renders the report (test_report_browser); qemu-system-arm ... cpio
# make and boot the emulated arm64 boards (scripts/qemu-board.sh); openssh-server is the board of
# test_board_ssh. make demo never waits for them.
TEST_PACKAGES="chromium openssh-server qemu-system-arm qemu-utils mmdebstrap genext2fs cpio"
# what a registry that cannot be reached looks like in apt's, pip's and cargo's output
NET_ERRORS='Temporary failure resolving|Temporary failure in name resolution|Could not resolve|resolve host|Name or service not known|Network is unreachable|No route to host|Connection refused|Connection timed out|timed out|Failed to establish a new connection|Could not connect|Failed to fetch|spurious network error'

# the jobs (below) stopped first; a job that failed of itself has said why, and setup says nothing more
die() {
    stop_jobs
    failed_job || echo "setup: $*" >&2
    exit 2
}
say() { echo "setup: $*"; }

fmt() {  # seconds -> "12 min 5 s"
    if [ "$1" -ge 60 ]; then echo "$(($1 / 60)) min $(($1 % 60)) s"; else echo "$1 s"; fi
}

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

# --- the builds, side by side ----------------------------------------------------------------
# The emulator (cargo), the YAFFS2 daemon and the lab kernel need nothing of one another, so they
# run at once: on two cores the kernel build's serial parts (its source's fetch and extraction,
# its configuration, its link) leave a core to cargo. Each is a job: setup.sh --job NAME, started
# by setup in a session of its own so that it is stopped whole (cargo and its rustc, the kernel
# build and its make). The first job to fail has said why in one line; setup stops the others and
# exits 2. Ctrl-C stops them all (the kernel build resumes at the next setup). Nothing half-built is
# ever used: cargo puts the emulator in place once linked, the kernel and YAFFS2 are cached whole.
# The kernel and boards jobs are flashbed.setupjobs (what each builds, how it stops and fails); with
# --tests, the kernel job also builds the SMP kernel, and the boards job runs.

run_job() {
    case $1 in
        emulator) stage "cargo build" "see the log" cargo build -q --release --locked --manifest-path emulator/Cargo.toml
            # with --tests, its tests' build too (make test's cargo test then only runs them): built
            # here, beside setup's other jobs, not under the labs' load beside pytest
            [ -z "${FLASHBED_SETUP_TESTS:-}" ] || stage "cargo test --no-run" "see the log" \
                cargo test -q --release --locked --no-run --manifest-path emulator/Cargo.toml ;;
        yaffs2) "$VENV/bin/python" -m flashbed.yaffs2 >/dev/null ;;
        kernel) exec "$VENV/bin/python" -m flashbed.setupjobs kernel ${FLASHBED_SETUP_TESTS:+tests} ;;
        boards) exec "$VENV/bin/python" -m flashbed.setupjobs boards ;;
        *) die "no job '$1'" ;;
    esac
}

JOBS=""     # the jobs started: name:start-time
RUNNING=""  # those not finished
JOBS_DIR=""
start_job() {  # NAME WHAT: the job NAME in the background, in a session of its own
    [ -n "$JOBS_DIR" ] || JOBS_DIR=$(mktemp -d)
    say "$2"
    # counted as running before it starts: Ctrl-C's trap may run between any two commands, and a job
    # started but not yet counted was never stopped (setup then waited for the whole build)
    JOBS="$JOBS $1:$(date +%s)"
    RUNNING="$RUNNING $1"
    # the session's leader is the sh that waits for the job: it writes the job's pid file (the
    # process group to stop), then starts the job unless setup is stopping its jobs already (a
    # leader that wrote its pid too late for stop_jobs sees its mark), and when the job ends
    # writes its exit status and end time. Its stderr is /dev/null, where it says "Terminated"
    # when setup stops the job; the job's is setup's (fd 3)
    setsid sh -c 'echo $$ >"$2.pid"; [ ! -e "$3" ] || exit 143; trap : TERM; sh "$0" --job "$1"; echo "$? $(date +%s)" >"$2.rc"' \
        "$SELF" "$1" "$JOBS_DIR/$1" "$JOBS_DIR/stopping" </dev/null 3>&2 2>/dev/null &
}

stop_jobs() {  # every job still running, stopped and waited for, every process of it gone
    groups=""
    # first the mark, then the pid files: a leader either wrote its pid before (stopped here) or sees
    # the mark and never starts its job
    [ -z "$JOBS_DIR" ] || : >"$JOBS_DIR/stopping"
    for name in $RUNNING; do
        pid=$(cat "$JOBS_DIR/$name.pid" 2>/dev/null || true)
        [ -n "$pid" ] || continue
        kill -TERM "-$pid" 2>/dev/null || true  # its process group (dash takes no --)
        groups="$groups $pid"
    done
    RUNNING=""
    wait
    for pid in $groups; do  # a compiler that outlived its cargo, 10 s at most
        n=0
        while kill -0 "-$pid" 2>/dev/null && [ $n -lt 100 ]; do
            sleep 0.1
            n=$((n + 1))
        done
    done
}

failed_job() {  # has a job ended in a failure of its own (not stopped by setup)?
    [ -n "$JOBS_DIR" ] || return 1
    for f in "$JOBS_DIR"/*.rc; do
        [ -s "$f" ] || continue
        read -r rc _ <"$f"
        [ "$rc" -ge 1 ] && [ "$rc" -lt 128 ] && return 0
    done
    return 1
}

TIMES=""  # each stage's time: "packages 95 s, ..."
timed() {  # NAME START: NAME took from START until now
    TIMES="${TIMES:+$TIMES, }$1 $(fmt $(($(date +%s) - $2)))"
}

await_jobs() {  # until every job has ended; the first that fails stops the others, exit 2
    while [ -n "$RUNNING" ]; do
        still=""
        for name in $RUNNING; do
            if [ -s "$JOBS_DIR/$name.rc" ]; then
                read -r rc ended <"$JOBS_DIR/$name.rc"
                if [ "$rc" != 0 ]; then
                    stop_jobs
                    # a job that fails says why in one line; one killed from outside could not
                    [ "$rc" -lt 128 ] || echo "setup: the $name job was killed (exit $rc): run make setup again" >&2
                    exit 2
                fi
                for j in $JOBS; do
                    [ "${j%:*}" != "$name" ] || started=${j#*:}
                done
                say "$name ready in $(fmt $((ended - started)))"
                timed "$name" "$started"
            else
                still="$still $name"
            fi
        done
        RUNNING=$still
        [ -z "$RUNNING" ] || sleep 1
    done
}

if [ "${1:-}" = --job ]; then
    exec 2>&3 3>&-
    run_job "$2"
    exit 0
fi

unset FLASHBED_SETUP_TESTS  # set here only, for the jobs
case "${1:-}" in
    '') ;;
    --tests) APT_PACKAGES="$APT_PACKAGES $TEST_PACKAGES"; export FLASHBED_SETUP_TESTS=1 ;;
    *) die "unknown option '$1': scripts/setup.sh [--tests]" ;;
esac
[ $# -le 1 ] || die "too many arguments: scripts/setup.sh [--tests]"

: >"$LOG"
SETUP_START=$(date +%s)
# Ctrl-C or a stage's failure: the jobs are stopped before setup ends
trap 'stop_jobs; [ -z "$JOBS_DIR" ] || rm -rf "$JOBS_DIR"' EXIT
trap 'trap - INT TERM; stop_jobs; echo "setup: interrupted: run make setup again to go on (a kernel build resumes where it stopped)" >&2; exit 130' INT TERM

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
timed packages "$SETUP_START"

# the emulator needs only the packages: it builds while the project environment is made
start_job emulator "building the emulator${FLASHBED_SETUP_TESTS:+ and its tests} (cargo build --release${FLASHBED_SETUP_TESTS:+, cargo test --no-run}, Rust $(${RUSTC:-rustc} --version | awk '{print $2}'))"

# --- the project environment ------------------------------------------------------------------
env_start=$(date +%s)
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
# the bytecode, compiled once: else each of make test's workers compiles every module it imports,
# at the same moment as the others (a few seconds of CPU each). Only a saving: a module that does
# not compile fails where it is imported
"$VENV/bin/python" -m compileall -q src ${FLASHBED_SETUP_TESTS:+tests} >/dev/null 2>&1 || true
timed environment "$env_start"

# --- the YAFFS2 daemon and the lab kernel, beside the emulator's build ---------------------------
# YAFFS2 (in no kernel): its core from Debian's u-boot source, fetched with apt into
# flashbed's cache, built with flashbed's MTD driver and FUSE front
start_job yaffs2 "YAFFS2 daemon"
# the default kernel's time-travel build: every cell of make demo runs on it (virtual time, and the
# cpu study with time travel off); the kernel as configured (SMP, for several vCPUs) is built on
# first use, or here after it with --tests. A build stopped midway (Ctrl-C) resumes here.
if [ -n "${FLASHBED_SETUP_TESTS:-}" ]; then
    start_job kernel "lab kernels (the time-travel build, which make demo runs on, then the SMP one, which the tests of two vCPUs boot)"
    start_job boards "emulated boards' images (once, under QEMU: tens of minutes the first time; log in flashbed's cache, board/)"
else
    start_job kernel "lab kernel (its time-travel build, which make demo runs on; the SMP one is built on first use)"
fi
await_jobs
say "done in $(fmt $(($(date +%s) - SETUP_START))) ($TIMES; the builds side by side): run flashbed as .venv/bin/flashbed, or after . .venv/bin/activate"
