"""The poll cycle against a real tmux server, one ``tick`` at a time."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.classify.packs import load_packs
from app.config import WatchSettings
from app.model import State
from app.store import StoreReader, StoreWriter
from app.tmux import Tmux
from app.watch import Watcher
from tests.waiting import retry_until

PRINTER = "sh -c 'i=0; while :; do i=$((i+1)); echo line $i; sleep 0.1; done'"
QUESTION = "bash --norc --noprofile -c \"read -p 'Overwrite? (y/N) ' a; sleep 60\""
CRASHER = "sh -c 'echo boom >&2; exit 3'"


@pytest.fixture
def watcher(server: Any, isolated_env: Path) -> Iterator[Watcher]:
    store = StoreWriter(isolated_env)
    yield Watcher(
        Tmux(socket_name=server.socket_name), store, load_packs(), WatchSettings(interval_s=1)
    )
    store.close()


def screen_of(session: Any, window_name: str) -> str:
    pane = session.windows.get(window_name=window_name).active_pane
    return "\n".join(pane.capture_pane())


def states_by_name(workers_dir: Path) -> dict[str, dict[str, Any]]:
    reader = StoreReader(workers_dir)
    try:
        return {w["name"]: w for w in reader.workers()}
    finally:
        reader.close()


def test_each_kind_of_pane_reaches_its_state_within_three_polls(
    server: Any, session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    server.cmd("set-option", "-g", "remain-on-exit", "on")
    session.new_window(window_name="idle", attach=False)
    session.new_window(window_name="printer", window_shell=PRINTER, attach=False)
    session.new_window(window_name="question", window_shell=QUESTION, attach=False)
    session.new_window(window_name="crashed", window_shell=CRASHER, attach=False)
    retry_until(lambda: "Overwrite? (y/N)" in screen_of(session, "question"), 10)
    retry_until(lambda: "line 3" in screen_of(session, "printer"), 10)
    retry_until(lambda: screen_of(session, "idle").strip().endswith(("$", "#")), 10)

    for _ in range(3):
        watcher.tick(time.time())
        time.sleep(0.5)

    states = states_by_name(isolated_env)
    assert states["idle"]["state"] == "READY"
    assert states["idle"]["cli_type"] == "shell"
    assert states["printer"]["state"] == "BUSY", json.dumps(states["printer"])
    assert states["question"]["state"] == "NEEDS_CONFIRMATION"
    assert "Overwrite? (y/N)" in states["question"]["summary"]
    assert states["crashed"]["state"] == "ERROR"
    assert "status 3" in states["crashed"]["summary"]

    # status.json mirrors the store, one folder per pane.
    for worker in states.values():
        data = json.loads((isolated_env / worker["id"] / "status.json").read_text())
        assert data["state"] == worker["state"]
        assert data["pane_id"] == worker["pane_id"]
        assert set(data) >= {
            "id",
            "name",
            "tmux_session",
            "tmux_window",
            "pane_id",
            "cwd",
            "cli_type",
            "state",
            "summary",
            "actions_needed",
            "state_entered_ts",
            "last_change_ts",
        }


def test_a_closed_window_loses_its_row_and_folder_on_the_next_cycle(
    session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    window = session.new_window(window_name="doomed", attach=False)
    watcher.tick(time.time())
    doomed = states_by_name(isolated_env)["doomed"]
    assert (isolated_env / doomed["id"]).is_dir()

    window.kill()
    report = watcher.tick(time.time())

    assert doomed["id"] in report.removed
    assert "doomed" not in states_by_name(isolated_env)
    assert not (isolated_env / doomed["id"]).exists()


def test_start_up_cleans_rows_and_folders_of_panes_that_are_gone(
    session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    leftover = isolated_env / "0123456789"
    leftover.mkdir()
    (leftover / "status.json").write_text('{"state": "REA')  # a killed daemon's leftover
    with watcher.store.transaction() as conn:
        watcher.store.upsert_pty(conn, {"id": "abcdefabcd", "name": "ghost", "pane_id": "%999"})

    watcher.tick(time.time())

    assert not leftover.exists()
    assert "ghost" not in states_by_name(isolated_env)


def test_status_json_is_rewritten_when_truncated_and_only_when_it_changes(
    session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    session.new_window(window_name="calm", attach=False)
    watcher.tick(time.time())
    calm = states_by_name(isolated_env)["calm"]
    path = isolated_env / calm["id"] / "status.json"
    path.write_text('{"id": "trunc')

    restarted = Watcher(watcher.tmux, watcher.store, watcher.packs, watcher.settings)
    restarted.tick(time.time())
    assert json.loads(path.read_text())["id"] == calm["id"]

    stamp = path.stat().st_mtime_ns
    restarted.tick(time.time())
    if json.loads(path.read_text())["state"] == calm["state"]:
        assert path.stat().st_mtime_ns == stamp


def test_state_entered_survives_a_watcher_restart(
    session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    session.new_window(window_name="steady", attach=False)
    for _ in range(3):
        watcher.tick(time.time())
    first = states_by_name(isolated_env)["steady"]
    assert first["state"] == State.READY.value

    restarted = Watcher(watcher.tmux, watcher.store, watcher.packs, watcher.settings)
    restarted.tick(time.time() + 30)

    again = states_by_name(isolated_env)["steady"]
    assert again["state"] == State.READY.value
    assert again["state_entered_ts"] == first["state_entered_ts"]


def test_a_stopped_server_is_reported_not_raised(server: Any, watcher: Watcher) -> None:
    server.kill()
    report = watcher.tick(time.time())
    assert report.server_running is False


def test_a_pane_first_seen_idle_has_no_previous_state(session: Any, watcher: Watcher) -> None:
    session.new_window(window_name="fresh", attach=False)
    transitions = []
    for _ in range(3):
        transitions += watcher.tick(time.time()).transitions
    fresh = [t for t in transitions if watcher.tracked[t.pane_key].name == "fresh"]
    assert [(t.previous, t.state) for t in fresh] == [(None, State.READY)]
