"""Which conversation of its agent each pane holds: the session id and transcript its hooks named.

Only what the pane's own agent said counts: a CLI whose hooks name no session (or that has no
hooks) is unknown, never guessed from the newest conversation of its folder, which five panes in
one repository share. The newest event wins, so ``/clear``, ``/new`` or a new agent process in
the pane replaces the id; a pane that runs another program now (a shell, another CLI) has none.
The id is the agent's data: shown and stored as it came, checked (:data:`SESSION_ID`) before it
goes into any command line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.adapters.store_read import StoreReader

# Claude Code, Gemini CLI and Qwen Code use UUIDs, Codex a UUID-like thread id, opencode
# "ses_…". Anything else is not resumed: it never reaches a command line.
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

# SessionEnd reasons that mean the person ended the conversation; any other end (the terminal
# went away with its tmux server, "other") leaves it there to resume.
_ENDED_REASONS = frozenset({"prompt_input_exit", "logout", "exit"})


@dataclass(frozen=True)
class SessionIdentity:
    id: str
    transcript: str
    cli: str
    ended: bool
    ts: float

    def public(self) -> dict[str, Any]:
        return {"id": self.id, "transcript": self.transcript or None, "cli": self.cli,
                "ended": self.ended}

    @property
    def resumable(self) -> bool:
        return not self.ended and SESSION_ID.fullmatch(self.id) is not None


def identity(pty: Mapping[str, Any], event: Mapping[str, Any] | None) -> SessionIdentity | None:
    """The pane's session from its newest session-naming event; None when unknown."""
    if event is None or not event.get("session_id"):
        return None
    cli = str(event.get("cli") or "")
    running = str(pty.get("cli_type") or "")
    if cli and running and cli != running:
        return None  # the agent that named it is no longer the pane's program
    ended = event.get("event") == "session_end" and event.get("detail") in _ENDED_REASONS
    return SessionIdentity(str(event["session_id"]), str(event.get("transcript") or ""), cli,
                           ended, float(event.get("ts") or 0.0))


def pane_event(reader: StoreReader, pty: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pane's newest event that names its session or forgets it (None: none)."""
    pane_id = pty.get("pane_id")
    if not pane_id:
        return None
    return reader.newest_session_event(str(pane_id), pty.get("server_pid"))


def pane_session(reader: StoreReader, pty: Mapping[str, Any]) -> SessionIdentity | None:
    return identity(pty, pane_event(reader, pty))


def with_sessions(reader: StoreReader, workers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The workers (``status --json`` rows), each with its ``session`` (a dict, or None)."""
    for worker in workers:
        found = pane_session(reader, worker)
        worker["session"] = found.public() if found is not None else None
    return workers


def describe(found: SessionIdentity | None, event: Mapping[str, Any] | None = None) -> str:
    """One line for ``explain`` (``event``: the one :func:`pane_event` found, to say why)."""
    if found is None and event is not None and event.get("kind") == "agent_start":
        return f"session: unknown ({event.get('detail') or 'a new agent process'}; " \
               "its agent has not named the new one yet)"
    if found is None:
        return "session: unknown (its agent's hooks named none)"
    where = f", transcript {found.transcript}" if found.transcript else ""
    ended = " (ended)" if found.ended else ""
    return f"session: {found.cli or 'agent'} {found.id}{ended}{where}"
