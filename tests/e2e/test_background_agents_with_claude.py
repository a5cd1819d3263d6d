"""Real Claude Code, its model starting two background subagents (issue 31): `wait` returns only
once the turn that takes their reports has ended, as the fake model's record of responses tells
it, and `status --json` shows `background` while they run."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, conductor
from tests.support.agents import ClaudeInTmux
from tests.support.fake_anthropic import CallTool, FakeAnthropic, Say, Turn
from tests.support.waiting import retry_until, stop_process

pytestmark = [pytest.mark.slow, pytest.mark.agent]

LABELS = ("ALPHA", "BRAVO")
FOUND = "FOUND-BY-"  # the subagents' reports start with it; nothing else says it


def agent_call(label: str) -> CallTool:
    return CallTool("Agent", {"description": f"Background check {label.lower()}",
                              "prompt": f"subagent-{label}: look around and report back",
                              "subagent_type": "general-purpose", "run_in_background": True},
                    preamble=f"Starting agent {label.lower()}.")


class BackgroundAgentsModel(FakeAnthropic):
    """The scripted main conversation; a subagent's requests (its first message carries the
    prompt the main agent gave it) get a slow report of their own and take nothing from the
    script. ``subagent_responses`` are their responses' numbers."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._body = threading.local()
        self.subagent_responses: set[int] = set()

    def answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        self._body.value = body
        super().answer(handler, body)

    def subagent_of(self, body: dict[str, Any]) -> str:
        first = json.dumps((body.get("messages") or [])[:1])
        return next((label for label in LABELS if f"subagent-{label}" in first), "")

    def pick(self, ends_in_tool_result: bool) -> Turn:
        label = self.subagent_of(getattr(self._body, "value", {}))
        if label:
            return Say.words(16, delay=0.4, prefix=f"{FOUND}{label}")
        return super().pick(ends_in_tool_result)

    def record(self, body: dict[str, Any], main: bool, stop_reason: str) -> Any:
        response = super().record(body, main, stop_reason)
        if self.subagent_of(body):
            self.subagent_responses.add(response.no)
        return response

    def main_turn_ends(self) -> list[tuple[float, dict[str, Any]]]:
        """(end, request body) of the main conversation's finished turns, oldest first."""
        with self._lock:
            pairs = list(zip(self.responses, self.requests, strict=True))
        return [(r.ended, body) for r, body in pairs
                if r.main and r.no not in self.subagent_responses
                and r.stop_reason == "end_turn" and r.ended is not None]

    def subagents_ended(self) -> list[float]:
        with self._lock:
            return [r.ended for r in self.responses
                    if r.no in self.subagent_responses and r.ended is not None
                    and r.stop_reason == "end_turn"]


@pytest.fixture
def lab(claude: ClaudeInTmux, isolated_env: Path) -> Iterator[ClaudeInTmux]:
    claude.server = BackgroundAgentsModel()
    installed = conductor("-L", claude.socket_name, "pty", "hooks", "install", "--cli",
                          "claude", "--path", str(claude.hooks_path))
    assert installed.returncode == 0, installed.stderr
    with claude:
        watcher = subprocess.Popen(
            [sys.executable, "-m", "app", "-L", claude.socket_name, "pty", "watch", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO)
        try:
            yield claude
        finally:
            stop_process(watcher, seconds=10)


def pty(lab: ClaudeInTmux, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return conductor("-L", lab.socket_name, "pty", *args, timeout=timeout)


def test_wait_outlasts_two_background_agents_until_their_reports_are_taken(
        lab: ClaudeInTmux) -> None:
    model = lab.server
    assert isinstance(model, BackgroundAgentsModel)
    model.queue(agent_call("ALPHA"), agent_call("BRAVO"),
                Say("Both agents are running in the background."),
                Say("Both agents reported back. Done."))
    retry_until(lambda: pty(lab, "status", "--json").stdout.count(lab.pane_id) > 0, 30)
    sent = pty(lab, "send", lab.pane_id, "Start two background checks and tell me their results")
    assert sent.returncode == 0, sent.stderr

    waiting = subprocess.Popen(
        [sys.executable, "-m", "app", "-L", lab.socket_name, "pty", "wait", lab.pane_id,
         "--timeout", "240"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=REPO)
    seen_background: list[dict[str, Any]] = []
    try:
        while waiting.poll() is None:
            rows = json.loads(pty(lab, "status", "--json").stdout or "[]")
            seen_background += [w["background"] for w in rows
                                if w["pane_id"] == lab.pane_id and w.get("background")]
            time.sleep(0.3)
        returned = time.time()
    finally:
        if waiting.poll() is None:
            waiting.kill()
        out, err = waiting.communicate(timeout=10)
    assert waiting.returncode == 0, out + err + lab.capture()

    ends = model.main_turn_ends()
    consumed = [end for end, body in ends
                if all(f"{FOUND}{label}" in json.dumps(body.get("messages") or [])
                       for label in LABELS)]
    record = (model.responses, sorted(model.subagent_responses), lab.capture())
    assert len(model.subagents_ended()) >= 2, record
    assert consumed, record
    # The first turn (agents started) ended long before; wait saw it through to the turn that
    # took both reports.
    assert ends[0][0] < min(model.subagents_ended()) <= consumed[0] <= returned, record
    assert any(b["agents"] >= 1 for b in seen_background), (seen_background, lab.capture())
