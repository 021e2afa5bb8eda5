"""The lab's UML directory: one per boot in the temporary directory, marked as flashbed's; removed
by the boot, and by the next flashbed when its maker is gone; never anything else."""

from __future__ import annotations

import os
import subprocess
import sys

from flashbed import owner
from flashbed.lab import umldir
from flashbed.lab.boundary import BootSpec, Step
from flashbed.lab.uml import kernel_cmdline


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_each_boot_gets_a_marked_directory_on_the_lab_s_command_line(tmp_path, monkeypatch):
    monkeypatch.setattr(umldir, "base", lambda: tmp_path)
    d = umldir.make()
    assert d.parent == tmp_path and d.name.startswith("flashbed-uml-")
    assert (d / umldir.MARK).read_text().split()[:2] == ["flashbed", str(os.getpid())]
    # the lab kernel runs in it (labview.py): its command line names it as its own directory
    args = kernel_cmdline(BootSpec(run_dir=tmp_path / "run", steps=(Step("s", "true"),)))
    assert args[0] == "uml_dir=." and args.index("uml_dir=.") < args.index("--")
    assert not umldir.leftover(d)  # its maker (this process) is alive
    umldir.remove(d)
    assert not d.exists()


def test_the_next_run_removes_only_flashbed_s_own_leftovers(tmp_path):
    gone = tmp_path / "flashbed-uml-gone"
    (gone / "abc123").mkdir(parents=True)
    (gone / umldir.MARK).write_text(f"flashbed {_dead_pid()} 12345\n")
    alive = tmp_path / "flashbed-uml-alive"
    alive.mkdir()
    owner.mark(alive)
    reused = tmp_path / "flashbed-uml-reused"  # its pid now another process's (another start time)
    reused.mkdir()
    (reused / umldir.MARK).write_text(f"flashbed {os.getpid()} 1\n")
    unmarked = tmp_path / "flashbed-uml-unmarked"  # not proven flashbed's: kept
    unmarked.mkdir()
    foreign = tmp_path / "flashbed-uml-foreign"
    foreign.mkdir()
    (foreign / umldir.MARK).write_text("someone 1 2\n")
    other = tmp_path / "uml-other"
    other.mkdir()
    (other / umldir.MARK).write_text(f"flashbed {_dead_pid()} 1\n")
    link = tmp_path / "flashbed-uml-link"
    link.symlink_to(gone)
    removed = umldir.sweep(tmp_path)
    assert sorted(p.name for p in removed) == ["flashbed-uml-gone", "flashbed-uml-reused"]
    assert alive.exists() and unmarked.exists() and foreign.exists() and other.exists()


def test_a_killed_board_run_s_control_directory_is_swept_with_what_it_noted(tmp_path):
    from flashbed.lab import ssh
    d = tmp_path / "flashbed-ssh-abc"
    d.mkdir()
    (d / owner.MARK).write_text(f"flashbed {_dead_pid()} 1\n")
    (d / ssh.BOARD_NOTE).write_text('{"url": "ssh://root@h", "base": "/var/tmp/flashbed.Ab12Cd"}')
    mine = tmp_path / "flashbed-ssh-mine"
    mine.mkdir()
    owner.mark(mine)
    (left,) = ssh.sweep(tmp_path)
    assert left["base"] == "/var/tmp/flashbed.Ab12Cd" and left["url"] == "ssh://root@h"
    assert not d.exists() and mine.exists()


def test_a_board_removes_only_its_own_left_working_directories(monkeypatch, capsys):
    from flashbed.lab.board import Board
    from flashbed.lab.ssh import parse_address
    b = Board(parse_address("ssh://root@h"))
    ran = []
    monkeypatch.setattr(b.ssh, "run", lambda cmd, **kw: ran.append(cmd))
    b._remove_left([{"url": "ssh://root@h", "base": "/var/tmp/flashbed.Ab12Cd"},
                    {"url": "ssh://root@other", "base": "/var/tmp/flashbed.Zz99Yy"},  # another board's
                    {"url": "ssh://root@h", "base": "/var/tmp/../etc"},  # not flashbed's pattern
                    {"url": "ssh://root@h"}])
    assert ran == ["rm -rf /var/tmp/flashbed.Ab12Cd"]
    assert "removed /var/tmp/flashbed.Ab12Cd on ssh://root@h" in capsys.readouterr().err
