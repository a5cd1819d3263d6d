"""The only module that talks to tmux.

The poll loop uses raw, batched tmux invocations (one ``list-panes -a`` and one chained
``capture-pane`` per ~100 panes), which a benchmark showed cost a few ms per cycle where one
subprocess or libtmux call per pane costs several ms *per pane*. Control mode (the clients that
tell the watcher which panes printed) is app.adapters.control, over this module's ``Tmux``.

Text that is not ours (names, folders, titles, anything a pane, a host or a person chose) is
data both ways: it reaches tmux only through :func:`literal` where tmux would expand formats,
and it comes back in rows no byte of it can split or forge (:meth:`Tmux.list_panes`).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.base.errors import (
    HostUnreachable,
    PaneDead,
    PaneNotFound,
    TmuxError,
    TmuxServerNotRunning,
)
from app.base.model import Pane
from app.base.screen import Cursor

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
PANE_ID = re.compile(r"%[0-9]+")
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
    if not PANE_ID.fullmatch(pane_id):
        raise PaneNotFound(f"{pane_id!r} is not a tmux pane id (%N)")
    return pane_id


def tmux_version(text: str) -> tuple[int, int] | None:
    """(major, minor) from ``tmux -V`` output such as ``tmux 3.3a``; None for ``tmux master``,
    ``tmux next-3.5`` and anything else without a plain version."""
    found = re.match(r"^tmux (\d+)\.(\d+)", text.strip())
    return (int(found.group(1)), int(found.group(2))) if found else None



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
    if not (PANE_ID.fullmatch(f["pane_id"]) and _WINDOW_ID.fullmatch(f["window_id"])
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


def _log_dropped(seen: set[str], label: str, row: str) -> None:
    """Log a row list_panes dropped, once per distinct row (a host may send it each poll)."""
    if row in seen or len(seen) >= _DROPPED_LOGGED:
        return
    seen.add(row)
    log.warning("tmux %s: dropped a list-panes row that is not one pane's: %r", label,
                row[:200])


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
            pane = _pane_row(row.split(free_sep), viewed) if kind == _PANE_ROW else None
            if pane is None:
                _log_dropped(self._dropped_rows, self.label, chunk.replace(token, "-"))
                continue
            server_pid = pane[1]
            panes.append(pane[0])
        return PaneListing(server_pid=server_pid, panes=panes)

    def capture(self, pane_ids: Sequence[str], titles: dict[str, str] | None = None,
                styled: Collection[str] = (),
                cursors: dict[str, Cursor] | None = None) -> dict[str, str]:
        """The visible screen of each pane, captured in as few tmux calls as possible; with
        ``titles``, each pane's title (``#{pane_title}``) at that moment goes there too, and
        with ``cursors`` its cursor. The panes in ``styled`` keep their colours
        (``capture-pane -e``).

        A pane that vanished between listing and capture is left out of the result (tmux stops a
        command sequence at the first failing command, so the rest is retried without it).
        """
        screens: dict[str, str] = {}
        pending = list(pane_ids)
        facts = titles is not None or cursors is not None
        while pending:
            size = _batch_size(pending, facts, styled)
            batch, pending = pending[:size], pending[size:]
            leftover = self._capture_batch(batch, screens, titles, styled, cursors)
            pending = leftover + pending
        return screens

    def _capture_batch(self, batch: list[str], screens: dict[str, str],
                       titles: dict[str, str] | None = None,
                       styled: Collection[str] = (),
                       cursors: dict[str, Cursor] | None = None) -> list[str]:
        # Plain ASCII: tmux may escape control characters depending on the client locale.
        marker = f"<<conductor-{secrets.token_hex(8)}>>"
        args: list[str] = []
        facts = titles is not None or cursors is not None
        for index, pane_id in enumerate(batch):
            if args:
                args.append(";")
            args += _pane_capture_args(marker, index, pane_id, facts, pane_id in styled)
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
                if line.startswith(f"{marker}pane "):
                    if current is not None:
                        _take_pane_facts(line[len(marker) + 5:], current, titles, cursors)
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
        for client in _clients(self):
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
        if not PANE_ID.fullmatch(pane_id):
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
        clients = _clients(self, with_session=True)
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
        clients = _clients(self)
        if not clients:
            return "selected (no client attached)"
        self.run("switch-client", "-c", clients[0], "-t", pane_id)
        return f"switched client {clients[0]}"

    def refresh_status(self) -> None:
        """Redraw the status line of every attached client now, so a ``#(conductor pty status
        --short)`` segment shows a transition at once instead of at the next status-interval."""
        args: list[str] = []
        for client in _clients(self):
            args += [*([";"] if args else []), "refresh-client", "-S", "-t", client]
        if args:
            self.run(*args, check=False)


def client_terminals(tmux: Tmux, pane_id: str) -> list[tuple[str, str]]:
    """(tty, terminal name) of each client attached to the session of ``pane_id``, control
    mode left out; unchecked text of the server's: a caller writing to a tty checks it."""
    out = tmux.run("list-clients", "-t", pane_id_checked(pane_id), "-F",
                   "#{client_control_mode} #{client_tty} #{client_termname}").stdout
    rows = [line.split(" ", 2) for line in out.splitlines() if line.count(" ") >= 2]
    return [(tty, term) for mode, tty, term in rows if mode != "1"]

def _clients(tmux: Tmux, with_session: bool = False) -> list[str]:
    """Attached clients (or their session ids), most recently active first. Control-mode
    clients are left out: nobody looks at them, and a message or a switch sent to ours would
    be lost."""
    what = "#{session_id}" if with_session else "#{client_name}"
    out = tmux.run("list-clients", "-F",
                   f"#{{client_control_mode}} #{{client_activity}} {what}",
                   check=False).stdout
    rows = [line.split(" ", 2) for line in out.splitlines() if line.count(" ") >= 2]
    rows = [r for r in rows if r[0] != "1"]
    return [name for _, _, name in sorted(rows, key=lambda r: _to_int(r[1]), reverse=True)]


def find_session(tmux: Tmux, name: str) -> str | None:
    """The id of the session named exactly ``name``; None when there is none (or no server)."""
    try:
        return tmux._session_id(name)
    except TmuxError:
        return None


# tmux refuses a command line over 16 KB less its header ("command too long", MAX_IMSGSIZE):
# a batch stays under this.
_CAPTURE_BYTES = 15_000
_MARKER_LENGTH = len("<<conductor-0123456789abcdef>>")


def _pane_capture_args(marker: str, index: int, pane_id: str, facts: bool,
                       styled: bool) -> list[str]:
    """One pane's part of a capture batch."""
    # The marker carries the batch index, not the pane id: display-message runs its text
    # through strftime, which mangles "%3".
    args = ["display-message", "-p", f"{marker} {index}", ";",
            "capture-pane", "-p", *(["-e"] if styled else []), "-t", pane_id]
    if facts:
        # In the same breath as the screen: a title tmux took while our control client had the
        # pane's output paused is read here, and the cursor where the screen left it. After the
        # capture, so a pane that vanished fails in capture-pane.
        args += [";", "display-message", "-p", "-t", pane_id,
                 f"{marker}pane #{{cursor_x}} #{{cursor_y}} #{{pane_title}}"]
    return args


def _batch_size(pending: Sequence[str], facts: bool, styled: Collection[str]) -> int:
    """How many of the ``pending`` panes go in the next batch: at most _CAPTURE_BATCH, and no
    more bytes than _CAPTURE_BYTES (at least one)."""
    total = 0
    marker = "x" * _MARKER_LENGTH
    for count, pane_id in enumerate(pending[:_CAPTURE_BATCH]):
        total += sum(len(arg.encode()) + 1 for arg in _pane_capture_args(
            marker, count, pane_id, facts, pane_id in styled)) + 2
        if total > _CAPTURE_BYTES:
            return max(count, 1)
    return min(len(pending), _CAPTURE_BATCH)


def _take_pane_facts(facts: str, pane_id: str, titles: dict[str, str] | None,
                     cursors: dict[str, Cursor] | None) -> None:
    """``<cursor_x> <cursor_y> <title>`` as the capture batch reads it, into the dicts asked."""
    x, _, rest = facts.partition(" ")
    y, _, title = rest.partition(" ")
    if titles is not None:
        titles[pane_id] = title
    if cursors is not None and x.isdigit() and y.isdigit():
        cursors[pane_id] = Cursor(int(x), int(y))


def capture_with_history(tmux: Tmux, pane_id: str, history_lines: int) -> str:
    """One pane's screen with up to ``history_lines`` lines of its history above it."""
    done = tmux.run("capture-pane", "-p", "-S", f"-{history_lines}", "-t", pane_id, check=False)
    if done.returncode != 0:
        raise PaneNotFound(f"pane {pane_id} no longer exists on tmux server {tmux.label}")
    return done.stdout
