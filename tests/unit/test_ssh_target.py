"""--target, --ssh-key, --ssh-config at the edge: one line each, before anything connects."""
import pytest

from flashbed.cli import main
from flashbed.errors import FlashbedError
from flashbed.lab.ssh import parse_address


@pytest.mark.parametrize("text,user,host,port", [
    ("ssh://root@192.168.7.2", "root", "192.168.7.2", 22),
    ("ssh://debian@bbb.local:2222", "debian", "bbb.local", 2222),
    ("ssh://root@[fe80::1]:22", "root", "fe80::1", 22),
])
def test_a_target_is_user_host_and_port(text, user, host, port):
    t = parse_address(text)
    assert (t.user, t.host, t.port) == (user, host, port)


@pytest.mark.parametrize("argv,words", [
    (["--target", "root@192.168.7.2"], "--target root@192.168.7.2: give ssh://USER@HOST"),
    (["--target", "ssh://root@h:99999"], "port 99999 is not a TCP port"),
    (["--target", "ssh://root@h", "--ssh-key", "/nonexistent/key"], "--ssh-key /nonexistent/key: no such file"),
    (["--ssh-key", "/etc/hostname"], "--ssh-key is for --target ssh://...: add --target, or drop it"),
    (["--power-cmd", "relay {action}"], "--power-cmd is for --target ssh://...: add --target, or drop it"),
    (["--target", "ssh://root@127.0.0.1:1", "--power-cmd", "relay 3"], "--power-cmd 'relay 3' has no {action}"),
    (["--target", "ssh://root@127.0.0.1:1", "--power-cmd", " "], "--power-cmd ' ': an empty value: give one"),
    (["--target", "ssh://root@127.0.0.1:1", "--boot-wait", "900"],
     "--boot-wait is how long a board may take to answer after --power-cmd's on: add --power-cmd"),
    (["--target", "ssh://root@127.0.0.1:1", "--power-cmd", "relay {action}", "--boot-wait", "0"],
     "--boot-wait must be a number of seconds above 0"),
])
def test_bad_target_options_are_one_line(argv, words, capsys, tmp_path):
    assert main(["run", "--fs", "ext4", "--study", "mkfs", "--device", "/dev/mmcblk0p3", "--out",
                 str(tmp_path / "run"), *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and words in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv,words", [
    (["--target", "ssh://root@127.0.0.1:1"], "flashbed probe needs a device"),
    (["/dev/sdz", "--device", "/dev/sdy"], "give the device once: /dev/sdz or --device /dev/sdy"),
    (["--device", "plain-file@64M", "--ssh-key", "/etc/hostname"], "--ssh-key is for --target ssh://...: add --target"),
    (["--target", "ssh://root@127.0.0.1:1", "--device", "plain-file@64M"], "give the board's device with --device /dev/"),
    (["--target", "ssh://root@127.0.0.1:1", "--device", "/dev/mmcblk0p3", "--destroy-data-on", "/dev/mmcblk0p"],
     "--destroy-data-on /dev/mmcblk0p names no device of this probe on the board (/dev/mmcblk0p3)"),
])
def test_bad_probe_target_options_are_one_line(argv, words, capsys, tmp_path):
    assert main(["probe", *argv, "--out", str(tmp_path / "probe")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and words in err and "Traceback" not in err
    assert not (tmp_path / "probe").exists()


@pytest.mark.parametrize("text", ["ssh://-V", "ssh://-oProxyCommand=touch@host", "ssh://root@-V"])
def test_a_target_never_reaches_ssh_as_an_option(text):
    """Issue 28, 16: --target ssh://-V reached ssh as its option."""
    with pytest.raises(FlashbedError, match="name does not start with '-'"):
        parse_address(text)


def test_ctrl_c_while_connecting_leaves_no_control_directory(monkeypatch):
    """Issue 28, 17: Ctrl-C while connecting to a board left /tmp/flashbed-ssh-*."""
    import subprocess
    import tempfile
    from pathlib import Path

    from flashbed.lab import ssh
    made = []
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(**kw):
        made.append(Path(real_mkdtemp(**kw)))
        return str(made[-1])

    def interrupted(*a, **kw):
        if "-N" in a[0]:
            raise KeyboardInterrupt
        return subprocess.CompletedProcess(a[0], 255, "", "")

    monkeypatch.setattr(ssh.tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(ssh.subprocess, "run", interrupted)
    conn = ssh.Ssh(ssh.SshAddress("root", "192.0.2.1"))
    with pytest.raises(KeyboardInterrupt):
        conn.start()
    assert made and not made[0].exists()


@pytest.mark.parametrize("text", ["ssh://root@[::1]", "ssh://root@[::1]:2222", "ssh://[fe80::1]"])
def test_an_ipv6_target_reads_back_as_the_user_wrote_it(text):
    """Issue 42, 15: ssh://root@[::1] was refused by `run` as 'ssh://root@::1', a URL the user did not type."""
    t = parse_address(text)
    assert t.url == text and parse_address(t.url) == t and ":" in t.host and "[" not in t.host


def test_a_run_on_an_ipv6_target_gets_as_far_as_connecting(capsys, tmp_path):
    assert main(["run", "--fs", "ext4", "--study", "mkfs", "--device", "/dev/mmcblk0p3", "--out",
                 str(tmp_path / "run"), "--target", "ssh://root@[::1]:1"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach ssh://root@[::1]:1" in err and err.count("\n") == 1


def _opts(args: list[str]) -> dict[str, str]:
    return dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "-o")


def test_without_an_ssh_config_flashbed_passes_timeouts_for_a_slow_board(tmp_path):
    """An emulated board under TCG took longer than a 10 s connect and a 15 s keepalive allowed."""
    from flashbed.lab import ssh
    config = tmp_path / "ssh_config"
    config.write_text("Host 127.0.0.1\n  User root\n")
    s = ssh.Ssh(parse_address("ssh://root@127.0.0.1:2222", config=str(config)))
    o = _opts(s.args())
    assert o["ConnectTimeout"] == str(ssh.CONNECT_TIMEOUT) and ssh.CONNECT_TIMEOUT >= 30
    assert int(o["ServerAliveInterval"]) * int(o["ServerAliveCountMax"]) >= 60
    assert s.timeouts.connect == ssh.CONNECT_TIMEOUT


def test_the_users_ssh_config_wins_over_flashbeds_timeouts(tmp_path):
    """--ssh-config's (or the user's) ConnectTimeout and keepalive are the board's: flashbed's own
    `-o` would have overridden them, as ssh takes the first value it reads and the command line first."""
    from flashbed.lab import ssh
    config = tmp_path / "ssh_config"
    config.write_text("Host 127.0.0.1\n  ConnectTimeout 91\n  ServerAliveInterval 7\n  ServerAliveCountMax 40\n")
    s = ssh.Ssh(parse_address("ssh://root@127.0.0.1:2222", config=str(config)))
    args = s.args()
    assert not {"ConnectTimeout", "ServerAliveInterval", "ServerAliveCountMax"} & set(_opts(args)), args
    assert (s.timeouts.connect, s.timeouts.alive_interval, s.timeouts.alive_count) == (91, 7, 40)
    # another host of the same config: its settings are not this one's
    other = ssh.Ssh(parse_address("ssh://root@127.0.0.2:2222", config=str(config)))
    assert _opts(other.args())["ConnectTimeout"] == str(ssh.CONNECT_TIMEOUT)


def test_a_config_that_sets_only_the_connect_timeout_gets_flashbeds_keepalive():
    from flashbed.lab.ssh import ALIVE_COUNT, ALIVE_INTERVAL, timeouts
    t = timeouts({"connecttimeout": "60", "serveraliveinterval": "0", "serveralivecountmax": "3"})
    assert t.connect == 60 and "-o" in t.options
    assert dict(o.split("=") for o in t.options if o != "-o") == {
        "ServerAliveInterval": str(ALIVE_INTERVAL), "ServerAliveCountMax": str(ALIVE_COUNT)}
