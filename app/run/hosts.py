"""The other machines of the config file (``[hosts.NAME]`` tables) and what ``conductor pty
hosts`` says about them.

A table names its ssh destination and may add ssh options, the remote tmux socket and whether it
is watched. This machine is the host ``local`` and needs no table.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.act.steps import Step
from app.adapters.ssh import HostConfig
from app.adapters.status import find_worker
from app.adapters.store import StoreReader, StoreWriter
from app.adapters.tmux import LOCAL_HOST, ControlMode, Tmux, pane_id_checked, tmux_version
from app.base.errors import (
    ConductorError,
    ConfigError,
    HostUnreachable,
    PaneNotFound,
    StoreError,
    TmuxServerNotRunning,
)
from app.base.inputs import ZERO_WIDTH
from app.base.render import clean_text
from app.base.settings import WatchSettings
from app.observe.hookevents import parse_event
from app.observe.one_pane import Target, resolve
from app.run.watcher import rest

log = logging.getLogger(__name__)

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


# --- watching ------------------------------------------------------------------------------------

# Pauses between tries to reach a host that did not answer: doubled each time up to the last.
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
# Control-mode clients per host: each is an ssh session, and sshd's MaxSessions (10 by default)
# must leave room for the calls in flight; the sessions beyond are polled.
CONTROL_CLIENTS = 8
# A burst of output wakes the loop; it gathers this long before its tick (as the daemon does).
_GATHER_S = 0.02


class Watching(Protocol):
    """What a host's thread drives: app.run.watcher.Watcher (kept abstract: the daemon builds it,
    with the steps and notifier of its own)."""

    @property
    def steps(self) -> Sequence[Step]: ...

    def tick(self, now: float | None = None, *, full: bool = True) -> Any: ...

    def next_due(self) -> float | None: ...

    def close(self) -> None: ...


# (the host's Tmux, the thread's own store connection, control mode or None) -> its watcher
WatcherFactory = Callable[[Tmux, StoreWriter, "ControlMode | None"], Watching]


class HostWatch:
    """One configured host, watched by a thread of its own with its own watcher, store
    connection, ssh connection and control-mode clients: a host that is slow or gone costs its
    own thread time, never a tick of this machine's or another host's.

    A host that does not answer (ssh refused, auth failed, timed out, sessions refused) leaves
    its panes' rows as they were, marked unreachable in the store's ``hosts`` table (so `status`
    shows them stale with ``host_unreachable``, and nothing types into them); it is tried again
    after 1, 2, 4 … 30 s. Its tmux server answering "no server" ends its panes as locally.
    """

    def __init__(self, host: HostConfig, store: StoreWriter, settings: WatchSettings,
                 factory: WatcherFactory, stop: threading.Event) -> None:
        self.host = host
        self.store = store  # the watcher's one writer: see app/adapters/store.py, _OPENING
        self.settings = settings
        self.factory = factory
        self._stop = stop
        self._wake = threading.Event()
        self.reachable: bool | None = None
        self.problem = ""
        self.ticks = 0
        self._thread = threading.Thread(target=self._run, name=f"host-{host.name}", daemon=True)

    def start(self) -> HostWatch:
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def join(self, timeout: float) -> None:
        self._wake.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        store = self.store
        tmux = self.host.tmux()
        control = ControlMode(tmux, self._wake.set) if self.settings.events else None
        if control is not None:
            control.max_clients = CONTROL_CLIENTS
        watcher: Watching | None = None
        try:
            watcher = self.factory(tmux, store, control)
            self._loop(watcher, store, control, tmux.label)
        except Exception:
            log.exception("host %s: its watcher stopped", self.host.name)
        finally:
            if watcher is not None:
                watcher.close()
                for step in watcher.steps:
                    step.close()
            if control is not None:
                control.close()
            self.host.via().close()

    def _loop(self, watcher: Watching, store: StoreWriter, control: ControlMode | None,
              socket: str) -> None:
        next_full = 0.0
        failures = 0
        while not self._stop.is_set():
            self._wake.clear()
            started = time.monotonic()
            full = started >= next_full
            try:
                if control is not None:
                    record_hooks(store, control.take_hooks(), socket)
                watcher.tick(time.time(), full=full)
            except HostUnreachable as exc:
                failures += 1
                self._record(store, False, str(exc))
                self._stop.wait(BACKOFF_S[min(failures, len(BACKOFF_S)) - 1])
                next_full = 0.0
                continue
            except StoreError as exc:
                log.error("host %s: cycle skipped: %s", self.host.name, exc)
            except Exception:
                log.exception("host %s: cycle failed; continuing", self.host.name)
            else:
                self.ticks += 1
                failures = 0
                if self.reachable is not True:
                    self._record(store, True, "")
            if full:
                next_full = started + self.settings.interval_s
            rest(next_full, watcher.next_due(), self._wake, self._stop, _GATHER_S)

    def _record(self, store: StoreWriter, reachable: bool, problem: str) -> None:
        if reachable != self.reachable:
            if reachable:
                log.info("host %s: reached (%s)", self.host.name, self.host.ssh)
            else:
                log.warning("host %s: unreachable, its panes are stale: %s", self.host.name,
                            problem)
        self.reachable, self.problem = reachable, problem
        now = time.time()
        try:
            with store.transaction() as conn:
                store.set_host(conn, name=self.host.name, socket=self.host.tmux().label,
                               reachable=int(reachable), problem=problem, checked_ts=now,
                               **({"reached_ts": now} if reachable else {}))
        except StoreError as exc:
            log.error("host %s: %s", self.host.name, exc)


def record_hooks(store: StoreWriter, hooks: list[tuple[str, str, float]], socket: str) -> None:
    """The hook option values a host's panes took (``SERVER_PID CLI EVENT NONCE EPOCH``, set by the
    line of ``app.install.remote_hooks``) as the hook events ``conductor pty hook`` records
    locally; the tick that follows reads them as it reads those."""
    rows = []
    for pane_id, value, seen in hooks:
        parts = value.split()
        if len(parts) < 3 or not parts[0].isdigit():
            continue  # unset, or not our line's value
        event = parse_event(parts[1], json.dumps({"hook_event_name": parts[2]}))
        rows.append({"ts": seen, "kind": "hook", "event": event.kind, "name": event.name,
                     "cli": event.cli, "pane_id": pane_id, "server_pid": int(parts[0]),
                     "socket": socket, "session_id": "", "detail": "via the pane option"})
    if rows:
        with store.transaction() as conn:
            for row in rows:
                store.add_event(conn, row)


class HostWatches:
    """Every enabled host's HostWatch, started together and stopped together."""

    def __init__(self, hosts: tuple[HostConfig, ...], store: StoreWriter,
                 settings: WatchSettings, factory: WatcherFactory) -> None:
        self._stop = threading.Event()
        self.watches = [HostWatch(h, store, settings, factory, self._stop).start()
                        for h in hosts if h.enabled]
        for watch in self.watches:
            log.info("watching host %s (%s) over ssh", watch.host.name, watch.host.ssh)

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout
        for watch in self.watches:
            watch.join(max(0.1, deadline - time.monotonic()))


# --- naming a pane on any host -------------------------------------------------------------------


def host_tmux(local: Tmux, hosts: tuple[HostConfig, ...], name: str) -> Tmux:
    """The tmux server a host name means: ``local`` is the one this command was given."""
    return local if name == LOCAL_HOST else find_host(hosts, name).tmux()


def resolve_anywhere(local: Tmux, workers_dir: Path, ident: str,
                     hosts: tuple[HostConfig, ...]) -> tuple[Tmux, Target]:
    """The pane ``ident`` names, and the tmux server it is on.

    ``HOST:NAME`` (or ``HOST:ID``, ``HOST:%N``) names it on that host. Anything else is looked
    for on this machine first; failing that, among the other hosts' panes in the store: one
    match is it, several are an error listing them as HOST:NAME, none is the local error."""
    head, sep, rest = ident.partition(":")
    if sep and rest and (head == LOCAL_HOST or any(h.name == head for h in hosts)):
        tmux = host_tmux(local, hosts, head)
        return tmux, resolve(tmux, workers_dir, rest)
    try:
        return local, resolve(local, workers_dir, ident)
    except (PaneNotFound, TmuxServerNotRunning) as exc:
        if not hosts:
            raise
        missing: ConductorError = exc
    candidates = _remote_candidates(workers_dir, ident, {h.name for h in hosts})
    if not candidates:
        raise missing
    if len(candidates) > 1:
        listed = ", ".join(f"{w['host']}:{w['name']} ({w['id']})" for w in candidates)
        raise PaneNotFound(f"{ident!r} names panes on several hosts: {listed}; "
                           "name one as HOST:NAME")
    found = candidates[0]
    tmux = host_tmux(local, hosts, str(found["host"]))
    return tmux, resolve(tmux, workers_dir, str(found["id"]))


def _remote_candidates(workers_dir: Path, ident: str, names: set[str]
                       ) -> list[dict[str, Any]]:
    """Live panes of configured hosts whose id, id prefix, name or tmux pane id is ``ident``."""
    try:
        reader = StoreReader(workers_dir)
    except StoreError:
        return []
    try:
        workers = [w for w in reader.workers() if w.get("host") in names
                   and w.get("state") != "EXITED"]
    finally:
        reader.close()
    exact = [w for w in workers if ident in (w.get("id"), w.get("name"), w.get("pane_id"))]
    return exact or [w for w in workers if ident and str(w.get("id", "")).startswith(ident)]


def pick_worker(workers: list[dict[str, Any]], ident: str, hosts: tuple[HostConfig, ...]
                ) -> dict[str, Any]:
    """A row of ``workers`` by what a person typed, by the rules of :func:`resolve_anywhere`:
    ``HOST:NAME``, else this machine's first, else one other host's."""
    head, sep, rest = ident.partition(":")
    if sep and rest and (head == LOCAL_HOST or any(h.name == head for h in hosts)):
        return find_worker([w for w in workers if (w.get("host") or LOCAL_HOST) == head], rest)
    local = [w for w in workers if (w.get("host") or LOCAL_HOST) == LOCAL_HOST]
    try:
        return find_worker(local, ident)
    except PaneNotFound:
        others = [w for w in workers if (w.get("host") or LOCAL_HOST) != LOCAL_HOST]
        exact = [w for w in others if ident in (w.get("id"), w.get("name"), w.get("pane_id"))]
        if len(exact) > 1:
            listed = ", ".join(f"{w['host']}:{w['name']} ({w['id']})" for w in exact)
            raise PaneNotFound(f"{ident!r} names panes on several hosts: {listed}; "
                               "name one as HOST:NAME") from None
        return exact[0] if exact else find_worker(others, ident)


# A remote pane's name as a local window's name (switch_to_remote) is cut to this many characters.
_REMOTE_NAME_CHARS = 100


def switch_to_remote(local: Tmux, hosts: tuple[HostConfig, ...], worker: Mapping[str, Any]
                     ) -> str:
    """Show another host's pane here: a local window running ``ssh -t HOST tmux attach -t
    PANE`` (made once, selected after), on the local tmux server.

    The window is named ``NAME@HOST``, and NAME is the other host's to choose (a window's
    automatic name is its foreground program's): it reaches tmux only as
    :func:`~app.adapters.tmux.literal` text, cut to printable characters."""
    host = find_host(hosts, str(worker["host"]))
    pane_id = pane_id_checked(str(worker["pane_id"]))
    name = "".join(c for c in clean_text(str(worker["name"])) if c not in ZERO_WIDTH)
    window = f"{name[:_REMOTE_NAME_CHARS]}@{host.name}"
    for pane in local.list_panes().panes:
        if pane.window_name == window and not pane.dead:
            return f"{local.switch_to(pane.pane_id)} (window {window})"
    remote = ["tmux", *(["-L", host.socket] if host.socket else []), "attach-session",
              "-t", pane_id]
    command = shlex.join(host.via().interactive(remote))
    pane = local.new_window(str(Path.home()), window, command)
    return f"{local.switch_to(pane.pane_id)} (new window {window})"
