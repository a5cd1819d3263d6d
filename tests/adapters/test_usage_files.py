"""Reading the agents' usage files a little at a time (app.adapters.usage_files): only complete
new lines, each message once, a replaced or cut file from its start. The lines are shaped as
Claude Code 2.1.197 and Codex 0.169 wrote them against the fake model servers (trimmed to the
fields that matter); the real CLIs are in tests/e2e/test_usage_with_agents.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.adapters.usage_files import Tail, Usage, codex_rollout


def _claude(message_id: str, inp: int, out: int, read: int = 0, write: int = 0,
            model: str = "claude-opus-4-8") -> str:
    return json.dumps({
        "type": "assistant", "timestamp": "2026-11-28T02:31:00.000Z",
        "message": {"id": message_id, "model": model, "role": "assistant",
                    "usage": {"input_tokens": inp, "output_tokens": out,
                              "cache_read_input_tokens": read,
                              "cache_creation_input_tokens": write,
                              "service_tier": "standard"}}}) + "\n"


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


def _tokens(found: list[Usage]) -> list[tuple[str, int, int, int, int]]:
    return [(u.model, u.input, u.output, u.cache_read, u.cache_write) for u in found]


def test_claude_lines_are_read_once_each_and_a_message_written_twice_counts_once(
        tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text(json.dumps({"type": "user", "message": {"content": "hi"}}) + "\n"
                    + _claude("msg_1", 100, 40, 11, 7))
    tail = Tail(str(path), "claude")
    assert _tokens(tail.read_new()) == [("claude-opus-4-8", 100, 40, 11, 7)]
    assert tail.read_new() == []  # caught up: nothing again
    # One line per content block, each with the message's usage: the copy adds nothing.
    _append(path, _claude("msg_1", 100, 40, 11, 7) + _claude("msg_2", 5, 6))
    assert _tokens(tail.read_new()) == [("claude-opus-4-8", 5, 6, 0, 0)]
    assert tail.offset == path.stat().st_size


def test_a_line_still_being_written_waits_for_its_end(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    line = _claude("msg_1", 100, 40)
    path.write_text(line[:30])
    tail = Tail(str(path), "claude")
    assert tail.read_new() == []
    assert tail.offset == 0
    _append(path, line[30:])
    assert _tokens(tail.read_new()) == [("claude-opus-4-8", 100, 40, 0, 0)]


def test_lines_that_are_not_usage_records_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text("not json\n[1, 2]\n"
                    + json.dumps({"type": "assistant", "message": {"usage": "many"}}) + "\n"
                    + json.dumps({"type": "assistant", "message": {
                        "id": "m", "usage": {"input_tokens": -5, "output_tokens": True}}}) + "\n"
                    + _claude("msg_9", 1, 2))
    found = Tail(str(path), "claude").read_new()
    assert _tokens(found) == [("claude-opus-4-8", 1, 2, 0, 0)]


def test_a_replaced_or_shortened_file_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text(_claude("msg_1", 100, 40))
    tail = Tail(str(path), "claude")
    assert len(tail.read_new()) == 1
    replacement = tmp_path / "new.jsonl"
    replacement.write_text(_claude("msg_1", 100, 40) + _claude("msg_2", 3, 4))
    replacement.replace(path)  # another inode: its ids are not the old file's
    assert _tokens(tail.read_new()) == [("claude-opus-4-8", 100, 40, 0, 0),
                                        ("claude-opus-4-8", 3, 4, 0, 0)]
    with path.open("r+") as f:
        f.truncate(0)
    _append(path, _claude("msg_3", 8, 9))
    assert _tokens(tail.read_new()) == [("claude-opus-4-8", 8, 9, 0, 0)]


def test_a_missing_file_reads_nothing(tmp_path: Path) -> None:
    assert Tail(str(tmp_path / "none.jsonl"), "claude").read_new() == []


def _codex_count(total: dict[str, int], last: dict[str, int] | None = None) -> str:
    info: dict[str, Any] = {"total_token_usage": total, "last_token_usage": last or total}
    return json.dumps({"timestamp": "2026-11-28T02:32:35.445Z", "type": "event_msg",
                       "payload": {"type": "token_count", "info": info}}) + "\n"


def _codex_usage(inp: int, cached: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "cached_input_tokens": cached, "cache_write_input_tokens": 0,
            "output_tokens": out, "reasoning_output_tokens": 0, "total_tokens": inp + out}


def test_codex_adds_what_each_token_count_added_to_the_thread_total(tmp_path: Path) -> None:
    path = tmp_path / "rollout-2026-11-28T02-32-34-thread.jsonl"
    turn = json.dumps({"type": "turn_context", "payload": {"model": "gpt-5-codex"}}) + "\n"
    path.write_text(turn + _codex_count(_codex_usage(103, 3, 41)))
    tail = Tail(str(path), "codex")
    # OpenAI's input_tokens holds the cached ones: input is the rest.
    assert _tokens(tail.read_new()) == [("gpt-5-codex", 100, 41, 3, 0)]
    # A repeated event (a rate-limit update) and one without info add nothing.
    _append(path, _codex_count(_codex_usage(103, 3, 41)) + json.dumps(
        {"type": "event_msg", "payload": {"type": "token_count", "info": None}}) + "\n")
    assert tail.read_new() == []
    _append(path, _codex_count(_codex_usage(209, 9, 83), _codex_usage(106, 6, 42)))
    assert _tokens(tail.read_new()) == [("gpt-5-codex", 100, 42, 6, 0)]


def test_codex_thread_file_is_found_by_its_own_id_only(tmp_path: Path) -> None:
    day = tmp_path / "sessions" / "2026" / "11" / "28"
    day.mkdir(parents=True)
    mine = day / "rollout-2026-11-28T02-32-34-01a21fff-4d6a-7142.jsonl"
    other = day / "rollout-2026-11-28T02-40-00-99999999-0000-0000.jsonl"
    mine.write_text("")
    other.write_text("")
    assert codex_rollout(str(tmp_path), "01a21fff-4d6a-7142") == str(mine)
    assert codex_rollout(str(tmp_path), "01a21fff") == ""
    assert codex_rollout(str(tmp_path / "nowhere"), "01a21fff-4d6a-7142") == ""


def test_the_codex_hook_names_the_threads_rollout_file_in_the_agents_codex_home(
        tmp_path: Path) -> None:
    from app.front.hook import event_row

    day = tmp_path / "codex" / "sessions" / "2026" / "11" / "28"
    day.mkdir(parents=True)
    rollout = day / "rollout-2026-11-28T02-32-34-01a21fff-4d6a-7142.jsonl"
    rollout.write_text("")
    payload = json.dumps({"type": "agent-turn-complete", "thread-id": "01a21fff-4d6a-7142",
                          "last-assistant-message": "done"})
    env = {"TMUX_PANE": "%3", "TMUX": "/tmp/sock,4242,0", "CODEX_HOME": str(tmp_path / "codex")}
    assert event_row("codex", payload, env, 0.0)["transcript"] == str(rollout)
    # A thread id that is no plain id is never a pattern to look for.
    sneaky = payload.replace("01a21fff-4d6a-7142", "*")
    assert event_row("codex", sneaky, env, 0.0)["transcript"] == ""
