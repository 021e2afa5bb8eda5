"""The sqlite study: its SQL, its steps (a statistics phase per journal mode, the transactions alone),
and its reading of the guest's figures (commit rate, device bytes per row byte, the commit claim)."""

from __future__ import annotations

from flashbed.lab.boundary import BootResult, StepResult
from flashbed.plan import PlanRequest, make_plan
from flashbed.status import BootStatus, CellStatus, StepStatus
from flashbed.studies import STUDIES
from flashbed.studies.claims import claims_of

ST = STUDIES["sqlite"]


def _spec(**over):
    plan = make_plan(PlanRequest(fs=("ext4",), devices=("plain-file@256M",), studies=("sqlite",),
                                 overrides={"sqlite": over}))
    return plan.cells[0]


def _boot(steps):
    return BootResult(status=BootStatus.DONE, boot_seconds=1.0, total_seconds=9.0, console_log="", exit_code=0,
                      kernel_release="7.3", steps=[StepResult(n, "sh", StepStatus.OK if ok else StepStatus.FAILED,
                                                              0 if ok else 1, 1.0, out, "") for n, ok, out in steps])


def test_the_sql_commits_each_transaction_durably_and_is_the_same_on_every_filesystem():
    spec = _spec(transactions=5, rows=3)
    wal = ST.script(spec, "wal")
    assert wal.startswith("PRAGMA journal_mode=WAL;\nPRAGMA synchronous=FULL;\n")
    assert wal.count("BEGIN;") == 5 and wal.count("COMMIT;") == 5 and wal.count("INSERT INTO t") == 15
    assert "randomblob(100)" in wal and ST.script(spec, "wal") == wal
    assert ST.script(spec, "rollback").startswith("PRAGMA journal_mode=DELETE;")


def test_each_journal_mode_has_a_statistics_phase_of_its_transactions_alone(tmp_path):
    spec = _spec(transactions=5)
    names = [s.name for s in ST.boots(spec, tmp_path)[0]]
    for j in ("wal", "rollback"):
        i = names.index(j)
        assert names[i - 1] == f"stats-reset-{j}" and names[i + 1] == f"stats-{j}"
        assert names.index(f"create-{j}") < i and (tmp_path / f"sqlite-{j}.sql").is_file()


def test_parse_reads_rate_and_write_amplification_and_claims_a_flush_per_commit(tmp_path):
    spec = _spec(transactions=300, rows=10)
    out = ST.parse(spec, [_boot([("wal", True, '{"seconds": 6.0, "device_bytes": 12000000}\n'),
                                 ("rollback", True, 'noise\n{"seconds": 15.0, "device_bytes": 30000000}')])], tmp_path)
    got = {(m.case, m.metric): m.value for m in out.measurements}
    assert got[("wal", "tps")] == 50.0 and got[("rollback", "tps")] == 20.0
    assert got[("wal", "write_amplification")] == 40.0  # 12 MB for 300 x 10 rows of 100 bytes
    assert out.status is CellStatus.OK and out.headline == "wal 50 tx/s, rollback 20 tx/s"
    claims = claims_of(out.extra)
    assert [(c.case, c.synced, c.write_bytes, c.direct) for c in claims] == [("wal", 300, 0, False),
                                                                             ("rollback", 300, 0, False)]
    # a mode that failed: no figure for it, the cell failed
    bad = ST.parse(spec, [_boot([("wal", True, '{"seconds": 6.0, "device_bytes": 1}'), ("rollback", False, "")])],
                   tmp_path)
    assert bad.status is CellStatus.FAILED and {m.case for m in bad.measurements} == {"wal"}
