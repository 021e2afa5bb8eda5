#!/bin/sh
# An A/B updater: writes the new image into the inactive slot's file, fsyncs it,
# writes its checksum, then points `current` at it by writing current.new, fsyncing it
# and renaming it over `current`, and fsyncs the directory. After each switch it
# acknowledges it ($FLASHBED_ACK current=ROUND:SLOT:SUM): ota-check.sh holds every crash
# state to it. (ota-update-unsafe.sh: the same without its fsyncs, the control that must fail.)
set -eu
ROUNDS=${OTA_ROUNDS:-4} SIZE_KB=${OTA_SIZE_KB:-2048}
FSYNC=1
ack=${FLASHBED_ACK:-true}
durable() { [ "$FSYNC" -eq 0 ] || sync "$@"; }   # fsync(2) of each (coreutils sync FILE)
start=$(date +%s%N)
r=0
while [ "$r" -lt "$ROUNDS" ]; do
  r=$((r + 1))
  slot=$([ $((r % 2)) -eq 1 ] && echo a || echo b)
  head -c $((SIZE_KB * 1024)) /dev/urandom > "slot-$slot.img"
  durable "slot-$slot.img"
  sum=$(md5sum "slot-$slot.img" | cut -c1-32)
  echo "$sum" > "slot-$slot.md5"
  durable "slot-$slot.md5"
  echo "$slot $r" > current.new
  durable current.new
  mv current.new current
  durable .
  $ack "current=$r:$slot:$sum"
done
end=$(date +%s%N)
echo "updates=$r"
echo "update_ms=$(( (end - start) / 1000000 / r ))ms"
