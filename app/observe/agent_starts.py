"""A pane whose agent process was replaced forgets the session the old process named.

Codex names its thread only when a turn ends (``notify``), so a new Codex process in the same
pane (the agent quit and was started again, or tmux respawned the pane) would be taken for the
old thread until its first turn ends: ``restore`` would resume a conversation the pane no longer
holds, and its usage would be read from the old file. Each full tick, a local pane whose session
is known has its foreground process looked at (app.adapters.procstart): when that process
started after the event that named the session, an event of kind ``agent_start`` with no
session id is recorded, and the pane's session is unknown until its agent names the new one.
Every CLI gets the same rule: one that names its session as it starts (Claude Code's and Gemini
CLI's SessionStart hook) names it after its process started, so nothing is lost.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from app.adapters.procstart import boot_time, foreground_start
from app.adapters.store import StoreWriter
from app.observe.pane import Tracked
from app.observe.sessions import identity

log = logging.getLogger(__name__)

AGENT_START = "agent_start"
# CLIs whose clear command starts a new conversation that nothing names until its first turn
# ends (Codex's /new: notify only): after conductor sends it, the old session is forgotten.
# Claude Code and Gemini CLI name the new one themselves (SessionStart, source "clear").
NAMED_AFTER_A_TURN = frozenset({"codex"})


def cleared_row(cli: str, pane_id: str, server_pid: int | None, socket: str, command: str,
                now: float) -> dict[str, Any]:
    """The event that forgets a pane's session after its clear command (``dispatch --clear``)."""
    return {"ts": now, "kind": AGENT_START, "event": "other", "name": "clear", "cli": cli,
            "pane_id": pane_id, "server_pid": server_pid, "socket": socket, "session_id": "",
            "transcript": "", "detail": f"{command}: a new conversation, not named yet"}


class AgentStarts:
    def __init__(self, store: StoreWriter) -> None:
        self.store = store
        self._seq = 0
        # (pane id, server pid) -> its newest session-naming (or session-forgetting) event.
        self._newest: dict[tuple[str, int | None], dict[str, Any]] = {}

    def look(self, panes: Mapping[str, Tracked], now: float) -> int:
        """Record an ``agent_start`` for every pane whose agent started after its session was
        named; how many were recorded."""
        for event in self.store.usage.session_events_after(self._seq):
            self._seq = event["seq"]
            self._newest[(event["pane_id"], event["server_pid"])] = event
        # Read again each time: a step of the wall clock (NTP) moves the boot time with it, and
        # the events' times are wall-clock times.
        booted = boot_time()
        if booted is None:
            return 0  # no /proc: nothing is known of processes
        news = []
        for tracked in panes.values():
            try:
                row = self._replaced(tracked, booted, now)
            except Exception:  # one pane must never stop the others
                log.exception("agent start: pane %s skipped", tracked.worker_id)
                continue
            if row is not None:
                news.append(row)
        if news:
            with self.store.transaction() as conn:
                for row in news:
                    self.store.events.add_event(conn, row)
            for row in news:
                self._newest[(row["pane_id"], row["server_pid"])] = row
        return len(news)

    def _replaced(self, tracked: Tracked, booted: float, now: float) -> dict[str, Any] | None:
        pty = tracked.pty_row
        if not pty or (pty.get("host") or "local") != "local" or tracked.pane.dead:
            return None
        key = (tracked.pane.pane_id, pty.get("server_pid"))
        event = self._newest.get(key)
        named = identity(pty, event)
        if event is None or named is None:
            return None
        found = foreground_start(tracked.pane.pid, booted)
        if found is None:
            return None
        leader, started = found
        if started <= float(event.get("ts") or 0.0):
            return None
        return {"ts": now, "kind": AGENT_START, "event": "other", "name": AGENT_START,
                "cli": named.cli, "pane_id": tracked.pane.pane_id,
                "server_pid": pty.get("server_pid"), "socket": pty.get("socket") or "",
                "session_id": "", "transcript": "",
                "detail": f"process {leader} started after session {named.id} was named"}
