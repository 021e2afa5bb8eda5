"""`flashbed lab smoke`: the first integration test, every catalogue filesystem."""
import pytest

from flashbed import filesystems as fscat
from flashbed.lab.smoke import run_smoke

pytestmark = pytest.mark.lab


def test_every_filesystem_survives_make_write_check_remount_verify(kernel, tmp_path):
    results = run_smoke(list(fscat.CATALOGUE), tmp_path)
    failed = {r.fs: f"{r.failed_step}: {r.detail} ({r.console_log})" for r in results if not r.passed}
    assert not failed
    for r in results:
        assert r.used_bytes and r.used_bytes > 24 * 1024 * 1024, r  # the big file is on the device
