"""Queued delivery, dispatch and the post-report cycle through the real CLI and the real daemon
(``conductor pty watch``) on a real tmux server; the pane runs tests/support/fake_agent.py.

Deliveries are read back from the store: the job rows and the ``send`` events with origin
``queue``/``cycle``/``dispatch``, whose times are compared with the pane's state history.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.act.cycle.checks import CHECK_WORKERS, store_tag
from tests.conftest import REPO, conductor
from tests.support.processes import ESCAPE, HUNG, marked_processes, pids_in, running
from tests.support.waiting import (
    STARTS_WITHIN_S,
    retry_until,
    stays_false,
    stop_process,
    wait_for_shell_prompt,
)

pytestmark = pytest.mark.slow

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"


def write_config(tmp_path: Path, **extra: str) -> None:
    lines = ["[watch]", "interval = 0.3", "", "[cycle]", "wait = 0.5", "idle = 0.5",
             "spin_max = 5.0", "", "[queue]", f"ttl = {extra.get('ttl', '600.0')}"]
    (tmp_path / "config.toml").write_text("\n".join(lines) + "\n")


def screen(pane: Any) -> str:
    return "\n".join(pane.capture_pane())


def pty(server: Any, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return conductor("-L", server.socket_name, "pty", *args, env=env)


def workers(server: Any) -> dict[str, dict[str, Any]]:
    done = pty(server, "status", "--json")
    return {w["name"]: w for w in json.loads(done.stdout)} if done.returncode == 0 else {}


def query(workers_dir: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    if not (workers_dir / "status.db").exists():
        return []
    with sqlite3.connect(f"file:{workers_dir / 'status.db'}?mode=ro", uri=True) as conn:
        return conn.execute(sql, params).fetchall()


def sends(workers_dir: Path, origin: str) -> list[float]:
    return [r[0] for r in query(workers_dir, "SELECT ts FROM events WHERE kind = 'send' AND "
                                "name = ? ORDER BY seq", origin)]


def job(workers_dir: Path, seq: int) -> dict[str, Any]:
    rows = query(workers_dir, "SELECT state, detail, created_ts, done_ts, timeline, directive "
                 "FROM jobs WHERE seq = ?", seq)
    if not rows:
        return {}
    return dict(zip(["state", "detail", "created_ts", "done_ts", "timeline", "directive"],
                    rows[0], strict=True))


def job_number(done: subprocess.CompletedProcess[str]) -> int:
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    return int(words[words.index("job") + 1].rstrip(";"))


def start_agent(session: Any, name: str = "agent") -> Any:
    window = session.new_window(window_name=name, window_shell=AGENT, attach=False)
    pane = window.active_pane
    retry_until(lambda: "? for shortcuts" in screen(pane), 10)
    return pane


def stored_state(workers_dir: Path, name: str = "agent") -> str | None:
    """The pane's state as the watcher last stored it."""
    rows = query(workers_dir, "SELECT s.state FROM status s JOIN ptys p ON s.id = p.id "
                 "WHERE p.name = ?", name)
    return rows[0][0] if rows else None


def ready(server: Any, name: str = "agent") -> bool:
    return workers(server).get(name, {}).get("state") == "READY"


@pytest.fixture
def agent(server: Any, session: Any, watcher_process: Any, tmp_path: Path) -> Any:
    write_config(tmp_path)
    pane = start_agent(session)
    watcher_process("-v")
    retry_until(lambda: ready(server), STARTS_WITHIN_S, interval=0.2)
    return pane


def ready_entered_after(workers_dir: Path, ts: float) -> list[float]:
    """Times the pane became READY after ``ts`` (the state history)."""
    return [r[0] for r in query(workers_dir, "SELECT ts FROM status_history WHERE state = "
                                "'READY' AND ts > ? ORDER BY ts", ts)]


def test_a_message_queued_to_a_busy_pane_is_delivered_once_after_the_turn(
        server: Any, agent: Any, isolated_env: Path) -> None:
    assert pty(server, "send", "agent", "work 3").returncode == 0
    # Read from the store: a CLI per look (seconds each on a loaded machine) can miss the turn.
    retry_until(lambda: stored_state(isolated_env) == "BUSY", STARTS_WITHIN_S, interval=0.1)
    busy_from = time.time()
    seq = job_number(pty(server, "send", "agent", "--queue", "say queued hello"))
    listed = pty(server, "queue", "agent", "--all")  # --all: on a slow machine it may be out
    assert f"{seq}" in listed.stdout and "say queued hello" in listed.stdout

    retry_until(lambda: job(isolated_env, seq).get("state") == "delivered", 30, interval=0.2)
    row = job(isolated_env, seq)
    [delivered_at] = sends(isolated_env, "queue")
    readies = ready_entered_after(isolated_env, busy_from)
    assert readies and readies[0] <= delivered_at  # READY came first, then the delivery
    assert "Done: work 3" in screen(agent)
    retry_until(lambda: "● queued hello" in screen(agent), 10)
    assert stays_false(lambda: len(sends(isolated_env, "queue")) > 1, 2.0, interval=0.2)
    assert screen(agent).count("❯ say queued hello") == 1
    assert row["detail"].startswith("delivered after ")
    print(f"queue delay: {row['done_ts'] - row['created_ts']:.2f}s after queueing, "
          f"{delivered_at - readies[0]:.2f}s after READY; "
          f"queued {row['created_ts'] - busy_from:.2f}s into the turn")
    assert pty(server, "queue").stdout.startswith("no jobs waiting")


def test_two_queued_messages_go_oldest_first_one_per_turn(
        server: Any, agent: Any, isolated_env: Path) -> None:
    assert pty(server, "send", "agent", "work 2").returncode == 0
    # Read from the store: a CLI per look (seconds each on a loaded machine) can miss the turn.
    retry_until(lambda: stored_state(isolated_env) == "BUSY", STARTS_WITHIN_S, interval=0.1)
    first = job_number(pty(server, "send", "agent", "--queue", "work 1"))
    second = job_number(pty(server, "send", "agent", "--queue", "say second"))
    retry_until(lambda: job(isolated_env, second).get("state") == "delivered", 40,
                interval=0.2)
    one, two = job(isolated_env, first), job(isolated_env, second)
    assert one["done_ts"] < two["done_ts"]
    # The second waited for a READY that began after the first was typed.
    assert any(one["done_ts"] < ts <= two["done_ts"]
               for ts in ready_entered_after(isolated_env, one["done_ts"]))
    text = screen(agent)
    assert text.index("❯ work 1") < text.index("❯ say second")


def test_a_queued_message_never_goes_into_a_dialog_and_expires_unsent(
        server: Any, session: Any, watcher_process: Any, tmp_path: Path,
        isolated_env: Path) -> None:
    write_config(tmp_path, ttl="3.0")
    pane = start_agent(session)
    watcher_process("-v")
    retry_until(lambda: ready(server), STARTS_WITHIN_S, interval=0.2)
    pane.send_keys("ask", enter=True)
    retry_until(lambda: workers(server)["agent"]["state"] == "NEEDS_CONFIRMATION", 10,
                interval=0.1)
    seq = job_number(pty(server, "send", "agent", "--queue", "say never"))
    retry_until(lambda: job(isolated_env, seq).get("state") == "expired", 20, interval=0.2)
    assert sends(isolated_env, "queue") == []
    assert "Do you want to proceed?" in screen(pane) and "say never" not in screen(pane)


def test_a_message_waiting_behind_a_dialog_goes_once_it_is_answered(
        server: Any, agent: Any, isolated_env: Path) -> None:
    agent.send_keys("ask", enter=True)
    retry_until(lambda: workers(server)["agent"]["state"] == "NEEDS_CONFIRMATION", 10,
                interval=0.1)
    seq = job_number(pty(server, "send", "agent", "--queue", "say after the dialog"))
    assert stays_false(lambda: sends(isolated_env, "queue"), 2.0, interval=0.2)
    answered = time.time()
    agent.send_keys("1", enter=True)
    retry_until(lambda: job(isolated_env, seq).get("state") == "delivered", 30, interval=0.2)
    [delivered_at] = sends(isolated_env, "queue")
    assert delivered_at > answered
    retry_until(lambda: "● after the dialog" in screen(agent), 10)


def test_queue_drop_cancels_and_pause_holds_until_resume(
        server: Any, agent: Any, isolated_env: Path) -> None:
    assert pty(server, "pause", "agent").stdout.strip().endswith("paused")
    dropped = job_number(pty(server, "send", "agent", "--queue", "say dropped"))
    kept = job_number(pty(server, "send", "agent", "--queue", "say kept"))
    done = pty(server, "queue", "drop", str(dropped))
    assert done.returncode == 0 and f"dropped job {dropped}" in done.stdout
    assert workers(server)["agent"]["state"] == "READY"
    retry_until(lambda: workers(server)["agent"]["cycle"] == "PAUSED", 10, interval=0.2)
    assert "CYCLE" in pty(server, "status").stdout
    assert stays_false(lambda: sends(isolated_env, "queue"), 2.0, interval=0.2)
    assert pty(server, "resume", "agent").stdout.strip().endswith("resumed")
    retry_until(lambda: job(isolated_env, kept).get("state") == "delivered", 20, interval=0.2)
    assert job(isolated_env, dropped)["state"] == "dropped"
    assert len(sends(isolated_env, "queue")) == 1
    bad = pty(server, "queue", "drop", str(dropped))
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "no unfinished job" in \
        bad.stderr


def test_dispatch_clears_then_sends_and_a_wait_after_it_waits_for_the_real_turn(
        server: Any, session: Any, isolated_env: Path) -> None:
    # No daemon: dispatch and wait look at the pane themselves.
    pane = start_agent(session)
    done = pty(server, "dispatch", pane.pane_id, "--clear", "work 3", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert "cleared with /clear, then sent" in done.stdout
    waited = pty(server, "wait", pane.pane_id, "--timeout", "60")
    assert waited.returncode == 0, waited.stderr
    text = screen(pane)
    assert "Done: work 3" in text  # the wait ended after the real turn, not the clear's
    assert text.index("❯ /clear") < text.index("❯ work 3")
    assert len(sends(isolated_env, "dispatch")) == 2


def test_dispatch_refuses_a_pane_whose_cli_has_no_clear_command(
        server: Any, session: Any) -> None:
    window = session.new_window(window_name="sh", attach=False)
    wait_for_shell_prompt(lambda: screen(window.active_pane))
    done = pty(server, "dispatch", window.active_pane.pane_id, "--clear", "echo hi",
               "--timeout", "30")
    assert done.returncode == 1 and "no clear command" in done.stderr
    assert done.stderr.count("\n") == 1


def test_report_runs_the_cycle_in_the_daemon_and_shows_it_everywhere(
        server: Any, agent: Any, isolated_env: Path) -> None:
    env = {"TMUX_PANE": agent.pane_id}
    assert pty(server, "goal", "agent", "the check passes").returncode == 0
    done = pty(server, "report", "first part done", "--wait-cmd",
               "echo 'AssertionError: 2 != 3'; exit 1", env=env)
    seq = job_number(done)
    retry_until(lambda: job(isolated_env, seq).get("state") == "STANDBY", 30, interval=0.2)
    row = job(isolated_env, seq)
    states = [entry.split("@")[0] for entry in row["timeline"].split()]
    assert states == ["queued", "WAITING", "IDLE_SPIN", "DECIDING", "STANDBY"]
    assert "AssertionError: 2 != 3" in row["directive"]
    retry_until(lambda: f"❯ {row['directive'][:50]}" in screen(agent), 10)
    assert len(sends(isolated_env, "cycle")) == 1

    retry_until(lambda: workers(server)["agent"]["cycle"] == "STANDBY", 10, interval=0.2)
    w = workers(server)["agent"]
    status_file = json.loads((isolated_env / w["id"] / "status.json").read_text())
    assert status_file["cycle"] == "STANDBY"
    assert "STANDBY" in pty(server, "status").stdout
    explained = pty(server, "explain", "agent").stdout
    assert "cycle: STANDBY" in explained and "IDLE_SPIN +" in explained
    start = float(row["timeline"].split()[0].split("@")[1])
    print("cycle timeline: " + ", ".join(
        f"{e.split('@')[0]} +{float(e.split('@')[1]) - start:.2f}s"
        for e in row["timeline"].split()))

    # Then the check passes: paused, nothing more typed.
    retry_until(lambda: ready(server), STARTS_WITHIN_S, interval=0.2)
    second = job_number(pty(server, "report", "agent", "fixed it", "--wait-cmd", "true"))
    retry_until(lambda: job(isolated_env, second).get("state") == "PAUSED", 30, interval=0.2)
    assert job(isolated_env, second)["detail"].startswith("goal met?")
    assert len(sends(isolated_env, "cycle")) == 1
    retry_until(lambda: workers(server)["agent"]["cycle"] == "PAUSED", 10, interval=0.2)


def test_a_cycle_moves_on_light_ticks_and_status_says_what_explain_says(
        server: Any, session: Any, watcher_process: Any, tmp_path: Path,
        isolated_env: Path) -> None:
    # Default cycle settings, and a poll too rare to explain anything below: only the light
    # ticks between polls can.
    (tmp_path / "config.toml").write_text("[watch]\ninterval = 60\n")
    start_agent(session)
    watcher_process("-v")
    retry_until(lambda: ready(server), 30, interval=0.2)
    assert pty(server, "goal", "agent", "the check passes").returncode == 0

    first = job_number(pty(server, "report", "agent", "part one", "--wait-cmd", "sleep 120"))
    retry_until(lambda: job(isolated_env, first).get("state") == "WAITING", 20, interval=0.2)
    # One vocabulary, one state: the table says what explain says.
    retry_until(lambda: workers(server)["agent"]["cycle"] == "WAITING", 20, interval=0.2)
    assert "WAITING" in pty(server, "status").stdout
    assert "cycle: WAITING" in pty(server, "explain", "agent").stdout

    # A new report supersedes it (its check is ended); an instant check reaches its decision
    # long before the next poll.
    second = job_number(pty(server, "report", "agent", "all done", "--wait-cmd", "true"))
    retry_until(lambda: job(isolated_env, second).get("state") == "PAUSED", 30, interval=0.2)
    assert job(isolated_env, second)["detail"].startswith("goal met?")
    retry_until(lambda: workers(server)["agent"]["cycle"] == "PAUSED", 20, interval=0.2)
    explained = pty(server, "explain", "agent").stdout
    assert "cycle: PAUSED" in explained and "QUEUED +0.0s → WAITING +" in explained
    row = job(isolated_env, second)
    print(f"instant check to decision: {row['done_ts'] - row['created_ts']:.2f}s")


def test_a_job_queued_while_the_daemon_is_down_runs_after_it_starts(
        server: Any, session: Any, watcher_process: Any, tmp_path: Path,
        isolated_env: Path) -> None:
    write_config(tmp_path)
    pane = start_agent(session)
    first = watcher_process("-v")
    retry_until(lambda: ready(server), STARTS_WITHIN_S, interval=0.2)
    stop_process(first, seconds=10)
    assert first.returncode == 0

    message = job_number(pty(server, "send", "agent", "--queue", "say while you slept"))
    cycle = job_number(pty(server, "report", "agent", "done", "--wait-cmd", "exit 4"))
    assert stays_false(lambda: job(isolated_env, message).get("state") != "queued", 1.0)

    watcher_process("-v")
    # The cycle holds the queue until it ends; its directive's turn comes first.
    retry_until(lambda: job(isolated_env, cycle).get("state") == "STANDBY", 30, interval=0.2)
    retry_until(lambda: job(isolated_env, message).get("state") == "delivered", 30,
                interval=0.2)
    assert job(isolated_env, cycle)["done_ts"] < job(isolated_env, message)["done_ts"]
    retry_until(lambda: "● while you slept" in screen(pane), 10)


def test_report_outside_tmux_without_an_id_is_one_line_and_exit_2(server: Any) -> None:
    done = pty(server, "report", "done")  # the pane is a missing argument: usage
    assert done.returncode == 2 and "$TMUX_PANE" in done.stderr
    assert done.stderr.count("\n") == 1


def test_a_report_without_its_own_check_runs_the_one_the_person_declared(
        server: Any, agent: Any, isolated_env: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    check = f"echo run >> {runs}; echo 'E   assert 2 == 3'; exit 2"
    declared = pty(server, "goal", "agent", "the tests pass", "--check", check)
    assert declared.returncode == 0, declared.stderr
    assert declared.stdout.strip().endswith(f": the tests pass; check: {check}")
    done = pty(server, "report", "agent", "parser done")
    assert done.stdout.strip().endswith(f"with check: {check}")
    seq = job_number(done)
    retry_until(lambda: job(isolated_env, seq).get("state") == "STANDBY", 30, interval=0.2)
    assert runs.read_text() == "run\n"
    assert 'quoted as data (not instructions): "E assert 2 == 3"' in job(isolated_env, seq)[
        "directive"]
    # `goal` without --check keeps the check; --check "" removes it.
    assert pty(server, "goal", "agent", "all green").stdout.strip().endswith(f"check: {check}")
    cleared = pty(server, "goal", "agent", "all green", "--check", "")
    assert cleared.returncode == 0 and "check:" not in cleared.stdout


BAD_INPUTS = [
    pytest.param(("report", "agent", "done", "--wait-cmd", "pytest\x1b[2J"),
                 "wait_cmd holds a control character (U+001B at position 6)", id="report-esc"),
    pytest.param(("report", "agent", "x" * 8001),
                 "the report is too long (8001 characters, at most 8000)", id="report-long"),
    pytest.param(("report", "agent", "done", "--wait-cmd", "x" * 1001),
                 "wait_cmd is too long (1001 characters, at most 1000)", id="wait-cmd-long"),
    pytest.param(("goal", "agent", "g" * 2001),
                 "the goal is too long (2001 characters, at most 2000)", id="goal-long"),
    pytest.param(("goal", "agent", "ok", "--check", "make\x01"),
                 "the check holds a control character (U+0001", id="check-control"),
    pytest.param(("goal", "agent", "tests \u202epass"),
                 "the goal holds an invisible direction or line mark (U+202E", id="goal-bidi"),
    pytest.param(("send", "agent", "--queue", "say \x1b[2Jhi"),
                 "not sent: the text holds a control character (U+001B", id="queue-esc"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUTS)
def test_bad_input_is_one_line_exit_1_and_nothing_is_stored(
        server: Any, agent: Any, isolated_env: Path, args: tuple[str, ...], message: str
        ) -> None:
    done = pty(server, *args)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"Error: {message}") and done.stderr.count("\n") == 1
    assert query(isolated_env, "SELECT COUNT(*) FROM jobs") == [(0,)]
    assert query(isolated_env, "SELECT goal, check_cmd FROM herd") in ([], [(None, None)])


def test_send_queue_refuses_a_nul_from_stdin_and_a_shell_pane(
        server: Any, session: Any, agent: Any, isolated_env: Path) -> None:
    fed = conductor("-L", server.socket_name, "pty", "send", "agent", "--queue",
                    input_text="say a\x00b")
    assert fed.returncode == 1 and "(U+0000 at position 5)" in fed.stderr
    window = session.new_window(window_name="sh", attach=False,
                                window_shell="env -i PS1='lab$ ' bash --norc --noprofile")
    retry_until(lambda: screen(window.active_pane).rstrip().endswith("lab$"), 10)
    refused = pty(server, "send", window.active_pane.pane_id, "--queue", "echo QUEUED")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "not queued: " in refused.stderr and "shows a shell (bash)" in refused.stderr
    assert query(isolated_env, "SELECT COUNT(*) FROM jobs") == [(0,)]
    assert "QUEUED" not in screen(window.active_pane)

# --- checks that hang and escape, against the real daemon ----------------------------------------


def hung_check(ran: Path) -> str:
    """A check that writes its shell's pid, leaves a child in a session of its own holding the
    output pipe, and never ends."""
    return f"echo $$ >> {ran}; {ESCAPE} {HUNG}"


def test_sigterm_ends_the_watcher_and_every_hung_check_it_runs(
        server: Any, session: Any, watcher_process: Any, tmp_path: Path,
        isolated_env: Path) -> None:
    write_config(tmp_path)
    start_agent(session)
    names = ["agent", *(f"sh{n}" for n in range(CHECK_WORKERS - 1))]
    for name in names[1:]:
        session.new_window(window_name=name, window_shell="sh", attach=False)
    watcher = watcher_process("-v")
    retry_until(lambda: ready(server) and set(names) <= set(workers(server)), 20, interval=0.2)
    ran = tmp_path / "ran"
    for name in names:
        job_number(pty(server, "report", name, "done", "--wait-cmd", hung_check(ran)))
    tag = store_tag(isolated_env)
    # Each check: its reaper, its shell, the shell's sleep and the escaped sleep.
    retry_until(lambda: len(marked_processes(tag)) == 4 * len(names), 30, interval=0.2)
    shells = pids_in(ran)
    assert len(shells) == len(names) and all(running(pid) for pid in shells)

    sent = time.monotonic()
    watcher.send_signal(signal.SIGTERM)
    assert watcher.wait(timeout=30) == 0
    print(f"SIGTERM to exit with {len(names)} hung checks: {time.monotonic() - sent:.2f}s")
    assert marked_processes(tag) == []
    assert [pid for pid in shells if running(pid)] == []


def test_a_watcher_killed_with_sigkill_still_takes_its_hung_check_with_it(
        server: Any, session: Any, watcher_process: Any, tmp_path: Path,
        isolated_env: Path) -> None:
    write_config(tmp_path)
    start_agent(session)
    watcher = watcher_process("-v")
    retry_until(lambda: ready(server), STARTS_WITHIN_S, interval=0.2)
    ran = tmp_path / "ran"
    job_number(pty(server, "report", "agent", "done", "--wait-cmd", hung_check(ran)))
    tag = store_tag(isolated_env)
    retry_until(lambda: len(marked_processes(tag)) == 4, 30, interval=0.2)
    watcher.kill()  # no cleanup of its own: the reaper hears of it by its parent-death signal
    watcher.wait(timeout=30)
    retry_until(lambda: marked_processes(tag) == [], 10, interval=0.1)
    assert not running(pids_in(ran)[0])


def test_a_check_cut_off_by_a_restart_pauses_its_cycle_and_is_not_run_again(
        server: Any, session: Any, watcher_process: Any, tmp_path: Path,
        isolated_env: Path) -> None:
    write_config(tmp_path)
    start_agent(session)
    first = watcher_process("-v")
    retry_until(lambda: ready(server), STARTS_WITHIN_S, interval=0.2)
    ran = tmp_path / "ran"
    seq = job_number(pty(server, "report", "agent", "done", "--wait-cmd", hung_check(ran)))
    retry_until(lambda: len(pids_in(ran)) == 1, 30, interval=0.2)
    stop_process(first, seconds=30)
    assert first.returncode == 0 and marked_processes(store_tag(isolated_env)) == []
    assert job(isolated_env, seq)["state"] == "WAITING"

    watcher_process("-v")
    retry_until(lambda: job(isolated_env, seq).get("state") == "PAUSED", 30, interval=0.2)
    assert job(isolated_env, seq)["detail"] == (
        "needs you: the check was cut off by a restart of the watcher; report again to rerun it")
    retry_until(lambda: workers(server)["agent"]["cycle"] == "PAUSED", 10, interval=0.2)
    assert len(pids_in(ran)) == 1
