"""The real Claude Code and Codex against the fake model, no hooks: their window titles alone (the
terminal's own signals, design/signals.md) make the finished turn READY, and never before the
model's last byte, nor over the approval dialog. The watcher runs with a READY window of an hour,
so READY can come from the signal only."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.adapters.control import ControlMode
from app.adapters.store import StoreWriter
from app.adapters.store_read import StoreReader
from app.adapters.tmux import Tmux
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.run.watcher import Watcher
from tests.support.agents import (
    AgentInTmux,
    AgentUnavailable,
    ClaudeInTmux,
    CodexInTmux,
    install_codex,
)
from tests.support.scripted_model import RunBash, Say
from tests.support.waiting import retry_until

pytestmark = [pytest.mark.slow, pytest.mark.agent]


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


class Watching:
    """A Watcher on control mode, ticking in a thread of its own as the daemon would."""

    def __init__(self, lab: AgentInTmux, workers: Path) -> None:
        self.store = StoreWriter(workers)
        self.woken = threading.Event()
        tmux = Tmux(socket_name=lab.socket_name)
        self.control = ControlMode(tmux, self.woken.set)
        self.watcher = Watcher(tmux, self.store, load_packs(),
                               WatchSettings(interval_s=3600, ready_min_s=3600),
                               control=self.control)
        self.workers = workers
        # (entered, recorded, state): when the tick that read it began (before its capture),
        # and when this thread got to record it (a moment after the capture).
        self.states: list[tuple[float, float, str]] = []
        self.history: list[tuple[float, str, Any, Any]] = []  # with reasons: for failures
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watching:
        self.watcher.tick(time.time())
        retry_until(lambda: self.control.watching(), 10)
        self.watcher.tick(time.time())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.woken.set()
        self._thread.join(timeout=10)
        self.control.close()
        self.store.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.woken.clear()
            self.watcher.tick(time.time(), full=False)
            row = self.row()
            if row and (not self.states or self.states[-1][2] != row["state"]):
                self.states.append((row["state_entered_ts"], time.time(), row["state"]))
            if row and (not self.history or self.history[-1][1:] != (
                    row["state"], row["reasons"], row["signals"])):
                self.history.append((time.time(), row["state"], row["reasons"], row["signals"]))
            due = self.watcher.next_due()
            self.woken.wait(0.2 if due is None else max(0.0, min(0.2, due - time.time())))

    def turn_ready(self, since: float) -> float | None:
        """When the READY after a turn sent at ``since`` was recorded: the first read after a
        BUSY read at ``since`` or later. Read, not recorded: a READY read before the prompt
        was sent is recorded a moment later, maybe after it."""
        before = [state for entered, _, state in self.states if entered <= since]
        busy = since if before and before[-1] == "BUSY" else next(
            (entered for entered, _, state in self.states if state == "BUSY" and entered > since),
            None)
        return None if busy is None else self.ready_after(busy)

    def ready_after(self, since: float) -> float | None:
        """When the first READY read after ``since`` was recorded."""
        return next((recorded for entered, recorded, state in self.states
                     if state == "READY" and entered > since), None)

    def now_in(self, state: str) -> bool:
        """The state the ticking thread saw last (what it recorded, with its time)."""
        return bool(self.states) and self.states[-1][2] == state

    def row(self) -> dict[str, Any]:
        reader = StoreReader(self.workers)
        try:
            return next(iter(reader.workers()), {})
        finally:
            reader.close()


def run_turns(lab: AgentInTmux, workers: Path) -> None:
    with lab, Watching(lab, workers) as watching:
        lab.server.queue(Say.words(16, delay=0.15), RunBash("rm -rf build", "Delete build"),
                         Say("Done."))
        lab.type_text("say something")
        time.sleep(0.3)
        started = time.time()
        lab.send_keys("Enter")
        end = lab.server.wait_for_turn_end(1)
        retry_until(lambda: watching.turn_ready(started) is not None, 30)
        row = watching.row()
        assert "title_event" in row["reasons"] and "term=title:stopped" in row["signals"], row
        ready = watching.turn_ready(started)
        assert ready is not None and ready >= end, (watching.history, started, end)

        lab.type_text("delete the build folder")
        time.sleep(0.3)
        lab.send_keys("Enter")
        retry_until(lambda: watching.now_in("NEEDS_CONFIRMATION"), 60)
        asked = time.time()
        retry_until(lambda: "Action Required" in lab.tmux(
            "display-message", "-p", "#{pane_title}") or lab.cli == "claude", 10)
        assert watching.row().get("state") == "NEEDS_CONFIRMATION"
        lab.send_keys("Enter")  # approve
        ends = lab.server.wait_for_turn_end(2)
        retry_until(lambda: watching.ready_after(asked) is not None, 30)
        ready = watching.ready_after(asked)
        assert ready is not None and ready >= ends, (watching.history, asked, ends)


def test_claude_codes_title_makes_its_finished_turn_ready_and_never_its_dialog(
        claude: ClaudeInTmux, isolated_env: Path) -> None:
    run_turns(claude, isolated_env)


def test_codexs_title_makes_its_finished_turn_ready_and_never_its_dialog(
        codex: CodexInTmux, isolated_env: Path) -> None:
    run_turns(codex, isolated_env)
