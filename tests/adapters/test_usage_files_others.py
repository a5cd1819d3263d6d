"""Gemini CLI's and Qwen Code's chat records, read a little at a time (app.adapters.usage_files).
The lines are as Gemini CLI 0.61.0 and Qwen Code 0.24.4 wrote them against the lab's fake model
server (scripts/lab/fake_openai_gemini_server.py: 100 prompt tokens per request, one output token
per word), with the prompts and answers cut short; design/cost.md says where they live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.adapters.usage_files import Tail, Usage

_GEMINI_HEADER = {"sessionId": "3baebd79-6997-4ae1-a060-71d211d2eb6f",
                  "projectHash": "96e2855751390d4f", "startTime": "2026-11-28T12:46:38.056Z",
                  "lastUpdated": "2026-11-28T12:46:38.056Z", "kind": "main"}


def _gemini(message_id: str, tokens: dict[str, int] | None, **more: Any) -> dict[str, Any]:
    line: dict[str, Any] = {"id": message_id, "timestamp": "2026-11-28T12:47:29.127Z",
                            "type": "gemini", "content": "Running.", "thoughts": []}
    if tokens is not None:
        line["tokens"] = tokens
    return {**line, "model": "gemini-3.1-pro-preview", **more}


_FAKE = {"input": 100, "output": 10, "cached": 0, "thoughts": 0, "tool": 0, "total": 110}


def _lines(*records: dict[str, Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


def _tokens(found: list[Usage]) -> list[tuple[str, int, int, int, int]]:
    return [(u.model, u.input, u.output, u.cache_read, u.cache_write) for u in found]


def test_gemini_counts_each_message_once_though_it_is_written_again_with_its_tool_calls(
        tmp_path: Path) -> None:
    path = tmp_path / "session-2026-11-28T12-47-7b17d5e8.jsonl"
    path.write_text(_lines(
        _GEMINI_HEADER,
        {"$set": {"messages": [{"id": "d049", "type": "user", "content": [{"text": "ctx"}]}]}},
        {"id": "0229", "timestamp": "2026-11-28T12:47:28.747Z", "type": "user",
         "content": [{"text": "run it"}]},
        {"$set": {"lastUpdated": "2026-11-28T12:47:28.747Z"}},
        _gemini("b1eb", None),  # first written before its usage is known
        _gemini("b1eb", _FAKE),
        {"$set": {"lastUpdated": "2026-11-28T12:47:29.127Z"}},
        _gemini("b1eb", _FAKE, toolCalls=[{"name": "run_shell_command", "status": "success"}]),
    ))
    tail = Tail(str(path), "gemini")
    assert _tokens(tail.read_new()) == [("gemini-3.1-pro-preview", 100, 10, 0, 0)]
    _append(path, _lines(_gemini("6806", _FAKE, content="All done now.")))
    assert _tokens(tail.read_new()) == [("gemini-3.1-pro-preview", 100, 10, 0, 0)]
    assert tail.read_new() == []


def test_gemini_resume_rewrites_the_message_list_which_adds_nothing(tmp_path: Path) -> None:
    # `gemini --resume ID` appends to the session's file a $set of the whole conversation so far,
    # usage included: only a message line of its own is a new response.
    path = tmp_path / "session.jsonl"
    path.write_text(_lines(_GEMINI_HEADER, _gemini("3005", _FAKE)))
    tail = Tail(str(path), "gemini")
    assert len(tail.read_new()) == 1
    _append(path, _lines({"$set": {"sessionId": _GEMINI_HEADER["sessionId"]}},
                         {"$set": {"messages": [_gemini("3005", _FAKE)]}}))
    assert tail.read_new() == []


def test_gemini_cached_prompt_tokens_are_taken_out_of_input_and_thoughts_are_output(
        tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text(_lines(_gemini("a1", {"input": 1200, "output": 40, "cached": 1000,
                                          "thoughts": 25, "tool": 3, "total": 1268})))
    # promptTokenCount holds the cached tokens; candidatesTokenCount leaves thoughts out.
    assert _tokens(Tail(str(path), "gemini").read_new()) == [
        ("gemini-3.1-pro-preview", 203, 65, 1000, 0)]


_QWEN_USER = {"uuid": "d4fb", "parentUuid": None, "sessionId": "44aeffd6-3da5-437d",
              "timestamp": "2026-11-28T12:48:24.993Z", "type": "user",
              "message": {"role": "user", "parts": [{"text": "run it"}]}}


def _qwen(uuid: str, prompt: int, out: int, cached: int = 0, thoughts: int = 0
          ) -> dict[str, Any]:
    return {"uuid": uuid, "parentUuid": "d4fb", "sessionId": "44aeffd6-3da5-437d",
            "timestamp": "2026-11-28T12:48:27.206Z", "type": "assistant",
            "provenance": "assistant_output", "version": "0.24.4", "model": "labb-model",
            "message": {"role": "model", "parts": [{"text": "Running. "}]},
            "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": out,
                              "thoughtsTokenCount": thoughts, "cachedContentTokenCount": cached,
                              "totalTokenCount": prompt + out}}


def test_qwen_counts_each_assistant_line_and_not_its_telemetry_copy(tmp_path: Path) -> None:
    path = tmp_path / "44aeffd6-3da5-437d.jsonl"
    telemetry = {"uuid": "4407", "type": "system", "subtype": "ui_telemetry", "systemPayload": {
        "uiEvent": {"event.name": "qwen-code.api_response", "input_token_count": 100,
                    "output_token_count": 1, "usageMetadata": "not this one"}}}
    path.write_text(_lines(_QWEN_USER, telemetry, _qwen("e4cf", 100, 1)))
    tail = Tail(str(path), "qwen")
    assert _tokens(tail.read_new()) == [("labb-model", 100, 1, 0, 0)]
    _append(path, _lines(_qwen("e4cf", 100, 1), _qwen("fbce", 100, 3)))
    assert _tokens(tail.read_new()) == [("labb-model", 100, 3, 0, 0)]


def test_qwen_cached_tokens_come_out_of_input_and_thoughts_are_inside_output(
        tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(_lines(_qwen("a", 900, 50, cached=600, thoughts=20)))
    assert _tokens(Tail(str(path), "qwen").read_new()) == [("labb-model", 300, 50, 600, 0)]
