"""What conductor shows a person holds neither someone else's terminal escapes nor a secret.

Printing: text an agent (or a screen, or a program naming its window) wrote is planted in the real
store: the rows any writer may leave there, an older release's included, so the printing edge is
what keeps the terminal safe, not the input checks in front of the store. The real CLI then
prints ``queue``, ``herd log``, ``herd list``, ``tail``, ``explain`` and ``status --watch``.

Logs and notifications: a check command holding an Anthropic key and a mysql password goes
through the real daemon (``conductor pty watch``) and its cycle; neither reaches ``watch.log``,
the daemon's stderr or a ``notify_command``'s environment.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.act.cycle import jobs
from app.adapters.store import StoreWriter
from app.run.watcher import Watcher
from tests.conftest import RECORD_ENV, REPO, conductor, read_jsonl, write_script
from tests.support.waiting import retry_until, stop_process

# A window title set, the screen cleared, the cursor sent home, the text reversed, and an 8-bit
# CSI: each would act on the terminal of whoever prints it raw.
EVIL = "fixed the parser \x1b]0;owned title\x07\x1b[2J\x1b[H\u202eevil\u202c done \x9b31m"
EVIL_CHECK = "pytest -q \x1b]2;owned\x07\x1b[2J\u202e; exit 1"
EVIL_NAME = "api\x1b]2;renamed\x07\u202e"
FORBIDDEN = ("\x1b", "\x07", "\x9b", "\u202e", "\u202c")


def pty(server: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return conductor("-L", server.socket_name, "pty", *args)


@pytest.fixture
def planted(server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> str:
    """A watched pane whose stored name, summary, history, goal, herd decision, queued message
    and cycle (report text, check, detail) all carry terminal escapes; the pane's id."""
    watcher.tick()
    pane_id = session.active_window.active_pane.pane_id
    [worker_id] = [t.worker_id for t in watcher.tracked.values() if t.pane.pane_id == pane_id]
    store = StoreWriter(isolated_env)
    try:
        now = time.time()
        with store.transaction() as conn:
            store.upsert_pty(conn, {"id": worker_id, "name": EVIL_NAME})
            store.upsert_status(conn, [{"id": worker_id, "summary": EVIL,
                                        "actions_needed": EVIL, "herd_reason": EVIL}])
            store.add_history(conn, [{"id": worker_id, "ts": now, "state": "READY",
                                      "previous_state": "BUSY", "summary": EVIL,
                                      "reasons": "prompt \x1b[2Jcleared"}])
            store.herd.upsert_herd(conn, {"id": worker_id, "enabled": 1, "rules": "conservative",
                                          "dry_run": 0, "goal": EVIL, "nudges": 1, "turn": 0,
                                          "last_nudge_ts": now, "updated_ts": now})
            store.herd.add_nudge(conn, {"id": worker_id, "ts": now, "name": EVIL_NAME,
                                        "eligible": 1, "outcome": "nudged", "reason": "",
                                        "rule_id": "continue",
                                        "text": EVIL, "state": "READY", "detail": EVIL})
            store.jobs.add_job(conn, {"id": worker_id, "kind": jobs.CYCLE, "state": jobs.WAITING,
                                      "text": EVIL, "wait_cmd": EVIL_CHECK, "origin": "report",
                                      "created_ts": now, "state_ts": now,
                                      "detail": f"running {EVIL_CHECK}",
                                      "timeline": jobs.stamp(jobs.stamp(None, jobs.QUEUED, now),
                                                             jobs.WAITING, now)})
            store.jobs.add_job(conn, {"id": worker_id, "kind": jobs.MESSAGE, "state": jobs.QUEUED,
                                      "text": EVIL, "origin": "send", "created_ts": now,
                                      "state_ts": now, "expires_ts": now + 600,
                                      "timeline": jobs.stamp(None, jobs.QUEUED, now)})
    finally:
        store.close()
    return worker_id


@pytest.mark.parametrize("command", [("queue",), ("queue", "--all"), ("herd", "log"),
                                     ("herd", "list"), ("tail", "ID"), ("explain", "ID")],
                         ids=["queue", "queue-all", "herd-log", "herd-list", "tail", "explain"])
def test_every_printed_column_is_clean(server: Any, planted: str,
                                       command: tuple[str, ...]) -> None:
    done = pty(server, *(planted if word == "ID" else word for word in command))
    assert done.returncode == 0, done.stderr
    for char in FORBIDDEN:
        assert char not in done.stdout, f"{char!r} printed by {' '.join(command)}"
    # The planted text itself is printed, only its escapes are gone.
    assert "fixed the parser" in done.stdout
    assert "owned title" not in done.stdout or command == ("herd", "log")  # log quotes it: repr


def test_queue_shows_the_check_and_explain_the_cycle_detail_without_their_escapes(
        server: Any, planted: str) -> None:
    queued = pty(server, "queue").stdout
    assert "[check: pytest -q ; exit 1]" in queued
    explained = pty(server, "explain", planted).stdout
    assert "cycle: WAITING" in explained and "running pytest -q ; exit 1" in explained
    assert "goal: fixed the parser" in explained
    # Columns line up on what the terminal shows: the header's TEXT sits above each text.
    header, *rows = queued.splitlines()
    assert all(row.index("fixed the parser") == header.index("TEXT") for row in rows)


def test_status_watch_draws_only_its_own_escapes(server: Any, planted: str,
                                                 tmp_path: Path) -> None:
    out = tmp_path / "watch.out"
    with out.open("w") as handle:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "-L", server.socket_name, "pty", "status", "--watch",
             "--interval", "0.2"], stdout=handle, stderr=subprocess.PIPE, text=True, cwd=REPO)
        try:
            retry_until(lambda: "fixed the parser" in out.read_text(), 20, interval=0.1)
        finally:
            proc.send_signal(signal.SIGINT)
            stop_process(proc, seconds=10)
    drawn = out.read_text()
    # Home, erase to the end of the line, erase below: the redraw's own; nothing else.
    leftover = drawn.replace("\x1b[H", "").replace("\x1b[K", "").replace("\x1b[J", "")
    for char in FORBIDDEN:
        assert char not in leftover
    assert "\x1b[2J" not in drawn


# --- secrets in logs and notifications, through the real daemon ---------------------------------

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"
ANTHROPIC_KEY = "sk-ant-api03-" + "Zq7RbW2xLm9TcV4nHp8KdY3sJf6GuA1e" * 3 + "_0AbCdEf-AA"
MYSQL_PASSWORD = "Hunter2pass"
# It passes (``true``), so the cycle pauses with "goal met?" quoting the check.
SECRET_CHECK = (f"true || mysql -u root -p{MYSQL_PASSWORD} shop || "
                f"curl -H 'x-api-key: {ANTHROPIC_KEY}' https://api.anthropic.com/v1/models")
SECRETS = (MYSQL_PASSWORD, ANTHROPIC_KEY[:24], ANTHROPIC_KEY[-24:])


def write_config(tmp_path: Path, notify_argv: list[str]) -> None:
    (tmp_path / "config.toml").write_text("\n".join([
        "[watch]", "interval = 0.3", "", "[cycle]", "wait = 0.5", "idle = 0.5",
        "spin_max = 5.0", "", "[notify.desktop]", "enabled = false", "",
        "[notify.command]", f"argv = {json.dumps(notify_argv)}", ""]))


@pytest.mark.slow
def test_a_secret_in_a_check_command_reaches_no_log_and_no_notification(
        server: Any, session: Any, watcher_process: Any, tmp_path: Path,
        isolated_env: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    write_config(tmp_path, [str(write_script(tmp_path / "hook", RECORD_ENV)), str(calls)])
    window = session.new_window(window_name="agent", window_shell=AGENT, attach=False)
    retry_until(lambda: "? for shortcuts" in "\n".join(window.active_pane.capture_pane()), 10)
    daemon = watcher_process()

    def ready() -> bool:
        done = pty(server, "status", "--json")
        return done.returncode == 0 and any(
            w["name"] == "agent" and w["state"] == "READY" for w in json.loads(done.stdout))

    retry_until(ready, 20, interval=0.2)
    done = pty(server, "report", "agent", f"done; mysql -p{MYSQL_PASSWORD} works",
               "--wait-cmd", SECRET_CHECK)
    assert done.returncode == 0, done.stderr

    def goal_met_notified() -> bool:
        return any(c["env"].get("CONDUCTOR_NOTE") == "goal_met" for c in read_jsonl(calls))

    retry_until(goal_met_notified, 30, interval=0.2)
    stop_process(daemon, seconds=10)
    assert daemon.stderr is not None
    stderr = daemon.stderr.read()
    log = (isolated_env / "watch.log").read_text(encoding="utf-8")

    # The check ran as written: the secret was there to leak.
    [stored] = StoreWriter(isolated_env).conn.execute(
        "SELECT wait_cmd FROM jobs WHERE kind = 'cycle'").fetchall()
    assert stored[0] == SECRET_CHECK
    assert "running true || mysql -u root -p[REDACTED] shop" in log
    [note] = [c for c in read_jsonl(calls) if c["env"]["CONDUCTOR_NOTE"] == "goal_met"]
    assert "mysql -u root -p[REDACTED] shop" in note["env"]["CONDUCTOR_BODY"]
    assert "x-api-key: [REDACTED]" in note["env"]["CONDUCTOR_MESSAGE"]
    for secret in SECRETS:
        assert secret not in log
        assert secret not in stderr
        for call in read_jsonl(calls):
            assert not [name for name, value in call["env"].items() if secret in value]
