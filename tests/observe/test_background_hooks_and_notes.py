"""Background work the screen may not show (issue 31): Claude Code's SubagentStart/SubagentStop
hooks hold a pane back from READY while subagents run, and `status`/`explain` say what runs and
what said so."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from app.adapters.store import record_event
from app.base.background import background_in
from app.base.model import State, Verdict
from app.base.render import background_evidence, summary_cell
from app.observe.assess import NO_SIGNALS
from app.observe.background_work import SUBAGENT_HOOKS, hold_for_background
from app.run.watcher import Watcher
from tests.conftest import conductor
from tests.run.test_watcher_tick import screen_of, states_by_name
from tests.support.waiting import retry_until, wait_for_shell_prompt

CLAUDE_IDLE = Path(__file__).resolve().parents[1] / "corpus" / "shared" / "claude-code" / \
    "ready-after-answer-200x50.txt"
# A pane that shows each file whose path it reads, as a screen of its own.
SHOWS_FILES = ("sh -c 'stty -echo; while read f; do printf \"\\033[H\\033[2J\"; cat \"$f\"; "
               "done'")


def idle_claude_window(session: Any, name: str) -> Any:
    """A window showing Claude Code's idle screen (a recorded one): the claude pack reads it."""
    pane = session.new_window(window_name=name, attach=False,
                              window_shell=SHOWS_FILES).active_pane
    pane.send_keys(str(CLAUDE_IDLE), enter=True, literal=True)
    retry_until(lambda: "for shortcuts" in screen_of(session, name), 10)
    return pane


IDLE = Verdict(state=State.READY, confidence=90, reasons=("prompt_visible",), rule_id="idle",
               summary="Claude Code is waiting for input")


def hooked(*names: str) -> int:
    signals = NO_SIGNALS
    for ts, name in enumerate(names, 1):
        kind = {"Stop": "turn_end", "UserPromptSubmit": "turn_start"}.get(name, "working")
        signals = signals.with_event("hook", kind, name, float(ts))
    return signals.subagents


def test_subagents_count_from_their_start_to_their_stop() -> None:
    assert hooked("UserPromptSubmit", "SubagentStart", "SubagentStart", "Stop") == 2
    assert hooked("SubagentStart", "SubagentStart", "Stop", "SubagentStop") == 1
    # A stop with none counted (the watcher started late) never goes below none.
    assert hooked("SubagentStop", "SubagentStart") == 1
    # A session that ends or starts again takes its subagents with it.
    assert hooked("SubagentStart", "SessionEnd") == 0
    assert hooked("SubagentStart", "SessionStart", "UserPromptSubmit") == 0


def test_an_idle_screen_with_subagents_running_is_busy_and_says_why() -> None:
    held = hold_for_background(IDLE, subagents=2)
    assert held.state is State.BUSY
    assert SUBAGENT_HOOKS in held.reasons
    found = background_in(held.reasons, held.summary)
    assert found is not None and found.agents == 2
    assert hold_for_background(IDLE, subagents=0) is IDLE


def test_a_question_or_an_error_is_never_hidden_behind_background_work() -> None:
    for state in (State.NEEDS_CONFIRMATION, State.ERROR):
        asks = Verdict(state=state, confidence=90, reasons=("dialog",))
        assert hold_for_background(asks, subagents=3, teammates=1) is asks


def test_the_screen_and_the_hooks_telling_the_same_agents_count_them_once() -> None:
    screen = Verdict(state=State.READY, confidence=90, reasons=("turn_end",),
                     summary="✻ Worked for 4s · 2 local agents still running")
    held = hold_for_background(screen, subagents=2)
    found = background_in(held.reasons, held.summary)
    assert found is not None and found.agents == 2
    assert "2 local agents still running" in found.evidence


def test_summary_names_the_background_work_even_when_cut() -> None:
    row = {"reasons": ["background_work"], "summary": "Claude Code waits for background work "
           "it started: " + "x" * 120 + " ✻ Waiting for 2 background agents to finish"}
    cell = summary_cell(row)
    assert cell.endswith(" · 2 background agents")
    assert len(cell) <= 80
    assert summary_cell({"reasons": ["prompt_visible"], "summary": "idle"}) == "idle"


def test_a_background_shell_that_does_not_resume_the_turn_is_a_note_on_ready() -> None:
    row = {"state": "READY", "reasons": ["prompt_visible", "background_note"],
           "summary": "✻ Crunched for 7s · 1 shell still running"}
    assert summary_cell(row).endswith(" · 1 background shell")
    said = "\n".join(background_evidence(row))
    assert "does not resume the turn" in said
    assert "1 shell still running" in said


def test_status_and_explain_show_what_the_hooks_counted(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> None:
    """A pane whose screen is idle, whose agent's hooks said two subagents started and the turn
    stopped: BUSY with two background agents until both stop, then READY."""
    pane = idle_claude_window(session, "lead")
    server_pid = int(server.cmd("display-message", "-p", "#{pid}").stdout[0])

    def hook(name: str, kind: str) -> None:
        record_event(str(isolated_env), {
            "ts": time.time(), "kind": "hook", "event": kind, "name": name, "cli": "claude",
            "pane_id": pane.pane_id, "server_pid": server_pid})

    def state_after_ticks() -> dict[str, Any]:
        for _ in range(3):
            watcher.tick(time.time())
        return states_by_name(isolated_env)["lead"]

    assert state_after_ticks()["state"] == "READY"
    for name, kind in (("UserPromptSubmit", "turn_start"), ("SubagentStart", "working"),
                       ("SubagentStart", "working"), ("Stop", "turn_end")):
        hook(name, kind)
    row = state_after_ticks()
    assert row["state"] == "BUSY"
    assert SUBAGENT_HOOKS in row["reasons"]

    done = conductor("pty", "status", "--json")
    assert done.returncode == 0, done.stderr
    listed = {w["name"]: w for w in json.loads(done.stdout)}
    assert listed["lead"]["background"]["agents"] == 2
    table = conductor("pty", "status")
    assert "2 background agents" in table.stdout, table.stdout
    explained = conductor("pty", "explain", "lead")
    assert "SubagentStart events without their SubagentStop" in explained.stdout, \
        explained.stdout + explained.stderr

    hook("SubagentStop", "working")
    assert state_after_ticks()["state"] == "BUSY"
    hook("SubagentStop", "working")
    retry_until(lambda: state_after_ticks()["state"] == "READY", 10)


def test_a_shell_left_with_subagents_counted_is_not_held(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> None:
    """An agent that died mid-subagent leaves its shell: nothing there waits for them."""
    pane = session.new_window(window_name="left", attach=False).active_pane
    wait_for_shell_prompt(lambda: screen_of(session, "left"))
    record_event(str(isolated_env), {
        "ts": time.time(), "kind": "hook", "event": "working", "name": "SubagentStart",
        "cli": "claude", "pane_id": pane.pane_id,
        "server_pid": int(server.cmd("display-message", "-p", "#{pid}").stdout[0])})
    for _ in range(3):
        watcher.tick(time.time())
        time.sleep(0.2)
    assert states_by_name(isolated_env)["left"]["state"] == "READY"


def test_a_row_without_background_work_says_nothing_of_it() -> None:
    assert background_evidence({"reasons": ["prompt_visible"], "summary": "idle"}) == []
