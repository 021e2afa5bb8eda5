"""This machine as a board: a private sshd on 127.0.0.1 (its own host key, config and
authorized key, on a spare port; the host's sshd and its config untouched) and loop
devices as the board's storage.

    with SshBoard(tmp) as b:   b.target ("ssh://root@127.0.0.1:PORT"), b.key, b.config
    with loop_device(tmp, 512 << 20) as node: ...
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def missing() -> str:
    """Why this machine cannot be a board here ('' if it can)."""
    if os.geteuid() != 0:
        return "needs root (loop devices, mkfs, mount)"
    for tool in (SSHD, shutil.which("ssh"), shutil.which("losetup"), shutil.which("ssh-keygen")):
        if not tool or not Path(tool).exists():
            return "needs openssh-server, openssh-client and losetup (scripts/setup.sh installs them)"
    return ""


def spare_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SshBoard:
    def __init__(self, where: Path, extra: str = ""):
        self.dir = where
        self.extra = extra  # more sshd_config lines
        self.port = spare_port()
        self.proc: subprocess.Popen | None = None

    @property
    def target(self) -> str:
        return f"ssh://root@127.0.0.1:{self.port}"

    def __enter__(self) -> "SshBoard":
        d = self.dir
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o700)
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
        (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
        os.chmod(d / "authorized_keys", 0o600)
        (d / "sshd_config").write_text(
            f"ListenAddress 127.0.0.1\nPort {self.port}\nHostKey {d / 'host_key'}\nPidFile {d / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            "LogLevel ERROR\n" + self.extra)
        host_pub = (d / "host_key.pub").read_text().split()
        (d / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        (d / "ssh_config").write_text(
            f"Host 127.0.0.1\n  UserKnownHostsFile {d / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
            f"  IdentityFile {d / 'client_key'}\n  IdentitiesOnly yes\n")
        # sshd's privilege separation directory (Debian's service makes it at start)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                                     stdout=subprocess.DEVNULL, stderr=open(d / "sshd.log", "w"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(d / 'sshd.log').read_text()[-500:]}")
            time.sleep(0.05)
        raise RuntimeError("sshd did not listen within 10 s")

    @property
    def key(self) -> str:
        return str(self.dir / "client_key")

    @property
    def config(self) -> str:
        return str(self.dir / "ssh_config")

    def power_cmd(self, delay: float = 3.0) -> str:
        """--power-cmd for this "board" (tests/sshpower.py says what it does and does not simulate)."""
        import shlex
        import sys
        here = Path(__file__).resolve().parent / "sshpower.py"
        return f"{shlex.quote(sys.executable)} {shlex.quote(str(here))} {shlex.quote(str(self.dir))} {delay} {{action}}"

    def __exit__(self, *exc) -> None:
        # an sshd that tests/sshpower.py started again (its pid file names it)
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.dir / "sshd.pid").read_text())
            if self.proc is None or pid != self.proc.pid:
                os.kill(pid, 15)
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def loop_device(where: Path, size: int):
    """A loop device on a sparse file of `size` bytes (detached at the end)."""
    img = where / f"board-{size >> 20}M.img"
    with open(img, "wb") as f:
        f.truncate(size)
    node = subprocess.run(["losetup", "--find", "--show", str(img)], capture_output=True, text=True,
                          check=True).stdout.strip()
    try:
        yield node
    finally:
        subprocess.run(["losetup", "-d", node], capture_output=True)
        img.unlink(missing_ok=True)
