#!/bin/sh
# Reproduces a vfat durability gap found by the powercut study, without the
# flash emulator: a plain image file, a lab kernel killed mid-run (a crash that
# keeps everything the lab wrote to the image).
#
# Pattern "replace": write f.tmp, fsync it, rename f.tmp over f, fsync the
# directory -- the usual durable-replace recipe. On vfat (mounted without
# sync/dirsync) the new directory entry is written through the renamed file's
# inode, which fsync(dir) does not write, while the replaced file's clusters
# are freed and reach the disk with the next fsync: after the crash the entry
# points at free clusters and both versions are gone.
# Pattern "replace+fsync": the same plus an fsync of f after the rename.
#
# Usage: scripts/repro-vfat-rename.sh      (needs `make setup`; about a minute)
set -eu
work=$(mktemp -d /var/tmp/flashbed-repro-XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/ops.py" <<'EOF'
import os, random, sys
mode, d = sys.argv[1], "/run/t/pc"
os.makedirs(d, exist_ok=True)
def fsync_path(p, flags=os.O_RDONLY):
    fd = os.open(p, flags); os.fsync(fd); os.close(fd)
def write(p, data, flags):
    fd = os.open(p, flags, 0o644); os.write(fd, data); os.fsync(fd); os.close(fd)
fsync_path(d, os.O_RDONLY | os.O_DIRECTORY)
rng = random.Random(1)
names = [f"{d}/f{i:05d}" for i in range(40)]
for p in names:
    write(p, os.urandom(rng.randrange(1000, 200000)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    fsync_path(d, os.O_RDONLY | os.O_DIRECTORY)
for _ in range(200):
    p = rng.choice(names)
    write(p + ".tmp", os.urandom(rng.randrange(1000, 200000)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.rename(p + ".tmp", p)
    fsync_path(d, os.O_RDONLY | os.O_DIRECTORY)
    if mode == "replace+fsync":
        fsync_path(p)
print("all acknowledged", flush=True)
EOF
for mode in replace replace+fsync; do
    rm -f "$work/fat.img" "$work/mark.img"
    truncate -s 512M "$work/fat.img"
    truncate -s 1M "$work/mark.img"
    # the lab is killed (SIGKILL to flashbed takes its lab down) while it idles
    # after the last acknowledgement: nothing is unmounted or synced
    # (its console stays silent until the end, so the workload marks its end on a second disk)
    flashbed lab exec --disk "$work/fat.img" --disk "$work/mark.img" \
        "mkfs.vfat /dev/ubda >/dev/null && mkdir -p /run/t && mount -t vfat /dev/ubda /run/t && python3 $work/ops.py $mode && echo acknowledged | dd of=/dev/ubdb oflag=direct,sync bs=512 conv=sync 2>/dev/null && sleep 120" \
        >/dev/null 2>&1 &
    lab=$!
    i=0
    until head -c 12 "$work/mark.img" | grep -q acknowledged; do
        i=$((i + 1))
        [ $i -le 120 ] || { kill -KILL $lab; echo "$mode: the workload did not finish within 60 s"; exit 1; }
        sleep 0.5
    done
    kill -KILL $lab
    wait $lab 2>/dev/null || true
    # the lab kernel dies with flashbed (PDEATHSIG); wait until it let go of the image
    while fuser -s "$work/fat.img" 2>/dev/null; do sleep 0.1; done
    broken=$(fsck.fat -n "$work/fat.img" 2>&1 | grep -c "Contains a free cluster" || true)
    echo "$mode: $broken of 40 acknowledged files point at free clusters after the crash"
done
