"""Issue 33's acceptance for tokens per pane: the real Claude Code and Codex against the fake
model servers, five turns each with a watcher restart after the third; the tokens stored for the
pane are the sum of what the fake reported for each of the pane's model responses (each response
reports other figures, so one missed or counted twice shows), and `status --json` shows them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.run.watcher import Watcher
from tests.conftest import conductor
from tests.support.agents import (
    AgentInTmux,
    AgentUnavailable,
    ClaudeInTmux,
    CodexInTmux,
    install_codex,
)
from tests.support.scripted_model import Say
from tests.support.waiting import retry_until

pytestmark = [pytest.mark.slow, pytest.mark.agent]

TURNS = 5
KINDS = ("input", "output", "cache_read", "cache_write")


@pytest.fixture
def codex(tmp_path: Path, isolated_env: Path) -> Iterator[CodexInTmux]:
    try:
        install = install_codex()
    except AgentUnavailable as exc:
        pytest.skip(str(exc))
    lab = CodexInTmux(tmp_path / "agent", install.binary,
                      env={"CONDUCTOR_WORKERS_DIR": str(isolated_env)})
    yield lab
    lab.close()


def _ask(lab: AgentInTmux, text: str, turn: int) -> None:
    """Type ``text``, Enter until the model is asked (Codex can take an Enter close behind the
    keys for part of a paste), then wait for the turn's end."""
    lab.type_text(text)
    retry_until(lambda: text in lab.capture(), 30, interval=0.1)
    asked = len(lab.server.requests)
    last_enter = [0.0]

    def submitted() -> bool:
        if len(lab.server.requests) > asked:
            return True
        if time.monotonic() - last_enter[0] >= 3.0:
            lab.send_keys("Enter")
            last_enter[0] = time.monotonic()
        return False

    retry_until(submitted, 30, interval=0.1)
    lab.server.wait_for_turn_end(turn, seconds=90)


def _stored(store: StoreWriter, worker_id: str) -> dict[str, int]:
    rows = [r for r in store.usage.rows() if r["id"] == worker_id]
    return {kind: sum(int(r[kind] or 0) for r in rows) for kind in KINDS}


def _five_turns_counted(lab: AgentInTmux, isolated_env: Path, reported: dict[str, str]) -> None:
    installed = conductor("-L", lab.socket_name, "pty", "hooks", "install", "--cli", lab.cli,
                          "--path", str(lab.hooks_path))
    assert installed.returncode == 0, installed.stderr
    # The store is made before the agent starts: its hooks fire at start-up, and a hook's write
    # during the first migration of a new store can find it locked.
    store = StoreWriter(isolated_env)
    with lab:
        watcher = Watcher(Tmux(socket_name=lab.socket_name), store, load_packs(),
                          WatchSettings(interval_s=1, ready_min_s=0))
        try:
            def agent_seen() -> bool:
                watcher.tick()
                return [t.pack.name if t.pack else "" for t in watcher.tracked.values()] == [
                    lab.cli]

            retry_until(agent_seen, 30, interval=0.3)
            (worker_id,) = watcher.tracked
            for turn in range(1, TURNS + 1):
                lab.server.queue(Say(f"Answer {turn}."))
                _ask(lab, f"Question {turn}", turn)
                watcher.tick()
                if turn == 3:
                    # A watcher restart goes on where the last one stopped reading: nothing
                    # counted twice, nothing missed.
                    watcher.close()
                    watcher = Watcher(Tmux(socket_name=lab.socket_name), store, load_packs(),
                                      WatchSettings(interval_s=1, ready_min_s=0))
                    watcher.tick()
            main = [r.usage for r in lab.server.responses if r.main]
            assert len(main) == TURNS
            expected = {kind: sum(u[name] for u in main) for kind, name in reported.items()}
            expected = {kind: expected.get(kind, 0) for kind in KINDS}
            if "cached_tokens" in reported.values():
                expected["input"] -= expected["cache_read"]  # OpenAI's input holds the cached

            def counted() -> bool:
                watcher.tick()
                return _stored(store, worker_id) == expected

            retry_until(counted, 30, interval=0.3,
                        message=f"stored {_stored(store, worker_id)}, reported {expected}")
            shown = conductor("-L", lab.socket_name, "pty", "status", "--json")
            assert shown.returncode == 0, shown.stderr
            (row,) = json.loads(shown.stdout)
            assert {kind: row["usage"][kind] for kind in KINDS} == expected
        finally:
            watcher.close()
            store.close()


def test_claude_tokens_per_pane_are_the_sum_the_model_reported(
        claude: ClaudeInTmux, isolated_env: Path) -> None:
    _five_turns_counted(claude, isolated_env, {
        "input": "input_tokens", "output": "output_tokens",
        "cache_read": "cache_read_input_tokens", "cache_write": "cache_creation_input_tokens"})


def test_codex_tokens_per_pane_are_the_sum_the_model_reported(
        codex: CodexInTmux, isolated_env: Path) -> None:
    _five_turns_counted(codex, isolated_env, {
        "input": "input_tokens", "output": "output_tokens", "cache_read": "cached_tokens"})
