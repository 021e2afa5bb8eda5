#!/bin/sh
# The check of rotating-logger.sh at a crash state: every line up to the last
# acknowledged `synced=N` is there, once, in order, across app.log.3 .. app.log
# (lines of the oldest files dropped by rotation excepted), and every line is whole.
set -u
want=$(grep -o 'synced=[0-9]*' "${FLASHBED_ACKED:-/dev/null}" | tail -n 1 | cut -d= -f2)
want=${want:-0}
files=""
for f in app.log.3 app.log.2 app.log.1 app.log; do [ -e "$f" ] && files="$files $f"; done
[ -n "$files" ] || { [ "$want" -eq 0 ] && { echo "ok: nothing synced yet"; exit 0; }; echo "no log left, $want lines synced"; exit 1; }
# shellcheck disable=SC2086
cat $files | awk -v want="$want" '
  !/^[0-9]+ [0-9]+ sensor=[0-9]+ value=[0-9]+$/ || length($1) != 8 { if (NF) { print "torn or garbage line: " substr($0, 1, 40); bad = 1; exit 1 } else next }
  { n = $1 + 0; if (prev && n != prev + 1) { print "line " prev + 1 " to " n - 1 " missing"; bad = 1; exit 1 } prev = n }
  END { if (bad) exit 1; if (prev < want) { print "synced lines lost: the last is " prev ", " want " were synced"; exit 1 }
        print "ok: lines to " prev ", " want " synced" }'
