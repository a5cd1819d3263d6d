"""Tell people when a pane needs them: tmux messages, desktop notifications, a user command.

The daemon calls :meth:`Notifier.on_transition` once per state transition, and
:meth:`Notifier.announce` for each note herding or the cycle has for a pane (a nudge typed,
"needs you", "goal met?"). The notifier decides (state filter, focus, rate limit) on the caller's
thread, cheaply, and hands the sending to one worker thread per receiver, so a slow or hanging
receiver never stalls the poll loop nor the other receivers. Every receiver failure is logged on
``app.adapters.notify`` and swallowed.

External programs are run from an argv list, never through a shell; a receiver that outlives
its timeout is killed together with anything it started. Every text an event carries is redacted
and cleaned of terminal escapes before any receiver sees it (:func:`safe_event`): notes quote
check commands, reports and goals, summaries quote screens.
"""

from __future__ import annotations

import contextlib
import html
import logging
import os
import queue
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from app.adapters.desktop_actions import ActionWaiter, server_capabilities
from app.adapters.notify_settings import COMMAND, DESKTOP, TERMINAL, TMUX, NotifySettings
from app.adapters.termnotify import Terminals
from app.adapters.tmux import LOCAL_HOST
from app.base.errors import ConductorError
from app.base.model import Note, State
from app.base.redact import redact
from app.base.render import clean_text

logger = logging.getLogger(__name__)

APP_NAME = "conductor"
MAC_SOUND = "Glass"

# A BUSY that no rule read off the screen is work, not a redraw, once it lasted this long (s).
TURN_MIN_S = 3.0

# What an event is about, for scripts (``CONDUCTOR_EVENT``): a transition, or a note's source.
TRANSITION = "transition"


@dataclass(frozen=True)
class NotificationEvent:
    """What a receiver needs to know about one transition of one pane, or one note about it.

    A note (``note`` set) is no transition: ``state`` is the pane's state when it was written and
    ``previous`` is None; ``summary`` and ``actions_needed`` still say what the classifier sees.
    """

    worker_id: str
    name: str
    session: str
    window: str
    pane_id: str  # tmux "%N"
    cli: str
    previous: State | None  # None: the daemon has never seen this pane before, or a note
    state: State
    summary: str = ""
    actions_needed: str = ""
    ts: float = field(default_factory=time.time)  # wall clock, seconds since the epoch
    focused: bool = False  # the pane the user is looking at
    note: Note | None = None
    host: str = LOCAL_HOST  # the tmux server's host, by its name in the config
    rule_id: str = ""  # the pack rule that read the state off the screen; "" = inferred
    previous_lasted_s: float = 0.0  # how long the pane was in ``previous``
    # Buttons for a desktop notification that can have them, (name, label): a dialog's Approve,
    # Deny and Open, each name bound to this dialog (app/run/dialog_buttons.py).
    actions: tuple[tuple[str, str], ...] = ()

    @property
    def source(self) -> str:
        """``transition``, or who wrote the note (``herd``, ``cycle``)."""
        return self.note.source if self.note is not None else TRANSITION

    @property
    def urgent(self) -> bool:
        """A person must act now: a question on screen, or a note saying so."""
        if self.note is not None:
            return self.note.urgent
        return self.state is State.NEEDS_CONFIRMATION

    @property
    def label(self) -> str:
        """Short, for our log lines: ``READY`` or ``herd max_nudges``."""
        if self.note is not None:
            return f"{self.note.source} {self.note.what}"
        return self.state.value


def _safe(text: str) -> str:
    return redact(clean_text(text))


def safe_event(event: NotificationEvent) -> NotificationEvent:
    """``event`` with every text in it redacted and cleaned of escapes and controls: what the
    notifier hands its receivers (tmux message, desktop, ``notify_command``'s environment)."""
    note = event.note
    if note is not None:
        note = replace(note, title=_safe(note.title), body=_safe(note.body))
    return replace(event, name=_safe(event.name), session=_safe(event.session),
                   window=_safe(event.window), summary=_safe(event.summary),
                   actions_needed=_safe(event.actions_needed), note=note)


@dataclass(frozen=True)
class Message:
    title: str
    body: str

    @property
    def line(self) -> str:
        """One line for places without a title (tmux status line, ``CONDUCTOR_MESSAGE``)."""
        return f"{self.title} — {self.body}" if self.body else self.title


def format_message(event: NotificationEvent) -> Message:
    """The words every receiver shows: ``api: NEEDS_CONFIRMATION — Approve: rm -rf build``, or
    for a note ``api: needs you — herd: max nudges reached (3), still stuck``.

    A transition's body is what the human must do if the classifier knows, else its summary.
    """
    who = event.name or event.worker_id
    # One line everywhere: a newline would end a tmux message and split a desktop title.
    if event.note is not None:
        return Message(title=" ".join(f"{who}: {event.note.title}".split()),
                       body=" ".join(event.note.body.split()))
    body = event.actions_needed or event.summary
    body = " ".join(body.split())
    if event.state is State.EXITED:
        # The summary says it all: "api: Claude Code exited".
        return Message(title=f"{who}: {body or 'exited'}", body="")
    title = f"{who}: {event.state.value}"
    return Message(title=title, body=body)


def event_env(event: NotificationEvent) -> dict[str, str]:
    """The ``CONDUCTOR_*`` variables a ``notify_command`` receives.

    The same set for every event, so a script reads one shape: ``CONDUCTOR_EVENT`` tells a
    transition from a herd or cycle note, ``CONDUCTOR_NOTE`` is the note's code ("" for a
    transition), and the title and body are what the desktop shows.
    """
    msg = format_message(event)
    return {
        "CONDUCTOR_EVENT": event.source,
        "CONDUCTOR_NOTE": event.note.what if event.note is not None else "",
        "CONDUCTOR_ID": event.worker_id,
        "CONDUCTOR_NAME": event.name,
        "CONDUCTOR_STATE": event.state.value,
        "CONDUCTOR_PREVIOUS_STATE": event.previous.value if event.previous else "",
        "CONDUCTOR_SUMMARY": event.summary,
        "CONDUCTOR_ACTIONS": event.actions_needed,
        "CONDUCTOR_SESSION": event.session,
        "CONDUCTOR_WINDOW": event.window,
        "CONDUCTOR_PANE": event.pane_id,
        "CONDUCTOR_CLI": event.cli,
        "CONDUCTOR_TS": f"{event.ts:.3f}",
        "CONDUCTOR_TITLE": msg.title,
        "CONDUCTOR_BODY": msg.body,
        "CONDUCTOR_URGENCY": _urgency(event),
        "CONDUCTOR_MESSAGE": msg.line,
    }


def _urgency(event: NotificationEvent) -> str:
    return "critical" if event.urgent else "normal"


def run_program(
    argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None
) -> None:
    """Run ``argv`` without a shell; log (never raise) a missing program, a non-zero exit or a hang.

    The child gets its own process group so that on timeout we kill whatever it started too
    (``sh -c 'sleep 60'`` would otherwise leave the sleep behind).
    """
    what = shlex.join(argv)
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    except OSError as e:
        logger.warning("notification command %s could not start: %s", what, e)
        return
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        logger.warning("notification command %s killed after %.1f s timeout", what, timeout)
        return
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        logger.warning(
            "notification command %s exited %d%s",
            what,
            proc.returncode,
            f": {' | '.join(tail)}" if tail else "",
        )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except OSError:
        proc.kill()
    # Bounded: after SIGKILL only a process stuck in the kernel could make these wait.
    try:
        proc.communicate(timeout=1.0)
    except subprocess.TimeoutExpired:
        logger.warning("notification command pid %d did not die after SIGKILL", proc.pid)


@dataclass(frozen=True)
class Receiver:
    """One way of telling: ``send`` does the work (on a worker thread) and may block until the
    settings' timeout; ``unavailable`` says why it is off, or is empty when it can run."""

    kind: str
    send: Callable[[NotificationEvent], None]
    unavailable: str = ""


def tmux_receiver(tmux_message: Callable[[str], None] | None) -> Receiver:
    if tmux_message is None:
        return Receiver(TMUX, _no_send, "tmux messages off: no tmux server to display them on")

    def send(event: NotificationEvent) -> None:
        tmux_message(format_message(event).line)

    return Receiver(TMUX, send)


def desktop_argv(event: NotificationEvent, platform: str, sound: bool = False,
                 markup: bool = False) -> list[str]:
    """The argv showing ``event`` as a desktop notification on ``platform`` (``sys.platform``),
    with the platform's notification sound when ``sound`` (a hint: the server may not play it)
    and asking for silence otherwise. ``markup``: the server reads markup in the body, so the
    body's ``<``, ``>`` and ``&`` are escaped (a pane's text is shown, never made a link)."""
    msg = format_message(event)
    if markup and platform != "darwin":
        msg = Message(msg.title, html.escape(msg.body, quote=False))
    if platform == "darwin":
        # Title and body travel as arguments of the script's run handler, so no text of ours is
        # ever parsed as AppleScript: nothing to escape, nothing to inject.
        shown = "display notification (item 2 of argv) with title (item 1 of argv)"
        return [
            "osascript",
            "-e",
            "on run argv",
            "-e",
            f'{shown} sound name "{MAC_SOUND}"' if sound else shown,
            "-e",
            "end run",
            msg.title,
            msg.body,
        ]
    # The freedesktop sound names: a question asks, a finished turn is complete.
    hint = (f"--hint=string:sound-name:{'dialog-question' if event.urgent else 'complete'}"
            if sound else "--hint=boolean:suppress-sound:true")
    # "--" so a summary starting with "-" is never read as an option.
    return [
        "notify-send",
        f"--app-name={APP_NAME}",
        f"--urgency={_urgency(event)}",
        hint,
        "--",
        msg.title,
        msg.body,
    ]


def session_bus_missing(env: Mapping[str, str]) -> bool:
    """True when notify-send could not reach any D-Bus session bus (a daemon on an SSH box).

    libnotify finds the bus from DBUS_SESSION_BUS_ADDRESS, else the systemd user bus socket
    $XDG_RUNTIME_DIR/bus, else it autolaunches one for an X display.
    """
    if env.get("DBUS_SESSION_BUS_ADDRESS") or env.get("DISPLAY"):
        return False
    runtime = env.get("XDG_RUNTIME_DIR")
    return not (runtime and Path(runtime, "bus").exists())


def desktop_receiver(
    timeout: float,
    platform: str = sys.platform,
    which: Callable[[str], str | None] = shutil.which,
    env: Mapping[str, str] | None = None,
    sounds: NotifySettings | None = None,
    buttons: tuple[ActionWaiter, Callable[[NotificationEvent, str], None]] | None = None,
) -> Receiver:
    """notify-send on Linux and the BSDs, osascript on macOS; off, with the reason, when neither
    can work here, so a headless daemon does not log one failure per transition."""
    program = "osascript" if platform == "darwin" else "notify-send"
    path = which(program)
    if path is None:
        return Receiver(
            DESKTOP, _no_send, "desktop notifications off: neither notify-send nor osascript found"
        )
    if program == "notify-send" and session_bus_missing(os.environ if env is None else env):
        return Receiver(
            DESKTOP,
            _no_send,
            "desktop notifications off: no D-Bus session bus "
            "(DBUS_SESSION_BUS_ADDRESS, $XDG_RUNTIME_DIR/bus and DISPLAY all missing)",
        )

    markup: list[bool] = []  # asked of the server once, at the first notification

    def send(event: NotificationEvent) -> None:
        sound = sounds is not None and sounds.sound_for(event.urgent)
        if not markup:
            markup.append(program == "notify-send" and "body-markup" in server_capabilities(env))
        argv = [path, *desktop_argv(event, platform, sound=sound, markup=markup[0])[1:]]
        if buttons is not None and event.actions and platform != "darwin":
            waiter, on_action = buttons
            if waiter.show(argv, event.actions, lambda name: on_action(event, name)):
                return
        run_program(argv, timeout=timeout)

    return Receiver(DESKTOP, send)


def command_receiver(
    argv: Sequence[str], timeout: float, which: Callable[[str], str | None] = shutil.which
) -> Receiver | None:
    """None when no ``notify_command`` is set: nothing to run, and nothing worth reporting."""
    if not argv:
        return None
    if which(argv[0]) is None:
        return Receiver(
            COMMAND, _no_send, f"notify_command off: {argv[0]!r} not found or not executable"
        )
    program = tuple(argv)

    def send(event: NotificationEvent) -> None:
        run_program(program, timeout=timeout, env={**os.environ, **event_env(event)})

    return Receiver(COMMAND, send)


def terminal_receiver(terminals: Terminals | None, settings: NotifySettings) -> Receiver:
    """OSC 9/99/777 (and BEL for a sound) to the terminals of the clients attached to the
    pane's session, on the pane's own host."""
    if terminals is None:
        return Receiver(TERMINAL, _no_send,
                        "terminal notifications off: no tmux server to find clients on")

    def send(event: NotificationEvent) -> None:
        msg = format_message(event)
        terminals.tell(event.host, event.pane_id, msg.title, msg.body,
                       bell=settings.sound_for(event.urgent), timeout=settings.timeout)

    return Receiver(TERMINAL, send)


def _no_send(event: NotificationEvent) -> None:
    return None


_STOP = object()


class _Channel:
    """A receiver with its own bounded queue and worker thread."""

    def __init__(self, receiver: Receiver, queue_size: int) -> None:
        self.receiver = receiver
        self.queue: queue.Queue[object] = queue.Queue(maxsize=queue_size)
        self.thread = threading.Thread(
            target=self._run, name=f"notify-{receiver.kind}", daemon=True
        )
        self.thread.start()

    def offer(self, event: NotificationEvent) -> None:
        try:
            self.queue.put_nowait(event)
        except queue.Full:
            logger.warning(
                "%s notifications backed up (%d waiting): dropped %s -> %s",
                self.receiver.kind,
                self.queue.maxsize,
                event.worker_id,
                event.label,
            )

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is _STOP:
                return
            assert isinstance(item, NotificationEvent)
            try:
                self.receiver.send(item)
            except ConductorError as e:
                # Our own errors carry a readable line (e.g. tmux did not answer); no traceback.
                logger.warning(
                    "%s notification for %s failed: %s", self.receiver.kind, item.worker_id, e
                )
            except Exception:
                # A receiver bug must cost one notification, never the thread.
                logger.exception(
                    "%s notification for %s failed", self.receiver.kind, item.worker_id
                )
            else:
                logger.debug(
                    "%s notification sent for %s -> %s",
                    self.receiver.kind,
                    item.worker_id,
                    item.label,
                )


class Notifier:
    """Decides which transitions deserve a notification and sends them without blocking; notes
    from herding and the cycle go out the same way (:meth:`announce`).

    ``tmux_message(text)`` shows ``text`` literally on the watched tmux server (the caller owns
    tmux and its escaping); ``None`` turns tmux messages off. ``clock`` is monotonic seconds, for
    the rate limit. ``receivers`` replaces the built-in ones (tests, other platforms).
    """

    def __init__(
        self,
        settings: NotifySettings,
        tmux_message: Callable[[str], None] | None,
        clock: Callable[[], float] = time.monotonic,
        *,
        receivers: Collection[Receiver] | None = None,
        terminals: Terminals | None = None,
        on_action: Callable[[NotificationEvent, str], None] | None = None,
        action_wait_s: float = 600.0,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._waiter = ActionWaiter(action_wait_s) \
            if on_action is not None and settings.desktop_buttons else None
        if receivers is None:
            built = [
                tmux_receiver(tmux_message),
                desktop_receiver(settings.timeout, sounds=settings,
                                 buttons=(self._waiter, on_action)
                                 if self._waiter is not None and on_action is not None
                                 else None),
                command_receiver(settings.notify_command, settings.timeout),
                terminal_receiver(terminals, settings),
            ]
            receivers = [r for r in built if r is not None]
        self._receivers = [r for r in receivers if r.kind in settings.kinds]
        self._channels = [
            _Channel(r, settings.queue_size) for r in self._receivers if not r.unavailable
        ]
        # Decided once per event, not per kind, so the rate limit stays per pane and state.
        self._wanted: frozenset[State] = frozenset().union(
            *(settings.states_for(r.kind) for r in self._receivers)
        )
        self._lock = threading.Lock()
        self._last_transition: dict[str, tuple[State | None, State, float]] = {}
        self._last_sent: dict[tuple[str, State], float] = {}
        self._last_note: dict[tuple[str, str, str], float] = {}  # (pane, title, body) -> sent
        # What each pane's current turn has already had its say about: its end (READY) and the
        # dialogs it showed, by their words; a BUSY (a new turn) forgets both.
        self._turn_ended: set[str] = set()
        self._dialogs: dict[str, set[str]] = {}
        self._closed = False

    def startup_report(self) -> list[str]:
        """One line per enabled receiver that cannot run here, for the daemon to log once."""
        return [r.unavailable for r in self._receivers if r.unavailable]

    @property
    def active_kinds(self) -> list[str]:
        return [c.receiver.kind for c in self._channels]

    def should_notify(self, event: NotificationEvent) -> tuple[bool, str]:
        """Decide, and record the decision; returns (send?, reason) for the log.

        Not idempotent: a positive answer starts the pane's rate-limit window.
        """
        with self._lock:
            if event.previous == event.state:
                return False, "no_transition"
            # The same transition handed over twice (a retried tick) still notifies once.
            seen = (event.previous, event.state, event.ts)
            if self._last_transition.get(event.worker_id) == seen:
                return False, "duplicate"
            self._last_transition[event.worker_id] = seen
            repeat = self._said_in_this_turn(event)
            if event.state not in self._wanted:
                return False, "state_not_notified"
            if event.previous is None and event.state is State.READY:
                # First sight of a pane (daemon start): every idle pane would ping at once.
                # A question or an error is news even then.
                return False, "first_sight"
            if repeat:
                return False, repeat
            if self.settings.skip_focused and event.focused:
                return False, "focused"
            now = self._clock()
            key = (event.worker_id, event.state)
            sent = self._last_sent.get(key)
            if sent is not None and now - sent < self.settings.min_interval:
                return False, "rate_limited"
            self._last_sent[key] = now
            return True, "notify"

    def _said_in_this_turn(self, event: NotificationEvent) -> str:
        """Why ``event`` repeats what this turn of the pane already told ("" when it does not),
        remembering it either way; caller holds the lock.

        A screen redrawn or resized, or read differently for a tick, leaves its state and comes
        back to it without the agent doing anything: the same turn's end, the same dialog. Only
        work starts a new turn, and the same question asked after it is a new question. Work is
        a BUSY the screen showed (a rule read it: "esc to interrupt"), or one that went on for
        ``TURN_MIN_S``: a dialog that is redrawn reads as BUSY too ("the screen is changing"),
        for a tick. A dialog is known by its words without any whitespace, which a narrower
        window wraps elsewhere.
        """
        pane = event.worker_id
        worked = (event.state is State.BUSY and bool(event.rule_id)) or (
            event.previous is State.BUSY and event.previous_lasted_s >= TURN_MIN_S)
        if worked:
            self._turn_ended.discard(pane)
            self._dialogs.pop(pane, None)
        if event.state is State.READY:
            if pane in self._turn_ended:
                return "same_turn"
            self._turn_ended.add(pane)
        elif event.state is State.NEEDS_CONFIRMATION:
            words = "".join((event.actions_needed or event.summary).split())
            asked = self._dialogs.setdefault(pane, set())
            if words in asked:
                return "same_dialog"
            asked.add(words)
        return ""

    def forget(self, worker_id: str) -> None:
        """Drop what is remembered about a pane that is gone, so memory follows live panes."""
        with self._lock:
            self._last_transition.pop(worker_id, None)
            self._turn_ended.discard(worker_id)
            self._dialogs.pop(worker_id, None)
            for key in [k for k in self._last_sent if k[0] == worker_id]:
                del self._last_sent[key]
            for note_key in [k for k in self._last_note if k[0] == worker_id]:
                del self._last_note[note_key]

    def on_transition(self, event: NotificationEvent) -> None:
        """Called by the daemon for each transition; returns at once, never raises."""
        self._send(event, self.should_notify,
                   lambda kind: event.state in self.settings.states_for(kind))

    def should_announce(self, event: NotificationEvent) -> tuple[bool, str]:
        """Decide about a note, and record the decision; returns (send?, reason) for the log.

        Notes are not transitions: they go to every enabled kind whatever its ``states``, and
        the per-pane-and-state rate limit does not apply (a "needs you" right after a READY
        must go out; herding's cooldown and max_nudges already bound the nudges). Only the very
        same words for the same pane inside ``min_interval`` are dropped, so a decision that
        flaps back and forth cannot ping on every tick.
        """
        with self._lock:
            if event.note is None:
                return False, "not_a_note"
            if self.settings.skip_focused and event.focused:
                return False, "focused"
            msg = format_message(event)
            now = self._clock()
            key = (event.worker_id, msg.title, msg.body)
            sent = self._last_note.get(key)
            if sent is not None and now - sent < self.settings.min_interval:
                return False, "repeated"
            self._last_note[key] = now
            return True, "notify"

    def announce(self, event: NotificationEvent) -> None:
        """Send a herd or cycle note (``event.note``); returns at once, never raises."""
        self._send(event, self.should_announce, lambda kind: True)

    def _send(
        self,
        event: NotificationEvent,
        decide: Callable[[NotificationEvent], tuple[bool, str]],
        wanted_by: Callable[[str], bool],
    ) -> None:
        try:
            if self._closed:
                logger.debug("notifier closed: ignored %s %s", event.worker_id, event.label)
                return
            event = safe_event(event)
            ok, reason = decide(event)
            if not ok:
                logger.debug(
                    "no notification for %s %s: %s", event.worker_id, event.label, reason
                )
                return
            for channel in self._channels:
                if wanted_by(channel.receiver.kind):
                    channel.offer(event)
        except Exception:
            # The caller is the poll loop: a notification is never worth a tick.
            logger.exception("notification for %s failed", event.worker_id)

    def close(self, timeout: float = 10.0) -> bool:
        """Deliver what is queued, then stop the workers; True if all stopped within ``timeout``.

        Workers are daemon threads, so one still stuck past the timeout cannot keep the process
        alive.
        """
        self._closed = True
        if self._waiter is not None:
            self._waiter.close()
        deadline = time.monotonic() + timeout
        for channel in self._channels:
            with contextlib.suppress(queue.Full):
                channel.queue.put(_STOP, timeout=max(0.0, deadline - time.monotonic()))
        for channel in self._channels:
            channel.thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [c.receiver.kind for c in self._channels if c.thread.is_alive()]
        if stuck:
            logger.warning("notifier closed with %s still sending", ", ".join(stuck))
        return not stuck
