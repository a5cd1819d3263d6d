"""Process concerns of ``conductor pty watch``: single-instance lock, signals, logging, the loop.

Signal handlers only set a flag; the loop waits on an Event so a stop is immediate, finishes the
cycle it is in and exits 0. One failing cycle is logged and survived.

With control mode the same Event is set by the control clients' threads when a pane prints, so
the loop runs a light tick at once (or when the pane may next be captured) and a full poll every
``interval_s``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import IO, Any, NoReturn

from app.act.answer_links import LinkKeys
from app.act.cycle.jobs import CycleSettings
from app.act.cycle.step import CycleStep
from app.act.herd.eligibility import HerdSettings
from app.act.herd.step import HerdStep
from app.adapters.control import ControlMode
from app.adapters.llm import LLMClient, LLMSettings
from app.adapters.notify import NotificationEvent, Notifier
from app.adapters.notify_settings import NotifySettings
from app.adapters.ssh import HostConfig
from app.adapters.status import write_beat
from app.adapters.store import StoreWriter, make_private_dir, open_private
from app.adapters.termnotify import Terminals
from app.adapters.tmux import LOCAL_HOST, Tmux
from app.adapters.watchfiles import LOG_NAME, SafeFormatter, log_handler
from app.base import settings_table
from app.base.errors import AlreadyRunning, ConductorError, StoreError
from app.base.files import write_atomic
from app.base.model import Note, State, Transition
from app.base.settings import WatchSettings
from app.observe.llm import AsyncLLM, LLMClassifier
from app.observe.pack_loading import load_packs
from app.observe.packs import Pack
from app.observe.pane import Tracked
from app.run.answer_desk import AnswerDesk
from app.run.dialog_buttons import ORIGIN as BUTTONS_ORIGIN
from app.run.dialog_buttons import DialogButtons
from app.run.hosts import HostWatches, WatcherFactory
from app.run.imports import import_everything
from app.run.runner import Runner
from app.run.seen import SeenStep
from app.run.watcher import Watcher

log = logging.getLogger(__name__)

LOCK_NAME = "watch.lock"
# What a watcher whose store files changed under it wrote since it last saw them (JSON), for the
# watcher it starts in its place to write again.
REPLAY_NAME = "replay.json"


class StoreLost(ConductorError):
    """The store's files are no longer the ones the watcher's connection writes (see
    StoreWriter.verify): what it wrote since it last saw them is in ``journal``."""

    def __init__(self, problem: str, journal: list[tuple[str, tuple[Any, ...], bool]]) -> None:
        super().__init__(problem)
        self.journal = journal


def start_anew(lost: StoreLost, workers_dir: Path) -> NoReturn:
    """Replace this process with a new watcher (same pid, arguments and environment), leaving
    the lost connection unclosed: its close would checkpoint the orphaned WAL over the store."""
    write_atomic(workers_dir / REPLAY_NAME, json.dumps(lost.journal), mode=0o600)
    log.error("starting the watcher anew to reopen the store")
    logging.shutdown()
    os.execv(sys.executable, sys.orig_argv)


def _replay_left(workers_dir: Path, store: StoreWriter) -> None:
    path = workers_dir / REPLAY_NAME
    try:
        statements = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        log.error("could not read %s: %s; nothing written again", path, exc)
        path.unlink(missing_ok=True)
        return
    count = store.replay((str(sql), tuple(params), bool(once))
                         for sql, params, once in statements)
    path.unlink(missing_ok=True)
    log.info("reopened the store: wrote again %d statements the last watcher's lost connection "
             "had written", count)
# After a wake-up, wait this long (seconds) so output reported by several panes at once is
# captured in one batch.
_GATHER_S = 0.01


class InstanceLock:
    """A non-blocking exclusive ``flock`` on ``<workers>/watch.lock``, mode 0600.

    The file is never unlinked: removing it would let a second watcher lock a new inode while the
    first still holds the old one. A lock left by a killed daemon is released by the kernel.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[str] | None = None

    def open(self) -> int:
        """The lock file, opened for writing (the store folder made if need be); StoreError in
        one line when the folder cannot be used (a file, read-only, a link)."""
        try:
            make_private_dir(self.path.parent)
            return open_private(str(self.path), os.O_RDWR)
        except OSError as exc:
            raise StoreError(f"cannot use the status store folder {self.path.parent}: "
                             f"{exc.strerror or exc}") from None

    def acquire(self) -> None:
        handle = os.fdopen(self.open(), "r+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise AlreadyRunning(
                f"conductor pty watch is already running for {self.path.parent} (pid {holder})"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing drops the flock
            self._handle = None


def setup_logging(verbosity: int, workers_dir: Path | None = None) -> None:
    """stderr at the chosen verbosity; with ``workers_dir``, also ``watch.log`` there (rotated,
    at least INFO even with -q, so `conductor pty logs` shows every transition). Both redact
    secrets and drop terminal escapes (:class:`app.install.service.SafeFormatter`)."""
    level = {-1: logging.WARNING, 0: logging.INFO}.get(verbosity, logging.DEBUG)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeFormatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    handler.setLevel(level)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(min(level, logging.INFO))
    if workers_dir is not None:
        try:
            root.addHandler(log_handler(workers_dir))
        except OSError as exc:
            log.warning("no log file %s: %s", workers_dir / LOG_NAME, exc.strerror or exc)


def _start_llm(settings: LLMSettings) -> AsyncLLM | None:
    """The LLM classifier when OPENROUTER_API_KEY is set (and not switched off); else None."""
    log.info("%s", settings.status)
    if not settings.enabled:
        return None
    return AsyncLLM(LLMClassifier(LLMClient(settings)), workers=2)


def _notify_with(notifier: Notifier, host: str = LOCAL_HOST,
                 buttons: DialogButtons | None = None
                 ) -> Callable[[Transition, Tracked], None]:
    def on_transition(transition: Transition, tracked: Tracked) -> None:
        event = _event(
            tracked, previous=transition.previous, state=transition.state,
            summary=transition.verdict.summary, actions_needed=transition.verdict.actions_needed,
            ts=transition.ts, host=host, rule_id=transition.verdict.rule_id or "",
            previous_lasted_s=transition.previous_lasted_s)
        if buttons is not None:
            event = buttons.add_to(event, tracked.text)
        notifier.on_transition(event)

    return on_transition


def announce_with(notifier: Notifier, host: str = LOCAL_HOST) -> Callable[[Tracked, Note], None]:
    """What herding and the cycle call with a note about a pane: the notifier sends it to the
    same receivers as a transition, with the same pane fields."""
    def announce(tracked: Tracked, note: Note) -> None:
        a = tracked.assessment
        notifier.announce(_event(
            tracked, previous=None, state=a.state if a is not None else State.UNKNOWN,
            summary=a.summary if a is not None else "",
            actions_needed=a.actions_needed if a is not None else "", ts=time.time(), note=note,
            host=host))

    return announce


def _event(tracked: Tracked, *, previous: State | None, state: State, summary: str,
           actions_needed: str, ts: float, note: Note | None = None, host: str = LOCAL_HOST,
           rule_id: str = "", previous_lasted_s: float = 0.0) -> NotificationEvent:
    pane = tracked.pane
    return NotificationEvent(
        worker_id=tracked.worker_id, name=tracked.name, session=pane.session_name,
        window=pane.window_name, pane_id=pane.pane_id,
        cli=tracked.pack.name if tracked.pack else "", previous=previous, state=state,
        summary=summary, actions_needed=actions_needed, ts=ts, focused=pane.focused, note=note,
        host=host, rule_id=rule_id, previous_lasted_s=previous_lasted_s)


def _dialog_buttons(daemon: Daemon, store: StoreWriter, notifier: Notifier
                    ) -> DialogButtons | None:
    """Approve / Deny / Open on this machine's dialog notifications, when the settings want
    them; None (logged) when the store's link key cannot be had."""
    if not (daemon.notify or NotifySettings()).desktop_buttons:
        return None
    try:
        links = LinkKeys(daemon.workers_dir)
    except (ConductorError, OSError) as exc:
        log.warning("no buttons on desktop notifications: %s", exc)
        return None
    desk = AnswerDesk(daemon.tmux, daemon.workers_dir, daemon.settings, links,
                      daemon.link_ttl_s, writer=store, origin=BUTTONS_ORIGIN)
    return DialogButtons(desk, daemon.tmux, notifier.announce)


def _start_herd(daemon: Daemon, store: StoreWriter, packs: Mapping[str, Pack],
                llm: AsyncLLM | None, notifier: Notifier) -> HerdStep:
    """Herding for opted-in panes; its nudges and "needs you" notes are notifications."""
    return HerdStep(daemon.tmux, store, packs, daemon.herd or HerdSettings(), daemon.settings,
                    llm=llm.classifier.client if llm is not None else None,
                    announce=announce_with(notifier, daemon.tmux.host))


def _start_cycle(daemon: Daemon, store: StoreWriter, packs: Mapping[str, Pack],
                 llm: AsyncLLM | None, notifier: Notifier) -> CycleStep:
    """Queued messages and post-report cycles; "goal met?" and "needs you" are notifications."""
    return CycleStep(daemon.tmux, store, packs, daemon.cycle or CycleSettings(), daemon.settings,
                     llm=llm.classifier.client if llm is not None else None,
                     announce=announce_with(notifier, daemon.tmux.host))


def _host_watcher(daemon: Daemon, packs: Mapping[str, Pack], llm: AsyncLLM | None,
                  notifier: Notifier, terminals: Terminals) -> WatcherFactory:
    """How a host's thread builds its watcher: this machine's, with that host's tmux, the
    daemon's store writer, and its own herding and cycle steps (they type and run checks
    there)."""
    def build(tmux: Tmux, store: StoreWriter, control: ControlMode | None) -> Watcher:
        there = replace(daemon, tmux=tmux, hosts=())
        terminals.add(tmux)  # its clients hear about its panes
        steps = (_start_herd(there, store, packs, llm, notifier),
                 _start_cycle(there, store, packs, llm, notifier), SeenStep(store))
        return Watcher(tmux, store, packs, daemon.settings,
                       on_transition=_notify_with(notifier, tmux.host),
                       llm=llm, control=control, steps=steps)

    return build


@dataclass
class Daemon:
    tmux: Tmux
    workers_dir: Path
    settings: WatchSettings
    once: bool = False
    notify: NotifySettings | None = None
    llm_defaults: LLMSettings | None = None  # the config file's [llm]; the environment wins
    notes: tuple[str, ...] = ()  # logged once the watcher has started (e.g. config upgraded)
    herd: HerdSettings | None = None  # the config's [herd]; None: defaults
    cycle: CycleSettings | None = None  # the config's [cycle] and [queue]; None: defaults
    hosts: tuple[HostConfig, ...] = ()  # the config's [hosts.NAME]: each watched by its thread
    # How long a notification's Approve / Deny stays pressable: the config's serve.link_ttl.
    link_ttl_s: float = settings_table.default("serve.link_ttl", float)
    # The config file the hosts came from: read again on SIGHUP and when it changes (None: never).
    config_path: Path | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._wake = threading.Event()  # a stop, or control mode reporting output
        self._reread = threading.Event()  # SIGHUP: read the config's hosts again
        self._config_mtime = _mtime(self.config_path)

    def _on_hangup(self, signum: int, frame: FrameType | None) -> None:
        self._reread.set()
        self._wake.set()

    def reload_hosts(self, remote: HostWatches | None) -> None:
        """Read the config's [hosts.*] again when asked (SIGHUP) or when the file changed since
        last read (its mtime); a file that does not load is logged and the hosts watched stay."""
        from app.run.configfile import load_config

        mtime = _mtime(self.config_path)
        if remote is None or self.config_path is None or (
                not self._reread.is_set() and mtime == self._config_mtime):
            return
        self._reread.clear()
        self._config_mtime = mtime
        try:
            hosts = load_config(self.config_path, upgrade=False).hosts
        except ConductorError as exc:
            log.error("config file %s not reloaded, the hosts watched stay: %s",
                      self.config_path, exc)
            return
        if remote.reload(hosts):
            log.info("hosts reloaded from %s: %s", self.config_path,
                     ", ".join(h.name for h in hosts if h.enabled) or "none")

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stop.set()
        self._wake.set()

    def run(self, install_signals: bool = True) -> int:
        # Validate everything before taking the lock or touching the store: a half-configured
        # watcher is worse than none.
        for missing in import_everything():
            log.warning("could not import %s; what needs it will fail", missing)
        packs = load_packs()
        llm_settings = LLMSettings.from_env(os.environ, defaults=self.llm_defaults)
        lock = InstanceLock(self.workers_dir / LOCK_NAME)
        lock.acquire()
        store: StoreWriter | None = None
        previous: dict[signal.Signals, object] = {}
        try:
            store = StoreWriter(self.workers_dir)
            _replay_left(self.workers_dir, store)
            store.keep_journal()
            if install_signals:
                for signum in (signal.SIGTERM, signal.SIGINT):
                    previous[signum] = signal.signal(signum, self._on_signal)
                previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, self._on_hangup)
            llm = _start_llm(llm_settings)
            terminals = Terminals(self.tmux)
            buttons: DialogButtons | None = None

            def pressed(event: NotificationEvent, name: str) -> None:
                if buttons is not None:
                    buttons.pressed(event, name)

            notifier = Notifier(self.notify or NotifySettings(), self.tmux.display_message,
                                terminals=terminals, on_action=pressed,
                                action_wait_s=self.link_ttl_s)
            buttons = _dialog_buttons(self, store, notifier)
            for line in notifier.startup_report():
                log.info("%s", line)
            control = ControlMode(self.tmux, self._wake.set) \
                if self.settings.events and not self.once else None
            herd = _start_herd(self, store, packs, llm, notifier)
            cycle = _start_cycle(self, store, packs, llm, notifier)
            watcher = Watcher(self.tmux, store, packs, self.settings,
                              on_transition=_notify_with(notifier, buttons=buttons), llm=llm,
                              control=control,
                              steps=(herd, cycle, SeenStep(store)))
            with store.transaction() as conn:
                store.heartbeat(conn, pid=os.getpid(), socket=self.tmux.label,
                                interval=self.settings.interval_s, started_ts=time.time(),
                                stopped_ts=None, problem=None)
            log.info("watching tmux server %s %s; store %s (%d packs: %s)",
                     self.tmux.label,
                     f"on output (control mode), polling every {self.settings.interval_s:.1f} s "
                     "as a safety net" if control is not None
                     else f"every {self.settings.interval_s:.1f} s",
                     store.path, len(packs), ", ".join(sorted(packs)))
            for note in self.notes:
                log.info("%s", note)
            # One store writer for the process: each host's thread writes through this one.
            remote = HostWatches(self.hosts, store, self.settings,
                                 _host_watcher(self, packs, llm, notifier, terminals)) \
                if not self.once else None
            try:
                self._loop(watcher, store, notifier, remote)
            finally:
                if remote is not None:
                    remote.close()
                watcher.close()
                if control is not None:
                    control.close()
                herd.close()
                cycle.close()
                notifier.close(timeout=5.0)
                if llm is not None:
                    llm.close()
        except StoreLost:
            store = None  # never closed: see start_anew
            raise
        finally:
            if store is not None:
                try:
                    with store.transaction() as conn:
                        store.heartbeat(conn, stopped_ts=time.time(), pid=None)
                except StoreError as exc:
                    log.warning("could not record the stop: %s", exc)
                store.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)  # type: ignore[arg-type]  # what signal() returned
            lock.release()
        log.info("stopped")
        return 0

    def _loop(self, watcher: Watcher, store: StoreWriter, notifier: Notifier,
              remote: HostWatches | None = None) -> None:
        # A failing tick is tried again at least once per interval, as the full poll would be.
        Runner(_LocalPart(self, watcher, store, notifier, remote), self.settings.interval_s,
               stop=self._stop, wake=self._wake, gather_s=_GATHER_S,
               retry_cap_s=self.settings.interval_s, fatal=(StoreLost,)).run(once=self.once)


@dataclass
class _LocalPart:
    """This machine's tmux server, as the runner drives it."""

    daemon: Daemon
    watcher: Watcher
    store: StoreWriter
    notifier: Notifier
    remote: HostWatches | None = None
    server_running: bool | None = None

    def tick(self, now: float, full: bool) -> bool:
        self.daemon.reload_hosts(self.remote)
        problem = self.store.verify()
        if problem is not None:
            log.error("status store %s: %s", self.store.path, problem)
            raise StoreLost(problem, self.store.journal())
        report = self.watcher.tick(now, full=full)
        if report.full and report.server_running:
            try:
                write_beat(self.daemon.workers_dir, os.getpid(), time.time())
            except OSError as exc:
                log.warning("could not write the heartbeat file: %s", exc.strerror or exc)
        for worker_id in report.exited:
            self.notifier.forget(worker_id)  # what it remembers follows the live panes
        tmux = self.daemon.tmux
        if report.transitions or report.exited:
            try:
                tmux.refresh_status()
            except Exception as exc:  # a status line is never worth a cycle
                log.warning("could not refresh the tmux status line: %s", exc)
        if report.server_running != self.server_running:
            if not report.server_running:
                log.warning("no tmux server on socket %s; waiting for one", tmux.label)
            elif self.server_running is False:
                log.info("tmux server on socket %s is back", tmux.label)
            self.server_running = report.server_running
            try:
                with self.store.transaction() as conn:
                    self.store.heartbeat(conn, last_cycle_ts=time.time(), problem=None
                                         if report.server_running else "tmux server not running")
            except StoreError as exc:
                log.error("%s", exc)
        return report.full

    def next_due(self) -> float | None:
        return self.watcher.next_due()

    def failed(self, exc: Exception, now: float) -> bool:
        return False


def _mtime(path: Path | None) -> float | None:
    try:
        return path.stat().st_mtime if path is not None else None
    except OSError:
        return None  # no file (yet): a file that appears is a change
