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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from app.act.steps import Step
from app.adapters.control import ControlMode
from app.adapters.ssh import DEFAULT_MAX_PANES, HostConfig
from app.adapters.status import find_worker
from app.adapters.store import StoreWriter
from app.adapters.store_read import StoreReader
from app.adapters.tmux import LOCAL_HOST, PaneListing, Tmux, pane_id_checked, tmux_version
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
from app.observe.sessions import SESSION_ID
from app.observe.views import VIEW_OPTION, mirror_marker
from app.run.runner import QuietRepeats, Runner

log = logging.getLogger(__name__)

# A host's name shows in `status`, in HOST:NAME and in NAME@HOST: letters, digits, - _ .
# fullmatch only: "$" would also match before a trailing newline.
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
# A tmux -L socket name: no folder, nothing a shell or a log line could misread.
SOCKET_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
_KEYS = {"ssh": str, "ssh_options": list, "socket": str, "enabled": bool, "max_panes": int}
MAX_PANES_LIMIT = 100_000
PANE_ID = re.compile(r"%[0-9]{1,9}")


def parse_hosts(table: Any, path: Path) -> tuple[HostConfig, ...]:
    """The ``[hosts]`` table as HostConfigs; one readable line naming the file for anything
    wrong in it."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: hosts must be a table of [hosts.NAME] tables")
    hosts = []
    for name, entry in table.items():
        where = f"{path}: hosts.{name}"
        if not isinstance(name, str) or not HOST_NAME.fullmatch(name) or name == LOCAL_HOST:
            # repr: the name may hold a newline or escapes, and the refusal is one line.
            raise ConfigError(f"{path}: hosts.{name!r}: a host name is letters, digits, '-', "
                              "'_' and '.' "
                              f"(and not {LOCAL_HOST!r}, which is this machine)")
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where} must be a table")
        for key, value in entry.items():
            kind = _KEYS.get(key)
            if kind is None:
                raise ConfigError(f"{where}: unknown key {key} (known: {', '.join(_KEYS)})")
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)) or \
                    (isinstance(value, list) and
                                               not all(isinstance(v, str) for v in value)):
                raise ConfigError(f"{where}.{key} must be "
                                  f"{'a list of strings' if kind is list else kind.__name__}, "
                                  f"got {value!r}")
        ssh = str(entry.get("ssh", ""))
        if not ssh or ssh.startswith("-") or any(c.isspace() or not c.isprintable() for c in ssh):
            raise ConfigError(f"{where}.ssh must be an ssh destination (user@host, an "
                              f"~/.ssh/config alias), got {ssh!r}")
        socket = str(entry.get("socket", ""))
        if socket and not SOCKET_NAME.fullmatch(socket):
            raise ConfigError(f"{where}.socket must be a tmux -L socket name (letters, digits, "
                              f"'-', '_', '.'), got {socket!r}")
        max_panes = entry.get("max_panes", DEFAULT_MAX_PANES)
        if not 1 <= max_panes <= MAX_PANES_LIMIT:
            raise ConfigError(f"{where}.max_panes must be 1 to {MAX_PANES_LIMIT}, "
                              f"got {max_panes!r}")
        hosts.append(HostConfig(name=name, ssh=ssh,
                                ssh_options=tuple(entry.get("ssh_options", ())),
                                socket=socket, enabled=bool(entry.get("enabled", True)),
                                max_panes=max_panes))
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

# The longest pause between tries to reach a host that did not answer (the pause doubles from
# 1 s with each failure in a row): a host that comes back is seen within this.
RETRY_CAP_S = 30.0
# Control-mode clients per host: each is an ssh session, and sshd's MaxSessions (10 by default)
# must leave room for the calls in flight; the sessions beyond are polled.
CONTROL_CLIENTS = 8
# A burst of output wakes the loop; it gathers this long before its tick (as the daemon does).
_GATHER_S = 0.02
NOT_REACHED_YET = "not reached yet since the watcher started"


class Watching(Protocol):
    """What a host's thread drives: app.run.watcher.Watcher (kept abstract: the daemon builds it,
    with the steps and notifier of its own)."""

    @property
    def steps(self) -> Sequence[Step]: ...

    def tick(self, now: float | None = None, *, full: bool = True) -> Any: ...

    def next_due(self) -> float | None: ...

    def close(self) -> None: ...


# (the host's Tmux, the daemon's store writer, control mode or None) -> its watcher
WatcherFactory = Callable[[Tmux, StoreWriter, "ControlMode | None"], Watching]


class CappedTmux(Tmux):
    """A host's tmux server with at most ``max_panes`` of its panes watched: a host is
    untrusted input, and one reporting 20,000 panes must cost no more than its cap (rows,
    captures, folders). The first panes listed are kept, so the same ones stay watched."""

    def __init__(self, host: HostConfig, quiet: QuietRepeats) -> None:
        super().__init__(socket_name=host.socket or None, via=host.via())
        self.max_panes = host.max_panes
        self.quiet = quiet

    def list_panes(self) -> PaneListing:
        listing = super().list_panes()
        if len(listing.panes) <= self.max_panes:
            return listing
        # Once per watcher, whatever the count: a host may vary it every tick.
        self.quiet.log(logging.WARNING, f"host {self.host}: more than {self.max_panes} panes; "
                       f"watching the first {self.max_panes} (max_panes in [hosts.{self.host}])",
                       window_s=float("inf"))
        return replace(listing, panes=listing.panes[:self.max_panes])


class HostWatch:
    """One configured host, watched by a thread of its own with its own watcher, ssh connection
    and control-mode clients, driven by the runner every loop uses (app.run.runner): a host that
    is slow or gone costs its own thread time, never a tick of this machine's or another host's.

    Each full tick writes the host's heartbeat (``checked_ts`` in the store's ``hosts`` table),
    so readers can tell its rows are current. A host that does not answer (ssh refused, auth
    failed, timed out, sessions refused) leaves its panes' rows as they were, marked
    unreachable (readers show them stale, and nothing types into them); everything we run there
    is ended (control clients, the shared connection) and it is tried again after 1, 2, 4 … 30
    s. Its tmux server answering "no server" ends its panes as locally; it is then polled at the
    interval.
    """

    def __init__(self, host: HostConfig, store: StoreWriter, settings: WatchSettings,
                 factory: WatcherFactory, stop: threading.Event, quiet: QuietRepeats) -> None:
        self.host = host
        self.store = store  # the watcher's one writer: see app/adapters/store.py, _OPENING
        self.settings = settings
        self.factory = factory
        self._stop = stop
        self._wake = threading.Event()
        self.quiet = quiet
        self.reachable: bool | None = None
        self.problem = ""
        self.tmux = CappedTmux(host, quiet)
        self.control = ControlMode(self.tmux, self._wake.set) if settings.events else None
        if self.control is not None:
            self.control.max_clients = CONTROL_CLIENTS
        self.watcher: Watching | None = None
        self.runner = Runner(self, settings.interval_s, stop=stop, wake=self._wake,
                             gather_s=_GATHER_S, retry_cap_s=RETRY_CAP_S,
                             label=f"host {host.name}: ", quiet=quiet)
        self._thread = threading.Thread(target=self._run, name=f"host-{host.name}", daemon=True)

    @property
    def ticks(self) -> int:
        return self.runner.ticks

    def start(self) -> HostWatch:
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def join(self, timeout: float) -> None:
        self._wake.set()
        self._thread.join(timeout)

    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            self.watcher = self.factory(self.tmux, self.store, self.control)
            self.runner.run()
        except Exception:
            log.exception("host %s: its watcher stopped", self.host.name)
        finally:
            if self.watcher is not None:
                self.watcher.close()
                for step in self.watcher.steps:
                    step.close()
            self._hang_up()

    def _hang_up(self) -> None:
        """End everything of ours on the host: control clients (a client exits at the end of
        its input, which ssh passes on) and the shared connection."""
        if self.control is not None:
            self.control.close()
        try:
            self.host.via().close()
        except Exception as exc:  # stopping goes on whatever ssh says
            log.warning("host %s: closing its ssh connection: %s", self.host.name, exc)

    # --- the runner's part ------------------------------------------------------------------

    def tick(self, now: float, full: bool) -> bool:
        assert self.watcher is not None
        if self.control is not None:
            record_hooks(self.store, self.control.take_hooks(), self.tmux.label)
        report = self.watcher.tick(now, full=full)
        if report.full:
            self._record(True, "" if report.server_running else "tmux server not running",
                         now)
        return bool(report.full)

    def next_due(self) -> float | None:
        return self.watcher.next_due() if self.watcher is not None else None

    def failed(self, exc: Exception, now: float) -> bool:
        if not isinstance(exc, HostUnreachable):
            return False
        # What ran over the lost connection may be half alive: end it, so a reconnect starts
        # clean and nothing of ours piles up there.
        self._hang_up()
        try:
            self._record(False, str(exc), now)
        except StoreError as failed:  # the loop goes on: readers see the heartbeat age instead
            self.quiet.log(logging.ERROR, f"host {self.host.name}: {failed}")
        return True

    def _record(self, reachable: bool, problem: str, now: float) -> None:
        if reachable != self.reachable:
            if reachable:
                log.info("host %s: reached (%s)", self.host.name, self.host.ssh)
            else:
                log.warning("host %s: unreachable, its panes are stale: %s", self.host.name,
                            problem)
        if problem and problem != self.problem and reachable:
            log.warning("host %s: %s", self.host.name, problem)
        self.reachable, self.problem = reachable, problem
        with self.store.transaction() as conn:
            self.store.hosts.set_host(conn, name=self.host.name, socket=self.tmux.label,
                                reachable=int(reachable), problem=problem, checked_ts=now,
                                watched=1, removed_ts=None,
                                **({"reached_ts": now} if reachable else {}))


def _strict_int(text: str) -> int | None:
    """A decimal number as tmux prints it; None for anything else (signs, spaces, ``²``)."""
    return int(text) if text.isascii() and text.isdecimal() else None


def _session_fields(parts: list[str]) -> dict[str, str]:
    """The session id and transcript path a naming event's value carries (``PID CLI EVENT
    s=ID t=PATH NONCE EPOCH``, the path as JSON string text); none from any other shape, so a
    path that split where the line did not mean it to (a character Python splits on and the
    host's sed kept) is dropped, never cut. parse_event checks the path as a local one's."""
    if len(parts) != 7 or not parts[3].startswith("s=") or not parts[4].startswith("t="):
        return {}
    session_id = parts[3][2:]
    if not SESSION_ID.fullmatch(session_id):
        return {}
    try:
        transcript = json.loads(f'"{parts[4][2:]}"')
    except ValueError:
        transcript = ""
    return {"session_id": session_id,
            "transcript_path": transcript if isinstance(transcript, str) else ""}


def record_hooks(store: StoreWriter, hooks: list[tuple[str, str, float]], socket: str) -> None:
    """The hook option values a host's panes took (``SERVER_PID CLI EVENT NONCE EPOCH``, set by
    the line of ``app.install.remote_hooks``; ``s=ID t=PATH`` before the nonce on the events
    that name the session) as the hook events ``conductor pty hook`` records locally; the tick
    that follows reads them as it reads those. A value that is not our line's (the host is
    untrusted input) is skipped."""
    rows = []
    for pane_id, value, seen in hooks:
        parts = value.split()
        server_pid = _strict_int(parts[0]) if parts else None
        if len(parts) < 3 or server_pid is None or not PANE_ID.fullmatch(pane_id):
            continue  # unset, or not our line's value
        event = parse_event(parts[1], json.dumps({"hook_event_name": parts[2],
                                                  **_session_fields(parts)}))
        rows.append({"ts": seen, "kind": "hook", "event": event.kind, "name": event.name,
                     "cli": event.cli, "pane_id": pane_id, "server_pid": server_pid,
                     "socket": socket, "session_id": event.session_id,
                     "transcript": event.transcript, "detail": "via the pane option"})
    if rows:
        with store.transaction() as conn:
            for row in rows:
                store.events.add_event(conn, row)


class HostWatches:
    """Every enabled host's HostWatch, started together and stopped together, all writing
    through the daemon's one store writer.

    At start the store's ``hosts`` table is told which hosts are watched: a disabled host and
    one no longer in the config are marked so, and readers show their rows stale at once."""

    def __init__(self, hosts: tuple[HostConfig, ...], store: StoreWriter,
                 settings: WatchSettings, factory: WatcherFactory) -> None:
        self.quiet = QuietRepeats(log)
        self.store, self.settings, self.factory = store, settings, factory
        self.watches: list[HostWatch] = []
        self._start(hosts)

    def _start(self, hosts: tuple[HostConfig, ...]) -> None:
        self.hosts = hosts
        self._stop = threading.Event()
        self._mark_watched(self.store, hosts)
        self.watches = [HostWatch(h, self.store, self.settings, self.factory, self._stop,
                                  self.quiet).start() for h in hosts if h.enabled]
        for watch in self.watches:
            log.info("watching host %s (%s) over ssh", watch.host.name, watch.host.ssh)

    def reload(self, hosts: tuple[HostConfig, ...]) -> bool:
        """Watch ``hosts`` from now on (the config file changed); False when they are the ones
        watched already. Every host's thread is started again: a host whose ssh settings
        changed reconnects, and one removed stops (its rows are marked so)."""
        if hosts == self.hosts:
            return False
        self.close()
        self._start(hosts)
        return True

    @staticmethod
    def _mark_watched(store: StoreWriter, hosts: tuple[HostConfig, ...]) -> None:
        now = time.time()
        known = {h.name: h for h in hosts}
        try:
            with store.transaction() as conn:
                for name, row in store.hosts.host_rows().items():
                    if name not in known and not row.get("removed_ts"):
                        store.hosts.set_host(conn, name=name, watched=0, removed_ts=now)
                for host in hosts:
                    store.hosts.set_host(conn, name=host.name, watched=int(host.enabled),
                                   removed_ts=None, reachable=None, checked_ts=now,
                                   problem=NOT_REACHED_YET if host.enabled
                                   else "disabled in the config")
        except StoreError as exc:
            log.error("could not record which hosts are watched: %s", exc)

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
# Runs the window's ssh so that its last words stay in view once it ends. ssh starts at the
# bottom row, because tmux scrolls the screen up a row to write its "Pane is dead" line, which
# would push a lone line at the top out of view; sh outlives ssh a moment, because tmux may
# close a pane whose program exited before reading its last output. Written for sh and run by
# sh: tmux runs a window's command with the person's own shell, which may be fish.
_KEEP_LAST_WORDS = 'printf "\\033[999B"; "$@"; status=$?; sleep 0.5; exit "$status"'


def switch_to_remote(local: Tmux, hosts: tuple[HostConfig, ...], worker: Mapping[str, Any]
                     ) -> str:
    """Show another host's pane here: a local window running ``ssh -t HOST tmux attach -t
    PANE`` (made once, selected after; made again when its ssh had ended), on the local tmux
    server.

    The window is named ``NAME@HOST``, and NAME is the other host's to choose (a window's
    automatic name is its foreground program's): it reaches tmux only as
    :func:`~app.adapters.tmux.literal` text, cut to printable characters."""
    host = find_host(hosts, str(worker["host"]))
    pane_id = pane_id_checked(str(worker["pane_id"]))
    name = "".join(c for c in clean_text(str(worker["name"])) if c not in ZERO_WIDTH)
    window = f"{name[:_REMOTE_NAME_CHARS]}@{host.name}"
    for pane in local.list_panes().panes:
        if pane.window_name != window:
            continue
        if not pane.dead:
            return f"{local.switch_to(pane.pane_id)} (window {window})"
        # The last try's ssh ended (its window kept what it said): this one starts afresh.
        local.run("kill-window", "-t", pane.pane_id, check=False)
    remote = ["tmux", *(["-L", host.socket] if host.socket else []), "attach-session",
              "-t", pane_id]
    # Kept when ssh ends: a refused login or a host gone says so there, instead of a window
    # that vanishes before anyone reads why.
    command = shlex.join(["sh", "-c", _KEEP_LAST_WORDS, "sh", *host.via().interactive(remote)])
    pane = local.new_window(str(Path.home()), window, command, remain_on_exit=True)
    local.set_pane_option(pane.pane_id, VIEW_OPTION, mirror_marker(window))
    return f"{local.switch_to(pane.pane_id)} (new window {window})"
