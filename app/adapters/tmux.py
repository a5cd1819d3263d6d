"""The only module that talks to tmux.

The poll loop uses raw, batched tmux invocations (one ``list-panes -a`` and one chained
``capture-pane`` per ~100 panes), which a benchmark showed cost a few ms per cycle where one
subprocess or libtmux call per pane costs several ms *per pane*. Control-mode clients
(``ControlMode``, one ``tmux -C`` per session) tell the watcher which panes printed; libtmux has
no parser for that protocol, and the few lines we need are parsed here.

Text that is not ours (names, folders, titles, anything a pane, a host or a person chose) is
data both ways: it reaches tmux only through :func:`literal` where tmux would expand formats,
and it comes back in rows no byte of it can split or forge (:meth:`Tmux.list_panes`).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import select
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.adapters import hookmark
from app.base.errors import (
    HostUnreachable,
    PaneDead,
    PaneNotFound,
    TmuxError,
    TmuxServerNotRunning,
)
from app.base.model import Pane
from app.base.termsignals import TITLE, SignalScanner, TermSignal

log = logging.getLogger(__name__)

# A list-panes row: fields tmux itself makes (ids, numbers, flags; never a space in them)
# joined by spaces, then the free-text fields, each behind a separator holding a token drawn
# for that one call. A program's argv[0], a folder or a title may hold any byte, newlines and
# our separators included, but not a token it cannot know: no row or field can be forged.
_FIXED_FIELDS = (
    "pane_id", "window_id", "window_index", "pane_index", "window_panes", "pane_pid",
    "pane_dead", "pane_dead_status", "pane_width", "pane_height", "window_activity", "cursor_x",
    "cursor_y", "history_size", "pane_in_mode", "pane_active", "window_active", "pid",
    "session_id", "destroy-unattached",
)
_FREE_FIELDS = (
    "session_name", "window_name", "pane_current_path", "pane_current_command", "pane_tty",
    "@conductor-view",  # set by conductor's own views on their pane (app.observe.views)
    "@conductor-id",  # set by `restore` on the pane it recreated for a stored row (app.act.restore)
    "pane_title",
)
_PANE_ROW, _CLIENT_ROW = "p", "c"
_PANE_ID = re.compile(r"%[0-9]+")
_WINDOW_ID = re.compile(r"@[0-9]+")
_SESSION_ID = re.compile(r"\$[0-9]+")
_HASHES = re.compile(r"#+\[?")
_DROPPED_LOGGED = 256  # distinct dropped rows logged per Tmux; a host repeating them is not
_CAPTURE_BATCH = 100
_TIMEOUT_S = 10.0
# What a window made by new_window runs until its real command is started in it: it sleeps
# until respawn-pane -k replaces it, long after that happens.
_PLACEHOLDER = "sleep 2147483647"
_NO_SERVER_MARKERS = ("no server running", "error connecting to", "failed to connect to server",
                      "server exited", "lost server")


@dataclass(frozen=True)
class PaneListing:
    server_pid: int
    panes: list[Pane]


@dataclass(frozen=True)
class PaneState:
    """One pane as tmux reports it at one moment."""

    server_pid: int
    dead: bool
    dead_status: int | None


# The tmux key names `send_keys` presses as keys; any other single character is sent literally.
NAMED_KEYS = frozenset({"Up", "Down", "Left", "Right", "Enter", "Escape", "Tab", "BTab", "Space",
                        "BSpace", "Home", "End", "PageUp", "PageDown"})


def _to_int(text: str, default: int = 0) -> int:
    try:
        return int(text)
    except ValueError:
        return default


def literal(text: str) -> str:
    """``text`` as an argument tmux format-expands, so that it arrives as itself.

    The rule: tmux never expands text we did not write. It expands formats in ``new-window``
    and ``new-session`` ``-n``/``-c``/``-s``, ``respawn-pane -c``, ``rename-window``,
    ``rename-session``, ``select-pane -T``, ``display-message``, ``-F`` formats and
    ``set-option -F`` values, and ``#(...)`` there runs a shell command on the server's host.
    A window name, a folder or a message that came from a pane, a host, a branch or a person
    goes to such an argument only through here: ``#`` doubled, so ``#(`` and ``#{`` reach
    tmux's state as the characters they are. A run of ``#`` before ``[`` (a style) is left as
    it is: tmux keeps it verbatim when expanding, and doubling it would add characters.
    ``-F`` formats and the other expanded arguments hold our own text only. (``set-option``
    without ``-F``, ``send-keys -l``, ``load-buffer`` and shell commands are not expanded.)"""
    return _HASHES.sub(lambda m: m[0] if m[0].endswith("[") else m[0] * 2, text)


def pane_id_checked(pane_id: str) -> str:
    """``pane_id`` when it is tmux's ``%N``, else :class:`PaneNotFound`: a pane id goes into
    tmux command strings we build (``if-shell``, control mode), where anything else could be
    parsed as more commands."""
    if not _PANE_ID.fullmatch(pane_id):
        raise PaneNotFound(f"{pane_id!r} is not a tmux pane id (%N)")
    return pane_id


LOCAL_HOST = "local"


class Via(Protocol):
    """How a tmux command line reaches another machine's tmux (``app.adapters.ssh.SshVia``)."""

    @property
    def host(self) -> str:
        """The host's name in the config file."""

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """The local command line that runs ``argv`` on the host."""

    def failure(self, returncode: int, stderr: str) -> TmuxError | None:
        """The error when the host, not tmux, failed the call (None: tmux answered)."""


class Tmux:
    """One tmux server, named by socket name (``-L``) or socket path (``-S``); neither means the
    user's default server. With ``via``, the server of another host: every command line is built
    here as on this machine and ``via`` carries it there (ssh), so listing, capturing, typing and
    control mode are the same code for every host."""

    def __init__(self, socket_name: str | None = None, socket_path: str | None = None,
                 via: Via | None = None) -> None:
        self.socket_name = socket_name or None
        self.socket_path = socket_path or None
        self.via = via
        self.host = via.host if via is not None else LOCAL_HOST
        self._binary = "tmux" if via is not None else shutil.which("tmux") or "tmux"
        self._dropped_rows: set[str] = set()

    @property
    def label(self) -> str:
        socket = self.socket_path or self.socket_name or "default"
        return socket if self.via is None else f"{self.host}:{socket}"

    def _argv(self, args: Sequence[str]) -> list[str]:
        argv = [self._binary]
        if self.socket_path:
            argv += ["-S", self.socket_path]
        elif self.socket_name:
            argv += ["-L", self.socket_name]
        if self.via is None:
            return argv + list(args)
        # A login over ssh often has no UTF-8 locale, and tmux would then print our field
        # separator (and any non-ASCII name) as "_".
        return self.via.wrap([*argv, "-u", *args])

    def run(self, *args: str, check: bool = True, stdin: str | None = None
            ) -> subprocess.CompletedProcess[str]:
        """Run one tmux command line; raise a one-line :class:`TmuxError` when it fails."""
        env = dict(os.environ)
        # Inside a tmux pane, TMUX would make some commands target the caller's server/client.
        env.pop("TMUX", None)
        try:
            done = subprocess.run(
                self._argv(args), capture_output=True, text=True, errors="replace",
                timeout=_TIMEOUT_S, env=env, check=False, input=stdin,
                stdin=subprocess.DEVNULL if stdin is None else None,
            )
        except FileNotFoundError:
            raise TmuxError("tmux is not installed (no 'tmux' on PATH)") from None
        except subprocess.TimeoutExpired:
            if self.via is not None:
                raise HostUnreachable(f"host {self.host}: tmux {args[0]} did not answer within "
                                      f"{_TIMEOUT_S:.0f} s") from None
            raise TmuxError(f"tmux {args[0]} did not answer within {_TIMEOUT_S:.0f} s") from None
        failed = self.via.failure(done.returncode, done.stderr) if self.via is not None else None
        if failed is not None:
            raise failed
        if check and done.returncode != 0:
            raise self._error(args[0], done.stderr)
        return done

    def _error(self, command: str, stderr: str) -> TmuxError:
        message = " ".join(stderr.split()) or "failed"
        if any(marker in message for marker in _NO_SERVER_MARKERS):
            return TmuxServerNotRunning(f"no tmux server running on socket {self.label}")
        return TmuxError(f"tmux {command}: {message}")

    def is_running(self) -> bool:
        return self.run("list-sessions", check=False).returncode == 0

    def version_text(self) -> str:
        """``tmux -V`` of the server's host, or why it could not be read."""
        try:
            return self.run("-V", check=False).stdout
        except TmuxError as exc:
            return str(exc)

    # --- polling -------------------------------------------------------------------------------

    def list_panes(self) -> PaneListing:
        """Every pane of every session and window, in one tmux call. A row that is not one
        pane's as tmux made it (an id that is not ``%N``, fields missing or extra) is dropped
        and logged."""
        token = secrets.token_hex(6)
        free_sep = f"<{token}|>"

        def row_format(kind: str, fixed: Sequence[str], free: Sequence[str]) -> str:
            return (f"<{token}{kind}>" + " ".join(f"#{{{name}}}" for name in fixed)
                    + "".join(f"{free_sep}#{{{name}}}" for name in free))

        out = self.run("list-clients", "-F",
                       row_format(_CLIENT_ROW, ("client_control_mode", "session_id"), ()), ";",
                       "list-panes", "-a", "-F",
                       row_format(_PANE_ROW, _FIXED_FIELDS, _FREE_FIELDS)).stdout
        panes: list[Pane] = []
        server_pid = 0
        # Sessions a person looks at. Control-mode clients (ours among them) count in
        # #{session_attached} but show nothing to anybody.
        viewed: set[str] = set()
        # Each row starts a line with our token; a newline inside a field stays in its field.
        for chunk in ("\n" + out).split(f"\n<{token}")[1:]:
            kind, _, row = chunk.removesuffix("\n").partition(">")
            if kind == _CLIENT_ROW:
                client = row.split(" ")
                if len(client) == 2 and client[0] != "1":
                    viewed.add(client[1])
                continue
            # The clients' rows come first: who looks at what is known by the panes' rows.
            pane = self._pane_row(row.split(free_sep), viewed) if kind == _PANE_ROW else None
            if pane is None:
                self._dropped(chunk.replace(token, "-"))
                continue
            server_pid = pane[1]
            panes.append(pane[0])
        return PaneListing(server_pid=server_pid, panes=panes)

    @staticmethod
    def _pane_row(parts: list[str], viewed: Collection[str]) -> tuple[Pane, int] | None:
        """One row's pane and the server's pid; None when the row is not one tmux made.
        ``viewed``: the ids of the sessions a person's client shows."""
        if len(parts) != 1 + len(_FREE_FIELDS):
            return None
        fixed = parts[0].split(" ")
        if len(fixed) != len(_FIXED_FIELDS):
            return None
        f = dict(zip(_FIXED_FIELDS, fixed, strict=True))
        f.update(zip(_FREE_FIELDS, parts[1:], strict=True))
        if not (_PANE_ID.fullmatch(f["pane_id"]) and _WINDOW_ID.fullmatch(f["window_id"])
                and _SESSION_ID.fullmatch(f["session_id"])):
            return None
        dead = f["pane_dead"] == "1"
        return Pane(
            pane_id=f["pane_id"],
            session_name=f["session_name"],
            window_id=f["window_id"],
            window_index=_to_int(f["window_index"]),
            window_name=f["window_name"],
            pane_index=_to_int(f["pane_index"]),
            window_panes=_to_int(f["window_panes"], 1),
            cwd=f["pane_current_path"],
            current_command=f["pane_current_command"],
            pid=_to_int(f["pane_pid"]),
            title=f["pane_title"],
            dead=dead,
            dead_status=_to_int(f["pane_dead_status"]) if dead and f["pane_dead_status"]
            else None,
            width=_to_int(f["pane_width"]),
            height=_to_int(f["pane_height"]),
            activity=_to_int(f["window_activity"]),
            cursor_x=_to_int(f["cursor_x"]),
            cursor_y=_to_int(f["cursor_y"]),
            history_size=_to_int(f["history_size"]),
            in_mode=f["pane_in_mode"] == "1",
            # The pane a person sees: the active pane of the active window of a session
            # with a client attached.
            focused=f["pane_active"] == "1" and f["window_active"] == "1"
            and f["session_id"] in viewed,
            session_id=f["session_id"],
            # "1" in tmux 3.3; "on", "keep-last", "keep-group" in later versions.
            destroy_unattached=f["destroy-unattached"] not in ("", "0", "off"),
            tty=f["pane_tty"],
            view=f["@conductor-view"],
            conductor_id=f["@conductor-id"],
        ), _to_int(f["pid"])

    def _dropped(self, row: str) -> None:
        """Log a row list_panes dropped, once per distinct row (a host may send it each poll)."""
        if row in self._dropped_rows or len(self._dropped_rows) >= _DROPPED_LOGGED:
            return
        self._dropped_rows.add(row)
        log.warning("tmux %s: dropped a list-panes row that is not one pane's: %r", self.label,
                    row[:200])

    def capture(self, pane_ids: Sequence[str], titles: dict[str, str] | None = None
                ) -> dict[str, str]:
        """The visible screen of each pane, captured in as few tmux calls as possible; with
        ``titles``, each pane's title (``#{pane_title}``) at that moment goes there too.

        A pane that vanished between listing and capture is left out of the result (tmux stops a
        command sequence at the first failing command, so the rest is retried without it).
        """
        screens: dict[str, str] = {}
        pending = list(pane_ids)
        while pending:
            batch, pending = pending[:_CAPTURE_BATCH], pending[_CAPTURE_BATCH:]
            leftover = self._capture_batch(batch, screens, titles)
            pending = leftover + pending
        return screens

    def _capture_batch(self, batch: list[str], screens: dict[str, str],
                       titles: dict[str, str] | None = None) -> list[str]:
        # Plain ASCII: tmux may escape control characters depending on the client locale.
        marker = f"<<conductor-{secrets.token_hex(8)}>>"
        args: list[str] = []
        for index, pane_id in enumerate(batch):
            if args:
                args.append(";")
            # The marker carries the batch index, not the pane id: display-message runs its text
            # through strftime, which mangles "%3".
            args += ["display-message", "-p", f"{marker} {index}", ";",
                     "capture-pane", "-p", "-t", pane_id]
            if titles is not None:
                # In the same breath as the screen: a title tmux took while our control client
                # had the pane's output paused is read here. After the capture, so a pane that
                # vanished fails in capture-pane, as without titles.
                args += [";", "display-message", "-p", "-t", pane_id,
                         f"{marker}title #{{pane_title}}"]
        done = self.run(*args, check=False)
        current: str | None = None
        lines: list[str] = []
        captured: list[str] = []

        def flush() -> None:
            if current is not None:
                screens[current] = "\n".join(lines)
                captured.append(current)

        for line in done.stdout.split("\n"):
            if line.startswith(marker):
                if line.startswith(f"{marker}title ") and titles is not None:
                    if current is not None:
                        titles[current] = line[len(marker) + 6:]
                    continue
                flush()
                current, lines = batch[int(line[len(marker) + 1:])], []
            else:
                lines.append(line)
        if done.returncode == 0:
            flush()
            return []
        error = self._error("capture-pane", done.stderr)
        if isinstance(error, TmuxServerNotRunning):
            raise error
        # The last marker printed belongs to the pane whose capture failed.
        failed = current
        if failed is None:
            raise error
        log.info("pane %s vanished during capture (%s)", failed, error)
        index = batch.index(failed)
        return batch[index + 1:]

    # --- acting on panes -----------------------------------------------------------------------

    def display_message(self, text: str) -> None:
        """Show a message on every client attached to the server (no client: nothing to do)."""
        for client in self._clients():
            # -d: tmux's default display-time (750 ms) is too short to notice.
            self.run("display-message", "-c", client, "-d", "5000", literal(text), check=False)

    def new_window(self, directory: str, name: str, command: str | None,
                   session_name: str | None = None, remain_on_exit: bool = False) -> Pane:
        """A new window rooted in ``directory``, in the session the caller sits in, else the most
        recently used session, else a new ``conductor`` session. ``remain_on_exit`` keeps the
        window (dead, with its last screen) when its program ends. ``name`` and ``directory``
        arrive as they are, whatever they hold (:func:`literal`).

        With ``remain_on_exit`` and a ``command``, the window first runs a placeholder that waits;
        the option is set on the window, and only then does ``respawn-pane -k`` start the command.
        So a command that exits at once (or a typo: status 127) leaves a dead pane that shows why,
        instead of a window tmux removed before anyone could look up its id."""
        if not self.is_running():
            raise TmuxServerNotRunning(f"no tmux server running on socket {self.label}; "
                                       "start tmux first")
        deferred = command if remain_on_exit and command is not None else None
        first = _PLACEHOLDER if deferred is not None else command
        target = self._session_id(session_name) if session_name else self._preferred_session()
        where = ["new-session", "-d", "-s", "conductor"] if target is None else \
            ["new-window", "-d", "-t", f"{target}:"]
        done = self.run(*where, "-P", "-F", "#{pane_id}", "-n", literal(name),
                        "-c", literal(directory), *([first] if first is not None else []),
                        check=False)
        if done.returncode != 0:
            raise self._error(where[0], done.stderr)
        pane_id = done.stdout.strip()
        if not _PANE_ID.fullmatch(pane_id):
            raise TmuxError(f"tmux {where[0]} answered {pane_id[:80]!r}, not a pane id")
        if remain_on_exit:
            # Window scope: the user's other windows keep their own setting.
            self.run("set-option", "-w", "-t", pane_id, "remain-on-exit", "on",
                     check=deferred is not None)
        if deferred is not None:
            try:
                self.run("respawn-pane", "-k", "-t", pane_id, "-c", literal(directory),
                         deferred)
            except TmuxError:
                # Not a window left sleeping in the placeholder, looking like a worker.
                self.run("kill-window", "-t", pane_id, check=False)
                raise
        for pane in self.list_panes().panes:
            if pane.pane_id == pane_id:
                return pane
        raise TmuxError("the new window vanished at once (did its command exit?)")

    def find_session(self, name: str) -> str | None:
        """The id of the session named exactly ``name``; None when there is none (or no server)."""
        try:
            return self._session_id(name)
        except TmuxError:
            return None

    def _session_id(self, name: str) -> str:
        """The id (``$N``) of the session named exactly ``name`` (or with that id)."""
        token = secrets.token_hex(6)
        out = self.run("list-sessions", "-F", f"<{token}>#{{session_id}} #{{session_name}}",
                       check=False).stdout
        for row in ("\n" + out).split(f"\n<{token}>")[1:]:
            session_id, _, session_name = row.removesuffix("\n").partition(" ")
            if _SESSION_ID.fullmatch(session_id) and name in (session_id, session_name):
                return session_id
        raise TmuxError(f"no tmux session {name!r}")

    def _preferred_session(self) -> str | None:
        caller = os.environ.get("TMUX_PANE")
        if caller and os.environ.get("TMUX"):
            done = self.run("display-message", "-p", "-t", caller, "#{session_id}", check=False)
            if done.returncode == 0 and done.stdout.strip():
                return done.stdout.strip()
        clients = self._clients(with_session=True)
        if clients:
            return clients[0]
        done = self.run("list-sessions", "-F", "#{session_last_attached} #{session_id}",
                        check=False)
        if done.returncode != 0 or not done.stdout.strip():
            return None
        rows = sorted((line.split(" ", 1) for line in done.stdout.splitlines()),
                      key=lambda r: _to_int(r[0]), reverse=True)
        return rows[0][1]

    def capture_styled(self, pane_id: str) -> str:
        """One pane's screen with its escape sequences (colours, dim, reverse video)."""
        done = self.run("capture-pane", "-p", "-e", "-t", pane_id, check=False)
        if done.returncode != 0:
            raise PaneNotFound(f"pane {pane_id} no longer exists on tmux server {self.label}")
        return done.stdout

    def pane_tty(self, pane_id: str) -> str:
        """The terminal device of a pane (``/dev/pts/3``)."""
        done = self.run("display-message", "-p", "-t", pane_id, "#{pane_tty}", check=False)
        if done.returncode != 0:
            raise PaneNotFound(f"pane {pane_id} no longer exists on tmux server {self.label}")
        return done.stdout.strip()

    def pane_option(self, pane_id: str, name: str) -> str:
        """A pane option's own value ("" when unset)."""
        return self.run("show-options", "-p", "-q", "-v", "-t", pane_id, name,
                        check=False).stdout.rstrip("\n")

    def set_pane_option(self, pane_id: str, name: str, value: str | None) -> None:
        """Set a pane option (a user option such as ``@conductor-view``), or unset it (None)."""
        if value is None:
            self.run("set-option", "-p", "-u", "-t", pane_id, name)
        else:
            self.run("set-option", "-p", "-t", pane_id, name, value)

    def pane_exists(self, pane_id: str) -> bool:
        return self.run("display-message", "-p", "-t", pane_id, "#{pane_id}",
                        check=False).returncode == 0

    def pane_state(self, pane_id: str) -> PaneState:
        """Whether a pane exists and is dead, read from tmux now (one call)."""
        done = self.run("display-message", "-p", "-t", pane_id,
                        "#{pid} #{pane_dead} #{pane_dead_status}", check=False)
        if done.returncode != 0:
            error = self._error("display-message", done.stderr)
            if isinstance(error, TmuxServerNotRunning):
                raise error
            raise PaneNotFound(f"pane {pane_id} no longer exists on tmux server {self.label}")
        pid, dead, status = [*done.stdout.strip().split(" "), "", "", ""][:3]
        return PaneState(server_pid=_to_int(pid), dead=dead == "1",
                         dead_status=_to_int(status) if dead == "1" and status else None)

    def dead_status(self, pane_id: str, wait_s: float = 1.0) -> int | None:
        """The exit status of a dead pane. tmux can mark a pane dead before it has reaped its
        process (3.3a misses a SIGCHLD when several things end together), and then knows no
        status yet; a ``run-shell true`` of ours ends a child of the server, whose SIGCHLD makes
        it reap every child. Looked at again for up to ``wait_s``; None if it still knows none."""
        deadline = time.monotonic() + wait_s
        while True:
            state = self.pane_state(pane_id)
            if not state.dead or state.dead_status is not None or time.monotonic() > deadline:
                return state.dead_status
            self.run("run-shell", "true", check=False)
            time.sleep(0.05)

    def send_text(self, pane_id: str, text: str, enter: bool = True,
                  enter_delay: float = 0.3) -> None:
        """Type ``text`` into a pane literally and optionally press Enter. Only ``app.act.gate``
        calls this: everything else types through the gate's checks and per-pane lock.

        The text goes through a named tmux buffer loaded from stdin and pasted with bracketed
        paste (``-p``): nothing in it is parsed by tmux or a shell, newlines stay inside the
        agent's input box instead of submitting it early, and its length is not bounded by the
        command line. Enter is a separate key after a pause, so the CLI sees the paste end first.

        tmux 3.3a crashes (taking every pane with it) on ``paste-buffer -p`` into a dead pane, so
        the paste is decided inside tmux: ``if-shell -F '#{pane_dead}'`` reads the flag and pastes
        in the same command queue, with no moment between for the pane to die in. A dead pane
        raises :class:`PaneDead` and gets nothing.
        """
        pane_id_checked(pane_id)  # it goes into if-shell's command strings below
        if text:
            buffer = f"conductor-send-{secrets.token_hex(6)}"
            refused = f"conductor-dead-{secrets.token_hex(6)}"
            self.run("load-buffer", "-b", buffer, "-", stdin=text)
            done = self.run("if-shell", "-F", "-t", pane_id, "#{pane_dead}",
                            f"delete-buffer -b {buffer} ; display-message -p {refused}",
                            f"paste-buffer -d -p -b {buffer} -t {pane_id}", check=False)
            if done.returncode != 0:
                self.run("delete-buffer", "-b", buffer, check=False)
                error = self._error("paste-buffer", done.stderr)
                if isinstance(error, TmuxServerNotRunning):
                    raise error
                raise PaneNotFound(f"pane {pane_id} no longer exists on tmux server {self.label}")
            if refused in done.stdout:
                raise PaneDead(f"pane {pane_id} has exited; nothing was typed into it")
            if enter and enter_delay > 0:
                time.sleep(enter_delay)
        if enter:
            self.send_keys(pane_id, ["Enter"])

    def send_keys(self, pane_id: str, keys: Sequence[str], gap_s: float = 0.0) -> None:
        """Press keys in a pane, one tmux call each, ``gap_s`` apart: tmux key names from
        :data:`NAMED_KEYS`, or one printable character sent literally (``-l``).

        Never a paste: a menu ignores pasted text, and the Enter after it would pick whatever
        is highlighted. One key at a time, because a CLI that reads a burst of input as one
        chunk may not tell ``Down Down Enter`` apart. tmux ignores keys sent to a dead pane.
        """
        for index, key in enumerate(keys):
            if key in NAMED_KEYS:
                args = [key]
            elif len(key) == 1 and key.isprintable():
                args = ["-l", key]
            else:
                raise TmuxError(f"not a key conductor presses: {key!r}")
            if index and gap_s > 0:
                time.sleep(gap_s)
            done = self.run("send-keys", "-t", pane_id, *args, check=False)
            if done.returncode != 0:
                error = self._error("send-keys", done.stderr)
                if isinstance(error, TmuxServerNotRunning):
                    raise error
                raise PaneNotFound(f"pane {pane_id} no longer exists on tmux server {self.label}")

    def switch_to(self, pane_id: str) -> str:
        """Bring a pane to the front: switch the most recently active client to it, else just
        select it so the next attach lands there. Returns what was done."""
        if not self.pane_exists(pane_id):
            raise PaneNotFound(f"pane {pane_id} no longer exists on tmux server {self.label}")
        self.run("select-window", "-t", pane_id)
        self.run("select-pane", "-t", pane_id)
        clients = self._clients()
        if not clients:
            return "selected (no client attached)"
        self.run("switch-client", "-c", clients[0], "-t", pane_id)
        return f"switched client {clients[0]}"

    def refresh_status(self) -> None:
        """Redraw the status line of every attached client now, so a ``#(conductor pty status
        --short)`` segment shows a transition at once instead of at the next status-interval."""
        args: list[str] = []
        for client in self._clients():
            args += [*([";"] if args else []), "refresh-client", "-S", "-t", client]
        if args:
            self.run(*args, check=False)

    def _clients(self, with_session: bool = False) -> list[str]:
        """Attached clients (or their session ids), most recently active first. Control-mode
        clients are left out: nobody looks at them, and a message or a switch sent to ours would
        be lost."""
        what = "#{session_id}" if with_session else "#{client_name}"
        out = self.run("list-clients", "-F",
                       f"#{{client_control_mode}} #{{client_activity}} {what}",
                       check=False).stdout
        rows = [line.split(" ", 2) for line in out.splitlines() if line.count(" ") >= 2]
        rows = [r for r in rows if r[0] != "1"]
        return [name for _, _, name in sorted(rows, key=lambda r: _to_int(r[1]), reverse=True)]


# --- control mode ------------------------------------------------------------------------------
#
# A control-mode client (``tmux -C attach``) is told of every byte a pane of its session prints
# (``%output``) and of sessions and windows coming and going. We need to know *that* a pane
# printed (reported once until the watcher captures it), *when it went quiet* (a frame drawn in
# full: the moment to capture it), and the terminal signals in its output. A pane that floods
# (more than _FLOOD_BYTES before its next capture) is paused for our client until the watcher
# continues it just before capturing: it costs one line per capture however much it prints, and
# other clients are not affected (pausing is per client).

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


# The pane option a hook on another host sets ("CLI EVENT NONCE EPOCH"; app.install.remote_hooks):
# the same option a local hook marks (app.adapters.hookmark), but with the event itself in it,
# since nothing of ours runs there to record it. Watched with a subscription of its own, reported
# with the server's pid and the time our client attached (that host's clock) in front.
HOOK_OPTION = "@conductor-hook"
HOOK_SUBSCRIPTION_NAME = "conductor-remote-hook"
HOOK_SUBSCRIPTION = (f"{HOOK_SUBSCRIPTION_NAME}:%*:#{{pid}} #{{client_created}} "
                     f"#{{{HOOK_OPTION}}}")
# tmux checks subscriptions once a second: what it reports this soon after attaching is the
# state of things then.
_HOOK_BASELINE_S = 2.5
# A hook's stamp and our client's creation are read off the same host's clock, in whole seconds.
_HOOK_CLOCK_SLACK_S = 1


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
                and self.args and _PANE_ID.fullmatch(self.args[0]):
            return self.args[0]
        if self.name == "subscription-changed" and len(self.args) >= 5 \
                and _PANE_ID.fullmatch(self.args[4]):
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


def tmux_version(text: str) -> tuple[int, int] | None:
    """(major, minor) from ``tmux -V`` output such as ``tmux 3.3a``; None for ``tmux master``,
    ``tmux next-3.5`` and anything else without a plain version."""
    found = re.match(r"^tmux (\d+)\.(\d+)", text.strip())
    return (int(found.group(1)), int(found.group(2))) if found else None


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
        if not _PANE_ID.fullmatch(pane):
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
        if len(args) < 5 or args[0] != HOOK_SUBSCRIPTION_NAME or not _PANE_ID.fullmatch(args[4]):
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
        if stamp.isdigit() and created.isdigit() and len(hook.split()) >= 4:
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
        if self._bell is None:
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
        if bell is not None:
            bell.close()

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
