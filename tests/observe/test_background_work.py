"""READY promises that nothing the agent started will resume its turn (issue 31): Claude Code's
turn line or footer that names running background work keeps the pane BUSY, wherever it sits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.adapters.store import StoreWriter
from app.base.background import Background, background_of
from app.base.model import State
from app.observe.pack_loading import load_packs
from app.observe.packs import Pack
from tests.conftest import conductor

RULE = "─" * 80

BACKGROUND_LINES = [
    "✻ Waiting for 1 background agent to finish",
    "✻ Waiting for 2 background agents to finish",
    "✻ Worked for 4s · 2 local agents still running",
    "✻ Crunched for 7s · 1 shell still running",
    "✻ Sautéed for 12s · 1 MCP task still running",
    "✻ Baked for 31s · 2 shells, 1 monitor still running",
    "✻ Churned for 5s · done 11:22 PM · 3 background tasks still running",
]
UNDER_THE_LINE = {
    "nothing": [],
    "tip": ["  ⎿  Tip: Use /agents to see and manage the agents running in the background"],
    "tasks": ["  ⎿  ✔ Read the README", "     ◼ Build the project"],
}
UNDER_THE_BOX = {
    "hint": ["  ? for shortcuts"],
    "mode": ["  ⏵⏵ accept edits on (shift+tab to cycle)"],
    "status": ["  Opus 4.8 | ~/proj | ctx 23% | $0.04", "  current: 2.1.150 · latest: 2.1.150"],
    "nothing": [],
}


@pytest.fixture(scope="module")
def claude() -> Pack:
    return load_packs()["claude"]


def screen(turn_line: str, under: list[str], footer: list[str], width: int = 80) -> str:
    rule = "─" * width
    return "\n".join(["● The work runs in the background.", "", turn_line, *under, "",
                      rule, "❯ ", rule, *footer]) + "\n"


@pytest.mark.parametrize("line", BACKGROUND_LINES)
@pytest.mark.parametrize("under", UNDER_THE_LINE)
@pytest.mark.parametrize("footer", UNDER_THE_BOX)
def test_running_background_work_is_never_ready(claude: Pack, line: str, under: str,
                                                footer: str) -> None:
    verdict = claude.classify(screen(line, UNDER_THE_LINE[under], UNDER_THE_BOX[footer]))
    assert verdict.state is State.BUSY
    assert verdict.rule_id == "background-work"
    assert "background_work" in verdict.reasons
    assert line in verdict.summary


def test_a_turn_line_wrapped_at_a_narrow_width_is_still_read(claude: Pack) -> None:
    text = screen("✻ Waiting for 1 background agent and 1 dynamic workflow to\n  finish", [],
                  ["  ? for shortcuts"], width=60)
    assert claude.classify(text).rule_id == "background-work"


def test_without_the_box_the_line_at_the_bottom_still_counts(claude: Pack) -> None:
    text = "● The build runs in the background.\n\n✻ Crunched for 7s · 1 shell still running\n"
    verdict = claude.classify(text)
    assert (verdict.state, verdict.rule_id) == (State.BUSY, "background-work-at-bottom")


@pytest.mark.parametrize("pill", ["1 shell", "2 bashes", "1 local agent", "3 background tasks"])
def test_a_background_pill_under_the_box_is_busy(claude: Pack, pill: str) -> None:
    verdict = claude.classify(screen("✻ Worked for 3s", [], [f"  ? for shortcuts · {pill} · "
                                                            "↓ to manage"]))
    assert (verdict.state, verdict.rule_id) == (State.BUSY, "background-pill")
    assert pill in verdict.summary


@pytest.mark.parametrize("line", ["✻ Worked for 4s", "✻ Crunched for 7s · done 11:22 PM"])
def test_the_same_screen_with_nothing_running_is_ready(claude: Pack, line: str) -> None:
    assert claude.classify(screen(line, [], ["  ? for shortcuts"])).state is State.READY


def test_a_reply_quoting_a_busy_line_does_not_hold_the_turn_open(claude: Pack) -> None:
    text = "\n".join(['● The spinner reads "✻ Thinking… (esc to interrupt)" while it works.', "",
                      "✻ Brewed for 5s", "", RULE, "❯ ", RULE, "  Opus 4.8 | ~/proj"]) + "\n"
    verdict = claude.classify(text)
    assert (verdict.state, verdict.rule_id) == (State.READY, "turn-ended")


@pytest.mark.parametrize(("line", "agents", "shells", "tasks"), [
    ("✻ Waiting for 2 background agents to finish", 2, 0, 0),
    ("✻ Waiting for 1 background agent and 1 dynamic workflow to finish", 2, 0, 0),
    ("✻ Worked for 4s · 2 local agents still running", 2, 0, 0),
    ("✻ Baked for 31s · 2 shells, 1 monitor still running", 0, 3, 0),
    ("✻ Sautéed for 12s · 1 MCP task still running", 0, 0, 1),
    ("✻ Worked for 2s · 3 background tasks still running", 0, 0, 3),
])
def test_the_background_object_counts_what_the_line_names(
        claude: Pack, line: str, agents: int, shells: int, tasks: int) -> None:
    verdict = claude.classify(screen(line, [], ["  ? for shortcuts"]))
    found = background_of(verdict)
    assert found is not None
    assert (found.agents, found.shells, found.tasks) == (agents, shells, tasks)
    assert line in str(found.as_dict()["evidence"])


def test_a_pill_is_counted_and_an_ended_turn_has_no_background(claude: Pack) -> None:
    pill = claude.classify(screen("✻ Worked for 3s", [], ["  ? for shortcuts · 2 bashes"]))
    assert background_of(pill) == Background(shells=2, evidence=pill.summary)
    assert background_of(claude.classify(screen("✻ Worked for 3s", [],
                                                ["  ? for shortcuts"]))) is None


def test_status_json_carries_the_background_a_stored_row_names(isolated_env: Path) -> None:
    """`status --json` reads the counts from the stored row: a busy row waiting on work it
    started says so, any other row says null."""
    store = StoreWriter(isolated_env)
    with store.transaction() as conn:
        for wid, reasons, summary in (
                ("a1", ["background_work"],
                 "Claude Code waits for background work it started: ✻ Waiting for 2 background "
                 "agents to finish"),
                ("b2", ["busy_marker"], "Claude Code is working")):
            store.upsert_pty(conn, {"id": wid, "name": wid, "pane_id": f"%{wid[1]}",
                                    "host": "local"})
            store.upsert_status(conn, [{"id": wid, "state": "BUSY", "summary": summary,
                                        "reasons": reasons}])
    store.close()
    done = conductor("pty", "status", "--json")
    assert done.returncode == 0, done.stderr
    rows = {w["id"]: w for w in json.loads(done.stdout)}
    assert rows["a1"]["background"]["agents"] == 2
    assert rows["b2"]["background"] is None
