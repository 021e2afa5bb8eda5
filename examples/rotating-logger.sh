#!/bin/sh
# A text logger with rotation: appends lines to app.log, fsyncs every FLUSH lines (as
# syslog-style loggers with a sync policy do), rotates at ROTATE bytes (app.log ->
# app.log.1 -> ... -> app.log.KEEP, the oldest dropped) and acknowledges each synced
# line count ($FLASHBED_ACK synced=N): rotating-check.sh holds every crash state to it.
set -eu
LINES=${LOGGER_LINES:-400} FLUSH=${LOGGER_FLUSH:-25} ROTATE=${LOGGER_ROTATE:-16384} KEEP=3
ack=${FLASHBED_ACK:-true}
start=$(date +%s%N)
n=0
rotations=0
while [ "$n" -lt "$LINES" ]; do
  n=$((n + 1))
  printf '%08d %s sensor=%d value=%d\n' "$n" "$(date +%s)" $((n % 7)) $((n * 37 % 1000)) >> app.log
  if [ $((n % FLUSH)) -eq 0 ]; then
    sync app.log   # fsync(2) of the file (coreutils sync FILE)
    $ack synced=$n
  fi
  if [ "$(stat -c %s app.log)" -ge "$ROTATE" ]; then
    sync app.log
    i=$KEEP
    while [ "$i" -gt 1 ]; do
      [ -e "app.log.$((i - 1))" ] && mv "app.log.$((i - 1))" "app.log.$i"
      i=$((i - 1))
    done
    mv app.log app.log.1
    : > app.log
    sync .          # the renames are durable before we count on them
    rotations=$((rotations + 1))
    $ack synced=$n rotated=$rotations
  fi
done
end=$(date +%s%N)
echo "lines=$n"
echo "rotations=$rotations"
echo "line_us=$(( (end - start) / 1000 / n ))us"
