"""``conductor pty hook``: what agent CLIs run from their hook systems.

It runs inside the agent's own hook, so it must be quick, print nothing (Claude Code and Gemini
CLI read a hook's stdout) and always exit 0: a failure here is written to ``hook.log`` in the
store folder, never shown to the agent. Stdlib only, for start-up time. The event is one row in
the store's events table, written before we exit: nothing is sent over a network, nothing is left
to a background task that could be lost. Then the hook marks its pane (a tmux pane option and a
``wait-for`` channel, ``app.adapters.hookmark``), which wakes the watcher at once. Gemini CLI's
AfterAgent and Notification lines start this in the background, so that Gemini need not wait
for it (``app.install.hooks``); the row then carries the time Gemini fired the event.

Claude Code and Gemini CLI pass the event JSON on stdin; Codex's ``notify`` program gets it as the
last argument.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, TextIO

LOG_NAME = "hook.log"
_MAX_PAYLOAD = 1 << 20  # a Claude payload carries no transcript, only its path
_MAX_LOG = 256 * 1024
# The oldest a CLI's own stamp of its event may be and still be taken (a hook of a loaded
# machine starts seconds late, never an hour).
FIRED_BELIEVED_S = 600.0
USAGE = """Usage: conductor pty hook [--cli claude|codex|gemini|qwen] [PAYLOAD]

Record an agent CLI's hook event for the pane it runs in ($TMUX_PANE). The event JSON is read
from PAYLOAD or, without it, from stdin. Prints nothing and always exits 0; problems go to
hook.log in the store folder. Set it up with `conductor pty hooks install --cli NAME`.
"""


def main(argv: list[str], stdin: TextIO | None = None, env: Mapping[str, str] | None = None
         ) -> int:
    env = os.environ if env is None else env
    if "-h" in argv or "--help" in argv:
        sys.stdout.write(USAGE)
        return 0
    from app.base import paths

    workers_dir = paths.workers_dir(env)
    try:
        cli, payload_arg = _parse_args(argv)
        payload = payload_arg if payload_arg is not None else _read_stdin(stdin or sys.stdin)
        row = event_row(cli, payload, env, time.time())
    except ValueError as exc:
        _log(workers_dir, env, f"ignored: {exc}")
        return 0
    except Exception as exc:  # never disturb the agent, whatever happened
        _log(workers_dir, env, f"ignored: {type(exc).__name__}: {exc}")
        return 0
    try:
        _record(workers_dir, row)
    except Exception as exc:
        _log(workers_dir, env, f"could not record {row['name']}: {exc}")
    _wake_watcher(workers_dir, env, row)
    return 0


def _record(workers_dir: str, row: dict[str, Any]) -> None:
    from app.adapters.store import record_event

    try:
        record_event(workers_dir, row)
    except Exception as exc:
        if "has no column named" not in str(exc):
            raise
        # A store no watcher of this version has opened yet lacks the newer columns: bringing
        # its schema up to date is what any writer does when it opens it.
        from pathlib import Path

        from app.adapters.store import StoreWriter

        StoreWriter(Path(workers_dir)).close()
        record_event(workers_dir, row)


def _wake_watcher(workers_dir: str, env: Mapping[str, str], row: dict[str, Any]) -> None:
    """Leave the event's mark on the pane, so a watcher hears of it now, not at its next look
    (app.adapters.hookmark)."""
    try:
        from app.adapters import hookmark

        status = hookmark.ring(row["socket"], row["pane_id"],
                               hookmark.format_mark(row["ts"], row["event"]))
    except Exception as exc:
        _log(workers_dir, env, f"could not mark the pane: {type(exc).__name__}: {exc}")
        return
    if status != 0:
        _log(workers_dir, env, f"could not mark the pane: tmux exit status {status}")


def _parse_args(argv: list[str]) -> tuple[str | None, str | None]:
    cli: str | None = None
    payload: str | None = None
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--cli" and args:
            cli = args.pop(0)
        elif arg.startswith("--cli="):
            cli = arg.split("=", 1)[1]
        elif payload is None:
            payload = arg
        else:
            raise ValueError(f"unexpected argument {arg[:40]!r}")
    return cli, payload


def _read_stdin(stream: TextIO) -> str:
    if stream.closed or stream.isatty():
        return ""
    return stream.read(_MAX_PAYLOAD)


def event_row(cli: str | None, payload: str, env: Mapping[str, str], now: float
              ) -> dict[str, Any]:
    """The events-table row for one hook call; ValueError when it cannot be attributed."""
    from app.observe.hookevents import parse_event

    event = parse_event(cli, payload)
    pane_id = env.get("TMUX_PANE", "")
    if not pane_id.startswith("%"):
        raise ValueError(f"{event.name or 'event'}: not inside a tmux pane (TMUX_PANE unset)")
    # $TMUX is "<socket path>,<server pid>,<session index>"; the pid tells servers apart, as
    # tmux reuses pane ids after a restart.
    socket_path, _, rest = env.get("TMUX", "").partition(",")
    server_pid = rest.partition(",")[0]
    return {
        "ts": event_time(event.fired, now),
        "kind": "hook",
        "event": event.kind,
        "name": event.name,
        "cli": event.cli,
        "pane_id": pane_id,
        "server_pid": int(server_pid) if server_pid.isdigit() else None,
        "socket": socket_path,
        "session_id": event.session_id,
        "transcript": event.transcript or _codex_transcript(event.cli, event.session_id, env),
        "detail": event.detail,
    }


def event_time(fired: float, now: float) -> float:
    """When the event happened: the CLI's own stamp when it gives a believable one, else now.

    Gemini CLI's AfterAgent and Notification hooks run in the background (app.install.hooks),
    so this process may start well after the event, even after the next turn's BeforeAgent was
    recorded; stamped now, the old turn end would look newer than the new turn's start. A stamp
    from the future, or from longer ago than any hook waits, is a clock's error: now it is."""
    return fired if now - FIRED_BELIEVED_S <= fired <= now else now


def _codex_transcript(cli: str, thread_id: str, env: Mapping[str, str]) -> str:
    """Codex's notify names its thread but not its file; the hook runs in the agent's own
    environment, so its CODEX_HOME (on whichever host) is the one that holds the thread."""
    from app.adapters.usage_files import codex_rollout
    from app.observe.sessions import SESSION_ID

    if cli != "codex" or not SESSION_ID.fullmatch(thread_id):
        return ""
    home = env.get("CODEX_HOME") or os.path.join(env.get("HOME") or "~", ".codex")
    return codex_rollout(os.path.expanduser(home), thread_id)


def _log(workers_dir: str, env: Mapping[str, str], message: str) -> None:
    path = os.path.join(workers_dir, LOG_NAME)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    try:
        from app.adapters.store import make_private_dir, open_private

        make_private_dir(workers_dir)
        if not os.path.islink(path) and os.path.exists(path) and \
                os.path.getsize(path) > _MAX_LOG:
            os.replace(path, path + ".1")
        # 0600 and never through a link: a planted hook.log link must not append to its target.
        fd = open_private(path, os.O_WRONLY | os.O_APPEND)
        with open(fd, "a", encoding="utf-8") as log:
            log.write(f"{stamp} pid {os.getpid()} pane {env.get('TMUX_PANE', '-')}: "
                      f"{' '.join(message.split())[:500]}\n")
    except OSError:
        pass  # nowhere to tell; the agent must still not be disturbed
