"""The rows the watcher writes for a pane: its status row, its pty row, a history row per
transition, and the final (EXITED) row of a pane that is gone. Plain functions of what the
watcher knows: no store writes and no tmux calls here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.model import State, Transition, Verdict
from app.base.render import SERVER_ENDED, clean_text
from app.observe import views
from app.observe.assess import Assessment
from app.observe.pack_detection import plain_program
from app.observe.packs import GENERIC_PACK, Pack
from app.observe.pane import POLL, Tracked

_STABLE_COUNT_CAP = 10
# Status columns that move with every capture of a moving screen; a light tick writes a row whose
# other columns did not change only at the next full poll.
_VOLATILE = ("last_snapshot_hash", "last_change_ts", "stable_count")


def _history_row(transition: Transition) -> dict[str, Any]:
    verdict = transition.verdict
    return {
        "id": transition.pane_key,
        "ts": transition.ts,
        "state": transition.state.value,
        "previous_state": transition.previous.value if transition.previous else None,
        "summary": clean_text(verdict.summary),
        "actions_needed": clean_text(verdict.actions_needed),
        "reasons": list(verdict.reasons),
        "rule_id": verdict.rule_id,
        "classifier": verdict.classifier,
        "confidence": verdict.confidence,
    }


def _material(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if row is None else {k: v for k, v in row.items() if k not in _VOLATILE}


def _status_row(worker: str, a: Assessment, mode: str = POLL) -> dict[str, Any]:
    verdict = a.verdict
    return {
        "id": worker,
        "state": a.state.value,
        "summary": clean_text(a.summary),
        "actions_needed": clean_text(a.actions_needed),
        "confidence": a.confidence,
        "reasons": list(a.reasons),
        "rule_id": verdict.rule_id if verdict else None,
        "classifier": verdict.classifier if verdict else None,
        "last_snapshot_hash": a.screen_hash,
        "state_entered_ts": a.state_entered,
        "last_change_ts": a.last_change,
        # Capped so a long-stable pane stops rewriting its row every poll.
        "stable_count": min(a.stable_count, _STABLE_COUNT_CAP),
        "signals": [*a.signals, f"watch={mode}"],
    }


# What a notification calls the program that ended: "api: Claude Code exited".
_CLI_LABELS = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI",
               "qwen": "Qwen Code", "aider": "aider", "opencode": "opencode", "shell": "the shell"}


def program_label(cli: str | None) -> str:
    return _CLI_LABELS.get(cli or "", "the program")


@dataclass
class FinalRow:
    """A pane that is gone, as it is kept: its last status row (EXITED) and the transition."""

    worker_id: str
    name: str
    transition: Transition
    status_row: dict[str, Any]
    public: dict[str, Any]  # status.json: the pty row as last seen plus the final status
    tracked: Tracked | None
    server_ended: bool = False  # the pane went with its tmux server


def exit_row(wid: str, tracked: Tracked | None, store: StoreWriter, now: float,
             server_pid: int | None = None) -> FinalRow:
    """The final row of a pane that left the server. ``tracked`` is None for a pane that vanished
    while no watcher ran: what it was is then read back from the store. ``server_pid`` is the
    server's now, None when none answers: a pane of another (earlier) server went with it."""
    if tracked is not None:
        a = tracked.assessment
        previous, entered = (a.state, a.state_entered) if a is not None else (None, now)
        cli = tracked.pack.name if tracked.pack else None
        name = tracked.name
        pty = tracked.pty_row or {}
        last_hash = a.screen_hash if a is not None else None
    else:
        pty = store.pty(wid) or {}
        row = store.statuses().get(wid) or {}
        previous = State(row["state"]) if row.get("state") in State.__members__ else None
        entered = row.get("state_entered_ts") or now
        cli, name = pty.get("cli_type"), pty.get("name") or wid
        last_hash = row.get("last_snapshot_hash")
    was_on = int(pty.get("server_pid") or 0)
    server_ended = server_pid is None or bool(was_on and was_on != server_pid)
    verdict = Verdict(state=State.EXITED, confidence=100, reasons=("pane_gone",),
                      rule_id="pane-gone", summary=f"{program_label(cli)} exited",
                      classifier="tmux")
    if server_ended:
        verdict = replace(verdict, reasons=(SERVER_ENDED,), rule_id="server-ended",
                          summary="tmux server ended")
    transition = Transition(wid, now, previous, State.EXITED, verdict,
                            max(0.0, now - entered) if previous is not None else 0.0)
    status_row = {
        "id": wid, "state": State.EXITED.value, "summary": verdict.summary, "actions_needed": "",
        "confidence": 100, "reasons": list(verdict.reasons), "rule_id": verdict.rule_id,
        "classifier": verdict.classifier, "last_snapshot_hash": last_hash,
        "state_entered_ts": now, "last_change_ts": now, "stable_count": 0, "signals": [],
    }
    return FinalRow(wid, name, transition, status_row, {**pty, **status_row}, tracked,
                    server_ended)


def _pty_row(tracked: Tracked, server_pid: int, tmux: Tmux, packs: Mapping[str, Pack]
             ) -> dict[str, Any]:
    pane = tracked.pane
    return {
        "id": tracked.worker_id,
        "name": tracked.name,
        "socket": tmux.label,
        "host": tmux.host,
        "server_pid": server_pid,
        "pane_id": pane.pane_id,
        "tmux_session": pane.session_name,
        "tmux_window": pane.window_name,
        "window_index": pane.window_index,
        "pane_index": pane.pane_index,
        # tmux names no folder for a dead pane: the row keeps the one it had, where restore
        # starts the pane again.
        **({"cwd": pane.cwd} if pane.cwd else {}),
        "cli_type": _cli_label(tracked, packs),
        "command": pane.current_command,
    }


def _cli_label(tracked: Tracked, packs: Mapping[str, Pack]) -> str:
    """What the CLI column calls the pane, one word that does not change while the program
    stays: ``shell`` for a shell (also while a program it started runs), the agent's pack
    name, the program's own name for a plain program; never None or ``generic``. A pane whose
    screen was just forgotten keeps the word it had."""
    if tracked.view:
        return views.VIEW_CLI
    if tracked.pack is not None and tracked.pack.name != GENERIC_PACK:
        return tracked.pack.name
    command = tracked.pane.current_command
    claimed = next((p.name for p in packs.values()
                    if p.name != GENERIC_PACK and p.detect.matches_command(command)), "")
    if tracked.pack is None:
        earlier = (tracked.pty_row or {}).get("cli_type")
        if claimed or earlier:
            return str(claimed or earlier)
    return tracked.program or plain_program(packs, command) or claimed \
        or tracked.cli_forced or Path(command).name or "unknown"


def restored_assessment(row: Mapping[str, Any]) -> Assessment:
    """What a status row written before this watcher started says of its pane."""
    return Assessment(
        state=State(row["state"]),
        state_entered=row.get("state_entered_ts") or 0.0,
        last_change=row.get("last_change_ts") or 0.0,
        screen_hash=row.get("last_snapshot_hash"),
        stable_count=row.get("stable_count") or 0,
        summary=row.get("summary") or "",
        actions_needed=row.get("actions_needed") or "",
        confidence=row.get("confidence") or 0,
    )
