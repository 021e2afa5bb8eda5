#!/bin/sh
# The container image, checked: built, run with exactly the documented privileges, and
# refused in one line with less.
#
#   scripts/image-check.sh [--base IMAGE] [--dir DIR]
#
# 1. BASE: IMAGE if given (e.g. debian:trixie where it can be pulled); else a trixie root
#    made with mmdebstrap (minbase, as Debian's own image) from the mirror this machine's
#    apt sources name, with this machine's CA certificates and package-index settings
#    (scripts/host-settings.sh), imported as localhost/flashbed-base:trixie.
# 2. `make image BASE=...`, timed.
# 3. In DIR (default a new directory under /var/tmp), the README's command:
#      podman run --rm --device /dev/fuse --cap-add SYS_ADMIN -v "$PWD/runs:/runs" flashbed run --profile quick --out /runs/quick
#    timed, its cells counted, the report looked for in DIR/runs/quick.
# 4. The same without --device /dev/fuse, and without --cap-add SYS_ADMIN: each must exit 2
#    with one line on stderr.
# podman's own settings (a runtime, ulimits) come from its configuration (CONTAINERS_CONF).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "image-check: $*" >&2; exit 2; }
note() { echo "image-check: $*"; }
fmt() { if [ "$1" -ge 60 ]; then echo "$(($1 / 60)) min $(($1 % 60)) s"; else echo "$1 s"; fi; }

base="" dir=""
while [ $# -gt 0 ]; do
    case "$1" in
        --base) base=${2:?}; shift 2 ;;
        --dir) dir=${2:?}; shift 2 ;;
        *) die "usage: scripts/image-check.sh [--base IMAGE] [--dir DIR]" ;;
    esac
done
command -v podman >/dev/null || die "needs podman (apt-get install podman)"
[ -n "$dir" ] || dir=$(mktemp -d /var/tmp/flashbed-image-check.XXXXXX)
mkdir -p "$dir/runs"
failed=no

if [ -z "$base" ]; then
    [ "$(id -u)" = 0 ] || die "making a base image with mmdebstrap needs root (or give --base IMAGE)"
    command -v mmdebstrap >/dev/null || die "mmdebstrap is missing: apt-get install mmdebstrap (or give --base IMAGE)"
    mirrors=$(PYTHONPATH="$repo/src" python3 -c '
from flashbed.lab.debsource import host_sources, debian_mirror, debian_security_mirror
s = host_sources()
print(debian_mirror(s), debian_security_mirror(s))') || die "cannot read a Debian mirror from this machine's apt sources"
    mirror=${mirrors% *} security=${mirrors#* }
    set -- "deb $mirror trixie main" "deb $mirror trixie-updates main"
    [ -z "$security" ] || set -- "$@" "deb $security trixie-security main"
    note "making the base image from a trixie root (mmdebstrap --variant=minbase; mirror $mirror)"
    mmdebstrap --variant=minbase trixie "$dir/base" "$@" >"$dir/mmdebstrap.log" 2>&1 ||
        die "mmdebstrap failed: see $dir/mmdebstrap.log"
    "$repo/scripts/host-settings.sh" "$dir/base"
    base=localhost/flashbed-base:trixie
    tar -C "$dir/base" -c . | podman import -q - "$base" >/dev/null
    rm -rf --one-file-system "$dir/base"
fi

t0=$(date +%s)
note "make image BASE=$base (log $dir/image.log)"
if make -C "$repo" image BASE="$base" >"$dir/image.log" 2>&1; then
    image="ok in $(fmt $(($(date +%s) - t0)))"
else
    die "make image failed after $(fmt $(($(date +%s) - t0))): see $dir/image.log"
fi
note "make image: $image"

cd "$dir"
t0=$(date +%s)
cmd='podman run --rm --device /dev/fuse --cap-add SYS_ADMIN -v "$PWD/runs:/runs" flashbed run --profile quick --out /runs/quick'
note "$cmd (in $dir, log $dir/quick.log)"
set +e
podman run --rm --device /dev/fuse --cap-add SYS_ADMIN -v "$PWD/runs:/runs" flashbed run --profile quick \
    --out /runs/quick >"$dir/quick.log" 2>&1
rc=$?
set -e
secs=$(($(date +%s) - t0))
cells=$(python3 -c '
import json, pathlib, sys
d = pathlib.Path(sys.argv[1])
st = [json.loads(p.read_text()).get("status") for p in (d / "cells").glob("*.json")]
total = json.loads((d / "manifest.json").read_text()).get("cells") if (d / "manifest.json").exists() else "?"
ok = sum(s == "ok" for s in st)
print(f"{ok}/{total} cells ok")' "$dir/runs/quick")
report=$(ls "$dir/runs/quick/report.html" 2>/dev/null || echo "no report.html")
[ "$rc" = 0 ] && [ -f "$dir/runs/quick/report.html" ] || failed=yes
quick="exit $rc in $(fmt "$secs"), $cells, report: $report"
note "quick profile: $quick"

# less than the documented privileges: one line each, exit 2
refusal() {  # NAME PODMAN-RUN-ARGS...
    name=$1; shift
    set +e
    podman run --rm "$@" -v "$PWD/runs:/runs" flashbed run --study mkfs --fs ext4 --device emmc-8g@64M \
        --out "/runs/$name" >"$dir/$name.out" 2>"$dir/$name.err"
    rc=$?
    set -e
    lines=$(wc -l <"$dir/$name.err")
    [ "$rc" = 2 ] && [ "$lines" = 1 ] && [ ! -e "$dir/runs/$name" ] || failed=yes
    echo "image-check: $name: exit $rc, $lines line(s): $(cat "$dir/$name.err")"
}
refusal no-fuse --cap-add SYS_ADMIN
refusal no-cap --device /dev/fuse

echo "image-check: make image: $image"
echo "image-check: quick profile in the container: $quick"
[ "$failed" = no ] && note "all as documented (directory $dir)" || note "FAILED (directory $dir)"
[ "$failed" = no ]
