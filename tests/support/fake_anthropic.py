"""A loopback fake of the Anthropic Messages API, just enough to drive the real Claude Code.

Claude Code 2.1.197 sends ``POST /v1/messages?beta=true`` with ``stream: true``: one "main"
request per model step (it carries the tools) and a tool-less one per session for the title,
which wants ``{"title": ...}`` back. Scripting and the record of responses are
:class:`tests.support.scripted_model.ScriptedModel`'s.

    with FakeAnthropic() as fake:
        fake.queue(Say.words(20, delay=0.3))
        ...  # ANTHROPIC_BASE_URL=fake.base_url claude
        fake.wait_for_turn_end(1)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.scripted_model import (
    CallTool,
    RunBash,
    Say,
    ScriptedModel,
    Turn,
    end_sse,
    known_usage,
    send_json,
    send_sse,
    start_sse,
)

__all__ = ["CallTool", "FakeAnthropic", "RunBash", "Say", "Turn"]


@dataclass
class FakeAnthropic(ScriptedModel):
    thread_name = "fake-anthropic"
    route = "/v1/messages"

    def answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        # A request without tools is the session title (or a max_tokens=1 probe): answer at once
        # and never consume a scripted turn.
        main = bool(body.get("tools")) and int(body.get("max_tokens") or 0) > 1
        turn = (self.pick(_ends_in_tool_result(body)) if main
                else Say(json.dumps({"title": self.title})))
        blocks: list[dict[str, Any]] = []
        if isinstance(turn, RunBash):
            blocks.append({"type": "text", "chunks": Say(turn.preamble).chunks(), "delay": 0.0})
            blocks.append({"type": "tool_use", "name": "Bash",
                           "input": {"command": turn.command, "description": turn.description}})
            stop_reason = "tool_use"
        elif isinstance(turn, CallTool):
            blocks.append({"type": "text", "chunks": Say(turn.preamble).chunks(), "delay": 0.0})
            blocks.append({"type": "tool_use", "name": turn.name, "input": turn.input})
            stop_reason = "tool_use"
        else:
            blocks.append({"type": "text", "chunks": turn.chunks(), "delay": turn.delay,
                           "say": turn})
            stop_reason = "end_turn"
        response = self.record(body, main, stop_reason)
        known = known_usage(response.no)
        response.usage = {"input_tokens": known["input"], "output_tokens": known["output"],
                          "cache_read_input_tokens": known["cache_read"],
                          "cache_creation_input_tokens": known["cache_write"]}
        message_id = f"msg_fake_{response.no}"
        model = body.get("model", "claude-fake")
        if not body.get("stream"):
            _non_stream(handler, message_id, model, blocks, stop_reason, response.usage)
        elif not self._stream(handler, message_id, model, blocks, stop_reason, response.usage):
            return  # cut short by stop(): it never ended
        self.finished(response)

    def _stream(self, handler: BaseHTTPRequestHandler, message_id: str, model: str,
                blocks: list[dict[str, Any]], stop_reason: str, usage: dict[str, int]) -> bool:
        def send(event: str, data: dict[str, Any]) -> None:
            send_sse(handler, event, {"type": event, **data})

        start_sse(handler)
        send("message_start", {"message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1}}})
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                send("content_block_start", {"index": index,
                                             "content_block": {"type": "text", "text": ""}})
                for i, chunk in enumerate(block["chunks"]):
                    if "say" in block and block["say"].hold(i, self.stopping):
                        return False
                    send("content_block_delta", {"index": index,
                                                 "delta": {"type": "text_delta", "text": chunk}})
                    if block["delay"] and self.stopping.wait(block["delay"]):
                        return False
            else:
                send("content_block_start", {"index": index,
                                             "content_block": {"type": "tool_use",
                                                               "id": f"toolu_{message_id}",
                                                               "name": block["name"],
                                                               "input": {}}})
                send("content_block_delta", {"index": index,
                                             "delta": {"type": "input_json_delta",
                                                       "partial_json": json.dumps(block["input"])}})
            send("content_block_stop", {"index": index})
        self.final_event_begins()
        send("message_delta", {"delta": {"stop_reason": stop_reason, "stop_sequence": None},
                               "usage": {"output_tokens": usage["output_tokens"]}})
        send("message_stop", {})
        end_sse(handler)
        return True


def _ends_in_tool_result(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    content = messages[-1].get("content") if messages else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def _non_stream(handler: BaseHTTPRequestHandler, message_id: str, model: str,
                blocks: list[dict[str, Any]], stop_reason: str, usage: dict[str, int]) -> None:
    content = [
        {"type": "text", "text": "".join(b["chunks"])} if b["type"] == "text"
        else {"type": "tool_use", "id": f"toolu_{message_id}", "name": b["name"],
              "input": b["input"]}
        for b in blocks
    ]
    send_json(handler, 200, {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason, "stop_sequence": None,
        "usage": usage,
    })
