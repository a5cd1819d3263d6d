"""A goal, a check command and a queued job are stored and printed without the secrets they may
hold (issue 29): the goal is stored redacted, a declared check holding a secret is refused
(masked it would not run, stored it would be kept and shown), and `queue` prints a queued
message and a report's one-off check masked although they are typed and run as written.
Through the real CLI on a real tmux server and store."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from app.act.cycle import jobs
from app.adapters.store import StoreWriter
from app.run.watcher import Watcher
from tests.conftest import conductor

SECRET = "Hunter2Secret"


def pty(server: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return conductor("-L", server.socket_name, "pty", *args)


def herd_row(workers: Path) -> tuple[Any, ...]:
    with sqlite3.connect(workers / "status.db") as conn:
        rows = conn.execute("SELECT goal, check_cmd FROM herd").fetchall()
    return rows[0] if rows else (None, None)


def watched(session: Any, watcher: Watcher) -> str:
    """The worker id of the session's pane, as the watcher stored it."""
    watcher.tick()
    pane_id = session.active_window.active_pane.pane_id
    [worker_id] = [t.worker_id for t in watcher.tracked.values() if t.pane.pane_id == pane_id]
    return str(worker_id)


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return str(lines[0])


def test_a_goal_is_stored_and_printed_redacted_and_a_check_with_a_secret_is_refused(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> None:
    worker_id = watched(session, watcher)

    done = pty(server, "goal", worker_id, f"deploy, the db password={SECRET} is in the vault",
               "--check", "pytest -q")
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout and "password=[REDACTED]" in done.stdout
    assert herd_row(isolated_env) == ("deploy, the db password=[REDACTED] is in the vault",
                                      "pytest -q")

    for check in (f"mysql -u app -p{SECRET} -e 'select 1'", f"PGPASSWORD={SECRET} psql -c 1",
                  f"redis-cli -a {SECRET} ping"):
        line = one_line(pty(server, "goal", worker_id, "ship it", "--check", check))
        assert "--check holds what looks like a secret" in line and SECRET not in line
    assert herd_row(isolated_env)[1] == "pytest -q"  # the refused checks changed nothing

    # A check that names where its secret is holds none.
    named = 'PGPASSWORD="$DB_PW" psql -c 1 && test "${API_TOKEN:-none}" != none'
    done = pty(server, "goal", worker_id, "ship it", "--check", named)
    assert done.returncode == 0, done.stderr
    assert herd_row(isolated_env)[1] == named


def test_queue_prints_queued_text_and_checks_masked(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> None:
    worker_id = watched(session, watcher)
    message = f"log in with token={SECRET} and rerun"
    jobs.queue_message(isolated_env, worker_id, message, 600.0)
    # A check stored raw by an older release, still waiting.
    store = StoreWriter(isolated_env)
    try:
        now = time.time()
        with store.transaction() as conn:
            store.jobs.add_job(conn, {"id": worker_id, "kind": jobs.CYCLE, "state": jobs.WAITING,
                                      "text": "done", "wait_cmd": f"mysql -p{SECRET} -e 1",
                                      "origin": "report", "created_ts": now, "state_ts": now,
                                      "detail": f"running mysql -p{SECRET} -e 1",
                                      "timeline": jobs.stamp(None, jobs.QUEUED, now)})
    finally:
        store.close()

    table = pty(server, "queue")
    listed = pty(server, "queue", "--json")

    assert table.returncode == 0 and listed.returncode == 0, table.stderr + listed.stderr
    assert SECRET not in table.stdout and SECRET not in listed.stdout
    assert "log in with token=[REDACTED] and rerun" in table.stdout
    assert "[check: mysql -p[REDACTED] -e 1]" in table.stdout
    assert {row["text"] for row in json.loads(listed.stdout)} == {
        "log in with token=[REDACTED] and rerun", "done"}
    with sqlite3.connect(isolated_env / "status.db") as conn:  # typed as written, when it is
        assert conn.execute("SELECT text FROM jobs WHERE kind = 'message'").fetchone() == (
            message,)
