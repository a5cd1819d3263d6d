"""A hook on another host names its agent's session and transcript (issue 33): the shell line
of app.install.remote_hooks, run by a real ``sh`` with a Claude Code payload on stdin in a pane
of a real tmux server, sets the pane option; app.run.hosts.record_hooks turns the value, as
control mode reports it, into the events row a local hook would have written. A path with
quotes, ``$()``, spaces or a ``*`` arrives as it was and runs nothing; one with a newline, or
anything the line did not make, names no transcript."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from app.adapters.store import StoreWriter, db_path
from app.install.remote_hooks import hook_line
from app.run.hosts import record_hooks

SID = "7f1c2a4e-0d3b-4c55-9a61-3e2f8b9c0d11"


def run_hook(server: Any, pane_id: str, event: str, payload: str | None) -> str:
    """Run the line as the agent's hook would, in ``pane_id``'s environment; the option value
    as control mode reports it (``PID`` first)."""
    socket, pid = server.cmd("display-message", "-p", "#{socket_path} #{pid}").stdout[0].split()
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    env.update(TMUX=f"{socket},{pid},0", TMUX_PANE=pane_id)
    done = subprocess.run(["sh", "-c", hook_line("claude", event)], env=env, timeout=20,
                          input=payload.encode() if payload is not None else None,
                          stdin=subprocess.DEVNULL if payload is None else None,
                          capture_output=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    [value] = server.cmd("display-message", "-p", "-t", pane_id, "#{@conductor-hook}").stdout
    return f"{pid} {value}"


def recorded(workers: Path, server: Any, pane_id: str, value: str) -> dict[str, Any]:
    """The events row the value became."""
    store = StoreWriter(workers)
    try:
        record_hooks(store, [(pane_id, value, time.time())], "alpha:default")
    finally:
        store.close()
    with sqlite3.connect(db_path(workers)) as conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT * FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    return dict(row)


class Case(NamedTuple):
    id: str
    payload: dict[str, Any]
    transcript: str  # what the store must hold ("" for none)


def _payload(transcript: Any, **more: Any) -> dict[str, Any]:
    return {"session_id": SID, "transcript_path": transcript, "cwd": "/w",
            "hook_event_name": "Stop", **more}


CASES = [
    Case("plain", _payload("/h/.claude/projects/-w/s.jsonl"), "/h/.claude/projects/-w/s.jsonl"),
    Case("hostile", _payload("/h/it's $(touch /tmp/CANARY) \"q\" *`id`.jsonl"),
         "/h/it's $(touch /tmp/CANARY) \"q\" *`id`.jsonl"),
    Case("unicode", _payload("/h/caf\u00e9 \u00fc.jsonl"), "/h/caf\u00e9 \u00fc.jsonl"),
    Case("newline", _payload("/h/a\n$(touch /tmp/CANARY).jsonl"), ""),
    Case("relative", _payload("s.jsonl"), ""),
    Case("not-a-string", _payload(None, x="/evil.jsonl"), ""),
    # The same key inside a prompt or tool input is never the field.
    Case("nested", _payload("/good.jsonl", prompt='"transcript_path":"/evil.jsonl"',
                            tool_input={"transcript_path": "/evil2.jsonl"}), "/good.jsonl"),
]


@pytest.mark.parametrize("compact", [True, False], ids=["compact", "spaced"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_line_names_the_session_and_transcript_as_data(
        server: Any, session: Any, isolated_env: Path, tmp_path: Path, case: Case,
        compact: bool) -> None:
    pane_id = session.active_pane.pane_id
    text = json.dumps(case.payload, separators=(",", ":") if compact else None,
                      ensure_ascii=False)
    value = run_hook(server, pane_id, "Stop", text)
    row = recorded(isolated_env, server, pane_id, value)
    assert (row["session_id"], row["transcript"]) == (SID, case.transcript)
    assert not Path("/tmp/CANARY").exists()


def test_events_without_a_session_and_values_not_of_our_line_name_none(
        server: Any, session: Any, isolated_env: Path) -> None:
    pane_id = session.active_pane.pane_id
    text = json.dumps(_payload("/h/s.jsonl"))
    # A tool event's line does not read the payload; no payload at all (a terminal) is quiet.
    for event, payload in (("PreToolUse", text), ("SessionStart", None)):
        value = run_hook(server, pane_id, event, payload)
        assert recorded(isolated_env, server, pane_id, value)["session_id"] == ""
    pid = value.split()[0]
    for forged, named in ((f"{pid} claude Stop s={SID} t=/a b.jsonl 1 2", ""),  # split
                          (f"{pid} claude Stop s=x;rm t=/a.jsonl 1 2", ""),
                          (f"{pid} claude Stop t=/a.jsonl s={SID} 1 2", ""),
                          # The session stands, the path that is no JSON text does not.
                          (f"{pid} claude Stop s={SID} t=\"/a.jsonl 1 2", SID)):
        row = recorded(isolated_env, server, pane_id, forged)
        assert (row["session_id"], row["transcript"]) == (named, ""), forged
    good = recorded(isolated_env, server, pane_id, f"{pid} claude Stop s={SID} t=/a\\u0020b 1 2")
    assert (good["session_id"], good["transcript"], good["event"]) == (SID, "/a b", "turn_end")
