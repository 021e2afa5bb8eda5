#!/bin/sh
# A data logger on SQLite: WAL journal, one transaction of ROWS readings per sample,
# synchronous=FULL (each COMMIT fsyncs the WAL). After each COMMIT returns it tells
# flashbed what it now counts on ($FLASHBED_ACK committed=N; a no-op outside crash
# states): sqlite-check.sh holds every crash state to it.
# Prints key=value metrics for the report.
set -eu
SYNC=FULL                      # sqlite-logger-unsafe.sh: OFF (the control that must fail)
TX=${LOGGER_TX:-8} ROWS=${LOGGER_ROWS:-20}
db=log.db
sqlite3 "$db" "PRAGMA journal_mode=WAL;" >/dev/null
sqlite3 "$db" "PRAGMA synchronous=$SYNC; CREATE TABLE IF NOT EXISTS readings(
  id INTEGER PRIMARY KEY, t REAL, sensor TEXT, value REAL, note TEXT);"
${FLASHBED_ACK:-true} schema=1
start=$(date +%s%N)
n=0
while [ "$n" -lt "$TX" ]; do
  sqlite3 "$db" "PRAGMA synchronous=$SYNC; BEGIN;
    INSERT INTO readings(t, sensor, value, note)
      WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $ROWS)
      SELECT julianday('now'), 'sensor' || (i % 4), (random() % 10000) / 10.0, hex(randomblob(96)) FROM c;
    COMMIT;"
  n=$((n + 1))
  ${FLASHBED_ACK:-true} committed=$((n * ROWS))
done
end=$(date +%s%N)
ms=$(( (end - start) / 1000000 ))
echo "transactions=$n"
echo "rows=$((n * ROWS))"
echo "commit_ms=$(( ms / n ))ms"
echo "db_bytes=$(stat -c %s "$db")"
