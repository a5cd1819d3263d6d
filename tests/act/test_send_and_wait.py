"""``send``, ``wait`` and ``hook`` against a real tmux server, one test per known race.

The pane runs tests/support/fake_agent.py, which draws Claude Code's real screens; each test writes
the
agent's hook events itself (through the real ``conductor pty hook``) at the moment its race needs.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, conductor
from tests.support.waiting import STARTS_WITHIN_S, retry_until, stays_false, wait_for_shell_prompt

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"


def screen(pane: Any) -> str:
    return "\n".join(pane.capture_pane())


@pytest.fixture
def agent(session: Any) -> Any:
    window = session.new_window(window_name="agent", window_shell=AGENT, attach=False)
    pane = window.active_pane
    retry_until(lambda: "? for shortcuts" in screen(pane), 10)
    return pane


def pty(server: Any, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return conductor("-L", server.socket_name, "pty", *args, **kwargs)


def hook(server: Any, pane: Any, payload: dict[str, Any] | str, *extra: str
         ) -> subprocess.CompletedProcess[str]:
    """What Claude Code runs: the payload on stdin, TMUX and TMUX_PANE in the environment."""
    socket_path = server.cmd("display-message", "-p", "#{socket_path}").stdout[0]
    pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return conductor("pty", "hook", *extra, input_text=text,
                     env={"TMUX": f"{socket_path},{pid},0", "TMUX_PANE": pane.pane_id})


def claude_event(name: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
            "hook_event_name": name, **fields}


def start_wait(server: Any, pane: Any, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app", "-L", server.socket_name, "pty", "wait", pane.pane_id,
         *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def finish(proc: subprocess.Popen[str], seconds: float = 30) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=seconds)
    return proc.returncode, out, err


# --- send ---------------------------------------------------------------------------------------

HOSTILE = ("-n; echo $(touch PWNED) `touch PWNED2` 'single' \"double\" \\back #{pane_id} %1 "
           "~ * ? [x] && || > out.txt\nsecond line; exit\n" + "long " * 1200)


def test_send_types_any_text_literally_and_records_the_send(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path) -> None:
    out = tmp_path / "received.txt"
    window = session.new_window(
        window_name="sink", attach=False, start_directory=str(tmp_path),
        window_shell=f"sh -c 'stty -icanon -echo; exec cat > {out}'")
    pane = window.active_pane
    retry_until(lambda: out.exists(), 5)

    done = pty(server, "send", pane.pane_id, "--", HOSTILE)

    assert done.returncode == 0, done.stderr
    expected = HOSTILE + "\n"
    retry_until(lambda: out.read_text() == expected, 10,
                message=f"received {out.read_text()[:200]!r}")
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED2").exists()
    rows = sqlite3.connect(isolated_env / "status.db").execute(
        "SELECT kind, event, pane_id, server_pid FROM events").fetchall()
    assert rows == [("send", "send", pane.pane_id, int(server.cmd(
        "display-message", "-p", "#{pid}").stdout[0]))]


def test_send_reads_the_text_from_stdin(server: Any, session: Any, tmp_path: Path) -> None:
    out = tmp_path / "received.txt"
    window = session.new_window(window_name="sink", attach=False,
                                window_shell=f"sh -c 'stty -icanon -echo; exec cat > {out}'")
    retry_until(lambda: out.exists(), 5)

    done = pty(server, "send", window.active_pane.pane_id, input_text="from stdin\n")

    assert done.returncode == 0, done.stderr
    retry_until(lambda: out.read_text() == "from stdin\n", 10)


def test_send_into_a_dialog_refuses_even_forced_and_names_answer(
        server: Any, agent: Any) -> None:
    agent.send_keys("ask", enter=True)
    retry_until(lambda: "Do you want to proceed?" in screen(agent), 10)

    for extra in ((), ("--force",)):
        refused = pty(server, "send", agent.pane_id, *extra, "3")

        assert refused.returncode == 1
        assert "waiting for confirmation" in refused.stderr
        assert "conductor pty answer agent" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    assert stays_false(lambda: "Do you want to proceed?" not in screen(agent), 0.5)

    answered = pty(server, "answer", agent.pane_id, "approve")
    assert answered.returncode == 0, answered.stderr
    assert "answered 'Yes' (1)" in answered.stdout
    retry_until(lambda: "Done: ask" in screen(agent), 10)


def test_send_refuses_to_mix_into_half_typed_input(server: Any, agent: Any) -> None:
    agent.send_keys("half typed by the user", enter=False, literal=True)
    retry_until(lambda: "❯ half typed by the user" in screen(agent), 10)

    refused = pty(server, "send", agent.pane_id, "work 1")

    assert refused.returncode == 1
    assert "unsent input" in refused.stderr and "half typed by the user" in refused.stderr


def test_send_to_an_unknown_pane_or_no_server_is_one_line(server: Any, session: Any) -> None:
    for done in (pty(server, "send", "%999", "hello"),
                 conductor("-L", "conductor-no-such-server", "pty", "send", "%1", "hello")):
        assert done.returncode == 1
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr


# --- wait ---------------------------------------------------------------------------------------

def test_wait_returns_when_the_turn_ends_not_before(server: Any, agent: Any) -> None:
    assert pty(server, "send", agent.pane_id, "work 3").returncode == 0
    code, out, err = finish(start_wait(server, agent, "--timeout", "30"))
    assert code == 0, err
    assert "Done: work 3" in screen(agent)
    assert "READY after" in out


def test_lost_stop_hook_wait_still_returns_once_the_screen_is_idle(
        server: Any, agent: Any) -> None:
    assert pty(server, "send", agent.pane_id, "work 2").returncode == 0
    assert hook(server, agent, claude_event("UserPromptSubmit", prompt="work 2")).returncode == 0
    # The agent's Stop hook never arrives.
    code, _, err = finish(start_wait(server, agent, "--timeout", "30"))
    assert code == 0, err
    assert "Done: work 2" in screen(agent)


def test_late_stop_from_the_previous_turn_does_not_end_the_wait(
        server: Any, agent: Any) -> None:
    # The agent shows its old idle screen for 1.5 s after Enter, like the real CLIs do briefly;
    # the previous turn's Stop lands inside that window.
    waiter = None
    assert pty(server, "send", agent.pane_id, "work 3 1.5").returncode == 0
    waiter = start_wait(server, agent, "--timeout", "30", "-v")
    assert hook(server, agent, claude_event("Stop", stop_hook_active=False)).returncode == 0
    code, _, err = finish(waiter)
    assert code == 0, err
    assert "Done: work 3 1.5" in screen(agent), err


def test_idle_prompt_box_visible_while_busy_is_not_ready(server: Any, agent: Any) -> None:
    # Long enough that the turn cannot end during the wait, however slow the machine.
    assert pty(server, "send", agent.pane_id, "work 30").returncode == 0
    retry_until(lambda: "esc to interrupt" in screen(agent), 10)
    assert "❯ " in screen(agent)  # Claude keeps its prompt box on screen while it works
    code, _, err = finish(start_wait(server, agent, "--timeout", "1.5"))
    assert code == 124
    assert "BUSY" in err


def test_a_confirmation_during_wait_keeps_it_waiting_and_says_why(
        server: Any, agent: Any) -> None:
    assert pty(server, "send", agent.pane_id, "ask").returncode == 0
    code, _, err = finish(start_wait(server, agent, "--timeout", "3", "-v"))
    assert code == 124
    assert "NEEDS_CONFIRMATION" in err and "still waiting" in err
    assert "timed out after" in err.splitlines()[-1]

    found = finish(start_wait(server, agent, "--until", "NEEDS_CONF", "--timeout", "10"))
    assert found[0] == 0, found[2]

    agent.send_keys("1", enter=True)
    code, _, err = finish(start_wait(server, agent, "--timeout", "30"))
    assert code == 0, err
    assert "Done: ask" in screen(agent)


def test_wait_works_alongside_a_running_watcher(
        server: Any, agent: Any, watcher_process: Any, isolated_env: Path) -> None:
    watcher_process("--interval", "0.5")
    retry_until(lambda: (isolated_env / "status.db").exists(), STARTS_WITHIN_S)
    assert pty(server, "send", agent.pane_id, "work 2").returncode == 0
    # Hang guards only: the CLI's start alone took 19 s with three suites on two cores.
    code, _, err = finish(start_wait(server, agent, "--timeout", "60"), 70)
    assert code == 0, err
    assert "Done: work 2" in screen(agent)


def test_wait_on_a_pane_the_watcher_saw_ready_takes_its_word_on_the_first_look(
        server: Any, agent: Any, watcher_process: Any, isolated_env: Path) -> None:
    watcher_process("--interval", "60")
    db = isolated_env / "status.db"

    def watcher_says_ready() -> bool:
        if not db.exists():
            return False
        try:
            with sqlite3.connect(db) as conn:
                rows = conn.execute("SELECT s.state FROM status s JOIN ptys p ON p.id = s.id "
                                    "WHERE p.pane_id = ?", (agent.pane_id,)).fetchall()
        except sqlite3.OperationalError:  # the watcher is still creating its tables
            return False
        return rows == [("READY",)]

    retry_until(watcher_says_ready, 30)
    code, out, err = finish(start_wait(server, agent, "--timeout", "30", "-v"))
    assert code == 0, err
    # Taken from the watcher on the first look, not after our own stability window.
    assert "watcher_verdict" in err.splitlines()[0], err
    assert "READY after" in out

    # After a send, that READY is the idle screen from before: the wait sees the turn end.
    assert pty(server, "send", agent.pane_id, "work 2").returncode == 0
    code, out, err = finish(start_wait(server, agent, "--timeout", "30"))
    assert code == 0, err
    assert "Done: work 2" in screen(agent)


def test_wait_for_a_pane_that_goes_away_is_an_error(
        server: Any, session: Any, tmp_path: Path) -> None:
    go = tmp_path / "go"
    window = session.new_window(window_name="short", attach=False,
                                window_shell=f"sh -c 'while [ ! -e {go} ]; do sleep 0.1; done'")
    proc = start_wait(server, window.active_pane, "--until", "ERROR", "--timeout", "60", "-v")
    assert proc.stderr is not None
    # The pane ends once `wait` has had its first look (-v says what it saw), however slowly
    # it started: before that, there is no pane to wait for, which is another error.
    looked = proc.stderr.readline()
    assert "still waiting" in looked, looked
    go.touch()
    code, _, err = finish(proc)
    assert code == 1
    told = [line for line in err.splitlines() if line and "still waiting" not in line]
    assert len(told) == 1 and "exited while waiting" in told[0], err


# --- hook ---------------------------------------------------------------------------------------

def test_hook_records_the_event_silently(server: Any, agent: Any, isolated_env: Path) -> None:
    done = hook(server, agent, claude_event("Notification", message="Claude needs your "
                                            "permission to use Bash",
                                            notification_type="permission_prompt"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    rows = sqlite3.connect(isolated_env / "status.db").execute(
        "SELECT kind, event, name, cli, pane_id FROM events").fetchall()
    assert rows == [("hook", "permission", "Notification", "claude", agent.pane_id)]


@pytest.mark.parametrize("payload", ["{not json", "[1, 2]", "", "\x00\xff"])
def test_malformed_hook_input_is_logged_and_never_disturbs_the_agent(
        server: Any, agent: Any, isolated_env: Path, payload: str) -> None:
    done = hook(server, agent, payload)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert "ignored" in (isolated_env / "hook.log").read_text()


def test_hook_outside_tmux_or_for_a_gone_pane_exits_0_silently(
        server: Any, session: Any, isolated_env: Path) -> None:
    outside = conductor("pty", "hook", input_text=json.dumps(claude_event("Stop")))
    assert (outside.returncode, outside.stdout, outside.stderr) == (0, "", "")
    assert "not inside a tmux pane" in (isolated_env / "hook.log").read_text()

    window = session.new_window(window_name="gone", attach=False)
    gone = window.active_pane
    window.kill()
    done = hook(server, gone, claude_event("Stop"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    # The watcher ignores the event of a pane it cannot see, and carries on.
    once = pty(server, "watch", "--once")
    assert once.returncode == 0, once.stderr


def test_hooks_install_merges_and_the_installed_command_records_events(
        server: Any, agent: Any, tmp_path: Path, isolated_env: Path) -> None:
    settings = tmp_path / "settings.json"
    mine = {"type": "command", "command": "echo mine"}
    settings.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [{"hooks": [mine]}]}}))

    done = pty(server, "hooks", "install", "--cli", "claude", "--path", str(settings))
    assert done.returncode == 0, done.stderr
    assert "installed" in done.stdout and "backup" in done.stdout
    merged = json.loads(settings.read_text())
    assert merged["model"] == "opus"
    stop_commands = [h["command"] for group in merged["hooks"]["Stop"] for h in group["hooks"]]
    assert "echo mine" in stop_commands and len(stop_commands) == 2
    assert pty(server, "hooks", "install", "--cli", "claude", "--path",
               str(settings)).stdout.startswith("conductor pty hooks for claude already")

    # Run what Claude Code would run, through a shell, from another folder and environment.
    ours = next(c for c in stop_commands if c != "echo mine")
    socket_path = server.cmd("display-message", "-p", "#{socket_path}").stdout[0]
    pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    env = {"PATH": "/usr/bin:/bin", "TMUX": f"{socket_path},{pid},0",
           "TMUX_PANE": agent.pane_id, "HOME": str(tmp_path)}
    ran = subprocess.run(["sh", "-c", ours], input=json.dumps(claude_event("Stop")), env=env,
                         capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
    rows = sqlite3.connect(isolated_env / "status.db").execute(
        "SELECT event, name, cli, pane_id FROM events").fetchall()
    assert rows == [("turn_end", "Stop", "claude", agent.pane_id)]


def test_send_and_wait_heed_the_watchers_confirmation_while_its_screen_is_up(
        server: Any, session: Any, isolated_env: Path) -> None:
    from app.adapters.store import StoreWriter, record_event
    from app.adapters.tmux import Tmux
    from app.base.settings import WatchSettings
    from app.observe.pack_loading import load_packs
    from app.run.watcher import Watcher

    pane = session.new_window(window_name="shell", attach=False).active_pane
    wait_for_shell_prompt(lambda: screen(pane))
    store = StoreWriter(isolated_env)
    watcher = Watcher(Tmux(socket_name=server.socket_name), store, load_packs(),
                      WatchSettings(ready_min_s=0))
    try:
        for _ in range(3):
            watcher.tick(time.time())
        # A permission hook the screen alone does not show (pack says READY).
        record_event(str(isolated_env), {
            "ts": time.time(), "kind": "hook", "event": "permission", "name": "Notification",
            "pane_id": pane.pane_id,
            "server_pid": int(server.cmd("display-message", "-p", "#{pid}").stdout[0])})
        watcher.tick(time.time())
    finally:
        store.close()

    refused = pty(server, "send", pane.pane_id, "echo hi")
    assert refused.returncode == 1 and "waiting for confirmation" in refused.stderr
    code, _, err = finish(start_wait(server, pane, "--timeout", "2.5"))
    assert code == 124 and "NEEDS_CONFIRMATION" in err  # wait never overrules it into READY

    pane.send_keys("echo moved on", enter=True)  # the watcher's verdict is now history
    retry_until(lambda: screen(pane).count("moved on") == 2, 10)
    allowed = pty(server, "send", pane.pane_id, "echo hi")
    assert allowed.returncode == 0, allowed.stderr


def test_send_is_not_fooled_by_a_suggested_prompt_drawn_dim(server: Any, agent: Any) -> None:
    agent.send_keys("suggest run the tests now", enter=True, literal=True)
    retry_until(lambda: "❯ run the tests now" in screen(agent), 10)  # plain text: looks typed

    done = pty(server, "send", agent.pane_id, "something else")

    assert done.returncode == 0, done.stderr
    retry_until(lambda: "Answer to: something else" in screen(agent), 10)
