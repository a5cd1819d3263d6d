"""Fixtures for the several-hosts tests: real sshd on loopback, one per host, with its own tmux
server; see tests/hosts/sshd.py."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.hosts.sshd import SshHost, SshUnavailable, keygen, short_folder


@pytest.fixture
def ssh_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
             ) -> Iterator[Callable[..., SshHost]]:
    """Start one sshd per call (``ssh_host("alpha")``, sshd_config lines after the name); every
    one and its tmux server is stopped at the end. conductor's ssh sockets go to a short
    private folder of the test's."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", short_folder(tmp_path))
    client_key = tmp_path / "client_key"
    client_pub = keygen(client_key)
    started: list[SshHost] = []

    def start(name: str, *sshd_config: str) -> SshHost:
        try:
            host = SshHost(name, tmp_path / f"host-{name}", client_key, client_pub,
                           sshd_config).start()
        except SshUnavailable as exc:
            pytest.skip(str(exc))
        started.append(host)
        return host

    yield start
    for host in started:
        host.stop()
        host.kill_tmux()
    sockets = tmp_path / "sockets"
    if sockets.is_symlink():
        shutil.rmtree(sockets.readlink(), ignore_errors=True)


def write_hosts(config: Path, *hosts: SshHost, extra: str = "") -> None:
    """A config file with one [hosts.NAME] table per test host (its own ssh_config via -F)."""
    tables = [f'[hosts.{h.name}]\nssh = "{h.name}"\nssh_options = ["-F", "{h.client_config}"]\n'
              for h in hosts]
    config.write_text("\n".join(tables) + extra, encoding="utf-8")
