"""Hooks wake the watcher: the hook marks its pane (a tmux pane option and a ``wait-for``
channel), control mode hears it, and the pane's hook event counts at the next light tick."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from app.adapters import hookmark
from app.adapters.control import ControlMode, parse_notification
from app.adapters.store import StoreWriter
from app.adapters.store_read import StoreReader
from app.adapters.tmux import Tmux
from app.base.model import State
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.run.clock import URGENT_S
from app.run.watcher import Watcher
from tests.conftest import REPO, conductor
from tests.run.test_terminal_signals import BUSY_SCREEN, IDLE_SCREEN, Player
from tests.support.waiting import retry_until


@pytest.mark.parametrize(("value", "parsed"), [
    ("1795562975.123 turn_end", (1795562975.123, "turn_end")),
    (" 12 permission\n", (12.0, "permission")),
    (hookmark.format_mark(1795562975.5, "turn_start"), (1795562975.5, "turn_start")),
    ("", None), ("123", None), ("abc turn_end", None), ("nan turn_end", None),
    ("-5 turn_end", None), ("12 turn end; rm -rf /", None), ("12 $(x)", None),
])
def test_a_mark_is_read_back_and_anything_else_is_not_a_mark(
        value: str, parsed: tuple[float, str] | None) -> None:
    assert hookmark.parse_mark(value) == parsed


def test_the_subscription_names_the_pane_and_carries_the_mark() -> None:
    note = parse_notification(b"%subscription-changed conductor-hook $0 @0 0 %7 : 12.5 turn_end")
    assert note is not None and note.pane_id == "%7" and note.value == b"12.5 turn_end"



def server_env(server: Any, pane: Any) -> dict[str, str]:
    socket_path = server.cmd("display-message", "-p", "#{socket_path}").stdout[0]
    pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    return {"TMUX": f"{socket_path},{pid},0", "TMUX_PANE": pane.pane_id}


def run_hook(server: Any, pane: Any, name: str) -> None:
    """What Claude Code runs for one of its hook events."""
    payload = {"session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
               "hook_event_name": name}
    done = conductor("pty", "hook", input_text=json.dumps(payload), env=server_env(server, pane))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_hook_rings_the_channel_and_marks_its_pane_for_every_control_client(
        server: Any, session: Any, control: tuple[ControlMode, threading.Event],
        isolated_env: Path) -> None:
    mode, woken = control
    pane = session.active_window.active_pane
    mode.follow({session.session_id})
    retry_until(lambda: mode.watching(), 10)
    # The bell's waiter is in place once a ring reaches it: ring until one does.
    socket_path = server_env(server, pane)["TMUX"].split(",")[0]
    retry_until(lambda: woken.is_set() or (
        hookmark.ring(socket_path, pane.pane_id, hookmark.format_mark(1.0, "x")) == 0
        and woken.wait(0.2)), 10)
    woken.clear()
    before = time.time()
    run_hook(server, pane, "Stop")
    retry_until(woken.is_set, 10)
    option = server.cmd("show-options", "-p", "-v", "-t", pane.pane_id,
                        hookmark.OPTION).stdout[0]
    ts, event = hookmark.parse_mark(option) or (0.0, "")
    assert event == "turn_end" and ts >= before - 1
    marks: dict[str, tuple[float, str]] = {}
    retry_until(lambda: marks.update(mode.take_hook_marks()) or
                marks.get(pane.pane_id, (0, ""))[1] == "turn_end", 10)
    assert not (isolated_env / "hook.log").exists()


def test_after_a_stop_hook_the_next_light_tick_makes_the_idle_screen_ready(
        server: Any, session: Any, control: tuple[ControlMode, threading.Event],
        isolated_env: Path, tmp_path: Path) -> None:
    """READY cannot come from stillness here (ready_min_s is an hour): only from the hook."""
    mode, woken = control
    store = StoreWriter(isolated_env)
    watcher = Watcher(Tmux(socket_name=server.socket_name), store, load_packs(),
                      WatchSettings(interval_s=3600, ready_min_s=3600), control=mode)
    try:
        player = Player(session, tmp_path)
        player.do(f"show {BUSY_SCREEN}")
        retry_until(lambda: "esc to interrupt" in player.screen(), 10)
        watcher.tick(time.time())
        retry_until(lambda: mode.watching(), 10)
        run_hook(server, player.pane, "UserPromptSubmit")
        watcher.tick(time.time())

        def state() -> str:
            reader = StoreReader(isolated_env)
            try:
                row = next((w for w in reader.workers() if w["name"] == "agent"), {})
            finally:
                reader.close()
            return str(row.get("state"))

        retry_until(lambda: watcher.tick(time.time(), full=False) and state() == "BUSY", 10)
        player.do(f"show {IDLE_SCREEN}")
        retry_until(lambda: "for shortcuts" in player.screen(), 10)
        woken.clear()
        run_hook(server, player.pane, "Stop")
        retry_until(woken.is_set, 10)
        retry_until(lambda: watcher.tick(time.time(), full=False) and state() == "READY", 10)
    finally:
        store.close()


def test_after_a_stop_hook_a_pane_still_drawing_work_is_looked_at_again_without_waiting(
        server: Any, session: Any, control: tuple[ControlMode, threading.Event],
        isolated_env: Path, tmp_path: Path) -> None:
    """Claude Code runs its Stop hooks before it redraws: the screen the hook's wake finds still
    shows work. The idle screen drawn next is due a look URGENT_S after that capture, not
    min_capture_s (or the streaming pace) as ordinary output is; once READY, ordinary again.
    Ticks are given their time, so how fast this machine is does not matter."""
    mode, woken = control
    store = StoreWriter(isolated_env)
    watcher = Watcher(Tmux(socket_name=server.socket_name), store, load_packs(),
                      WatchSettings(interval_s=3600, ready_min_s=3600), control=mode)
    try:
        player = Player(session, tmp_path)
        player.do(f"show {BUSY_SCREEN}")
        retry_until(lambda: "esc to interrupt" in player.screen(), 10)
        watcher.tick(time.time())
        retry_until(lambda: mode.watching(), 10)
        tracked = next(t for t in watcher.tracked.values() if t.name == "agent")
        woken.clear()
        run_hook(server, player.pane, "Stop")  # the screen still shows the spinner
        retry_until(woken.is_set, 10)
        retry_until(lambda: watcher.tick(time.time(), full=False) and
                    tracked.captured_at > tracked.signals.turn_end > 0, 10)
        assert tracked.assessment is not None and tracked.assessment.state is State.BUSY

        # A light tick 0.1 s after that capture: sooner than an ordinary pane is looked at again.
        looked_at = tracked.captured_at
        player.do(f"show {IDLE_SCREEN}")
        retry_until(lambda: watcher.tick(looked_at + 2 * URGENT_S, full=False) and
                    tracked.assessment is not None and
                    tracked.assessment.state is State.READY, 10)

        looked_at = tracked.captured_at
        player.do(f"show {BUSY_SCREEN}")  # no turn end to wait for now: the ordinary pace
        retry_until(lambda: watcher.tick(looked_at + 2 * URGENT_S, full=False) and
                    watcher.clock.printed(player.pane.pane_id), 10)
        assert tracked.captured_at == looked_at
        assert watcher.settings.min_capture_s > 2 * URGENT_S
    finally:
        store.close()


OLD_CODEX_REPLY = REPO / "tests" / "corpus" / "codex-0.142.5" / "codex" / \
    "ready-after-long-answer-200x50.txt"


def test_a_reply_without_end_mark_is_ready_soon_after_its_turn_end_not_after_the_window(
        server: Any, session: Any, control: tuple[ControlMode, threading.Event],
        isolated_env: Path, tmp_path: Path) -> None:
    """Codex before 0.160 draws no end mark: its finished reply reads BUSY (no_end_mark). Its
    notify hook's turn end makes that still screen READY once it has settled, with no new
    output and no stability window (an hour here)."""
    mode, woken = control
    store = StoreWriter(isolated_env)
    watcher = Watcher(Tmux(socket_name=server.socket_name), store, load_packs(),
                      WatchSettings(interval_s=3600, ready_min_s=3600), control=mode)
    try:
        player = Player(session, tmp_path)
        player.do(f"show {OLD_CODEX_REPLY}")
        retry_until(lambda: "Improve documentation" in player.screen(), 10)
        watcher.tick(time.time())
        retry_until(lambda: mode.watching(), 10)
        tracked = next(t for t in watcher.tracked.values() if t.name == "agent")
        retry_until(lambda: watcher.tick(time.time(), full=False) and
                    tracked.assessment is not None and
                    tracked.assessment.state is State.BUSY, 10)
        assert tracked.assessment is not None
        assert "no_end_mark" in tracked.assessment.reasons
        # Still BUSY however long it stays still: no stillness alone may call it finished.
        watcher.tick(time.time() + 60, full=False)
        assert tracked.assessment is not None
        assert tracked.assessment.state is State.BUSY

        woken.clear()
        payload = {"type": "agent-turn-complete", "turn-id": "t1",
                   "last-assistant-message": "done"}
        done = conductor("pty", "hook", "--cli", "codex", json.dumps(payload),
                         env=server_env(server, player.pane))
        assert done.returncode == 0
        retry_until(woken.is_set, 10)
        retry_until(lambda: watcher.tick(time.time(), full=False) and
                    tracked.assessment is not None and
                    tracked.assessment.state is State.READY, 10)
        assert tracked.assessment is not None
        assert {"hook_event", "no_end_mark"} <= set(tracked.assessment.reasons)
    finally:
        store.close()
