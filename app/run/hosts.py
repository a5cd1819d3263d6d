"""The other machines of the config file (``[hosts.NAME]`` tables) and what ``conductor pty
hosts`` says about them.

A table names its ssh destination and may add ssh options, the remote tmux socket and whether it
is watched. This machine is the host ``local`` and needs no table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.adapters.ssh import HostConfig
from app.adapters.tmux import LOCAL_HOST, tmux_version
from app.base.errors import ConductorError, ConfigError

# A host's name shows in `status`, in HOST:NAME and in NAME@HOST: letters, digits, - _ .
HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_KEYS = {"ssh": str, "ssh_options": list, "socket": str, "enabled": bool}


def parse_hosts(table: Any, path: Path) -> tuple[HostConfig, ...]:
    """The ``[hosts]`` table as HostConfigs; one readable line naming the file for anything
    wrong in it."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: hosts must be a table of [hosts.NAME] tables")
    hosts = []
    for name, entry in table.items():
        where = f"{path}: hosts.{name}"
        if not HOST_NAME.match(name) or name == LOCAL_HOST:
            raise ConfigError(f"{where}: a host name is letters, digits, '-', '_' and '.' "
                              f"(and not {LOCAL_HOST!r}, which is this machine)")
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where} must be a table")
        for key, value in entry.items():
            kind = _KEYS.get(key)
            if kind is None:
                raise ConfigError(f"{where}: unknown key {key} (known: {', '.join(_KEYS)})")
            if not isinstance(value, kind) or (isinstance(value, list) and
                                               not all(isinstance(v, str) for v in value)):
                raise ConfigError(f"{where}.{key} must be "
                                  f"{'a list of strings' if kind is list else kind.__name__}, "
                                  f"got {value!r}")
        ssh = str(entry.get("ssh", "")).strip()
        if not ssh or ssh.startswith("-") or any(c.isspace() or not c.isprintable() for c in ssh):
            raise ConfigError(f"{where}.ssh must be an ssh destination (user@host, an "
                              f"~/.ssh/config alias), got {ssh!r}")
        socket = str(entry.get("socket", ""))
        if "/" in socket or any(not c.isprintable() for c in socket):
            raise ConfigError(f"{where}.socket must be a tmux -L socket name, got {socket!r}")
        hosts.append(HostConfig(name=name, ssh=ssh,
                                ssh_options=tuple(entry.get("ssh_options", ())),
                                socket=socket, enabled=bool(entry.get("enabled", True))))
    return tuple(hosts)


@dataclass(frozen=True)
class HostReport:
    """How one host answered just now."""

    name: str
    destination: str
    enabled: bool
    reachable: bool
    latency_s: float | None = None
    tmux: str = ""  # the host's `tmux -V`
    events: bool = False  # tmux new enough for control mode (else polling)
    panes: int | None = None
    problem: str = ""


def probe(host: HostConfig) -> HostReport:
    """Reach the host once: latency of one call over the shared connection, its tmux, its panes."""
    via = host.via()
    try:
        latency = via.latency()
        tmux = host.tmux()
        version_text = tmux.version_text().strip()
        version = tmux_version(version_text)
        try:
            panes: int | None = len(tmux.list_panes().panes)
            problem = ""
        except ConductorError as exc:
            panes, problem = None, str(exc)
    except ConductorError as exc:
        return HostReport(host.name, host.ssh, host.enabled, False, problem=str(exc))
    return HostReport(host.name, host.ssh, host.enabled, True, latency, version_text,
                      version is None or version >= (3, 2), panes, problem)


def probe_all(hosts: tuple[HostConfig, ...]) -> list[HostReport]:
    """Every host at once: one unreachable host costs its own timeout, not the sum."""
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(hosts))) as pool:
        return list(pool.map(probe, hosts))


def find_host(hosts: tuple[HostConfig, ...], name: str) -> HostConfig:
    for host in hosts:
        if host.name == name:
            return host
    known = ", ".join([LOCAL_HOST, *(h.name for h in hosts)])
    raise ConfigError(f"no host {name!r} in the config file (hosts: {known})")
