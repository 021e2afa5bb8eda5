#!/bin/sh
# A write-ahead log: 400 records of 512 bytes, each appended and made durable (dd conv=fsync)
# before the next; every 50th acknowledged as `records=N` (the records up to N are durable).
set -eu
i=1
while [ "$i" -le 400 ]; do
  printf '%-511s\n' "record $i" | dd of=wal.log bs=512 count=1 oflag=append conv=notrunc,fsync status=none
  if [ $((i % 50)) -eq 0 ]; then $FLASHBED_ACK records=$i; fi
  i=$((i + 1))
done
