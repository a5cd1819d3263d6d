"""A hostile line in an agent's transcript (a token count no store can hold) must not stop the
watcher: every other pane's state keeps reaching the store."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from app.act.create import create_worker
from app.adapters.store_read import StoreReader
from app.adapters.store_tables import MAX_TOKENS
from app.adapters.tmux import Tmux
from app.run.watcher import Watcher
from tests.conftest import conductor
from tests.support.waiting import retry_until

SESSION = "7f1c2a4e-0d3b-4c55-9a61-3e2f8b9c0d11"


def _usage_line(message_id: str, tokens: int) -> str:
    return json.dumps({"type": "assistant", "timestamp": "2026-11-28T02:31:00.000Z",
                       "message": {"id": message_id, "model": "claude-opus-4-8",
                                   "usage": {"input_tokens": tokens, "output_tokens": 1}}}) + "\n"


def _states(workers: Path) -> dict[str, str]:
    reader = StoreReader(workers)
    try:
        return {str(w["name"]): str(w["state"]) for w in reader.workers()}
    finally:
        reader.close()


def test_a_token_count_too_big_for_the_store_does_not_stop_the_watcher(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path) -> None:
    tmux = Tmux(socket_name=server.socket_name)
    agent = create_worker(tmux, watcher.workers_dir, tmp_path, name="agent", cli="claude",
                          command="cat")
    watcher.tick()
    transcript = tmp_path / f"{SESSION}.jsonl"
    transcript.write_text(_usage_line("m1", 10**19) + _usage_line("m2", 10**400))
    server_pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    done = conductor("pty", "hook", "--cli", "claude", input_text=json.dumps(
        {"hook_event_name": "SessionStart", "source": "startup", "session_id": SESSION,
         "transcript_path": str(transcript)}),
        env={"TMUX_PANE": agent.pane_id, "TMUX": f"/tmp/x,{server_pid},0"})
    assert done.returncode == 0, done.stderr

    # A pane that came after the line: it reaches the store only if the ticks go on.
    create_worker(tmux, watcher.workers_dir, tmp_path, name="other", cli="shell", command="sh")

    def other_stored() -> bool:
        watcher.tick()
        return "other" in _states(watcher.workers_dir)

    retry_until(other_stored, 20)
    shown = conductor("-L", server.socket_name, "pty", "cost", "--json")
    assert shown.returncode == 0, shown.stderr
    [row] = json.loads(shown.stdout)
    # Held at the cap, not dropped: past any budget, so automation leaves the pane alone.
    assert (row["name"], row["input"]) == ("agent", MAX_TOKENS)
    assert math.isfinite(row["cost_usd"])
