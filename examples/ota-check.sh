#!/bin/sh
# The check of ota-update.sh at a crash state: `current` ("SLOT ROUND") names a slot
# whose image is complete (matches the checksum written with it), and is not older than
# the last acknowledged switch (current=ROUND:SLOT:SUM): the same round with that very
# image, or a later round.
set -u
last=$(grep -o 'current=[0-9]*:[ab]:[0-9a-f]*' "${FLASHBED_ACKED:-/dev/null}" | tail -n 1 | cut -d= -f2)
if [ ! -s current ]; then
  [ -z "$last" ] && { echo "ok: no switch acknowledged yet"; exit 0; }
  echo "current is missing or empty after switch $last was acknowledged"; exit 1
fi
read -r slot round < current || true
case "$slot" in a|b) ;; *) echo "current holds '$slot $round'"; exit 1 ;; esac
have=$(md5sum "slot-$slot.img" 2>/dev/null | cut -c1-32)
want=$(cat "slot-$slot.md5" 2>/dev/null)
[ -n "$have" ] && [ "$have" = "$want" ] || { echo "current names slot $slot (round $round), whose image is incomplete or damaged"; exit 1; }
if [ -n "$last" ]; then
  lround=${last%%:*} rest=${last#*:}; lsum=${rest#*:}
  [ "$round" -ge "$lround" ] || { echo "current went back to round $round after round $lround was acknowledged"; exit 1; }
  if [ "$round" -eq "$lround" ] && [ "$have" != "$lsum" ]; then
    echo "current names round $round with an image other than the acknowledged one"; exit 1
  fi
fi
echo "ok: current -> slot $slot (round $round), image intact"
