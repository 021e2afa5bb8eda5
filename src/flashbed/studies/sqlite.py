"""`sqlite`: what a database feels. Debian's sqlite3 inserts rows in transactions with
`synchronous=FULL`, once with a write-ahead log (WAL) and once with the rollback journal
(DELETE): each commit is durable when sqlite3 goes on, so the transaction rate is set by the
filesystem's fsync path and the device's flushes, not by a page cache.

Per journal mode: the transaction rate (commits per second), and the write amplification the
application sees: the bytes the block device received (the block layer's own count for the
device under test, after a sync: base.block_stat, in the lab or on a board) per byte of row
data inserted. Each mode's statistics phase covers the transactions alone, and records the
claim that every commit reached the device (studies/claims.py): at least one flush per commit,
which the report's device check verifies.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from ..lab.boundary import BootResult, Step
from ..shellwords import DEV
from .base import (
    MNT,
    CellSpec,
    Outcome,
    Study,
    block_stat,
    first_failure,
    m,
    make_and_mount,
    passed,
    stats_reset,
    stats_take,
    umount,
)
from .claims import Claim, claims_extra
from .params import param
from .views import Bars

JOURNALS = {"wal": "WAL", "rollback": "DELETE"}  # the study's name -> SQLite's journal_mode
DB = f"{MNT}/bench.db"
# the device under test's sectors written (field 7 of its block-layer stat, 512-byte units)
SECTORS_WRITTEN = f"awk '{{print $7}}' {block_stat(DEV)}"
# the timed step's last line: its time and the bytes the block device received
REPORT = 'printf \'{"seconds": %s, "device_bytes": %s}\\n\' "$(awk "BEGIN {print $t1 - $t0}")" "$(( (w1 - w0) * 512 ))"'


def script_name(journal: str) -> str:
    return f"sqlite-{journal}.sql"


class Sqlite(Study):
    name = "sqlite"
    title = "SQLite transactions (synchronous=FULL)"
    description = "sqlite3 inserts in transactions, WAL and rollback journal, synchronous=FULL: commits/s, " \
                  "device bytes per row byte"
    order = 65
    primary_metric = "tps"
    figures = (Bars("tps", ("tps",), "SQLite: transactions per second"),
               Bars("wa", ("write_amplification",), "SQLite: device bytes written per byte of row data"))
    case_order = tuple(JOURNALS)
    tools = ("sqlite3",)
    media = ("block",)

    @dataclass(frozen=True)
    class Params:
        transactions: int = param(2000, low=1, help="transactions per journal mode")
        rows: int = param(10, low=1, help="rows inserted per transaction")
        row_bytes: int = param(100, unit="bytes", low=1, help="each row's blob")
        journals: tuple[str, ...] = param(tuple(JOURNALS), choices=tuple(JOURNALS), help="journal modes")

    def min_capacity(self, params):
        # the rows and their index, twice over (journal or WAL), with room
        return 64 * (1 << 20) + 4 * params.transactions * params.rows * (params.row_bytes + 64)

    def script(self, spec: CellSpec, journal: str) -> str:
        """The transactions, with keys from the cell's seed: the same SQL on every filesystem."""
        p = spec.params
        rng = random.Random(f"{spec.seed}-{journal}")
        lines = [f"PRAGMA journal_mode={JOURNALS[journal]};", "PRAGMA synchronous=FULL;"]
        for _ in range(p.transactions):
            lines.append("BEGIN;")
            lines += [f"INSERT INTO t(k, v) VALUES ({rng.randrange(1 << 40)}, randomblob({p.row_bytes}));"
                      for _ in range(p.rows)]
            lines.append("COMMIT;")
        return "\n".join(lines) + "\n"

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        steps = make_and_mount(spec.variant)
        for journal in spec.params.journals:
            (run_dir / script_name(journal)).write_text(self.script(spec, journal))
            create = (f"PRAGMA journal_mode={JOURNALS[journal]}; "
                      "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v BLOB); CREATE INDEX tk ON t(k);")
            # the transactions alone are timed (and in the statistics phase); the sync after them
            # puts what they left in the page cache (a checkpoint's pages) on the device, so the
            # device's byte count covers everything the inserts cost
            run = (f"w0=$({SECTORS_WRITTEN}); t0=$(date +%s.%N); "
                   f"sqlite3 -bail {DB} < {script_name(journal)} > /dev/null && t1=$(date +%s.%N) && sync && "
                   f"w1=$({SECTORS_WRITTEN}) && " + REPORT)
            steps += [Step(f"create-{journal}", f"rm -f {DB} {DB}-wal {DB}-journal && sqlite3 -bail {DB} "
                                                f"\"{create}\" > /dev/null", timeout=300),
                      Step(f"sync-{journal}", "sync", timeout=300),
                      stats_reset(journal),
                      Step(journal, run, timeout=7200),
                      stats_take(journal)]
        return [steps + umount(spec.variant)]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        p = spec.params
        out, claims = [], []
        payload = p.transactions * p.rows * p.row_bytes
        for journal in p.journals:
            s = boots[0].step(journal) if boots else None
            if s is None or not s.status.ok:
                continue
            try:
                res = json.loads(s.stdout.strip().splitlines()[-1])
                seconds, device_bytes = float(res["seconds"]), float(res["device_bytes"])
            except (ValueError, KeyError, IndexError, TypeError):
                continue
            if seconds <= 0:
                continue
            out += m(journal, "tps", p.transactions / seconds, "tx/s") + m(journal, "seconds", seconds, "s")
            out += m(journal, "write_amplification", device_bytes / payload, "×")
            # every commit was durable when sqlite3 went on: the device must have had a flush for each
            claims.append(Claim(case=journal, direct=False, synced=p.transactions, write_bytes=0, writes=0,
                                what=f"sqlite3 journal_mode={JOURNALS[journal]} synchronous=FULL, "
                                     f"{p.transactions} transactions of {p.rows} inserts"))
        err = first_failure(boots)
        head = ", ".join(f"{x.case} {x.value:.0f} tx/s" for x in out if x.metric == "tps") or "no transaction ran"
        return Outcome(out, head, extra=claims_extra(claims),
                       status=passed(len(out) == 3 * len(p.journals) and not err), error=err)
