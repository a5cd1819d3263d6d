"""Hook payloads, as each CLI sends them, read into one HookEvent.

The payloads copy the field sets of Claude Code 2.1.197 (its bundled hook input builders), Gemini
CLI 0.61.0 (``bundle/docs/hooks/reference.md`` and ``createBaseInput``) and Codex's notify JSON
(``codex-rs/hooks/src/legacy_notify.rs``); see design/hooks.md.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import pytest

from app.observe.hookevents import DETAIL_MAX, KINDS, HookEvent, parse_event

CLAUDE_BASE = {
    "session_id": "7f1c2a4e-0d3b-4c55-9a61-3e2f8b9c0d11",
    "transcript_path": "/home/ana/.claude/projects/-home-ana-shop/7f1c2a4e.jsonl",
    "cwd": "/home/ana/shop",
    "permission_mode": "default",
}
GEMINI_BASE = {
    "session_id": "b2d5c1e0-5b8e-4a63-8d3a-6b1f0c2e9a77",
    "transcript_path": "/home/ana/.gemini/tmp/5e1f/chats/session-2026-07-01T10-00.json",
    "cwd": "/home/ana/shop",
    "timestamp": "2026-07-01T10:00:03.120Z",
}
# As Qwen Code 0.24.4 sent them against the lab's fake model (design/hooks.md).
QWEN_BASE = {
    "session_id": "4a68f2d3-83c0-4105-8f72-0630878f0121",
    "transcript_path": "/home/ana/.qwen/projects/-home-ana-shop/chats/"
                       "4a68f2d3-83c0-4105-8f72-0630878f0121.jsonl",
    "cwd": "/home/ana/shop",
    "timestamp": "2026-11-28T12:58:15.380Z",
    "permission_mode": "default",
}
CODEX_TURN_COMPLETE = {
    "type": "agent-turn-complete",
    "thread-id": "b5f6c1c2-1111-2222-3333-444455556666",
    "turn-id": "12345",
    "cwd": "/Users/example/project",
    "client": "codex-tui",
    "input-messages": ["Rename `foo` to `bar` and update the callsites."],
    "last-assistant-message": "Rename complete and verified `cargo build` succeeds.",
}


def claude(name: str, **fields: Any) -> dict[str, Any]:
    return {**CLAUDE_BASE, "hook_event_name": name, **fields}


def gemini(name: str, **fields: Any) -> dict[str, Any]:
    return {**GEMINI_BASE, "hook_event_name": name, **fields}


def qwen(name: str, **fields: Any) -> dict[str, Any]:
    return {**QWEN_BASE, "hook_event_name": name, **fields}


class Case(NamedTuple):
    id: str
    payload: dict[str, Any]
    cli: str
    name: str
    kind: str
    detail: str


CASES = [
    Case(
        "claude prompt submitted",
        claude(
            "UserPromptSubmit", prompt="Add a discount field\nto the cart", session_title="Cart"
        ),
        "claude", "UserPromptSubmit", "turn_start", "Add a discount field to the cart",
    ),
    Case(
        "claude tool about to run",
        claude(
            "PreToolUse", tool_name="Bash", tool_use_id="toolu_01ABC",
            tool_input={"command": "npm test", "description": "Run the tests"},
        ),
        "claude", "PreToolUse", "working", "Bash",
    ),
    Case(
        "claude tool finished",
        claude(
            "PostToolUse", tool_name="Edit", tool_use_id="toolu_01ABD",
            tool_input={"file_path": "/home/ana/shop/cart.py"},
            tool_response={"filePath": "/home/ana/shop/cart.py", "success": True},
        ),
        "claude", "PostToolUse", "working", "Edit",
    ),
    Case(
        "claude tool failed",
        claude("PostToolUseFailure", tool_name="Bash", error="exit 1", is_interrupt=False),
        "claude", "PostToolUseFailure", "working", "Bash failed",
    ),
    Case(
        "claude permission prompt",
        claude(
            "Notification", message="Claude needs your permission",
            notification_type="permission_prompt",
        ),
        "claude", "Notification", "permission", "Claude needs your permission",
    ),
    Case(
        "claude idle prompt",
        claude(
            "Notification", message="Claude is waiting for your input",
            notification_type="idle_prompt",
        ),
        "claude", "Notification", "idle", "Claude is waiting for your input",
    ),
    Case(
        "claude MCP elicitation dialog",
        claude(
            "Notification", message="Claude Code needs your input",
            notification_type="elicitation_dialog",
        ),
        "claude", "Notification", "permission", "Claude Code needs your input",
    ),
    Case(
        "claude login notice",
        claude(
            "Notification", message="Claude Code login successful",
            notification_type="auth_success",
        ),
        "claude", "Notification", "other", "Claude Code login successful",
    ),
    Case(
        "claude old permission notification without type",
        claude("Notification", message="Claude needs your permission to use Write"),
        "claude", "Notification", "permission", "Claude needs your permission to use Write",
    ),
    Case(
        "claude old idle notification without type",
        claude("Notification", message="Claude is waiting for your input"),
        "claude", "Notification", "idle", "Claude is waiting for your input",
    ),
    Case(
        "claude permission request",
        claude("PermissionRequest", tool_name="Bash", tool_input={"command": "rm -rf build"}),
        "claude", "PermissionRequest", "permission", "Bash",
    ),
    Case(
        "claude turn finished",
        claude(
            "Stop", stop_hook_active=False, last_assistant_message="Added the field; tests pass."
        ),
        "claude", "Stop", "turn_end", "Added the field; tests pass.",
    ),
    Case(
        "claude turn ended on an API error",
        claude("StopFailure", error="rate_limit", last_assistant_message=""),
        "claude", "StopFailure", "turn_end", "error: rate_limit",
    ),
    Case(
        "claude subagent finished",
        claude(
            "SubagentStop", stop_hook_active=False, agent_id="a1", agent_type="Explore",
            agent_transcript_path="/tmp/a1.jsonl", last_assistant_message="Found 3 callers",
        ),
        "claude", "SubagentStop", "working", "Explore",
    ),
    Case(
        "claude session ended",
        claude("SessionEnd", reason="prompt_input_exit"),
        "claude", "SessionEnd", "session_end", "prompt_input_exit",
    ),
    Case(
        "claude event we do not map",
        claude("PreCompact", trigger="auto", custom_instructions=""),
        "claude", "PreCompact", "other", "",
    ),
    Case(
        "gemini prompt submitted",
        gemini("BeforeAgent", prompt="Fix the failing test"),
        "gemini", "BeforeAgent", "turn_start", "Fix the failing test",
    ),
    Case(
        "gemini tool about to run",
        gemini("BeforeTool", tool_name="run_shell_command", tool_input={"command": "pytest"}),
        "gemini", "BeforeTool", "working", "run_shell_command",
    ),
    Case(
        "gemini tool finished",
        gemini(
            "AfterTool", tool_name="read_file", tool_input={"absolute_path": "/a"},
            tool_response={"llmContent": "...", "returnDisplay": "..."},
        ),
        "gemini", "AfterTool", "working", "read_file",
    ),
    Case(
        "gemini turn finished",
        gemini(
            "AfterAgent", prompt="Fix the failing test", prompt_response="Fixed: off-by-one.",
            stop_hook_active=False,
        ),
        "gemini", "AfterAgent", "turn_end", "Fixed: off-by-one.",
    ),
    Case(
        "gemini tool permission",
        gemini(
            "Notification", notification_type="ToolPermission",
            message="Tool Confirm Shell Command requires execution",
            details={
                "type": "exec", "title": "Confirm Shell Command",
                "command": "sleep 8; echo lab-shell-done", "rootCommand": "sleep, echo",
            },
        ),
        "gemini", "Notification", "permission", "Tool Confirm Shell Command requires execution",
    ),
    Case(
        "gemini session ended",
        gemini("SessionEnd", reason="exit"),
        "gemini", "SessionEnd", "session_end", "exit",
    ),
    Case(
        "gemini session started",
        gemini("SessionStart", source="startup"),
        "gemini", "SessionStart", "other", "",
    ),
    Case(
        "qwen prompt submitted",
        qwen("UserPromptSubmit", prompt="run it",
             prompt_id="4a68f2d3-83c0-4105-8f72-0630878f0121########0"),
        "qwen", "UserPromptSubmit", "turn_start", "run it",
    ),
    Case(
        "qwen tool about to run",
        qwen("PreToolUse", tool_name="run_shell_command", tool_input={"command": "echo hi"}),
        "qwen", "PreToolUse", "working", "run_shell_command",
    ),
    Case(
        "qwen turn ended",
        qwen("Stop", stop_hook_active=False, last_assistant_message="All done now."),
        "qwen", "Stop", "turn_end", "All done now.",
    ),
    Case(
        "codex turn complete",
        CODEX_TURN_COMPLETE,
        "codex", "agent-turn-complete", "turn_end",
        "Rename complete and verified `cargo build` succeeds.",
    ),
    Case(
        "codex turn start (older builds)",
        {
            "type": "agent-turn-start", "thread-id": "t-1", "turn-id": "7", "cwd": "/p",
            "input-messages": ["first", "Rename foo"],
        },
        "codex", "agent-turn-start", "turn_start", "Rename foo",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_detected_cli_and_kind(case: Case) -> None:
    event = parse_event(None, json.dumps(case.payload))
    session = str(case.payload.get("session_id") or case.payload.get("thread-id"))
    assert event == HookEvent(case.cli, case.name, case.kind, case.detail, session)
    assert event.kind in KINDS


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_named_cli_agrees_with_detection(case: Case) -> None:
    event = parse_event(case.cli, json.dumps(case.payload))
    assert (event.cli, event.kind, event.detail) == (case.cli, case.kind, case.detail)


def test_named_cli_wins_over_the_payload_shape() -> None:
    # Codex's lifecycle hooks send Claude-shaped payloads; the installed command says --cli codex.
    payload = {"hook_event_name": "Stop", "session_id": "s-1", "last_assistant_message": "Done"}
    assert parse_event("codex", json.dumps(payload)) == HookEvent(
        "codex", "Stop", "turn_end", "Done", "s-1"
    )
    # A Gemini Notification without its timestamp is still Gemini's when the command says so.
    notification = {"hook_event_name": "Notification", "notification_type": "ToolPermission"}
    assert parse_event("gemini", json.dumps(notification)).kind == "permission"
    assert parse_event(None, json.dumps(notification)).cli == "claude"


def test_unrecognised_cli_name_falls_back_to_detection() -> None:
    event = parse_event("Claude-Code", json.dumps(claude("Stop")))
    assert (event.cli, event.kind) == ("claude", "turn_end")


def test_unknown_payloads_are_other_not_errors() -> None:
    assert parse_event(None, '{"hello": "world"}') == HookEvent("unknown", "", "other")
    event = parse_event(None, json.dumps({"hook_event_name": "SomethingNew", "session_id": "x"}))
    assert (event.cli, event.name, event.kind, event.session_id) == (
        "unknown", "SomethingNew", "other", "x",
    )
    # A non-string event name or session id is ignored rather than trusted.
    event = parse_event("claude", '{"hook_event_name": 3, "session_id": {"a": 1}}')
    assert (event.name, event.kind, event.session_id) == ("", "other", "")


def test_detail_is_one_short_line() -> None:
    long_reply = "Summary:\n\n" + "word " * 400 + "\x1b[31mred\x1b[0m"
    event = parse_event("claude", json.dumps(claude("Stop", last_assistant_message=long_reply)))
    assert len(event.detail) <= DETAIL_MAX
    assert event.detail.startswith("Summary: word word")
    assert event.detail.endswith("…")
    assert "\n" not in event.detail and "\x1b" not in event.detail


def test_detail_never_carries_a_secret() -> None:
    key = "sk-proj-Zy9xW8vU7tS6rQ5pO4nM3lK2jI1hG0fE"
    prompt = f"use OPENAI_API_KEY={key} and call the API"
    event = parse_event("claude", json.dumps(claude("UserPromptSubmit", prompt=prompt)))
    assert "Zy9xW8" not in event.detail
    assert event.detail.startswith("use OPENAI_API_KEY=")
    reply = f"Exported the token ghp_{'a1B2' * 10} for you"
    event = parse_event(None, json.dumps({**CODEX_TURN_COMPLETE, "last-assistant-message": reply}))
    assert "a1B2a1B2" not in event.detail


def test_detail_never_includes_tool_input() -> None:
    payload = claude("PreToolUse", tool_name="Bash", tool_input={"command": "cat ~/.netrc"})
    assert parse_event("claude", json.dumps(payload)).detail == "Bash"


class Bad(NamedTuple):
    id: str
    text: str
    message: str


BAD = [
    Bad("empty", "  \n", "hook payload is empty"),
    Bad("truncated", '{"hook_event_name": "Stop", "session', "not valid JSON"),
    Bad("not json", "Stop", "not valid JSON"),
    Bad("array", '["Stop"]', "is a JSON array, not an object"),
    Bad("string", '"Stop"', "is a JSON string, not an object"),
    Bad("null", "null", "is a JSON null, not an object"),
    Bad("number", "3.5", "is a JSON number, not an object"),
]


@pytest.mark.parametrize("bad", BAD, ids=[bad.id for bad in BAD])
def test_malformed_payload_raises_one_line(bad: Bad) -> None:
    with pytest.raises(ValueError, match=bad.message) as raised:
        parse_event("claude", bad.text)
    assert "\n" not in str(raised.value)


def test_error_message_does_not_echo_the_payload() -> None:
    secret = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345"
    with pytest.raises(ValueError) as raised:
        parse_event(None, '{"prompt": "' + secret + '" oops}')
    assert secret not in str(raised.value)
    assert "line 1" in str(raised.value)


def test_event_is_a_plain_value() -> None:
    event = HookEvent("claude", "Stop", "turn_end", "done", "s")
    assert event.as_dict() == {
        "cli": "claude", "name": "Stop", "kind": "turn_end", "detail": "done", "session_id": "s",
    }
    assert event != HookEvent("claude", "Stop", "turn_end", "done", "other")
    assert "turn_end" in repr(event)
    with pytest.raises(AttributeError):
        event.extra = 1  # type: ignore[attr-defined]


def test_codex_title_turn_is_not_the_end_of_the_users_turn() -> None:
    # Codex 0.169.0, captured: its hidden turn that names a new thread also runs `notify`,
    # 0.1 s after the user's first prompt, while the user's own turn has only begun.
    title_turn = {
        "type": "agent-turn-complete", "thread-id": "01a204cf-c602-7b71-a5a6-3c786a9843f7",
        "turn-id": "01a204cf-c621-7e91-bc4c-df4a6d74918b", "cwd": "/home/dev/project",
        "client": "codex-tui",
        "input-messages": ["Generate a concise, single-line task title of at most 36 characters "
                           "and under five words where possible. ...\n\nUser prompt:\nhello"],
        "last-assistant-message": '{"title": "Conductor test session"}',
    }
    users_turn = {**title_turn, "input-messages": ["hello"],
                  "last-assistant-message": "lorem ipsum"}
    assert parse_event("codex", json.dumps(title_turn)).kind == "other"
    assert parse_event("codex", json.dumps(users_turn)).kind == "turn_end"


@pytest.mark.parametrize(("stamp", "fired"), [
    ("2026-07-01T10:00:03.120Z", 1782900003.12),  # Gemini CLI's, from Date.toISOString()
    ("2026-07-01T12:00:03.120+02:00", 1782900003.12),
    ("2026-07-01T10:00:03.120", 0.0),  # no zone: ours would be a guess
    ("yesterday", 0.0), ("", 0.0), (1782900003.12, 0.0), ("2026-07-01T10:00:03Z" * 3, 0.0),
])
def test_the_payloads_own_time_is_when_the_event_fired(stamp: object, fired: float) -> None:
    """Gemini CLI runs AfterAgent and Notification hooks in the background (issue 31), so the
    hook's own start says little about when the turn ended; the payload says."""
    event = parse_event("gemini", json.dumps({**GEMINI_BASE, "hook_event_name": "AfterAgent",
                                              "timestamp": stamp}))
    assert event.fired == pytest.approx(fired)
    claude = parse_event("claude", json.dumps({**CLAUDE_BASE, "hook_event_name": "Stop"}))
    assert claude.fired == 0.0


def test_a_hook_row_takes_the_events_time_unless_a_clock_is_off() -> None:
    from app.front.hook import FIRED_BELIEVED_S, event_time

    now = 1782900010.0
    assert event_time(now - 7.5, now) == now - 7.5  # a late hook: the event's own time
    assert event_time(0.0, now) == now  # none given
    assert event_time(now + 1, now) == now  # from the future
    assert event_time(now - FIRED_BELIEVED_S - 1, now) == now  # older than any hook waits
