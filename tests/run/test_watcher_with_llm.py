"""The watcher with the LLM switched on: a real daemon, a real tmux pane, a loopback OpenRouter."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import conductor
from tests.support.openrouter_server import OpenRouterServer, Reply
from tests.support.waiting import STARTS_WITHIN_S, retry_until

KEY = "sk-or-v1-0123456789abcdef0123456789abcdef0123456789abcdef"
TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
# Nothing in the packs recognises this screen, so the pack verdict is UNKNOWN and the LLM is asked.
SCREEN = f"sh -c 'printf \"deploy token {TOKEN}\\nShip it to production now?\\n\"; sleep 600'"


@pytest.fixture
def llm_server() -> Iterator[OpenRouterServer]:
    with OpenRouterServer(default=Reply.verdict("NEEDS_CONFIRMATION", "Asks to ship to prod",
                                                "Answer the deploy question")) as srv:
        yield srv


@pytest.mark.slow
def test_llm_fills_an_unknown_screen_and_the_key_stays_secret(
    server: Any, session: Any, watcher_process: Any, llm_server: OpenRouterServer,
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    monkeypatch.setenv("OPENROUTER_BASE_URL", llm_server.base_url)
    session.new_window(window_name="deploy", window_shell=SCREEN, attach=False)
    proc = watcher_process("--interval", "0.3", "-v")

    def deploy() -> dict[str, Any]:
        done = conductor("-L", server.socket_name, "pty", "status", "--json")
        rows = json.loads(done.stdout) if done.returncode == 0 else []
        return next((w for w in rows if w["name"] == "deploy"), {})

    retry_until(lambda: deploy().get("state") == "NEEDS_CONFIRMATION", STARTS_WITHIN_S,
                interval=0.2)
    worker = deploy()
    assert worker["classifier"].startswith("llm:")
    assert worker["summary"] == "Asks to ship to prod"
    # One call for the settled screen, not one per poll (other panes are asked about their own).
    def deploy_calls() -> list[Any]:
        return [r for r in llm_server.requests if "Ship it to production now?" in r.text]

    retry_until(lambda: deploy().get("state") == "NEEDS_CONFIRMATION", 1)
    assert len(deploy_calls()) == 1

    sent = deploy_calls()[0]
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert TOKEN not in sent.text
    assert "Ship it to production now?" in sent.text

    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    assert KEY not in err
    for path in isolated_env.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert os.environ["OPENROUTER_API_KEY"] == KEY  # the daemon really had the key
