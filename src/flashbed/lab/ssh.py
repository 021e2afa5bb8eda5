"""A board over SSH: OpenSSH's own client, one ControlMaster connection per board.

`ssh://USER@HOST[:PORT]` names the board. Every command shares the master's
connection (the ControlPath socket lives in a private directory of this run);
`--ssh-key FILE` names a key, `--ssh-config FILE` an ssh_config instead of the
user's own; otherwise the user's ssh config and agent decide. BatchMode: a
password or host-key prompt never waits for an answer that does not come; it is
one line saying what to do.

Timeouts: a connection attempt and the keepalive that declares a board gone are
the ssh config's where it sets them (ConnectTimeout, ServerAliveInterval and
ServerAliveCountMax for the board's host, as `ssh -G` reads them), else
flashbed's defaults, which suit a slow board (an emulated one under TCG, a
board busy writing its card): a command-line `-o` would override the config,
so flashbed passes only what the config leaves unset.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import owner
from ..errors import FlashbedError
from ..scratch import system_tmp

# where the ssh config does not say: a board under load (an emulated one under TCG) may take
# tens of seconds to accept a connection and stall as long during a sync of its card
CONNECT_TIMEOUT = 30  # seconds for one connection attempt
ALIVE_INTERVAL = 15  # seconds between keepalives on a silent connection
ALIVE_COUNT = 8  # keepalives unanswered before the board counts as gone (2 minutes)
URL = re.compile(r"ssh://(?:(?P<user>[^@/:\s]+)@)?(?P<host>\[[0-9a-fA-F:.]+\]|[^@/:\s\[\]]+)(?::(?P<port>\d+))?/?")


@dataclass(frozen=True)
class SshAddress:
    user: str
    host: str
    port: int = 22
    key: str = ""  # --ssh-key
    config: str = ""  # --ssh-config

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address, as the user wrote it
        return f"ssh://{self.user + '@' if self.user else ''}{host}" + (f":{self.port}" if self.port != 22 else "")


def parse_address(text: str, key: str = "", config: str = "") -> SshAddress:
    """`ssh://USER@HOST[:PORT]`, checked: one line if it is not one."""
    m = URL.fullmatch(text.strip())
    if not m:
        raise FlashbedError(f"--target {text}: give ssh://USER@HOST or ssh://USER@HOST:PORT (e.g. ssh://root@192.168.7.2)")
    for part, what in ((m.group("user") or "", "user"), (m.group("host"), "host")):
        if part.startswith("-"):  # ssh would read it as one of its options (ssh://-V, ssh://-oProxyCommand=...)
            raise FlashbedError(f"--target {text}: a {what} name does not start with '-': give ssh://USER@HOST")
    port = int(m.group("port") or 22)
    if not 0 < port < 65536:
        raise FlashbedError(f"--target {text}: port {port} is not a TCP port (1-65535)")
    for flag, path in (("--ssh-key", key), ("--ssh-config", config)):
        if path and not Path(path).is_file():
            raise FlashbedError(f"{flag} {path}: no such file")
    if shutil.which("ssh") is None:
        raise FlashbedError("ssh (OpenSSH's client) is missing: apt-get install openssh-client")
    return SshAddress(user=m.group("user") or "", host=m.group("host").strip("[]"), port=port,
                     key=str(Path(key).resolve()) if key else "", config=str(Path(config).resolve()) if config else "")


@dataclass(frozen=True)
class Timeouts:
    """The connection's timeouts in seconds, and which of them flashbed has to pass (`-o`): the
    ones the ssh config leaves unset."""

    connect: int = CONNECT_TIMEOUT
    alive_interval: int = ALIVE_INTERVAL
    alive_count: int = ALIVE_COUNT
    options: tuple[str, ...] = ()


def timeouts(config: dict[str, str]) -> Timeouts:
    """The timeouts from `ssh -G`'s lowercase settings: the config's where it sets them (ssh
    prints ConnectTimeout none and ServerAliveInterval 0 where nothing does), else the defaults."""
    opts: list[str] = []
    connect = _seconds(config.get("connecttimeout", "none"))
    if connect is None:
        connect = CONNECT_TIMEOUT
        opts += ["-o", f"ConnectTimeout={connect}"]
    interval = _seconds(config.get("serveraliveinterval", "0"))
    count = _seconds(config.get("serveralivecountmax", "3")) or 3
    if not interval:  # the config keeps no keepalive: flashbed's, with its own count
        interval, count = ALIVE_INTERVAL, ALIVE_COUNT
        opts += ["-o", f"ServerAliveInterval={interval}", "-o", f"ServerAliveCountMax={count}"]
    return Timeouts(connect=connect, alive_interval=interval, alive_count=count, options=tuple(opts))


def _seconds(text: str) -> int | None:
    try:
        n = int(text)
    except ValueError:
        return None  # "none"
    return n if n > 0 else None


@dataclass
class Ssh:
    """One board's connection: `start()` the master, then `run`, `popen`, `put`, `get` over it."""

    address: SshAddress
    _dir: Path | None = field(default=None, init=False)
    _master: subprocess.Popen | None = field(default=None, init=False)
    _timeouts: Timeouts | None = field(default=None, init=False)

    def _target(self) -> list[str]:
        t = self.address
        opts = ["-p", str(t.port)]
        if t.config:
            opts = ["-F", t.config, *opts]
        if t.key:
            opts += ["-i", t.key, "-o", "IdentitiesOnly=yes"]
        return [*opts, f"{t.user}@{t.host}" if t.user else t.host]

    @property
    def timeouts(self) -> Timeouts:
        """The ssh config's timeouts for this board, or flashbed's where it sets none (read once)."""
        if self._timeouts is None:
            try:
                r = subprocess.run(["ssh", "-G", *self._target()], capture_output=True, text=True,
                                   stdin=subprocess.DEVNULL, timeout=30)
                said = r.stdout if r.returncode == 0 else ""
            except (OSError, subprocess.SubprocessError):
                said = ""  # the connection itself will say what is wrong with the config
            config = {}
            for line in said.splitlines():
                key, _, value = line.partition(" ")
                config[key.lower()] = value.strip()
            self._timeouts = timeouts(config)
        return self._timeouts

    def args(self) -> list[str]:
        return ["ssh", "-o", "BatchMode=yes", *self.timeouts.options, "-o", f"ControlPath={self._dir}/master",
                *self._target()]

    def start(self, wait: float = 10.0) -> None:
        """Open the master connection, retrying for up to `wait` seconds (a board still
        booting refuses connections); one line if it cannot."""
        # in the system's temporary directory, not the command's own: its sweep ends the master first
        self._dir = Path(tempfile.mkdtemp(prefix=CONTROL_PREFIX, dir=system_tmp()))
        owner.mark(self._dir)  # a flashbed killed with SIGKILL leaves it: the next board run ends it (sweep)
        deadline = time.monotonic() + wait
        try:
            while True:
                r = subprocess.run([*self.args()[:1], "-o", "ControlMaster=yes", "-o", "ControlPersist=no", "-N",
                                    "-f", *self.args()[1:]], capture_output=True, text=True,
                                   stdin=subprocess.DEVNULL, timeout=self.timeouts.connect + 30)
                if r.returncode == 0:
                    return
                why = _why(r.stderr)
                if time.monotonic() > deadline or not _retryable(r.stderr):
                    raise FlashbedError(f"cannot reach {self.address.url}: {why}")
                time.sleep(2)
        except BaseException:  # Ctrl-C while connecting too: no control directory left in /tmp
            self.close()
            raise

    def reconnect(self, wait: float) -> None:
        """A new master after the board went away (its power cut): retried until it answers
        or `wait` seconds passed (then one line)."""
        self.close()
        self.start(wait)

    def close(self) -> None:
        if self._dir is not None:
            try:
                subprocess.run([*self.args()[:1], "-O", "exit", *self.args()[1:]], capture_output=True,
                               stdin=subprocess.DEVNULL, timeout=30)
            except (OSError, subprocess.SubprocessError):
                pass  # no master to stop
            finally:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None

    def note(self, **facts: str) -> None:
        """What this connection leaves on the board (its working directory), kept beside its control
        socket: a later run that finds them left behind removes them (sweep, Board.open)."""
        if self._dir is not None:
            (self._dir / BOARD_NOTE).write_text(json.dumps({"url": self.address.url, **facts}))

    def run(self, cmd: str, timeout: float = 120, input: bytes | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
        """`cmd` in the board's shell; its stdout (bytes). check: one line if it fails."""
        try:
            r = subprocess.run([*self.args(), cmd], input=input, capture_output=True, timeout=timeout,
                               stdin=None if input is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise FlashbedError(f"{self.address.url}: '{cmd[:80]}' did not finish within {timeout:.0f}s") from None
        if check and r.returncode != 0:
            err = r.stderr.decode("utf-8", "replace").strip().splitlines()
            raise FlashbedError(f"{self.address.url}: '{cmd[:80]}' failed (exit {r.returncode}): "
                                f"{err[-1] if err else 'no message'}")
        return r

    def popen(self, cmd: str) -> subprocess.Popen:
        return subprocess.Popen([*self.args(), cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)

    def put(self, local: Path, names: list[str], remote: str, timeout: float = 600) -> None:
        """Files `names` of directory `local` into the board's directory `remote` (a tar stream:
        the board needs tar, not rsync or scp's server)."""
        data = subprocess.run(["tar", "-C", str(local), "-cf", "-", "--", *names], capture_output=True,
                              check=True).stdout
        self.run(f"mkdir -p {shlex.quote(remote)} && tar -C {shlex.quote(remote)} -xf -", timeout=timeout,
                 input=data)

    def get(self, remote: str, local: Path, max_bytes: int, timeout: float = 600) -> None:
        """The board directory `remote`'s files up to `max_bytes` each into `local`."""
        r = self.run(f"cd {shlex.quote(remote)} && find . -maxdepth 1 -type f -size -{max_bytes // 1024}k "
                     f"| tar -cf - -T -", timeout=timeout)
        local.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-C", str(local), "-xf", "-"], input=r.stdout, check=True, capture_output=True)


CONTROL_PREFIX = "flashbed-ssh-"
BOARD_NOTE = "board.json"


def sweep(where: Path | None = None) -> list[dict]:
    """The control directories earlier flashbeds left (their makers gone: killed with SIGKILL): each
    one's master connection ended (`ssh -O exit` on its socket) and the directory removed. Returns
    what each had noted of its board (Ssh.note), for the board's own leftovers."""
    out = []
    for d in (where or system_tmp()).glob(CONTROL_PREFIX + "*"):
        if not owner.left_behind(d, CONTROL_PREFIX):
            continue
        if (d / "master").exists():
            try:  # the host name is ssh's to expand the path with: the socket is what is asked
                subprocess.run(["ssh", "-o", f"ControlPath={d}/master", "-O", "exit", "flashbed-leftover"],
                               capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
            except (OSError, subprocess.SubprocessError):
                pass
        try:
            note = json.loads((d / BOARD_NOTE).read_text())
        except (OSError, ValueError):
            note = {}
        shutil.rmtree(d, ignore_errors=True)
        out.append({"dir": str(d), **(note if isinstance(note, dict) else {})})
    return out


def _why(stderr: str) -> str:
    lines = [l.strip() for l in stderr.splitlines() if l.strip() and not l.startswith("Warning: Permanently")]
    last = lines[-1] if lines else "ssh gave no reason"
    if "Host key verification failed" in stderr or "No ED25519 host key is known" in stderr \
            or "host key is not known" in stderr.lower():
        return f"{last} (connect once with ssh to accept the board's host key, or add it to known_hosts)"
    if "Permission denied" in stderr:
        return f"{last} (give --ssh-key FILE, or load the key into your ssh agent)"
    return last


def _retryable(stderr: str) -> bool:
    """A board that is booting: connection refused or reset, or no route yet; not a wrong key."""
    return any(s in stderr for s in ("Connection refused", "Connection reset", "Connection timed out",
                                     "No route to host", "kex_exchange_identification", "Connection closed"))
