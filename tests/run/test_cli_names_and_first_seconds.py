"""Issue 20 on a real tmux server: one stable word in the CLI column (`shell` for a shell, the
program's own name for a plain program), and a pane's first seconds do not flap."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.adapters.notify import Notifier
from app.base.model import State, Verdict
from app.base.settings import WatchSettings
from app.observe.assess import Policy, assess
from app.run.watcher import Watcher
from tests.conftest import REPO, conductor, read_jsonl
from tests.observe.test_shells_and_plain_programs import row, screen, shell_pane, tick_until
from tests.support.waiting import retry_until

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"


def ticks(watcher: Watcher, workers: Path, pane_id: str, count: int) -> list[dict[str, Any]]:
    seen = []
    for _ in range(count):
        watcher.tick(time.time())
        seen.append(row(workers, pane_id))
        time.sleep(0.2)
    return seen


def test_a_shell_is_called_shell_and_a_plain_program_by_its_name_all_along(
        server: Any, session: Any, tmp_path: Path, watcher: Watcher, isolated_env: Path) -> None:
    pane = shell_pane(session, tmp_path / "sh")
    plain = session.new_window(window_name="nap", window_shell="exec sleep 600",
                               attach=False).active_pane
    retry_until(lambda: plain.cmd("display-message", "-p", "#{pane_current_command}").stdout
                == ["sleep"], 10, message="sleep never in the foreground")
    napper = shell_pane(session, tmp_path / "nap", name="napper")
    napper.send_keys("sleep 600", enter=True)
    retry_until(lambda: napper.cmd("display-message", "-p", "#{pane_current_command}").stdout
                == ["sleep"], 10, message="sleep never in the foreground")
    tick_until(watcher, isolated_env, napper.pane_id, "BUSY")
    names: dict[str, set[str | None]] = {pane.pane_id: set(), plain.pane_id: set(),
                                         napper.pane_id: set()}

    napping: list[str] = []

    def look(count: int) -> None:
        for pane_id in names:
            rows = ticks(watcher, isolated_env, pane_id, count)
            names[pane_id] |= {r["cli_type"] for r in rows}
            if pane_id == napper.pane_id:
                napping.extend(r["state"] for r in rows)
    look(3)
    pane.send_keys("sleep 3", enter=True)  # a program the shell started: still a shell pane
    look(4)
    pane.send_keys("echo typed-not-run", enter=False)
    retry_until(lambda: screen(pane).rstrip().endswith("typed-not-run"), 15)
    look(3)

    assert names == {pane.pane_id: {"shell"}, plain.pane_id: {"sleep"}, napper.pane_id: {"shell"}}
    assert set(napping) == {"BUSY"}, napping  # `sleep 600` holds BUSY across every tick
    listed = json.loads(conductor("-L", server.socket_name, "pty", "status", "--json").stdout)
    assert {w["pane_id"]: w["cli_type"] for w in listed if w["pane_id"] in names} == {
        pane.pane_id: "shell", plain.pane_id: "sleep", napper.pane_id: "shell"}


def test_the_mcp_status_tool_names_a_shell_shell(
        server: Any, session: Any, tmp_path: Path, watcher: Watcher, isolated_env: Path) -> None:
    pytest.importorskip("mcp")
    from tests.front.test_mcp_server import session_calls, text_of

    pane = shell_pane(session, tmp_path / "sh")
    tick_until(watcher, isolated_env, pane.pane_id, "READY")
    _, [status] = asyncio.run(session_calls(server, isolated_env, pane.pane_id, [("status", {})]))

    assert not status.is_error, text_of(status)
    [mine] = [w for w in json.loads(text_of(status)) if w["pane_id"] == pane.pane_id]
    assert mine["cli_type"] == "shell"


def test_a_fresh_agent_flapping_in_its_first_seconds_notifies_ready_once(
        server: Any, session: Any, notified: tuple[Watcher, Notifier, Path],
        isolated_env: Path) -> None:
    """Claude Code went READY <-> BUSY three times in its first 20 s and sent three READY
    notifications. The fake agent does the same (three short turns as soon as it is up); no rate
    limit here (min_interval 0), so only the watcher's hold stands between the flaps and the
    person. One real turn after the pane settled is told, once."""
    watcher, notifier, out = notified
    # The default poll interval: a pane's first state must hold two of them (10 s) before it is
    # told, however fast this test ticks.
    watcher.settings = replace(watcher.settings, interval_s=5)
    pane = session.new_window(window_name="agent", window_shell=AGENT, attach=False).active_pane
    retry_until(lambda: "? for shortcuts" in screen(pane), 10)
    raw: list[str] = []

    def ticked(done: Callable[[], bool]) -> Callable[[], bool]:
        def check() -> bool:
            wid = row_id(isolated_env, pane.pane_id)
            raw.extend(t.state.value for t in watcher.tick(time.time()).transitions
                       if t.pane_key == wid)
            return done()
        return check
    retry_until(ticked(lambda: raw[-1:] == ["READY"]), 15, interval=0.1, message="never READY")
    for turn in range(3):
        pane.send_keys("work 0.3", enter=True)
        retry_until(ticked(lambda: screen(pane).count("Done: work 0.3") == turn + 1  # noqa: B023
                           and raw[-1:] == ["READY"]),
                    15, interval=0.1, message=f"turn {turn} never READY: {raw}")
    assert raw.count("READY") >= 4 and raw.count("BUSY") >= 3, raw  # it did flap
    retry_until(ticked(lambda: watcher.tracked[row_id(isolated_env, pane.pane_id)].settled),
                15, interval=0.2, message="the pane never settled")

    pane.send_keys("work 1", enter=True)
    retry_until(ticked(lambda: ready_notes(out) >= 1), 20, interval=0.2,
                message=f"the real turn's end was not told: {read_jsonl(out)}")
    for _ in range(5):  # nothing else arrives later
        ticked(lambda: True)()
        time.sleep(0.2)
    assert notifier.close()
    assert ready_notes(out) == 1, read_jsonl(out)


def ready_notes(out: Path) -> int:
    return sum(c["env"]["CONDUCTOR_STATE"] == "READY" for c in read_jsonl(out))


def row_id(workers: Path, pane_id: str) -> str:
    try:
        return str(row(workers, pane_id)["id"])
    except StopIteration:
        return ""


def test_unknown_needs_a_poll_interval_as_well_as_polls() -> None:
    """`sleep 600` typed at a prompt went BUSY, UNKNOWN, BUSY at defaults: for a moment after
    Enter the screen shows the command line while tmux still names the shell, and control mode's
    light ticks count polls fast. UNKNOWN must also last one interval before it is reported."""
    busy = Verdict(State.BUSY, 80, ("foreground_program",), summary="sleep is running")
    typed = Verdict(State.UNKNOWN, 50, ("neutral_screen",))
    policy = Policy.from_settings(WatchSettings(), 2)
    now = 1000.0
    a = assess(None, busy, "running", now, 2, policy=policy)
    reported = []
    for _ in range(8):  # light ticks 0.3 s apart, all inside one 5 s interval
        now += 0.3
        a = assess(a, typed, "typed", now, 2, policy=policy)
        reported.append(a.state)
    a = assess(a, busy, "running", now + 0.3, 2, policy=policy)
    assert set(reported) == {State.BUSY} and a.state is State.BUSY, reported
    for _ in range(20):  # a screen nothing reads, for good: UNKNOWN after the interval
        now += 0.5
        a = assess(a, typed, "typed", now, 2, policy=policy)
    assert a.state is State.UNKNOWN
