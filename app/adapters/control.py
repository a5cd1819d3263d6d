"""Control mode: one ``tmux -C`` client per session, and the hook bell.

A control-mode client (``tmux -C attach``) is told of every byte a pane of its session prints
(``%output``) and of sessions and windows coming and going. We need to know *that* a pane
printed (reported once until the watcher captures it), *when it went quiet* (a frame drawn in
full: the moment to capture it), and the terminal signals in its output. A pane that floods
(more than _FLOOD_BYTES before its next capture) is paused for our client until the watcher
continues it just before capturing: it costs one line per capture however much it prints, and
other clients are not affected (pausing is per client).

libtmux has no parser for this protocol; the few lines we need are parsed here. Everything
else said to tmux goes through app.adapters.tmux.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import select
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from app.adapters import hookmark
from app.adapters.stray_clients import StrayClients
from app.adapters.tmux import PANE_ID, Tmux, tmux_version
from app.base.termsignals import TITLE, SignalScanner, TermSignal

log = logging.getLogger(__name__)

# tmux 3.2 brought client flags (-f) and pausing panes (refresh-client -A).
CONTROL_MIN_VERSION = (3, 2)
# ignore-size: our clients must never shrink the user's windows; read-only: they type nothing.
CONTROL_FLAGS = "ignore-size,read-only"
_OCTAL = re.compile(rb"\\([0-3][0-7]{2})")
# Notifications after which the set of panes (or which sessions we follow) may differ.
_STRUCTURE = frozenset({
    "sessions-changed", "session-changed", "window-add", "window-close", "unlinked-window-add",
    "unlinked-window-close", "layout-change", "client-session-changed", "exit",
})
# A client that failed before it was attached is not tried again for this long (seconds).
_RETRY_S = 30.0
# ESC ] (an OSC) and BEL as %output escapes them: output holding neither carries no signal.
_SIGNAL_MARKS = (b"\\033]", b"\\007")
# Signals kept per pane between two takes; a pane that sends more keeps the newest.
_SIGNALS_KEPT = 64
_HOOK_SUBSCRIPTION = "conductor-hook"
_READ_SIZE = 1 << 16
# How long (seconds) the reader lets output gather between two reads while panes print nonstop
# and nothing else comes: each read wakes this thread, and its wake-ups were most of what a
# stream cost us. A stream's end is known this much later at most (its quiet is timed from the
# read that brought its last output).
_READ_GATHER_S = 0.1
# Output a pane may send between two captures before our client pauses it (escaped bytes).
_FLOOD_BYTES = 16384
# How often (seconds) our client asks tmux for the title of each pane it paused: a paused pane's
# title changes never reach us as output, and Gemini CLI and Qwen Code, which flood while they
# stream, tell the end of their turn by their title (design/signals.md). One command line per
# client for all its paused panes; only a title that changed is reported.
_TITLE_PROBE_S = 0.1
# What the probe's reply lines start with (command output, inside a %begin/%end block), before
# a token of the client's own: a title that holds a newline (tmux before 3.3 keeps it) cannot
# start a reply of its own for another pane.
_TITLE_PROBE_MARK = "conductor-title"
# A pane that printed nothing for this long (seconds) has finished drawing its frame; longer
# than the frame interval of the agents' spinners (about 0.1 s), so a spinner is never quiet.
QUIET_S = 0.15
_FLOODED = float("inf")  # the last output of a pane paused for flooding: never quiet
# A hook waiter whose tmux call failed (no server) tries again after this long (seconds).
_HOOK_RETRY_S = 2.0


def _news(signal: TermSignal) -> bool:
    """A signal worth waking the watcher for: anything but a title that starts with a braille
    spinner frame (agents turn one ten times a second while they work; design/signals.md)."""
    return not (signal.kind == TITLE and signal.text[:1] and "\u2800" <= signal.text[0] <= "\u28ff")


def output_signals(scanner: SignalScanner, value: bytes) -> list[TermSignal]:
    """The terminal signals (titles, progress, bells, notifications) in one ``%output`` value,
    still escaped as tmux sends it; ``scanner`` joins a sequence split between two values."""
    if _SIGNAL_MARKS[0] not in value and _SIGNAL_MARKS[1] not in value and not scanner.pending:
        return []
    return scanner.feed(decode_output(value))


# The pane option a hook on another host sets ("CLI EVENT [s=ID t=PATH] NONCE EPOCH";
# app.install.remote_hooks): the same option a local hook marks (app.adapters.hookmark), but with
# the event itself in it, since nothing of ours runs there to record it. Watched with a
# subscription of its own, reported with the server's pid and the time our client attached
# (that host's clock) in front.
HOOK_OPTION = "@conductor-hook"
HOOK_SUBSCRIPTION_NAME = "conductor-remote-hook"
HOOK_SUBSCRIPTION = (f"{HOOK_SUBSCRIPTION_NAME}:%*:#{{pid}} #{{client_created}} "
                     f"#{{{HOOK_OPTION}}}")
# tmux checks subscriptions once a second: what it reports this soon after attaching is the
# state of things then.
_HOOK_BASELINE_S = 2.5
# A hook's stamp and our client's creation are read off the same host's clock, in whole seconds.
_HOOK_CLOCK_SLACK_S = 1


def _decimal(text: str) -> bool:
    return text.isascii() and text.isdecimal()


@dataclass(frozen=True)
class Notification:
    """One ``%name arg...`` line of control-mode output; ``value`` is the still escaped data of
    ``%output`` and ``%extended-output``."""

    name: str
    args: tuple[str, ...] = ()
    value: bytes = b""

    @property
    def pane_id(self) -> str | None:
        """The pane a pane notification is about, when it names a valid one."""
        if self.name in ("output", "extended-output", "pause", "continue", "pane-mode-changed") \
                and self.args and PANE_ID.fullmatch(self.args[0]):
            return self.args[0]
        if self.name == "subscription-changed" and len(self.args) >= 5 \
                and PANE_ID.fullmatch(self.args[4]):
            return self.args[4]  # name $session @window index %pane ... : value
        return None


def parse_notification(line: bytes) -> Notification | None:
    """One line of control-mode output; None for anything that is not a notification (command
    output inside ``%begin``/``%end`` blocks, blank lines). Never raises on odd bytes."""
    line = line.rstrip(b"\r\n")
    if not line.startswith(b"%") or len(line) < 2:
        return None
    head, _, rest = line.partition(b" ")
    name = head[1:].decode("ascii", "replace")
    if name == "output":
        pane, _, value = rest.partition(b" ")
        return Notification(name, (pane.decode("ascii", "replace"),), value)
    if name in ("extended-output", "subscription-changed"):
        # %extended-output pane-id age ... : value (arguments up to " : " are for the future);
        # %subscription-changed name $session @window index %pane ... : value
        before, _, value = rest.partition(b" : ")
        return Notification(name, tuple(before.decode("ascii", "replace").split()), value)
    return Notification(name, tuple(rest.decode("utf-8", "replace").split()))


def decode_output(value: bytes) -> bytes:
    """The bytes a pane printed: tmux writes control characters and backslash as octal
    ``\\ooo``; anything else (including a stray backslash) is taken as it is."""
    return _OCTAL.sub(lambda m: bytes((int(m.group(1), 8),)), value)


class ControlClient:
    """One ``tmux -C attach`` on one session, read by its own thread."""

    def __init__(self, tmux: Tmux, session_id: str, owner: ControlMode) -> None:
        self.session_id = session_id
        self.owner = owner
        self.started = time.monotonic()
        self.attached = False  # tmux said which session we are in: output flows from now on
        self.alive = True
        self._paused: set[str] = set()
        self._reported: set[str] = set()  # told the watcher; again only after resume()
        self._sent: dict[str, int] = {}  # escaped bytes since the last resume()
        self._scanners: dict[str, SignalScanner] = {}
        self._titles: dict[str, str] = {}  # the last title heard per pane (output or probe)
        self._probe_at = 0.0  # monotonic: when the paused panes' titles are asked for next
        self._title_mark = f"{_TITLE_PROBE_MARK}-{secrets.token_hex(6)} ".encode()
        # Over ssh: the client's pid on the host, asked for once attached (stray_clients).
        self._pid_mark = f"conductor-client-pid-{secrets.token_hex(6)} ".encode()
        self.remote_pid: int | None = None
        self._remote = tmux.via is not None
        self._in_reply = False  # between %begin and %end: a command's output
        self._write_lock = threading.Lock()
        env = dict(os.environ)
        env.pop("TMUX", None)
        self.proc = subprocess.Popen(
            tmux._argv(["-C", "attach-session", "-f", CONTROL_FLAGS, "-t", session_id]),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            # Its own process group: a Ctrl-C meant for the watcher must not kill it first.
            start_new_session=True,
        )
        self._thread = threading.Thread(target=self._read, name=f"tmux-control-{session_id}",
                                        daemon=True)
        self._hooks_seen: dict[str, str] = {}
        # Once attached, we ask tmux to tell us when a pane's hook option changes (tmux >= 3.2
        # checks once a second): a local hook's mark (app.adapters.hookmark), the way a hook
        # whose wait-for channel nobody follows still reaches us; and on another host, where
        # nothing of ours runs, the hook's event itself.
        self._subscriptions = [f"{_HOOK_SUBSCRIPTION}:%*:#{{{hookmark.OPTION}}}"]
        if tmux.via is not None:
            self._subscriptions.append(HOOK_SUBSCRIPTION)
        self._subscribed_at = 0.0
        self._thread.start()

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        fd = stdout.fileno()
        partial = b""
        try:
            while True:
                # Until output comes, a pane that printed goes quiet, or paused panes' titles
                # are due a look.
                ready, _, _ = select.select([fd], [], [], self._wait_for())
                streaming = False
                if ready:
                    chunk = os.read(fd, _READ_SIZE)
                    if not chunk:
                        break
                    lines = (partial + chunk).split(b"\n")
                    partial = lines.pop()
                    streaming = self._handle_batch(lines)
                self.owner._tell_quiet()
                self._probe_titles()
                if streaming:
                    # Panes printing nonstop send a line each every few ms: take them in
                    # batches (one wake-up of this thread per batch, not per line). Anything
                    # else (a pane's first output, a window come or gone) is read at once.
                    time.sleep(_READ_GATHER_S)
        except (OSError, ValueError) as exc:
            log.debug("control client %s: read failed: %s", self.session_id, exc)
        finally:
            self.alive = False
            self.owner._on_lost(self)

    def _handle_batch(self, lines: list[bytes]) -> bool:
        """Lines read together. More output of a pane already reported, holding no signal and
        no flood, only moves its clock: it takes the quick way, once per batch; anything else
        is handled line by line. True when every line was of the first kind."""
        busy: set[str] = set()
        plain = True
        for line in lines:
            pane = ""
            if line.startswith(b"%output %"):
                head, _, value = line[8:].partition(b" ")
                pane = head.decode("ascii", "replace")
                sent = self._sent.get(pane, 0) + len(value)
                if pane in self._reported and sent <= _FLOOD_BYTES \
                        and b"\\033]" not in value and b"\\007" not in value \
                        and not (pane in self._scanners and self._scanners[pane].pending):
                    self._sent[pane] = sent
                    busy.add(pane)
                    continue
            # A flooding pane's output is streaming too; anything else is news to read at once.
            plain = plain and pane in self._paused
            try:
                self._handle(line)
            except Exception:  # one odd line must never end the client
                log.exception("control client %s: cannot handle %r", self.session_id,
                              line[:200])
        if busy:
            self.owner._on_more_output(busy)
        return plain and bool(busy)

    def _wait_for(self) -> float | None:
        """Seconds the reader may wait for output (None: until some comes)."""
        wait = self.owner._quiet_in()
        if self._paused:
            probe = max(0.0, self._probe_at - time.monotonic())
            wait = probe if wait is None else min(wait, probe)
        return wait

    def _probe_titles(self) -> None:
        """Ask tmux for the titles of the panes we paused, when due (replies: _took_title)."""
        now = time.monotonic()
        if not self._paused or now < self._probe_at:
            return
        self._probe_at = now + _TITLE_PROBE_S
        with self._write_lock:
            paused = sorted(self._paused)
        mark = self._title_mark.decode()
        self._write(" ; ".join(f"display-message -p -t '{p}' '{mark}{p} #{{pane_title}}'"
                               for p in paused))

    def _took_title(self, line: bytes) -> None:
        """A probe's reply, ``conductor-title %P TITLE``: the title, if it changed, as a
        signal of the pane (as tmux holds it, like a capture's)."""
        head, _, title = line[len(self._title_mark):].partition(b" ")
        pane = head.decode("ascii", "replace")
        if not PANE_ID.fullmatch(pane):
            return
        text = title.decode("utf-8", "replace")
        if self._titles.get(pane) != text:
            self._titles[pane] = text
            self.owner._on_title(pane, TermSignal(TITLE, text))

    def _handle(self, line: bytes) -> None:
        if line.startswith((b"%begin ", b"%end ", b"%error ")):
            self._in_reply = line.startswith(b"%begin ")
            return
        if self._in_reply:
            if line.startswith(self._title_mark):
                self._took_title(line)
            elif line.startswith(self._pid_mark) and line[len(self._pid_mark):].isdigit():
                self.remote_pid = int(line[len(self._pid_mark):])
            return
        note = parse_notification(line)
        if note is None:
            return
        pane = note.pane_id
        if note.name in ("output", "extended-output", "pause", "pane-mode-changed"):
            if pane is None:
                return
            with self._write_lock:
                fresh = pane not in self._reported
                self._reported.add(pane)
                sent = self._sent[pane] = self._sent.get(pane, 0) + len(note.value)
                flood = note.name == "pause" or sent > _FLOOD_BYTES
                pause = flood and pane not in self._paused
                if flood:
                    self._paused.add(pane)
            if pause and note.name != "pause":
                self._write(f"refresh-client -A '{pane}:pause'")
            signals = output_signals(self._scanners.setdefault(pane, SignalScanner()),
                                     note.value) if note.value else []
            for signal in signals:
                if signal.kind == TITLE:
                    self._titles[pane] = signal.text
            self.owner._on_output(pane, signals, fresh, flood)
        elif note.name == "subscription-changed" and note.args[:1] == (_HOOK_SUBSCRIPTION,):
            mark = hookmark.parse_mark(note.value.decode("utf-8", "replace"))
            if pane is not None and mark is not None:
                self.owner._on_hook(pane, mark)
        elif note.name == "subscription-changed":
            self._remote_hook_changed(note.args, note.value.decode("utf-8", "replace"))
        elif note.name in _STRUCTURE:
            if note.name == "session-changed":
                self.attached = True
                if self._remote and self.remote_pid is None:
                    self._write(f"display-message -p '{self._pid_mark.decode()}#{{client_pid}}'")
                if self._subscriptions:
                    # Asked before the attach is done, tmux may drop them.
                    subscriptions, self._subscriptions = self._subscriptions, []
                    self._subscribed_at = time.monotonic()
                    for subscription in subscriptions:
                        self._write(f"refresh-client -B '{subscription}'")
            self.owner._on_change()

    def _remote_hook_changed(self, args: tuple[str, ...], value: str) -> None:
        """``%subscription-changed NAME $S @W IDX %P ... : PID CREATED VALUE``: a remote pane's
        hook option moved. A value the hook stamped (its host's clock, as is CREATED, when our
        client attached) is news when it was set since we attached; an older one is where
        things stood. Without a stamp, the first check's values are taken as where things
        stood, and a pane first seen later is new."""
        if len(args) < 5 or args[0] != HOOK_SUBSCRIPTION_NAME or not PANE_ID.fullmatch(args[4]):
            return
        pane = args[4]
        pid, _, rest = value.strip().partition(" ")
        created, _, hook = rest.partition(" ")
        value = " ".join([pid, *hook.split()])
        previous = self._hooks_seen.get(pane)
        self._hooks_seen[pane] = value
        if value == previous or not hook.strip():
            return
        stamp = hook.split()[-1]
        # The host writes these: ASCII digits only ("²".isdigit() is true, int() refuses it).
        if _decimal(stamp) and _decimal(created) and len(hook.split()) >= 4:
            news = int(stamp) >= int(created) - _HOOK_CLOCK_SLACK_S
        else:
            news = previous is not None or \
                time.monotonic() - self._subscribed_at >= _HOOK_BASELINE_S
        if news:
            self.owner._on_remote_hook(pane, value)

    def resume(self, pane_ids: Collection[str]) -> None:
        """Continue output of those panes we paused, so their next output is reported again."""
        with self._write_lock:
            paused = [p for p in pane_ids if p in self._paused]
            self._paused.difference_update(paused)
            self._reported.difference_update(pane_ids)
            for pane in pane_ids:
                self._sent.pop(pane, None)
        for pane in paused:
            # What it printed while paused never reached us: no sequence runs across the gap.
            self._scanners.pop(pane, None)
        if paused:
            self._write("refresh-client " + " ".join(f"-A '{p}:continue'" for p in paused))

    def _write(self, command: str) -> None:
        stdin = self.proc.stdin
        if stdin is None:
            return
        try:
            with self._write_lock:
                stdin.write(command.encode() + b"\n")
                stdin.flush()
        except (OSError, ValueError):
            pass  # the client is gone; the reader thread reports it

    def close(self) -> None:
        self.alive = False
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # a control client exits at the end of its input
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ControlMode:
    """Control-mode clients for every session of one tmux server, and what they reported.

    The watcher calls :meth:`follow` with the sessions of each full poll (new sessions get a
    client, a client whose session or server went away is reaped), :meth:`take` for the panes
    that printed since, and :meth:`resume` just before capturing them. ``wake`` is called from
    the client threads whenever there is something to take.
    """

    def __init__(self, tmux: Tmux, wake: Callable[[], None] = lambda: None) -> None:
        self.tmux = tmux
        self.wake = wake
        self._lock = threading.Lock()
        self._clients: dict[str, ControlClient] = {}
        self._dirty: dict[str, float] = {}
        # Pane id -> when (epoch seconds) its last output arrived, while it awaits a capture;
        # inf for a pane paused for flooding (its quiet cannot be known).
        self._last_output: dict[str, float] = {}
        self._unquiet: set[str] = set()  # reported, not yet told quiet
        # Pane id -> when (monotonic) it was resumed, for panes the watcher captured while they
        # printed nonstop: their first output after that is no news when it comes within
        # QUIET_S (the stream goes on; the watcher comes back for it at its streaming pace).
        self._streams: dict[str, float] = {}
        self._signals: dict[str, list[tuple[float, TermSignal]]] = {}
        self._marks: dict[str, tuple[float, str]] = {}
        self._bell: HookBell | None = None
        self._changed_flag = False
        self._hooks: list[tuple[str, str, float]] = []
        self._retry_at: dict[str, float] = {}
        self.available: bool | None = None  # None: not checked yet
        # At most this many clients (None: one per session); over ssh each is a session of
        # sshd's MaxSessions.
        self.max_clients: int | None = None
        self.problem = ""
        self.strays = StrayClients()  # over ssh: clients that ended, to be sure they did

    def _check_version(self) -> bool:
        if self.available is None:
            text = self.tmux.version_text()
            version = tmux_version(text)
            self.available = version is None or version >= CONTROL_MIN_VERSION
            if not self.available:
                self.problem = f"{text.strip()} is older than 3.2: polling only"
                log.warning("control mode off: %s", self.problem)
        return self.available

    def follow(self, session_ids: Collection[str]) -> None:
        """Have one live client per session in ``session_ids`` and none for any other."""
        if not self._check_version():
            return
        # Not over ssh: no hook rings the channel there (app.install.remote_hooks sets a pane
        # option instead), and a remote `tmux wait-for` outlives the ssh client killed to end it.
        if self._bell is None and self.tmux.via is None:
            self._bell = HookBell(self.tmux, self.wake)
        now = time.monotonic()
        wanted = {s for s in session_ids if s.startswith("$")}
        with self._lock:
            stale = [c for s, c in self._clients.items() if s not in wanted or not c.alive]
            for client in stale:
                del self._clients[client.session_id]
                if not client.attached:
                    self._retry_at[client.session_id] = now + _RETRY_S
            missing = [s for s in wanted - self._clients.keys()
                       if self._retry_at.get(s, 0.0) <= now]
            if self.max_clients is not None:  # the rest of the sessions are polled
                missing = sorted(missing)[:max(0, self.max_clients - len(self._clients))]
        for client in stale:
            client.close()
        if self.tmux.via is not None and self.strays.pending():
            self.strays.end_on(self.tmux.via)
        for session in missing:
            try:
                client = ControlClient(self.tmux, session, self)
            except OSError as exc:
                log.warning("control client for session %s: %s", session, exc)
                continue
            with self._lock:
                self._clients[session] = client
            log.debug("control client for session %s started", session)

    def watching(self) -> set[str]:
        """Session ids whose panes' output reaches us now."""
        with self._lock:
            return {s for s, c in self._clients.items() if c.alive and c.attached}

    def take(self) -> tuple[dict[str, float], bool]:
        """The panes that printed since the last call (pane id -> monotonic time of the first
        report), and whether sessions, windows or panes may have come or gone."""
        with self._lock:
            dirty, self._dirty = self._dirty, {}
            changed, self._changed_flag = self._changed_flag, False
        return dirty, changed

    def take_hook_marks(self) -> dict[str, tuple[float, str]]:
        """The newest hook mark (epoch seconds, event) each pane's option took since the last
        call, as the subscription reported it (app.adapters.hookmark)."""
        with self._lock:
            marks, self._marks = self._marks, {}
        return marks

    def take_signals(self) -> dict[str, list[tuple[float, TermSignal]]]:
        """The terminal signals each pane sent since the last call, with the time (epoch
        seconds) each arrived, oldest first."""
        with self._lock:
            signals, self._signals = self._signals, {}
        return signals

    def quiet(self, pane_id: str, now: float) -> bool:
        """Whether the pane printed nothing for QUIET_S (as far as we can tell: a pane paused
        for flooding never is)."""
        with self._lock:
            return now - self._last_output.get(pane_id, 0.0) >= QUIET_S

    def resume(self, pane_ids: Collection[str], streaming: Collection[str] = ()) -> None:
        """Report the next output of these panes again (just before they are captured: what
        they printed until now is in the capture). Of those in ``streaming`` (printing nonstop,
        the caller comes back for them on its own) an output that goes on within QUIET_S wakes
        nobody; their output stopping still does."""
        now = time.monotonic()
        with self._lock:
            clients = list(self._clients.values())
            for pane in pane_ids:
                self._last_output.pop(pane, None)
                self._unquiet.discard(pane)
                self._dirty.pop(pane, None)
                self._streams.pop(pane, None)
            self._streams.update((pane, now) for pane in streaming)
        for client in clients:
            client.resume(pane_ids)

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
            bell, self._bell = self._bell, None
        for client in clients:
            client.close()
            self.strays.ended(client.remote_pid)
        if bell is not None:
            bell.close()
        if self.tmux.via is not None and self.strays.pending():
            self.strays.end_on(self.tmux.via)

    # --- called from the client threads ---

    def _on_output(self, pane_id: str, signals: Sequence[TermSignal] = (), fresh: bool = True,
                   flood: bool = False) -> None:
        """Output of a pane: the watcher is woken by the first since its capture (``fresh``,
        unless it goes on with a stream: see resume) and again once the pane went quiet (the
        quiet thread); other output only moves the clock."""
        now = time.time()
        with self._lock:
            reported = self._dirty.setdefault(pane_id, time.monotonic())
            resumed = self._streams.pop(pane_id, None)
            if fresh and resumed is not None and reported - resumed < QUIET_S:
                fresh = False  # the stream it was captured in goes on
            self._last_output[pane_id] = _FLOODED if flood else now
            if signals:
                kept = self._signals.setdefault(pane_id, [])
                kept.extend((now, signal) for signal in signals)
                del kept[:-_SIGNALS_KEPT]
            if not flood:
                self._unquiet.add(pane_id)
            else:
                self._unquiet.discard(pane_id)
        if fresh or any(_news(signal) for signal in signals):
            self.wake()

    def _on_title(self, pane_id: str, signal: TermSignal) -> None:
        """A paused pane's title changed (our client asked tmux): heard as if it had printed
        it, without counting as output."""
        with self._lock:
            kept = self._signals.setdefault(pane_id, [])
            kept.append((time.time(), signal))
            del kept[:-_SIGNALS_KEPT]
        if _news(signal):
            self.wake()

    def _on_more_output(self, pane_ids: Collection[str]) -> None:
        """More output of panes already reported: only their clocks move."""
        now = time.time()
        with self._lock:
            for pane in pane_ids:
                if self._last_output.get(pane) != _FLOODED:
                    self._last_output[pane] = now
                    self._unquiet.add(pane)

    def _quiet_in(self) -> float | None:
        """Seconds until the first pane that printed may be quiet; None: none printed."""
        with self._lock:
            last = min((self._last_output.get(p, 0.0) for p in self._unquiet), default=_FLOODED)
        if last == _FLOODED:
            return None
        return min(QUIET_S, max(0.0, last + QUIET_S - time.time()))

    def _tell_quiet(self) -> None:
        """Wake the watcher when a pane that printed went quiet: its frame is complete."""
        now = time.time()
        with self._lock:
            quiet = {p for p in self._unquiet if now - self._last_output.get(p, 0.0) >= QUIET_S}
            self._unquiet -= quiet
        if quiet:
            self.wake()

    def _on_hook(self, pane_id: str, mark: tuple[float, str]) -> None:
        with self._lock:
            self._marks[pane_id] = mark
        self.wake()

    def _on_change(self) -> None:
        with self._lock:
            self._changed_flag = True
        self.wake()

    def _on_remote_hook(self, pane_id: str, value: str) -> None:
        with self._lock:
            self._hooks.append((pane_id, value, time.time()))
        self.wake()

    def take_hooks(self) -> list[tuple[str, str, float]]:
        """Hook option values set since the last call: (pane id, "SERVER_PID CLI EVENT NONCE EPOCH",
        when seen)."""
        with self._lock:
            hooks, self._hooks = self._hooks, []
        return hooks

    def _on_lost(self, client: ControlClient) -> None:
        log.debug("control client for session %s ended (exit %s)", client.session_id,
                  client.proc.poll())
        self.strays.ended(client.remote_pid)
        self._on_change()


class HookBell:
    """Waits on the hooks' ``wait-for`` channel (app.adapters.hookmark) in a thread of its own
    and calls ``wake`` each time a hook rings it: one ``tmux wait-for`` process at a time."""

    def __init__(self, tmux: Tmux, wake: Callable[[], None]) -> None:
        self.tmux = tmux
        self.wake = wake
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._wait, name="tmux-hook-bell", daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        env = dict(os.environ)
        env.pop("TMUX", None)
        while not self._closed.is_set():
            try:
                with self._lock:
                    if self._closed.is_set():
                        return
                    self._proc = subprocess.Popen(
                        self.tmux._argv(["wait-for", hookmark.CHANNEL]), env=env,
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL, start_new_session=True)
                status = self._proc.wait()
            except OSError as exc:
                log.debug("hook bell: %s", exc)
                status = -1
            if self._closed.is_set():
                return
            if status == 0:
                self.wake()
            else:  # no server (yet): the poll notices; try again later
                self._closed.wait(_HOOK_RETRY_S)

    def close(self) -> None:
        with self._lock:
            self._closed.set()
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self._thread.join(timeout=2)
