"""`explain`'s live check with real tmux and a real watcher: it judges the pane with the
watcher's own evidence (the foreground program here) and so agrees with the stored state."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from app.adapters.store import StoreWriter
from app.adapters.store_read import StoreReader
from app.run.watcher import Watcher
from tests.conftest import conductor
from tests.support.waiting import retry_until


def stored(workers_dir: Path, name: str) -> dict[str, Any]:
    reader = StoreReader(workers_dir)
    try:
        return next((w for w in reader.workers() if w["name"] == name), {})
    finally:
        reader.close()


def test_a_pager_stored_as_a_question_is_one_live_too_judged_by_its_foreground_program(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path, tmp_path: Path) -> None:
    text = tmp_path / "long.txt"
    text.write_text("".join(f"line {n}\n" for n in range(200)))
    window = session.new_window(window_name="pager", attach=False)
    window.active_pane.send_keys(f"less {text}", enter=True)

    def asking() -> bool:
        watcher.tick(time.time())
        return stored(isolated_env, "pager").get("state") == "NEEDS_CONFIRMATION"

    retry_until(asking, 30, interval=0.2, message=f"{stored(isolated_env, 'pager')}")
    done = conductor("-L", server.socket_name, "pty", "explain", "pager")
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    assert done.stdout.startswith("pager (")
    live = [line for line in done.stdout.splitlines() if line.startswith("live ")]
    assert live[0].startswith("live screen, pack generic (foreground less): NEEDS_CONFIRMATION")
    assert live[1].startswith("live state: NEEDS_CONFIRMATION [")
    assert "UNKNOWN" not in "\n".join(live)


def test_a_pane_of_a_host_not_in_the_config_says_stored_evidence_not_gone(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> None:
    watcher.tick(time.time())  # the store exists, as the watcher made it
    store = StoreWriter(isolated_env)
    try:
        with store.transaction() as conn:
            store.upsert_pty(conn, {"id": "0123456789", "name": "far", "host": "gpu",
                                    "pane_id": "%0", "cwd": "/srv", "cli_type": "claude",
                                    "tmux_session": "w"})
            store.upsert_status(conn, [{
                "id": "0123456789", "state": "READY", "summary": "", "actions_needed": "",
                "confidence": 90, "reasons": ["stable_for_n"], "rule_id": "idle-prompt",
                "classifier": "pack:claude", "last_snapshot_hash": "h", "state_entered_ts": 1.0,
                "last_change_ts": 1.0, "stable_count": 3, "signals": []}])
    finally:
        store.close()
    done = conductor("-L", server.socket_name, "pty", "explain", "0123456789")
    assert done.returncode == 0, done.stderr
    assert "live screen: remote (gpu, not in the config): stored evidence" in done.stdout
    assert "the pane is gone" not in done.stdout
