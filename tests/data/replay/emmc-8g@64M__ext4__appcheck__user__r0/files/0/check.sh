#!/bin/sh
# The check of sqlite-logger.sh at a crash state, on the recovered filesystem ($FLASHBED_MNT,
# the working directory): exit 0 when the database passes PRAGMA integrity_check and
# holds every row whose COMMIT had returned before the crash. What had returned is what
# the logger acknowledged ($FLASHBED_ACKED: its `committed=N` labels, kept off the device,
# so a crash cannot take them away). A COMMIT under way may or may not be there.
set -u
db=log.db
want=$(grep -o 'committed=[0-9]*' "${FLASHBED_ACKED:-/dev/null}" | tail -n 1 | cut -d= -f2)
want=${want:-0}
schema=$(grep -c 'schema=1' "${FLASHBED_ACKED:-/dev/null}")
if [ ! -s "$db" ]; then
  [ "$schema" -eq 0 ] && { echo "ok: nothing acknowledged yet"; exit 0; }
  echo "log.db is gone or empty, $want rows had been committed"; exit 1
fi
if [ "$schema" -eq 0 ]; then  # the table may not be there yet: integrity alone
  ic=$(sqlite3 "$db" "PRAGMA integrity_check;" 2>&1 | head -n 1)
  [ "$ic" = ok ] || { echo "integrity_check: $ic"; exit 1; }
  echo "ok: integrity, no schema acknowledged yet"; exit 0
fi
# one sqlite3 run (the check runs at every crash state): integrity, then the committed rows
out=$(sqlite3 "$db" "PRAGMA integrity_check; SELECT 'rows=' || count(*) FROM readings WHERE id <= $want;" 2>&1)
ic=$(echo "$out" | head -n 1)
[ "$ic" = ok ] || { echo "integrity_check: $ic"; exit 1; }
have=$(echo "$out" | sed -n 's/^rows=//p')
[ "$have" = "$want" ] || { echo "committed rows lost: ${have:-none} of the $want committed are there"; exit 1; }
echo "ok: the $want committed rows are there"
