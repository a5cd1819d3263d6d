"""A loopback fake of the OpenAI Responses API, just enough to drive the real Codex CLI.

Codex 0.169.0, given a custom provider with ``wire_api = "responses"``, sends
``POST <base_url>/responses`` with ``stream: true``: one "main" request per model step (it
carries the tools) and a tool-less one per session for the thread title, which wants
``{"title": ...}`` back. The answer is an SSE stream: ``response.created``, then per output
item ``response.output_item.added`` ... ``response.output_item.done`` (a message streams as
``response.output_text.delta`` events), then ``response.completed`` with ``usage``.

A :class:`RunBash` turn becomes a ``function_call`` to ``exec_command`` asking for
``sandbox_permissions: "require_escalated"``: under ``sandbox_mode = "read-only"`` and
``approval_policy = "on-request"`` Codex shows its approval prompt, with the ``justification``
as "Reason: ...". Scripting and the record of responses are
:class:`tests.support.scripted_model.ScriptedModel`'s.

    with FakeOpenAI() as fake:
        fake.queue(Say.words(20, delay=0.3))
        ...  # a config.toml provider with base_url = fake.base_url + "/v1"
        fake.wait_for_turn_end(1)
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.scripted_model import (
    RunBash,
    Say,
    ScriptedModel,
    Turn,
    end_sse,
    known_usage,
    send_sse,
    start_sse,
)

__all__ = ["FakeOpenAI", "RunBash", "Say", "Turn"]

TOOL_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


@dataclass
class FakeOpenAI(ScriptedModel):
    thread_name = "fake-openai"
    route = "/v1/responses"

    def answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        main = bool(body.get("tools"))
        items = body.get("input")
        ends_in_tool = (isinstance(items, list) and bool(items) and isinstance(items[-1], dict)
                        and items[-1].get("type") in TOOL_OUTPUTS)
        turn = self.pick(ends_in_tool) if main else Say(json.dumps({"title": self.title}))
        response = self.record(body, main,
                               "tool_use" if isinstance(turn, RunBash) else "end_turn")
        known = known_usage(response.no)
        # OpenAI counts cached input inside input_tokens, and has no cache writes.
        response.usage = {"input_tokens": known["input"] + known["cache_read"],
                          "cached_tokens": known["cache_read"], "output_tokens": known["output"]}
        if self._stream(handler, f"resp_fake_{response.no}", body.get("model", "gpt-fake"),
                        turn, response.usage):
            self.finished(response)

    def _stream(self, handler: BaseHTTPRequestHandler, response_id: str, model: str,
                turn: Turn, usage: dict[str, int]) -> bool:
        """The SSE answer; False when stop() cut it short."""
        number = [0]

        def send(event: str, data: dict[str, Any]) -> None:
            send_sse(handler, event, {"type": event, "sequence_number": number[0], **data})
            number[0] += 1

        base = {"id": response_id, "object": "response", "created_at": int(time.time()),
                "model": model, "status": "in_progress", "output": []}
        start_sse(handler)
        send("response.created", {"response": base})
        send("response.in_progress", {"response": base})
        text = turn if isinstance(turn, Say) else Say(turn.preamble)
        message_id = f"msg_{response_id}"
        output: list[dict[str, Any]] = []
        send("response.output_item.added", {"output_index": 0, "item": {
            "id": message_id, "type": "message", "status": "in_progress", "role": "assistant",
            "content": []}})
        send("response.content_part.added", {
            "item_id": message_id, "output_index": 0, "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []}})
        for index, chunk in enumerate(text.chunks()):
            if text.hold(index, self.stopping):
                return False
            send("response.output_text.delta", {"item_id": message_id, "output_index": 0,
                                                 "content_index": 0, "delta": chunk})
            if text.delay and self.stopping.wait(text.delay):
                return False
        full = "".join(text.chunks())
        send("response.output_text.done", {"item_id": message_id, "output_index": 0,
                                           "content_index": 0, "text": full})
        message = {"id": message_id, "type": "message", "status": "completed",
                   "role": "assistant",
                   "content": [{"type": "output_text", "text": full, "annotations": []}]}
        send("response.output_item.done", {"output_index": 0, "item": message})
        output.append(message)
        if isinstance(turn, RunBash):
            call = {"id": f"fc_{response_id}", "type": "function_call", "status": "completed",
                    "call_id": f"call_{response_id}", "name": "exec_command",
                    "arguments": json.dumps({"cmd": turn.command,
                                             "sandbox_permissions": "require_escalated",
                                             "justification": turn.description})}
            send("response.output_item.added", {"output_index": 1,
                                                "item": {**call, "status": "in_progress"}})
            send("response.output_item.done", {"output_index": 1, "item": call})
            output.append(call)
        self.final_event_begins()
        send("response.completed", {"response": {
            **base, "status": "completed", "output": output,
            "usage": {"input_tokens": usage["input_tokens"],
                      "input_tokens_details": {"cached_tokens": usage["cached_tokens"]},
                      "output_tokens": usage["output_tokens"],
                      "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": usage["input_tokens"] + usage["output_tokens"]}}})
        end_sse(handler)
        return True
