"""Gemini CLI's hooks as installed, run the way Gemini CLI runs them (``bash -c LINE``, the payload
on stdin, its stdout and stderr read to their end) against a real tmux pane and store (issue 31).

Gemini CLI waits for a hook's shell to exit and its output to close before it goes on, and draws
its idle screen only after the AfterAgent hooks: that line must return at once, and the hook it
leaves behind must still record the event, stamped with the time Gemini fired it."""

from __future__ import annotations

import json
import os
import select
import shlex
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from app.adapters import hookmark
from app.adapters.store import StoreWriter
from app.install.hooks import hook_words, install
from app.observe.assess import NO_SIGNALS, Signals
from tests.support.tmux_sockets import socket_path
from tests.support.waiting import STARTS_WITHIN_S, retry_until

CONDUCTOR = [str(Path(sys.executable).parent / "conductor"), "pty", "hook"]


def installed_lines(tmp_path: Path) -> dict[str, str]:
    """Each event's command line as ``hooks install --cli gemini`` writes it."""
    path = tmp_path / ".gemini" / "settings.json"
    install("gemini", CONDUCTOR, path)
    hooks = json.loads(path.read_text())["hooks"]
    return {event: groups[0]["hooks"][0]["command"] for event, groups in hooks.items()}


def pane_env(server: Any, session: Any) -> dict[str, str]:
    """The environment a CLI in the session's pane gives its hooks."""
    pane_id = session.active_window.active_pane.pane_id
    server_pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    return {**os.environ, "TMUX_PANE": pane_id,
            "TMUX": f"{socket_path(server.socket_name)},{server_pid},0"}


def as_gemini_runs(line: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["bash", "-c", line], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)


def payload(event: str, fired: datetime) -> bytes:
    return json.dumps({
        "session_id": "7f1c2a4e-0d3b-4c55-9a61-3e2f8b9c0d11", "hook_event_name": event,
        "cwd": "/tmp", "transcript_path": "",
        "timestamp": fired.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        **({"prompt": "hi", "prompt_response": "hello", "stop_hook_active": False}
           if event == "AfterAgent" else {"prompt": "hi"}),
    }).encode()


def closed_empty(stream: Any) -> bool:
    """True when every writer of the pipe has closed it without writing (a read would say
    so at once); False, not a hang, when one still holds it open."""
    readable, _, _ = select.select([stream], [], [], STARTS_WITHIN_S)
    return bool(readable) and os.read(stream.fileno(), 1) == b""


def hook_rows(workers: Path) -> list[dict[str, Any]]:
    writer = StoreWriter(workers)
    try:
        return writer.events.events_after(0)
    finally:
        writer.close()


def test_the_turn_end_line_returns_before_its_hook_has_run_and_the_hook_still_records_it(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path) -> None:
    StoreWriter(isolated_env).close()
    env = pane_env(server, session)
    shell = as_gemini_runs(installed_lines(tmp_path)["AfterAgent"], env)
    assert shell.stdin is not None and shell.stdout is not None and shell.stderr is not None
    try:
        # Gemini has not written the payload yet, so the hook is still waiting for it: all
        # that can have ended here is the shell, with the output Gemini waits on.
        assert shell.wait(timeout=STARTS_WITHIN_S) == 0
        assert closed_empty(shell.stdout) and closed_empty(shell.stderr)
        assert hook_rows(isolated_env) == []
        fired = (datetime.now(timezone.utc) - timedelta(seconds=2)).replace(microsecond=250_000)
        shell.stdin.write(payload("AfterAgent", fired))
    finally:
        shell.stdin.close()  # an early failure: the hook reads an empty payload and exits
    retry_until(lambda: hook_rows(isolated_env), STARTS_WITHIN_S)
    [row] = hook_rows(isolated_env)
    assert (row["name"], row["event"], row["pane_id"]) == ("AfterAgent", "turn_end",
                                                          env["TMUX_PANE"])
    assert row["ts"] == fired.timestamp()
    # ...and it woke the watcher through the pane, with the same time.
    mark = hookmark.format_mark(fired.timestamp(), "turn_end")
    retry_until(lambda: server.cmd("show-options", "-p", "-v", "-t", env["TMUX_PANE"],
                                   hookmark.OPTION).stdout == [mark], STARTS_WITHIN_S)


def test_a_turn_end_recorded_after_the_next_turn_began_stays_the_older_event(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path) -> None:
    """The background AfterAgent of one turn may land after the BeforeAgent of the next (a
    person quick to type, a loaded machine): by its own time it is the older, so the turn that
    runs is not taken for ended."""
    StoreWriter(isolated_env).close()
    env = pane_env(server, session)
    lines = installed_lines(tmp_path)
    # Stamps a moment old (a stamp from the future is a clock's error, and taken as now).
    ended = (datetime.now(timezone.utc) - timedelta(seconds=3)).replace(microsecond=100_000)
    began = ended.replace(microsecond=600_000)
    late = as_gemini_runs(lines["AfterAgent"], env)
    assert late.stdin is not None
    try:
        assert late.wait(timeout=STARTS_WITHIN_S) == 0
        start = as_gemini_runs(lines["BeforeAgent"], env)
        start.communicate(payload("BeforeAgent", began), timeout=STARTS_WITHIN_S)
        assert start.returncode == 0
        late.stdin.write(payload("AfterAgent", ended))
    finally:
        late.stdin.close()
    retry_until(lambda: len(hook_rows(isolated_env)) == 2, STARTS_WITHIN_S)
    rows = hook_rows(isolated_env)
    assert [row["name"] for row in rows] == ["BeforeAgent", "AfterAgent"]  # in store order
    signals: Signals = NO_SIGNALS
    for row in rows:
        signals = signals.with_event(row["kind"], row["event"], row["name"], row["ts"])
    assert signals.turn_start == began.timestamp() > signals.turn_end == ended.timestamp()


def test_doctor_names_the_turn_end_hooks_an_older_install_left_in_the_foreground(
        tmp_path: Path) -> None:
    from app.run.doctor import hook_checks

    env = {"HOME": str(tmp_path), "PATH": "/nonexistent"}
    path = tmp_path / ".gemini" / "settings.json"
    install("gemini", CONDUCTOR, path)
    settings = json.loads(path.read_text())
    for groups in settings["hooks"].values():  # as installs before issue 31 wrote them
        for group in groups:
            for hook in group["hooks"]:
                hook["command"] = shlex.join(hook_words(hook["command"]))
    path.write_text(json.dumps(settings))
    [check] = [c for c in hook_checks(env) if c.name == "gemini"]
    assert not check.ok
    assert check.detail.startswith(f"AfterAgent, Notification in {path} run in the foreground")
    assert install("gemini", CONDUCTOR, path).changed
    [check] = [c for c in hook_checks(env) if c.name == "gemini"]
    assert check.ok and check.detail == f"installed in {path} (7 events)"
