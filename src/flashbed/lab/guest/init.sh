#!/bin/sh
# flashbed lab init: PID 1 inside the lab kernel. The root is the host's / through
# hostfs, read-only; this gives the guest writable /etc, /var (overlays), /run, /tmp
# (tmpfs) so mount helpers and daemons (nilfs_cleanerd) work, mounts the shared run
# directory read-write and the guest programs at fixed paths (lab/labview.py: the
# kernel's command line names them through the lab kernel's own directory, never by
# where they are on the host), and hands over to the agent.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
# never on the host: this script mounts over /etc and powers off
[ "$$" = 1 ] || { echo "init.sh runs only as PID 1 of the lab kernel" >&2; exit 2; }
fail() { echo "FLASHBED-INIT FAILED: $*"; exec /usr/bin/python3 -S -I -c 'import ctypes; ctypes.CDLL(None).reboot(0x4321fedc)'; }

mount -t proc proc /proc || fail "mount /proc"
run= tools=
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        flashbed.run=*) run=${arg#flashbed.run=} ;;
        flashbed.tools=*) tools=${arg#flashbed.tools=} ;;
    esac
done
[ -n "$run" ] && [ -n "$tools" ] || fail "flashbed.run= or flashbed.tools= missing from the kernel command line"
mount -t sysfs sysfs /sys || fail "mount /sys"
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev || fail "mount /dev"
mount -t tmpfs -o mode=0755,size=256m run /run || fail "mount /run"
for d in etc var root; do
    mkdir -p /run/.ov/$d/upper /run/.ov/$d/work
    mount -t overlay overlay -o lowerdir=/$d,upperdir=/run/.ov/$d/upper,workdir=/run/.ov/$d/work /$d \
        || fail "overlay on /$d"
done
mount -t tmpfs -o mode=1777 tmp /tmp || fail "mount /tmp"
mkdir -p /dev/pts /dev/shm /dev/mqueue
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
mount -t mqueue mqueue /dev/mqueue
mount -t debugfs debugfs /sys/kernel/debug

mkdir -p /run/flashbed /run/flashbed-tools
# mount(2) itself, not mount(8): the guest runs the host's util-linux, and from 2.41
# (trixie) mount(8) uses the new mount API, which hands hostfs's one option (the host
# path) to fsconfig() as a parameter name, and hostfs refuses it
/usr/bin/python3 -S -I -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for host, at, flags in ((sys.argv[1], b"/run/flashbed", 0), (sys.argv[2], b"/run/flashbed-tools", 1)):  # 1: MS_RDONLY
    if libc.mount(b"hostfs", at, b"hostfs", flags, os.fsencode(host)) != 0:
        sys.exit(f"mount {host}: {os.strerror(ctypes.get_errno())}")' "$run" "$tools" || fail "mount the run directory and the guest programs"
hostname flashbed-lab
# The agent's string hashes get a fixed seed, not a random one: the random seed
# comes from the guest's entropy (the host's), and it changes which pages the
# agent's dicts and sets touch, so the page faults and syscalls charged to the CPU
# profile in virtual time (lab patch 0008) and every guest instant after them moved
# between two runs of one cell (by a microsecond before a timed job, enough to shift
# its figure by 0.1 %). -s -P is -I without -E (which ignores PYTHONHASHSEED); the
# environment is the kernel's, with no other PYTHON* variable. Steps inherit it.
exec env PYTHONHASHSEED=0 /usr/bin/python3 -S -s -P /run/flashbed-tools/agent.py /run/flashbed
