#!/bin/sh
# The README's two commands on a stock Debian root, timed.
#
#   scripts/fresh-host.sh SUITE [--dir DIR] [--keep] [--demo-only] [--user NAME]
#
# Makes a root of Debian SUITE (bookworm, trixie) with mmdebstrap: a minimal system
# (--variant=apt) plus git, make, python3 and sudo, from the mirror this machine's own
# apt sources name. Carries in this machine's CA certificates and its package-index
# settings (apt's proxy settings, pip's and cargo's configuration and index variables),
# so the root reaches the same registries. Clones this repository's HEAD commit into
# /srv/flashbed (a checkout every user of the root can read), then runs `make demo`
# and `make test` there as root, in a chroot with /dev (and so /dev/fuse and the loop
# devices), /proc and /sys, each command's time and result printed (--demo-only: `make demo`
# alone, the first answer's time). --user NAME then
# makes an ordinary user in the root and runs a short study as that user, with the
# checkout's environment on PATH (`su NAME -c 'flashbed run ...'`), and checks that
# nothing was written under root's home meanwhile.
#
# The chroot runs in private mount and PID namespaces: its mounts (and the FUSE
# mounts of the emulators inside) and its processes end with it. Needs root and
# mmdebstrap. The root is removed at the end unless --keep (it is kept on a failure).
# Prints, last, one line per command: `fresh-host SUITE: make demo: ok in ...`.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)

usage() { echo "usage: scripts/fresh-host.sh bookworm|trixie [--dir DIR] [--keep] [--demo-only] [--user NAME]" >&2; exit 2; }
die() { echo "fresh-host: $*" >&2; exit 2; }

[ $# -ge 1 ] || usage
suite=$1; shift
case "$suite" in bookworm|trixie) ;; *) usage ;; esac
dir=/var/tmp/flashbed-fresh-$suite keep=no user= demo_only=no
while [ $# -gt 0 ]; do
    case "$1" in
        --dir) [ $# -ge 2 ] || usage; dir=$2; shift 2 ;;
        --keep) keep=yes; shift ;;
        --demo-only) demo_only=yes; shift ;;
        --user) [ $# -ge 2 ] || usage; user=$2; shift 2 ;;
        *) usage ;;
    esac
done
# the name goes into a root shell in the chroot: a whole user name (useradd's default rule), nothing else
case "$user" in
    '') ;;
    *[!a-z0-9_-]*|[!a-z_]*) die "--user '$user': give a user name: a lower-case letter or _ first, then lower-case letters, digits, _ or -" ;;
esac
[ ${#user} -le 32 ] || die "--user '$user': a user name has at most 32 characters"
[ "$(id -u)" = 0 ] || die "makes a root with mmdebstrap and enters it with chroot: run it as root"
command -v mmdebstrap >/dev/null || die "mmdebstrap is missing: apt-get install mmdebstrap"
[ -c /dev/fuse ] || die "no /dev/fuse on this machine: the lab's emulated devices need FUSE (modprobe fuse)"
[ ! -e "$dir" ] || die "$dir exists: remove it, or give another --dir"

root=$dir/root
logs=$dir/logs
sha=$(git -C "$repo" rev-parse HEAD)
branch=$(git -C "$repo" rev-parse --abbrev-ref HEAD)
summary=""

fmt() {  # seconds -> "12 min 5 s"
    if [ "$1" -ge 60 ]; then echo "$(($1 / 60)) min $(($1 % 60)) s"; else echo "$1 s"; fi
}

note() { echo "fresh-host $suite: $*"; }

# --- the root -------------------------------------------------------------------------------
# the Debian mirror and its security archive as this machine's apt sources name them
mirrors=$(PYTHONPATH="$repo/src" python3 -c '
from flashbed.lab.debsource import host_sources, debian_mirror, debian_security_mirror
s = host_sources()
print(debian_mirror(s), debian_security_mirror(s))') || die "cannot read a Debian mirror from this machine's apt sources"
mirror=${mirrors% *} security=${mirrors#* }
mkdir -p "$logs"
start=$(date +%s)
note "making the root in $root (mmdebstrap --variant=apt, plus git make python3 sudo; mirror $mirror)"
set -- "deb $mirror $suite main" "deb $mirror $suite-updates main"
[ -z "$security" ] || set -- "$@" "deb $security $suite-security main"
if ! mmdebstrap --variant=apt --include=git,make,python3,sudo "$suite" "$root" "$@" >"$logs/mmdebstrap.log" 2>&1; then
    die "mmdebstrap failed: see $logs/mmdebstrap.log"
fi

# this machine's CA certificates, apt's, pip's and cargo's settings for reaching the registries
"$repo/scripts/host-settings.sh" "$root"
# the environment inside: a login's, plus this machine's proxy and index variables
envfile=$root/etc/fresh-host.env
: >"$envfile"
env | grep -E '^(https?_proxy|no_proxy|HTTPS?_PROXY|NO_PROXY|PIP_(INDEX_URL|EXTRA_INDEX_URL|TRUSTED_HOST|CERT|PROXY|DEFAULT_TIMEOUT|RETRIES)|CARGO_(HTTP|NET|REGISTRIES|REGISTRY)_[A-Z_]*)=' \
    | sed "s/'/'\\\\''/g; s/=/='/; s/\$/'/" >>"$envfile" || true
cat >"$root/etc/fresh-host-cells.py" <<'EOF'
import json, pathlib
runs = sorted(pathlib.Path("runs").glob("*/manifest.json"), key=lambda p: p.stat().st_mtime)
if runs:
    cells = [json.loads(p.read_text()).get("status") for p in runs[-1].parent.glob("cells/*.json")]
    total = json.loads(runs[-1].read_text()).get("cells")
    print(f"{sum(s == 'ok' for s in cells)}/{total} cells ok, run {runs[-1].parent.name}")
EOF
# the lab kernels make demo built in the root's own cache (the root's /root: nothing of this machine's
# cache is seen in the chroot, so the run builds its own)
cat >"$root/etc/fresh-host-kernels.py" <<'EOF'
import json, pathlib
for p in sorted(pathlib.Path.home().glob(".cache/flashbed/kernel/*/info.json")):
    i = json.loads(p.read_text())
    print(f"lab kernel {i['name']}{' ' + i['flavour'] if i.get('flavour') else ''} built in the root "
          f"in {i['build_seconds']:.0f} s")
EOF
note "root made in $(fmt $(($(date +%s) - start)))"

git clone -q "$repo" "$root/srv/flashbed"
git -C "$root/srv/flashbed" checkout -q -B "$branch" "$sha"
note "cloned $sha ($branch) into /srv/flashbed"

# --- inside ---------------------------------------------------------------------------------
# The root's /dev is this machine's. A stock Debian's udev gives /dev/fuse mode 0666 (its
# 50-udev-default.rules), which an ordinary user's FUSE mount needs; where this machine's is
# root's only (no udev), the root gets a node of its own with that mode, this one untouched.
fusenode=-
if [ "$(stat -c %a /dev/fuse)" != 666 ]; then
    fusenode=$dir/fuse-node
    mknod -m 666 "$fusenode" c $((0x$(stat -c %t /dev/fuse))) $((0x$(stat -c %T /dev/fuse)))
fi

# inside ARGS...: sh -c ARGS as root in the chroot, in private mount and PID namespaces
inside() {
    unshare --mount --propagation private --pid --fork --kill-child sh -c '
        root=$1 fusenode=$2; shift 2
        # the root a mount point, as / is on a machine (unshare --propagation, in the board tests, needs it)
        mount --bind "$root" "$root" && mount -t proc proc "$root/proc" && mount --rbind /sys "$root/sys" &&
            mount --rbind /dev "$root/dev" || exit 125
        [ "$fusenode" = - ] || mount --bind "$fusenode" "$root/dev/fuse" || exit 125
        exec chroot "$root" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/sh LANG=C.UTF-8 \
            TERM="${TERM:-dumb}" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            sh -c "set -a; . /etc/fresh-host.env; set +a; $*"' sh "$root" "$fusenode" "$@"
}

failed=no
cells_ok() {  # "200/200 cells ok, run ID": the newest run under /srv/flashbed/runs
    inside 'cd /srv/flashbed && .venv/bin/python /etc/fresh-host-cells.py'
}

timed_cmd() {  # NAME SHELL-COMMAND: run it in the root, log it, time it, add a summary line
    name=$1 log=$logs/$(echo "$1" | tr -c 'A-Za-z0-9@.\n' '-').log
    note "$name ... (log $log)"
    t0=$(date +%s)
    set +e
    { inside "$2" 2>&1; echo $? >"$log.rc"; } | tee "$log"
    set -e
    rc=$(cat "$log.rc")
    secs=$(($(date +%s) - t0))
    if [ "$rc" = 0 ]; then result="ok in $(fmt "$secs")"; else result="FAILED (exit $rc) after $(fmt "$secs")"; failed=yes; fi
    summary="$summary
fresh-host $suite: $name: $result"
    note "$name: $result"
}

timed_cmd "make demo" "cd /srv/flashbed && make demo"
summary="$summary ($(cells_ok))"
kernels=$(inside '/usr/bin/python3 /etc/fresh-host-kernels.py' | sed "s/^/fresh-host $suite: /")
[ -z "$kernels" ] || summary="$summary
$kernels"
if [ "$demo_only" = no ]; then
    timed_cmd "make test" "cd /srv/flashbed && make test"
    # pytest's closing line, not cargo's "test result" lines, which make test prints after it
    tail_line=$(grep -E '[0-9]+ (passed|failed)' "$logs/make-test.log" | grep -v '^test result' | tail -n 1 || true)
    [ -z "$tail_line" ] || summary="$summary ($tail_line)"
fi

if [ -n "$user" ]; then
    # an ordinary user in its home, the checkout's environment on PATH (su keeps PATH); its
    # kernels (built on first use), runs and FUSE mounts in its own directories
    inside "useradd -m -s /bin/sh $user && touch /root/.fresh-host-stamp"
    as_user() {  # NAME COMMAND: COMMAND as the user, timed
        timed_cmd "$1" "cd /home/$user && PATH=/srv/flashbed/.venv/bin:\$PATH su $user -c '$2'"
    }
    as_user "su $user -c 'flashbed run --study mkfs --fs ext4 --device emmc-8g@64M'" \
        "flashbed run --study mkfs --fs ext4 --device emmc-8g@64M"
    as_user "su $user -c 'flashbed report runs/ID'" 'flashbed report runs/*'
    as_user "su $user -c 'flashbed probe emmc-8g@64M --clock virtual'" "flashbed probe emmc-8g@64M --clock virtual"
    as_user "su $user -c 'flashbed lab smoke --clock virtual'" "flashbed lab smoke --clock virtual --out smoke"
    written=$(inside "find /root -newer /root/.fresh-host-stamp ! -path /root/.fresh-host-stamp | head -n 5")
    if [ -n "$written" ]; then
        summary="$summary
fresh-host $suite: written under /root while $user ran: $(echo "$written" | tr '\n' ' ')"
        failed=yes
    else
        summary="$summary
fresh-host $suite: nothing written under /root while $user ran"
    fi
fi

if [ "$failed" = no ] && [ "$keep" = no ]; then
    rm -rf --one-file-system "$dir"
    where="root removed"
else
    where="root kept in $root, logs in $logs"
fi
echo "$summary" | sed '/^$/d'
note "$where"
[ "$failed" = no ]
