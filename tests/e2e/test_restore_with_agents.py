"""Issue 33's acceptance, with the real Claude Code and Codex against the fake model servers:
panes in one folder, each in its own conversation; the tmux server is killed; `restore` brings
each back in its own conversation (the model sees each pane's earlier messages, never the
other's), or fresh when its session was never named, and the plan says so."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.run.watcher import Watcher
from tests.conftest import conductor
from tests.support.agents import (
    IDLE_FOOTER,
    AgentInTmux,
    AgentUnavailable,
    ClaudeInTmux,
    CodexInTmux,
    install_codex,
)
from tests.support.scripted_model import Say
from tests.support.waiting import retry_until

pytestmark = [pytest.mark.slow, pytest.mark.agent]

START_S = 90.0


def _idle(lab: AgentInTmux, pane_id: str) -> None:
    retry_until(lambda: bool(IDLE_FOOTER.search(lab.tmux("capture-pane", "-p", "-t", pane_id))),
                START_S, interval=0.2, message=f"claude in {pane_id} never idle")


def _still(lab: AgentInTmux, pane_id: str, quiet_s: float = 1.0) -> None:
    """Until the pane shows the idle footer on a screen unchanged for ``quiet_s``."""
    last = [""]
    since = [time.monotonic()]

    def held() -> bool:
        screen = lab.tmux("capture-pane", "-p", "-t", pane_id)
        if screen != last[0]:
            last[0], since[0] = screen, time.monotonic()
        return bool(IDLE_FOOTER.search(screen)) and time.monotonic() - since[0] >= quiet_s

    retry_until(held, START_S, interval=0.1, message=f"{pane_id} never held still")


def _ask(lab: AgentInTmux, pane_id: str, text: str, turns: int) -> None:
    last_typed = [time.monotonic()]

    def typed() -> bool:
        # A CLI busy redrawing (a resumed Codex under load) can drop keys: typed again then,
        # once nothing of the last try showed for 3 s (never twice on screen).
        screen = lab.tmux("capture-pane", "-p", "-t", pane_id)
        if text in screen:
            return True
        if text[-8:] not in screen and time.monotonic() - last_typed[0] >= 3.0:
            lab.tmux("send-keys", "-t", pane_id, "-l", text)
            last_typed[0] = time.monotonic()
        return False

    lab.tmux("send-keys", "-t", pane_id, "-l", text)
    retry_until(typed, 30, interval=0.1)
    asked = len(lab.server.requests)
    last_enter = [0.0]

    def submitted() -> bool:
        # Codex takes an Enter too close behind typed keys for part of a paste (a newline):
        # Enter again until the model is asked.
        if len(lab.server.requests) > asked:
            return True
        if time.monotonic() - last_enter[0] >= 3.0:
            lab.tmux("send-keys", "-t", pane_id, "Enter")
            last_enter[0] = time.monotonic()
        return False

    retry_until(submitted, 30, interval=0.1)
    lab.server.wait_for_turn_end(turns, seconds=START_S)


def _sent_with(lab: ClaudeInTmux, marker: str) -> str:
    """Every user text of the newest main request that carries ``marker``."""
    for body in reversed(lab.server.requests):
        text = json.dumps(body.get("messages") or [])
        if marker in text:
            return text
    raise AssertionError(f"no request carried {marker!r}")


def _sessions(lab: AgentInTmux) -> dict[str, Any]:
    done = conductor("-L", lab.socket_name, "pty", "status", "--json")
    return {w["id"]: w["session"] for w in json.loads(done.stdout)} if done.returncode == 0 \
        else {}


def _claude_hooked_and_on_path(claude: ClaudeInTmux, tmp_path: Path) -> Path:
    """Claude Code's hooks installed, and a folder to put first on PATH in which `claude` is the
    lab's binary (restore starts `claude` by name)."""
    installed = conductor("-L", claude.socket_name, "pty", "hooks", "install", "--cli", "claude",
                          "--path", str(claude.settings_path))
    assert installed.returncode == 0, installed.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(claude.binary)
    return bin_dir


def _second_pane(lab: AgentInTmux, argv: list[str], pack: str, workers_dir: Path
                 ) -> tuple[str, dict[str, str]]:
    """A second agent in the project's folder, idle; and each pane's row id once a watcher has
    seen both as that agent."""
    second: str = lab.tmux("new-window", "-d", "-c", str(lab.project), "-P", "-F", "#{pane_id}",
                           "--", *argv).strip()
    _idle(lab, second)
    with _watcher(lab, workers_dir) as watcher:
        def both_seen() -> bool:
            watcher.tick()
            return sorted(t.pack.name if t.pack else "" for t in watcher.tracked.values()
                          ) == [pack, pack]

        retry_until(both_seen, 30, interval=0.3)
        return second, {t.pane.pane_id: wid for wid, t in watcher.tracked.items()}


@contextlib.contextmanager
def _watcher(lab: AgentInTmux, workers_dir: Path) -> Iterator[Watcher]:
    """A watcher of the lab's tmux server writing to ``workers_dir``, closed after use."""
    store = StoreWriter(workers_dir)
    watcher = Watcher(Tmux(socket_name=lab.socket_name), store, load_packs(),
                      WatchSettings(interval_s=1, ready_min_s=0))
    try:
        yield watcher
    finally:
        watcher.close()
        store.close()


def test_two_claude_panes_in_one_folder_each_come_back_in_their_own_conversation(
        claude: ClaudeInTmux, tmp_path: Path, isolated_env: Path) -> None:
    bin_dir = _claude_hooked_and_on_path(claude, tmp_path)
    with claude:
        first = claude.pane_id
        second, ids = _second_pane(claude, [str(claude.binary)], "claude", isolated_env)
        claude.server.queue(Say("Noted alpha."), Say("Noted beta."))
        _ask(claude, first, "Remember the word ALPHA-SEVEN", 1)
        _ask(claude, second, "Remember the word BETA-NINE", 2)
        retry_until(lambda: all(_sessions(claude).get(i) for i in ids.values()), 20,
                    interval=0.3)
        before = _sessions(claude)
        assert before[ids[first]]["id"] != before[ids[second]]["id"]

        claude.tmux("kill-server")
        env = {**claude.pane_env(), "PATH": f"{bin_dir}{os.pathsep}{claude.pane_env()['PATH']}"}
        done = conductor("-L", claude.socket_name, "pty", "restore", env=env)
        assert done.returncode == 0, done.stderr
        assert len(re.findall(r"resume claude session", done.stdout)) == 2, done.stdout

        panes = dict(line.split(" ")[::-1] for line in claude.tmux(
            "list-panes", "-a", "-F", "#{pane_id} #{@conductor-id}").split("\n") if line)
        for pane_id in panes.values():
            _idle(claude, pane_id)
        claude.server.queue(Say("It was alpha."), Say("It was beta."))
        _ask(claude, panes[ids[first]], "Which word? QUESTION-ONE", 3)
        _ask(claude, panes[ids[second]], "Which word? QUESTION-TWO", 4)

    one, two = _sent_with(claude, "QUESTION-ONE"), _sent_with(claude, "QUESTION-TWO")
    assert "ALPHA-SEVEN" in one and "BETA-NINE" not in one
    assert "BETA-NINE" in two and "ALPHA-SEVEN" not in two


def _watch_once(lab: AgentInTmux, workers_dir: Path) -> None:
    """A watcher started and stopped: what a restart in between leaves in the store."""
    with _watcher(lab, workers_dir) as watcher:
        watcher.tick()


def test_after_a_watcher_restart_a_pane_whose_session_ended_comes_back_fresh_and_says_so(
        claude: ClaudeInTmux, tmp_path: Path, isolated_env: Path) -> None:
    bin_dir = _claude_hooked_and_on_path(claude, tmp_path)
    with claude:
        kept = claude.pane_id
        ended, ids = _second_pane(claude, [str(claude.binary)], "claude", isolated_env)
        claude.server.queue(Say("Noted alpha."), Say("Noted delta."))
        _ask(claude, kept, "Remember the word ALPHA-SEVEN", 1)
        _ask(claude, ended, "Remember the word DELTA-TWO", 2)
        retry_until(lambda: all(_sessions(claude).get(i) for i in ids.values()), 20,
                    interval=0.3)
        ended_session = _sessions(claude)[ids[ended]]["id"]
        # The person ends that conversation: Claude Code's SessionEnd names it ended.
        claude.tmux("send-keys", "-t", ended, "-l", "/exit")
        retry_until(lambda: "/exit" in claude.tmux("capture-pane", "-p", "-t", ended), 20,
                    interval=0.1)
        claude.tmux("send-keys", "-t", ended, "Enter")
        retry_until(lambda: (_sessions(claude).get(ids[ended]) or {}).get("ended") is True,
                    START_S, interval=0.3)

        _watch_once(claude, isolated_env)
        claude.tmux("kill-server")
        _watch_once(claude, isolated_env)  # restarted after the crash, before the restore
        env = {**claude.pane_env(), "PATH": f"{bin_dir}{os.pathsep}{claude.pane_env()['PATH']}"}
        done = conductor("-L", claude.socket_name, "pty", "restore", env=env)
        assert done.returncode == 0, done.stderr
        lines = {line.split()[1].strip("()"): line for line in done.stdout.splitlines()[1:]}
        assert "resume claude session" in lines[ids[kept]]
        assert f"fresh claude (its session {ended_session} had ended)" in lines[ids[ended]]

        panes = dict(line.split(" ")[::-1] for line in claude.tmux(
            "list-panes", "-a", "-F", "#{pane_id} #{@conductor-id}").split("\n") if line)
        for pane_id in panes.values():
            _idle(claude, pane_id)
        claude.server.queue(Say("It was alpha."), Say("Nothing yet."))
        _ask(claude, panes[ids[kept]], "Which word? QUESTION-ONE", 3)
        _ask(claude, panes[ids[ended]], "Which word? QUESTION-TWO", 4)

    one, two = _sent_with(claude, "QUESTION-ONE"), _sent_with(claude, "QUESTION-TWO")
    assert "ALPHA-SEVEN" in one and "DELTA-TWO" not in one
    assert "DELTA-TWO" not in two and "ALPHA-SEVEN" not in two


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


def _sent_input_with(lab: CodexInTmux, marker: str) -> str:
    for body in reversed(lab.server.requests):
        text = json.dumps(body.get("input") or body.get("messages") or [])
        if marker in text:
            return text
    raise AssertionError(f"no request carried {marker!r}")


def test_codex_comes_back_in_its_own_thread_and_a_fresh_pane_says_so(
        codex: CodexInTmux, tmp_path: Path, isolated_env: Path) -> None:
    """Codex names its thread only in notify (after a turn): the pane that had a turn resumes
    it; the one that never had one comes back fresh, and the plan said so. A watcher runs
    between the crash and the restore."""
    installed = conductor("-L", codex.socket_name, "pty", "hooks", "install", "--cli", "codex",
                          "--path", str(codex.config_path))
    assert installed.returncode == 0, installed.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "codex").symlink_to(codex.binary)
    with codex:
        first = codex.pane_id
        second, ids = _second_pane(codex, codex.command(), "codex", isolated_env)
        codex.server.queue(Say("Noted gamma."))
        _ask(codex, first, "Remember the word GAMMA-FOUR", 1)
        retry_until(lambda: bool(_sessions(codex).get(ids[first])), 20, interval=0.3)

        codex.tmux("kill-server")
        _watch_once(codex, isolated_env)  # a watcher restarted in between changes nothing
        env = {**codex.pane_env(), "PATH": f"{bin_dir}{os.pathsep}{codex.pane_env()['PATH']}"}
        done = conductor("-L", codex.socket_name, "pty", "restore", env=env)
        assert done.returncode == 0, done.stderr
        lines = {line.split()[1].strip("()"): line for line in done.stdout.splitlines()[1:]}
        assert "resume codex session" in lines[ids[first]]
        assert "fresh codex (its session id is unknown)" in lines[ids[second]]

        panes = dict(line.split(" ")[::-1] for line in codex.tmux(
            "list-panes", "-a", "-F", "#{pane_id} #{@conductor-id}").split("\n") if line)
        for pane_id in panes.values():
            _idle(codex, pane_id)
        # A resumed Codex draws its idle footer, then redraws the old thread for a while and
        # drops keys typed meanwhile: type once its screen held still.
        _still(codex, panes[ids[first]])
        codex.server.queue(Say("It was gamma."))
        _ask(codex, panes[ids[first]], "Which word? QUESTION-THREE", 2)

    assert "GAMMA-FOUR" in _sent_input_with(codex, "QUESTION-THREE")
