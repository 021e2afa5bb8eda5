#!/bin/sh
# The check of wal400.sh at a crash state: every record up to the last acknowledged `records=N`
# is there and whole, each read with its own dd (a program started per record, as checks
# written by hand often are).
set -u
want=$(grep -o 'records=[0-9]*' "${FLASHBED_ACKED:-/dev/null}" | tail -n 1 | cut -d= -f2)
want=${want:-0}
i=1
while [ "$i" -le "$want" ]; do
  got=$(dd if=wal.log bs=512 skip=$((i - 1)) count=1 status=none 2>&1)
  [ "$got" = "$(printf '%-511s' "record $i")" ] || { echo "record $i of the $want acknowledged is lost or damaged"; exit 1; }
  i=$((i + 1))
done
echo "ok: the $want acknowledged records are there"
