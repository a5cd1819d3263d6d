"""The only module that talks to tmux.

The poll loop uses raw, batched tmux invocations (one ``list-panes -a`` and one chained
``capture-pane`` per ~100 panes), which a benchmark showed cost a few ms per cycle where one
subprocess or libtmux call per pane costs several ms *per pane*. Creating windows and switching use
libtmux, imported lazily because the status-line path must not pay for it.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.errors import PaneNotFound, TmuxError, TmuxServerNotRunning
from app.model import Pane

if TYPE_CHECKING:
    import libtmux

log = logging.getLogger(__name__)

_SEP = "\x1f"
_PANE_FIELDS = (
    "pane_id", "session_name", "window_id", "window_index", "window_name", "pane_index",
    "window_panes", "pane_current_path", "pane_current_command", "pane_pid", "pane_dead",
    "pane_dead_status", "pane_width", "pane_height", "window_activity", "cursor_x", "cursor_y",
    "history_size", "pane_in_mode", "pane_active", "window_active", "session_attached", "pid",
    "pane_title",  # title last: it may hold anything
)
_LIST_FORMAT = _SEP.join(f"#{{{name}}}" for name in _PANE_FIELDS)
_CAPTURE_BATCH = 100
_TIMEOUT_S = 10.0
_NO_SERVER_MARKERS = ("no server running", "error connecting to", "failed to connect to server",
                      "server exited", "lost server")


@dataclass(frozen=True)
class PaneListing:
    server_pid: int
    panes: list[Pane]


def _to_int(text: str, default: int = 0) -> int:
    try:
        return int(text)
    except ValueError:
        return default


class Tmux:
    """One tmux server, named by socket name (``-L``) or socket path (``-S``); neither means the
    user's default server."""

    def __init__(self, socket_name: str | None = None, socket_path: str | None = None) -> None:
        self.socket_name = socket_name or None
        self.socket_path = socket_path or None
        self._binary = shutil.which("tmux") or "tmux"

    @property
    def label(self) -> str:
        return self.socket_path or self.socket_name or "default"

    def _argv(self, args: Sequence[str]) -> list[str]:
        argv = [self._binary]
        if self.socket_path:
            argv += ["-S", self.socket_path]
        elif self.socket_name:
            argv += ["-L", self.socket_name]
        return argv + list(args)

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
            raise TmuxError(f"tmux {args[0]} did not answer within {_TIMEOUT_S:.0f} s") from None
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

    # --- polling -------------------------------------------------------------------------------

    def list_panes(self) -> PaneListing:
        """Every pane of every session and window, in one tmux call."""
        out = self.run("list-panes", "-a", "-F", _LIST_FORMAT).stdout
        panes: list[Pane] = []
        server_pid = 0
        for row in out.splitlines():
            parts = row.split(_SEP, len(_PANE_FIELDS) - 1)
            if len(parts) != len(_PANE_FIELDS):
                log.debug("skipping unparsable list-panes row %r", row)
                continue
            f = dict(zip(_PANE_FIELDS, parts, strict=True))
            server_pid = _to_int(f["pid"])
            dead = f["pane_dead"] == "1"
            panes.append(Pane(
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
                and _to_int(f["session_attached"]) > 0,
            ))
        return PaneListing(server_pid=server_pid, panes=panes)

    def capture(self, pane_ids: Sequence[str]) -> dict[str, str]:
        """The visible screen of each pane, captured in as few tmux calls as possible.

        A pane that vanished between listing and capture is left out of the result (tmux stops a
        command sequence at the first failing command, so the rest is retried without it).
        """
        screens: dict[str, str] = {}
        pending = list(pane_ids)
        while pending:
            batch, pending = pending[:_CAPTURE_BATCH], pending[_CAPTURE_BATCH:]
            leftover = self._capture_batch(batch, screens)
            pending = leftover + pending
        return screens

    def _capture_batch(self, batch: list[str], screens: dict[str, str]) -> list[str]:
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
            # tmux expands formats in the text; doubled '#' prints literally. -d: tmux's default
            # display-time (750 ms) is too short to notice.
            self.run("display-message", "-c", client, "-d", "5000", text.replace("#", "##"),
                     check=False)

    def _libtmux_server(self) -> libtmux.Server:
        import libtmux

        return libtmux.Server(socket_name=self.socket_name, socket_path=self.socket_path)

    def new_window(self, directory: str, name: str, command: str | None,
                   session_name: str | None = None, remain_on_exit: bool = False) -> Pane:
        """A new window rooted in ``directory``, in the session the caller sits in, else the most
        recently used session, else a new ``conductor`` session. ``remain_on_exit`` keeps the
        window (dead, with its last screen) when its program ends."""
        import libtmux.exc

        if not self.is_running():
            raise TmuxServerNotRunning(f"no tmux server running on socket {self.label}; "
                                       "start tmux first")
        server = self._libtmux_server()
        try:
            target = session_name or self._preferred_session()
            if target is None:
                session = server.new_session(
                    session_name="conductor", start_directory=directory, window_name=name,
                    window_command=command, attach=False,
                )
                window = session.active_window
            else:
                found = server.sessions.get(session_id=target, default=None) or \
                    server.sessions.get(session_name=target, default=None)
                if found is None:
                    raise TmuxError(f"no tmux session {target!r}")
                window = found.new_window(
                    window_name=name, start_directory=directory, window_shell=command,
                    attach=False,
                )
        except libtmux.exc.LibTmuxException as exc:
            raise TmuxError(f"tmux new-window: {' '.join(str(exc).split())}") from None
        pane_id = window.active_pane.pane_id if window.active_pane else None
        if remain_on_exit and pane_id:
            # Window scope: the user's other windows keep their own setting.
            self.run("set-option", "-w", "-t", pane_id, "remain-on-exit", "on", check=False)
        for pane in self.list_panes().panes:
            if pane.pane_id == pane_id:
                return pane
        raise TmuxError("the new window vanished at once (did its command exit?)")

    def _preferred_session(self) -> str | None:
        caller = os.environ.get("TMUX_PANE")
        if caller and os.environ.get("TMUX"):
            done = self.run("display-message", "-p", "-t", caller, "#{session_id}", check=False)
            if done.returncode == 0 and done.stdout.strip():
                return done.stdout.strip()
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

    def pane_exists(self, pane_id: str) -> bool:
        return self.run("display-message", "-p", "-t", pane_id, "#{pane_id}",
                        check=False).returncode == 0

    def send_text(self, pane_id: str, text: str, enter: bool = True,
                  enter_delay: float = 0.3) -> None:
        """Type ``text`` into a pane literally and optionally press Enter.

        The text goes through a named tmux buffer loaded from stdin and pasted with bracketed
        paste (``-p``): nothing in it is parsed by tmux or a shell, newlines stay inside the
        agent's input box instead of submitting it early, and its length is not bounded by the
        command line. Enter is a separate key after a pause, so the CLI sees the paste end first.
        """
        if not self.pane_exists(pane_id):
            raise PaneNotFound(f"pane {pane_id} no longer exists on tmux server {self.label}")
        if text:
            buffer = f"conductor-send-{secrets.token_hex(6)}"
            self.run("load-buffer", "-b", buffer, "-", stdin=text)
            self.run("paste-buffer", "-d", "-p", "-b", buffer, "-t", pane_id)
            if enter and enter_delay > 0:
                time.sleep(enter_delay)
        if enter:
            self.run("send-keys", "-t", pane_id, "Enter")

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

    def _clients(self) -> list[str]:
        """Attached clients, most recently active first."""
        out = self.run("list-clients", "-F", "#{client_activity} #{client_name}",
                       check=False).stdout
        rows = [line.split(" ", 1) for line in out.splitlines() if " " in line]
        return [name for _, name in sorted(rows, key=lambda r: _to_int(r[0]), reverse=True)]
