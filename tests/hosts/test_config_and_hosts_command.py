"""[hosts.NAME] in the config file and `conductor pty hosts` against real sshd."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from app.base.errors import ConfigError
from app.run.configfile import load_config
from tests.conftest import conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost


def test_hosts_tables_are_read(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[watch]\ninterval = 3\n\n[hosts.gpu]\nssh = "me@gpu-box"\n'
                    'ssh_options = ["-p", "2222"]\nsocket = "agents"\n\n'
                    '[hosts.lab]\nssh = "lab"\nenabled = false\n', encoding="utf-8")
    config = load_config(path)
    assert [(h.name, h.ssh, h.ssh_options, h.socket, h.enabled) for h in config.hosts] == [
        ("gpu", "me@gpu-box", ("-p", "2222"), "agents", True),
        ("lab", "lab", (), "", False),
    ]
    assert config.watch.interval_s == 3
    text = path.read_text(encoding="utf-8")  # upgraded with the new keys, the tables kept
    assert "[hosts.gpu]" in text and "[notify]" in text and config.added
    # Commands that only read (every CLI command but `watch`) see the same hosts.
    assert load_config(path, upgrade=False).hosts == config.hosts


@pytest.mark.parametrize(("table", "says"), [
    ('[hosts.local]\nssh = "x"\n', "this machine"),
    ('[hosts."a b"]\nssh = "x"\n', "host name"),
    ('[hosts.gpu]\nssh = "-oProxyCommand=touch /tmp/x"\n', "ssh destination"),
    ('[hosts.gpu]\n', "ssh destination"),
    ('[hosts.gpu]\nssh = "gpu"\nssh_options = "-v"\n', "list of strings"),
    ('[hosts.gpu]\nssh = "gpu"\nport = 22\n', "unknown key port"),
    ('[hosts.gpu]\nssh = "gpu"\nsocket = "a/b"\n', "socket"),
    ('[hosts.gpu]\nssh = "gpu"\nsocket = "a#{pid}"\n', "socket"),
    # A trailing newline: "$" in a pattern matches before it, fullmatch does not.
    ('[hosts."gpu\\n"]\nssh = "gpu"\n', "host name"),
    ('[hosts."gpu²"]\nssh = "gpu"\n', "host name"),
    ('[hosts.gpu]\nssh = "gpu\\n"\n', "ssh destination"),
    ('[hosts.gpu]\nssh = "gpu"\nmax_panes = 0\n', "max_panes"),
    ('[hosts.gpu]\nssh = "gpu"\nmax_panes = true\n', "max_panes"),
    ('[hosts.gpu]\nssh = "gpu"\nmax_panes = "5"\n', "max_panes"),
    ('hosts = 3\n', "table"),
])
def test_bad_hosts_tables_are_one_line(tmp_path: Path, table: str, says: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(table, encoding="utf-8")
    with pytest.raises(ConfigError, match=says) as caught:
        load_config(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_hosts_command_says_who_answers(ssh_host: Callable[[str], SshHost],
                                       tmp_path: Path) -> None:
    alpha, beta = ssh_host("alpha"), ssh_host("beta")
    alpha.tmux("new-session", "-d", "-s", "one", "cat")
    beta.stop()
    write_hosts(tmp_path / "config.toml", alpha, beta,
                extra='\n[hosts.gamma]\nssh = "nowhere"\nenabled = false\n')
    done = conductor("pty", "hosts", "--json", env={"XDG_RUNTIME_DIR": os.environ[
        "XDG_RUNTIME_DIR"]})
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert rows["local"]["reachable"]
    assert rows["alpha"]["reachable"] and rows["alpha"]["panes"] == 1
    assert rows["alpha"]["latency_s"] > 0 and rows["alpha"]["events"]
    assert not rows["beta"]["reachable"] and "unreachable" in rows["beta"]["problem"]
    assert not rows["gamma"]["enabled"] and not rows["gamma"]["reachable"]
    table = conductor("pty", "hosts").stdout
    assert table.splitlines()[0].split() == ["HOST", "SSH", "REACHABLE", "LATENCY", "TMUX",
                                            "WATCH", "PANES"]
    assert "beta: host beta (beta) unreachable" in table


def test_a_host_refusing_sessions_is_unreachable(ssh_host: Callable[..., SshHost],
                                                tmp_path: Path) -> None:
    full = ssh_host("full", "MaxSessions 0")  # sshd's MaxSessions reached: no session at all
    write_hosts(tmp_path / "config.toml", full)
    done = conductor("pty", "hosts", "--json")
    assert done.returncode == 0, done.stderr
    row = next(r for r in map(json.loads, done.stdout.splitlines()) if r["name"] == "full")
    assert not row["reachable"] and "unreachable" in row["problem"]
