"""A rule that asks where the terminal's cursor is (aider's prompt line: a draft while the
cursor is in it, a prompt just sent once Enter moved the cursor under it): the real watcher
reads the cursor with the capture, in the same tmux command, and judges the same text again
when only the cursor moved."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from app.adapters.store_read import StoreReader
from app.base.screen import Cursor
from app.observe.pack_loading import load_packs
from app.observe.packs import cursor_place
from app.run.watcher import Watcher
from tests.support.waiting import retry_until

REPO = Path(__file__).resolve().parents[2]
PROMPT = "diff> "
LINE = "diff> rename the config loader"


def test_the_cursor_is_placed_against_the_screens_last_line() -> None:
    text = "Tokens: 2.1k sent.\n" + "─" * 10 + "\n" + LINE
    assert cursor_place(text, None) is None
    assert cursor_place(text, Cursor(len(LINE), 2)) == "on_last_line"
    assert cursor_place(text, Cursor(0, 4)) == "below_last_line"
    assert cursor_place(text, Cursor(3, 0)) == "above_last_line"


def test_aider_reads_no_state_from_its_typed_line_without_the_cursor() -> None:
    screen = "─" * 10 + "\n" + LINE
    aider = load_packs()["aider"]
    assert aider.classify(screen).state.value == "UNKNOWN"
    assert aider.classify(screen, cursor=Cursor(len(LINE), 1)).state.value == "READY"
    assert aider.classify(screen, cursor=Cursor(0, 3)).state.value == "BUSY"
    # ...and `send` reads no draft to protect once the line was taken
    typed = LINE.removeprefix(PROMPT)
    assert aider.draft(screen) == typed == aider.draft(screen, Cursor(len(LINE), 1))
    assert aider.draft(screen, Cursor(0, 3)) is None


def row_of(watcher: Watcher, workers_dir: Path) -> dict[str, Any]:
    watcher.tick(time.time())
    reader = StoreReader(workers_dir)
    try:
        return next((w for w in reader.workers() if w["name"] == "prompt"), {})
    finally:
        reader.close()


def state_of(watcher: Watcher, workers_dir: Path) -> str:
    return str(row_of(watcher, workers_dir).get("state") or "")


def test_a_typed_line_is_ready_until_enter_takes_it_then_busy_on_the_same_text(
        watcher: Watcher, session: Any, isolated_env: Path) -> None:
    program = REPO / "tests" / "support" / "line_prompt.py"
    # Named aider, as tmux names the pane's program (argv[0]), so the aider pack judges it.
    window = session.new_window(
        window_name="prompt", attach=False,
        window_shell=f"bash -c 'exec -a aider {sys.executable} {program} \"$0\"' '{PROMPT}'")
    pane = window.active_pane
    retry_until(lambda: state_of(watcher, isolated_env) == "READY", 15)

    pane.send_keys(LINE.removeprefix(PROMPT), enter=False, literal=True)
    retry_until(lambda: LINE in "\n".join(pane.capture_pane()), 10)
    # The person's draft (the cursor is in the line): READY once the typing stopped, and it stays.
    retry_until(lambda: state_of(watcher, isolated_env) == "READY", 15)
    seen = [state_of(watcher, isolated_env) for _ in range(6)]
    assert set(seen) == {"READY"}, seen

    pane.send_keys("", enter=True)
    retry_until(lambda: pane.cmd("display-message", "-p", "#{cursor_x}").stdout == ["0"], 10)
    rows = [row_of(watcher, isolated_env) for _ in range(3)]
    assert rows[-1]["state"] == "BUSY" and "prompt_sent" in rows[-1]["reasons"], rows[-1]
    assert LINE in "\n".join(pane.capture_pane())  # the text did not change: the cursor did
