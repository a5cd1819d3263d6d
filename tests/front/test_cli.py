"""The CLI as a user runs it: a real `conductor pty watch` process against a real tmux server."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.adapters.store_read import StoreReader
from tests.conftest import REPO, conductor, conductor_in_process
from tests.support.waiting import STARTS_WITHIN_S, retry_until, wait_for_exit_status

QUESTION = "bash --norc --noprofile -c \"read -p 'Overwrite? (y/N) ' a; sleep 60\""
PRINTER = "sh -c 'i=0; while :; do i=$((i+1)); echo line $i; sleep 0.1; done'"


def status_json(socket: str) -> dict[str, dict[str, Any]]:
    # A subprocess, not conductor_in_process: with a reader that quick, the server test below
    # (dies and comes back) failed 2 runs in 10, its loss logged twice (not understood yet).
    done = conductor("-L", socket, "pty", "status", "--json")
    if done.returncode != 0:
        return {}
    return {w["name"]: w for w in json.loads(done.stdout)}


def watcher_problem(workers_dir: Path) -> str | None:
    reader = StoreReader(workers_dir)
    try:
        return (reader.daemon() or {}).get("problem")
    finally:
        reader.close()


def state_of(socket: str, name: str) -> str | None:
    worker = status_json(socket).get(name)
    return worker["state"] if worker else None


def attach_client(server: Any, session: Any) -> subprocess.Popen[bytes]:
    """A real client attached to ``session`` on a pseudo-terminal (`script`), as a person has."""
    client = subprocess.Popen(
        ["script", "-qfc", f"tmux -L {server.socket_name} attach -t {session.session_id}",
         "/dev/null"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        env={**os.environ, "TERM": "xterm", "LC_ALL": "C.UTF-8"},
    )
    retry_until(lambda: server.cmd("list-clients").stdout != [], 10)
    return client


@pytest.mark.slow
def test_watch_end_to_end(server: Any, session: Any, watcher_process: Any,
                          isolated_env: Path) -> None:
    server.cmd("set-option", "-g", "remain-on-exit", "on")
    session.new_window(window_name="idle", attach=False)
    session.new_window(window_name="printer", window_shell=PRINTER, attach=False)
    session.new_window(window_name="question", window_shell=QUESTION, attach=False)
    crashed = session.new_window(window_name="crashed", window_shell="sh -c 'exit 3'",
                                 attach=False)
    wait_for_exit_status(server, crashed.active_pane, 3)
    proc = watcher_process("--interval", "1")
    socket = server.socket_name

    # Within 3 polls of --interval 1 (plus start-up and a poll of slack for a loaded machine).
    expected = {"idle": "READY", "printer": "BUSY", "question": "NEEDS_CONFIRMATION",
                "crashed": "ERROR"}
    retry_until(lambda: all(state_of(socket, n) == s for n, s in expected.items()), 8,
                interval=0.2, message=f"states: {status_json(socket)}")

    workers = status_json(socket)
    for name, state in expected.items():
        on_disk = json.loads((isolated_env / workers[name]["id"] / "status.json").read_text())
        assert on_disk["state"] == state
    short = conductor_in_process("-L", socket, "pty", "status", "--short")
    assert short.returncode == 0
    assert "[question: NEEDS_CONF]" in short.stdout
    assert "[idle: READY]" in short.stdout
    # Needing a human comes first.
    assert short.stdout.index("question") < short.stdout.index("idle")
    table = conductor_in_process("-L", socket, "pty", "status").stdout.splitlines()
    assert "question" in table[1]

    # A killed window becomes EXITED within 2 cycles, its status.json too.
    doomed = workers["printer"]["id"]
    session.windows.get(window_name="printer").kill()
    retry_until(lambda: state_of(socket, "printer") == "EXITED", 2.5, interval=0.1)
    assert json.loads((isolated_env / doomed / "status.json").read_text())["state"] == "EXITED"

    # tail shows the history of a pane.
    tail = conductor_in_process("pty", "tail", workers["question"]["id"])
    assert tail.returncode == 0
    assert "-> NEEDS_CONFIRMATION" in tail.stdout

    # A second watcher on the same store refuses to start.
    second = subprocess.run(
        [sys.executable, "-m", "app", "-L", socket, "pty", "watch", "--interval", "1"],
        capture_output=True, text=True, timeout=30, cwd=REPO, check=False,
    )
    assert second.returncode == 1
    assert "already running" in second.stderr and f"(pid {proc.pid})" in second.stderr

    # SIGTERM: finish the cycle, exit 0, and the store says the watcher stopped.
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    short = conductor_in_process("pty", "status", "--short")
    assert short.stdout.strip() == "[conductor: watcher stopped]"


@pytest.mark.slow
def test_a_killed_watcher_leaves_no_lock_that_blocks_the_next(
    server: Any, session: Any, watcher_process: Any
) -> None:
    first = watcher_process("--interval", "0.2")
    retry_until(lambda: status_json(server.socket_name) != {}, STARTS_WITHIN_S, interval=0.1)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    second = watcher_process("--interval", "0.2")
    retry_until(lambda: "[conductor: watcher stopped]" not in
                conductor_in_process("pty", "status", "--short").stdout, STARTS_WITHIN_S,
                interval=0.1)
    assert second.poll() is None


@pytest.mark.slow
def test_watcher_waits_for_a_server_that_dies_and_comes_back(
    server: Any, session: Any, watcher_process: Any, isolated_env: Path
) -> None:
    proc = watcher_process("--interval", "0.2", "-v")
    socket = server.socket_name
    retry_until(lambda: status_json(socket) != {}, STARTS_WITHIN_S, interval=0.1)
    server.kill()
    retry_until(lambda: watcher_problem(isolated_env) == "tmux server not running",
                STARTS_WITHIN_S, interval=0.05)
    # A new server on the same socket: the watcher recovers and sees its panes.
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-s", "reborn", "-n", "phoenix"],
                   check=True)
    try:
        retry_until(lambda: "phoenix" in status_json(socket), STARTS_WITHIN_S, interval=0.1)
        assert watcher_problem(isolated_env) is None
        # Stopped before the server goes: a cycle between the two would log its loss again.
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], check=False)
    assert proc.returncode == 0
    assert err.count("no tmux server on socket") == 1
    assert err.count("is back") == 1


def test_once_with_no_server_exits_cleanly_and_says_so(tmp_path: Path) -> None:
    done = conductor("-L", f"absent-{os.getpid()}", "pty", "watch", "--once")
    assert done.returncode == 0
    assert "no tmux server on socket" in done.stderr


def test_create_rejects_a_missing_directory_and_creates_nothing(server: Any, session: Any) -> None:
    before = len(server.windows)
    done = conductor_in_process("-L", server.socket_name, "pty", "create", "/nonexistent/dir")
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: /nonexistent/dir does not exist; nothing created"
    assert len(server.windows) == before


def test_create_with_hostile_names_runs_nothing_and_registers_at_once(
    server: Any, session: Any, tmp_path: Path
) -> None:
    sentinel = tmp_path / "pwned"
    hostile = f"a b 'q' \"d\" $(touch {sentinel}); touch {sentinel}"
    folder = tmp_path / hostile.replace("/", "_")
    folder.mkdir()
    done = conductor("-L", server.socket_name, "pty", "create", str(folder), "--name", hostile)
    assert done.returncode == 0, done.stderr
    worker_id = done.stdout.strip()
    window = server.windows.get(window_name=hostile)
    retry_until(lambda: window.active_pane.pane_current_path == str(folder), 5)
    assert not sentinel.exists()
    listed = json.loads(conductor("-L", server.socket_name, "pty", "status", "--json").stdout)
    assert [w["name"] for w in listed if w["id"] == worker_id] == [hostile]


def test_create_names_a_window_worker_something_by_default(server: Any, session: Any,
                                                           tmp_path: Path) -> None:
    done = conductor("-L", server.socket_name, "pty", "create", str(tmp_path))
    assert done.returncode == 0, done.stderr
    names = [w.window_name for w in server.windows]
    assert any(n.startswith("worker-") for n in names)


def test_create_without_a_server_says_so(tmp_path: Path) -> None:
    done = conductor_in_process("-L", f"absent-{os.getpid()}", "pty", "create", str(tmp_path))
    assert done.returncode == 1
    assert "no tmux server running on socket" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["tail", "switch"])
def test_unknown_ids_are_one_clear_line(server: Any, session: Any, command: str) -> None:
    assert conductor("-L", server.socket_name, "pty", "watch", "--once").returncode == 0
    done = conductor_in_process("-L", server.socket_name, "pty", command, "nope")
    assert done.returncode == 1
    assert done.stderr.strip() == ("Error: no pane with id or name 'nope'; see "
                                   "`conductor pty status`")


def test_switch_selects_the_window_when_no_client_is_attached(server: Any, session: Any) -> None:
    session.new_window(window_name="target", attach=False)
    assert conductor("-L", server.socket_name, "pty", "watch", "--once").returncode == 0
    done = conductor("-L", server.socket_name, "pty", "switch", "target")
    assert done.returncode == 0, done.stderr
    assert "selected (no client attached)" in done.stdout
    active = server.cmd("display-message", "-p", "-t", session.session_id, "#{window_name}")
    assert active.stdout == ["target"]


def test_status_without_a_store(isolated_env: Path) -> None:
    short = conductor_in_process("pty", "status", "--short")
    assert (short.returncode, short.stdout.strip()) == (0, "[conductor: no store]")
    full = conductor_in_process("pty", "status")
    assert full.returncode == 1
    assert "no status store" in full.stderr


def test_a_broken_pack_stops_the_watcher_before_it_starts(tmp_path: Path) -> None:
    packs = tmp_path / "packs"
    packs.mkdir()
    (packs / "broken.yml").write_text("name: broken\nrules:\n  - id: x\n    state: READY\n"
                                      "    match: '(unclosed'\n")
    done = conductor("pty", "watch", "--once", env={"CONDUCTOR_PACKS_DIR": str(packs)})
    assert done.returncode == 1
    assert f"{packs / 'broken.yml'}:3: rule 'x' match: invalid regex" in done.stderr
    assert not (Path(os.environ["CONDUCTOR_WORKERS_DIR"]) / "status.db").exists()


def test_classify_reads_files_and_stdin(tmp_path: Path) -> None:
    screen = tmp_path / "q.txt"
    screen.write_text("user@host:~$ read -p 'Continue? (y/N) ' a\nContinue? (y/N) \n")
    one = conductor_in_process("pty", "classify", str(screen))
    assert one.returncode == 0
    assert one.stdout.startswith("NEEDS_CONFIRMATION")
    many = conductor_in_process("pty", "classify", "--json", "--cli", "shell", str(screen), "-",
                                input_text="user@host:~$ \n")
    rows = [json.loads(line) for line in many.stdout.splitlines()]
    assert [(r["file"], r["state"]) for r in rows] == [(str(screen), "NEEDS_CONFIRMATION"),
                                                       ("-", "READY")]
    missing = conductor_in_process("pty", "classify", str(tmp_path / "absent.txt"))
    assert missing.returncode != 0


def test_explain_shows_the_deciding_rule_and_the_rules_tried(server: Any, session: Any) -> None:
    session.new_window(window_name="asks", window_shell=QUESTION, attach=False)
    retry_until(lambda: "Overwrite?" in "\n".join(
        session.windows.get(window_name="asks").active_pane.capture_pane()), 10)
    assert conductor("-L", server.socket_name, "pty", "watch", "--once").returncode == 0
    done = conductor_in_process("-L", server.socket_name, "pty", "explain", "asks")
    assert done.returncode == 0, done.stderr
    assert "asks (" in done.stdout and "NEEDS_CONFIRMATION" in done.stdout
    assert "rule yes-no-question" in done.stdout
    assert "matched: Overwrite? (y/N)" in done.stdout
    assert "-> NEEDS_CONFIRMATION" in done.stdout  # the transition history
    assert "watched: by polling only" in done.stdout  # --once never starts control mode
    missing = conductor_in_process("-L", server.socket_name, "pty", "explain", "nope")
    assert missing.returncode == 1


@pytest.mark.slow
def test_switch_moves_an_attached_client_and_messages_reach_it(server: Any, session: Any) -> None:
    other = server.new_session(session_name="elsewhere", window_name="target", attach=False)
    client = attach_client(server, session)
    try:
        assert conductor("-L", server.socket_name, "pty", "watch", "--once").returncode == 0
        done = conductor("-L", server.socket_name, "pty", "switch", "target")
        assert done.returncode == 0, done.stderr
        assert "switched client" in done.stdout

        def client_session() -> list[str]:
            return list(server.cmd("list-clients", "-F", "#{session_name}:#{window_name}").stdout)

        retry_until(lambda: client_session() == ["elsewhere:target"], 5)

        from app.adapters.tmux import Tmux

        Tmux(socket_name=server.socket_name).display_message("api: READY #1")
        name = server.cmd("list-clients", "-F", "#{client_name}").stdout[0]
        retry_until(lambda: any("api: READY #1" in line for line in
                                server.cmd("show-messages", "-t", name).stdout), 5)
    finally:
        client.kill()
        client.wait(timeout=10)
        other.kill()


def test_a_bad_llm_setting_stops_the_watcher_before_it_starts(tmp_path: Path) -> None:
    done = conductor("pty", "watch", "--once",
                     env={"OPENROUTER_API_KEY": "sk-or-v1-secret", "CONDUCTOR_LLM_TIMEOUT": "soon"})
    assert done.returncode == 1
    assert "CONDUCTOR_LLM_TIMEOUT" in done.stderr
    assert "sk-or-v1-secret" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (Path(os.environ["CONDUCTOR_WORKERS_DIR"]) / "status.db").exists()


def test_watch_upgrades_an_older_config_in_place_and_uses_its_values(
        server: Any, session: Any, tmp_path: Path) -> None:
    config = Path(os.environ["CONDUCTOR_CONFIG"])
    config.write_text("# my settings\n[watch]\ninterval = 0.5  # fast, I have few panes\n")

    done = conductor("-L", server.socket_name, "pty", "watch", "--once")

    assert done.returncode == 0, done.stderr
    assert "added new settings" in done.stderr and "states.send_grace" in done.stderr
    text = config.read_text()
    assert text.startswith("# my settings\n[watch]\ninterval = 0.5  # fast, I have few panes\n")
    assert "[states]" in text and "waiting_grace = 120.0" in text and "[notify]" in text
    daemon = sqlite3.connect(Path(os.environ["CONDUCTOR_WORKERS_DIR"]) / "status.db").execute(
        "SELECT interval FROM daemon").fetchone()
    assert daemon == (0.5,)

    again = conductor("-L", server.socket_name, "pty", "watch", "--once")
    assert "added new settings" not in again.stderr
    assert config.read_text() == text


@pytest.mark.slow
def test_skip_focused_spares_the_pane_the_user_is_looking_at(
        server: Any, session: Any, tmp_path: Path) -> None:
    log = tmp_path / "notified.txt"
    Path(os.environ["CONDUCTOR_CONFIG"]).write_text(
        "[notify]\nskip_focused = true\n[notify.tmux]\nenabled = false\n"
        "[notify.desktop]\nenabled = false\n[notify.command]\n"
        f"argv = [\"sh\", \"-c\", 'echo \"$CONDUCTOR_NAME\" >> {log}']\n")
    seen = session.new_window(window_name="seen", window_shell=QUESTION, attach=False)
    session.new_window(window_name="unseen", window_shell=QUESTION, attach=False)
    seen.select()
    client = attach_client(server, session)
    try:
        retry_until(lambda: all("Overwrite?" in "\n".join(
            session.windows.get(window_name=name).active_pane.capture_pane())
            for name in ("seen", "unseen")), 10)
        done = conductor("-L", server.socket_name, "pty", "watch", "--once", "-v")
        assert done.returncode == 0, done.stderr
        retry_until(lambda: log.exists() and "unseen" in log.read_text(), 10)
        time.sleep(0.5)  # a notification for "seen" would have arrived by now too
        assert log.read_text().split() == ["unseen"]
    finally:
        client.kill()
        client.wait(timeout=10)


def test_status_shows_waiting_time_and_redraws_with_watch(
        server: Any, session: Any, isolated_env: Path) -> None:
    Path(os.environ["CONDUCTOR_CONFIG"]).write_text("[states]\nwaiting_grace = 0.5\n")
    session.new_window(window_name="asks", window_shell=QUESTION, attach=False)
    retry_until(lambda: "Overwrite?" in "\n".join(
        session.windows.get(window_name="asks").active_pane.capture_pane()), 10)
    assert conductor("-L", server.socket_name, "pty", "watch", "--once").returncode == 0
    time.sleep(0.6)

    workers = json.loads(conductor_in_process("pty", "status", "--json").stdout)
    asks = next(w for w in workers if w["name"] == "asks")
    assert asks["state"] == "NEEDS_CONFIRMATION"
    assert asks["waiting_s"] >= 0.5 and asks["waiting_long"] is True
    assert asks["inactive_s"] >= 0.5
    assert asks["signals"] == ["screen=NEEDS_CONFIRMATION", "watch=poll"]  # --once only polls
    assert workers[0]["name"] == "asks"  # the pane needing a human comes first
    table = conductor_in_process("pty", "status").stdout.splitlines()
    assert table[0].split() == ["ID", "NAME", "CLI", "STATE", "SINCE", "WAITING", "SUMMARY"]
    assert " long " in table[1] and "asks" in table[1]

    watching = subprocess.Popen([sys.executable, "-m", "app", "pty", "status", "--watch",
                                 "--interval", "0.2"], stdout=subprocess.PIPE, text=True,
                                cwd=REPO)
    assert watching.stdout is not None
    frames: list[str] = []
    lines: list[str] = []
    while len(frames) < 3:  # each frame starts by moving the cursor home: redrawn in place
        line = watching.stdout.readline()
        assert line, "status --watch stopped drawing"
        lines.append(line)
        if "\x1b[H" in line:
            frames.append(line)
    watching.send_signal(signal.SIGINT)
    watching.communicate(timeout=10)
    assert watching.returncode == 0
    assert all("conductor pty status" in frame for frame in frames)
    assert any("asks" in line and "NEEDS_CONFIRMATION" in line for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize(("argv", "logged"), [
    ('["sleep", "60"]', "killed after"),  # a receiver that hangs
    ('["sh", "-c", "exit 3"]', "exited 3"),  # one that fails
    ('["/nonexistent/notifier"]', "/nonexistent/notifier"),  # one that is not there
])
def test_a_failing_receiver_is_logged_and_the_watcher_keeps_polling(
        server: Any, session: Any, watcher_process: Any, isolated_env: Path, argv: str,
        logged: str) -> None:
    Path(os.environ["CONDUCTOR_CONFIG"]).write_text(
        "[notify]\ntimeout = 1.0\n[notify.tmux]\nenabled = false\n[notify.desktop]\n"
        f"enabled = false\n[notify.command]\nargv = {argv}\n")
    session.new_window(window_name="asks", window_shell=QUESTION, attach=False)
    proc = watcher_process("--interval", "0.3", "-v")
    db = isolated_env / "status.db"

    def cycles() -> float:
        row = sqlite3.connect(db).execute("SELECT last_cycle_ts FROM daemon").fetchone()
        return float(row[0] or 0) if row else 0.0

    retry_until(lambda: db.exists() and state_of(server.socket_name, "asks")
                == "NEEDS_CONFIRMATION", STARTS_WITHIN_S)
    first = cycles()
    retry_until(lambda: cycles() > first + 2.0, 15)  # still polling, seconds later
    assert proc.poll() is None
    session.new_window(window_name="later", window_shell=QUESTION, attach=False)
    retry_until(lambda: state_of(server.socket_name, "later") == "NEEDS_CONFIRMATION",
                STARTS_WITHIN_S)
    proc.terminate()
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0
    assert logged in err, err[-2000:]
