"""The one gate in front of every keystroke (app/act/gate.py), on real tmux servers.

A dead pane (remain-on-exit) is refused by every path that types and the tmux server survives
(tmux 3.3a crashes on a paste into one); typists in separate processes never interleave; a menu
takes its own keys through `answer`, never typed text; prose for agents only reaches an agent
at its own prompt; `wait` on a dead pane ends at once. The agent panes run
tests/support/fake_agent.py,
which draws Claude Code's screens and reads its dialog key by key like a real menu.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.act import gate, handoff
from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.errors import PaneDead
from app.base.inputs import Refused
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from tests.conftest import REPO, conductor
from tests.support.waiting import retry_until, stays_false, wait_for_exit_status

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"
BASH = "env -i PATH=/usr/bin:/bin HOME=/tmp PS1='lab$ ' bash --norc --noprofile"


def screen(pane: Any) -> str:
    return "\n".join(pane.capture_pane())


def pty(server: Any, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return conductor("-L", server.socket_name, "pty", *args, timeout=timeout)


def server_pid(server: Any) -> int:
    return int(server.cmd("display-message", "-p", "#{pid}").stdout[0])


def refusals(workers: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(workers / "status.db") as conn:
        return list(conn.execute("SELECT name, pane_id, detail FROM events "
                                 "WHERE kind = 'refused' ORDER BY seq"))


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.fixture
def agent(session: Any) -> Any:
    pane = session.new_window(window_name="agent", window_shell=AGENT, attach=False).active_pane
    retry_until(lambda: "? for shortcuts" in screen(pane), 10)
    return pane


@pytest.fixture
def shell(session: Any, tmp_path: Path) -> Any:
    pane = session.new_window(window_name="shell", window_shell=BASH, attach=False,
                              start_directory=str(tmp_path)).active_pane
    retry_until(lambda: screen(pane).rstrip().endswith("lab$"), 10)
    return pane


@pytest.fixture
def dead(server: Any, session: Any, tmp_path: Path) -> Any:
    """A window `create --cmd` opened whose program exited with status 3, kept by tmux."""
    # Server-wide too, so the window stays even if its program ends before `create` sets it.
    server.cmd("set-option", "-g", "remain-on-exit", "on")
    done = pty(server, "create", str(tmp_path), "--name", "dead", "--cmd", "sleep 1; exit 3")
    assert done.returncode == 0, done.stderr
    [window] = [w for w in session.windows if w.window_name == "dead"]
    pane = window.active_pane
    wait_for_exit_status(server, pane, 3)
    return pane


def in_process(server: Any, workers: Path, pane: Any) -> tuple[Tmux, handoff.Target]:
    tmux = Tmux(socket_name=server.socket_name)
    return tmux, handoff.resolve(tmux, workers, pane.pane_id)


# --- a dead pane ---------------------------------------------------------------------------------

def test_a_dead_pane_refuses_every_way_to_type_and_the_server_survives(
        server: Any, dead: Any, agent: Any, isolated_env: Path) -> None:
    before = server_pid(server)

    for args in (("send", "dead", "hello"), ("send", "--force", "dead", "hello"),
                 ("answer", "dead", "approve")):
        line = one_line(pty(server, *args))
        assert "exited with status 3" in line and "dead pane" in line, line

    # The report cycle's directive: no user command, a decision made on the dead pane's screen.
    tmux, target = in_process(server, isolated_env, dead)
    watch = handoff.PaneWatch(tmux, target, load_packs(), WatchSettings(), isolated_env)
    watch.poll()
    with pytest.raises(Refused, match="exited with status 3"):
        handoff.send(tmux, target, "The check failed; fix it.", load_packs(), WatchSettings(),
                     isolated_env, origin="cycle", expect_screen=watch.tracked.stability_hash)
    # Below the gate, the paste itself is decided inside tmux: nothing reaches a dead pane.
    with pytest.raises(PaneDead):
        tmux.send_text(dead.pane_id, "hello")

    assert server_pid(server) == before
    assert "? for shortcuts" in screen(agent)
    assert pty(server, "send", agent.pane_id, "still alive").returncode == 0
    retry_until(lambda: "Answer to: still alive" in screen(agent), 10)
    assert [(origin, pane) for origin, pane, _ in refusals(isolated_env)] == [
        ("send", dead.pane_id), ("send", dead.pane_id), ("answer", dead.pane_id),
        ("cycle", dead.pane_id)]


def test_wait_on_a_dead_pane_exits_1_at_once_with_its_status(
        server: Any, dead: Any) -> None:
    # No --timeout: before the gate this waited for ever (the subprocess timeout would hit).
    line = one_line(pty(server, "wait", dead.pane_id))
    assert "exited with status 3" in line

    done = pty(server, "wait", dead.pane_id, "--until", "EXITED")
    assert done.returncode == 0, done.stderr
    assert "EXITED" in done.stdout


# --- the lock ------------------------------------------------------------------------------------

def test_ten_concurrent_sends_each_arrive_whole_and_run_separately(
        server: Any, shell: Any, tmp_path: Path) -> None:
    # --force: each send types behind the previous one without waiting for bash's next prompt;
    # only the lock keeps a paste from landing between another's text and its Enter.
    procs = [subprocess.Popen(
        [sys.executable, "-m", "app", "-L", server.socket_name, "pty", "send", "--force",
         shell.pane_id, "--", f"echo PAR{n} >> out.txt"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        for n in range(10)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err

    out = tmp_path / "out.txt"
    retry_until(lambda: out.exists() and len(out.read_text().splitlines()) >= 10, 20,
                message=f"{screen(shell)}")
    assert sorted(out.read_text().splitlines()) == [f"PAR{n}" for n in range(10)]


def test_a_typist_waits_for_the_lock_another_process_holds(
        server: Any, agent: Any, isolated_env: Path) -> None:
    tmux, target = in_process(server, isolated_env, agent)
    with gate.pane_lock(tmux, target, isolated_env):
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "-L", server.socket_name, "pty", "send",
             agent.pane_id, "behind the lock"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        assert stays_false(lambda: "behind the lock" in screen(agent) or
                           proc.poll() is not None, 2.0, interval=0.1)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    retry_until(lambda: "Answer to: behind the lock" in screen(agent), 10)


# --- dialogs take keys ---------------------------------------------------------------------------

def ask(agent: Any) -> None:
    agent.send_keys("ask", enter=True)
    retry_until(lambda: "Do you want to proceed?" in screen(agent), 10)


def test_answer_refuse_presses_the_refusing_option_and_approve_the_approving_one(
        server: Any, agent: Any, isolated_env: Path) -> None:
    ask(agent)
    done = pty(server, "answer", agent.pane_id, "refuse")
    assert done.returncode == 0, done.stderr
    assert "answered 'No' (3)" in done.stdout
    assert "Refused: rm -rf build was not run." in screen(agent)
    assert "Done: ask" not in screen(agent)

    ask(agent)
    done = pty(server, "answer", agent.pane_id, "approve")
    assert done.returncode == 0, done.stderr
    assert "answered 'Yes' (1)" in done.stdout
    retry_until(lambda: "Done: ask" in screen(agent), 10)
    with sqlite3.connect(isolated_env / "status.db") as conn:
        answers = [row[0] for row in conn.execute(
            "SELECT detail FROM events WHERE kind = 'send' AND name = 'answer' ORDER BY seq")]
    assert answers == ["answer 'No': 3", "answer 'Yes': 1"]


def test_answer_takes_an_option_by_key_or_label_and_lists_them_when_none_fits(
        server: Any, agent: Any, isolated_env: Path) -> None:
    ask(agent)
    line = one_line(pty(server, "answer", agent.pane_id, "maybe"))
    assert "no option 'maybe'" in line and "3 (No)" in line and "1 (Yes)" in line
    assert "Do you want to proceed?" in screen(agent)

    done = pty(server, "answer", agent.pane_id, "no")
    assert done.returncode == 0, done.stderr
    assert "Refused: rm -rf build was not run." in screen(agent)

    ask(agent)
    done = pty(server, "answer", agent.pane_id, "2")
    assert done.returncode == 0, done.stderr
    assert "answered 'Yes, and always allow" in done.stdout
    retry_until(lambda: "Done: ask" in screen(agent), 10)


def test_answer_presses_a_shell_questions_letter_and_enter(
        server: Any, shell: Any) -> None:
    shell.send_keys("read -p 'Delete everything? (y/N) ' a; echo \"got:$a\"", enter=True)
    retry_until(lambda: screen(shell).rstrip().endswith("(y/N)"), 10)

    done = pty(server, "answer", shell.pane_id, "refuse")

    assert done.returncode == 0, done.stderr
    assert "answered 'N' (n Enter)" in done.stdout
    retry_until(lambda: "got:n" in screen(shell), 10)


def test_answer_refuses_a_pane_that_asks_nothing(
        server: Any, agent: Any, shell: Any, isolated_env: Path) -> None:
    for pane in (agent, shell):
        line = one_line(pty(server, "answer", pane.pane_id, "approve"))
        assert "not asking anything" in line
    assert [origin for origin, _, _ in refusals(isolated_env)] == ["answer", "answer"]


def test_answer_says_so_when_the_dialog_stays_up(
        server: Any, session: Any, isolated_env: Path) -> None:
    # A dialog drawn by a program that reads its input and ignores it: the keys change nothing.
    dialog = (" Do you want to proceed?\\n ❯ 1. Yes\\n   2. No\\n\\n Esc to cancel\\n")
    pane = session.new_window(window_name="stuck", attach=False,
                              window_shell=f"sh -c 'printf \"{dialog}\"; exec cat >/dev/null'"
                              ).active_pane
    retry_until(lambda: "2. No" in screen(pane), 10)
    tmux, target = in_process(server, isolated_env, pane)
    with pytest.raises(gate.NotAnswered, match="still shows its dialog"):
        gate.answer(tmux, target, "refuse", load_packs(), WatchSettings(), isolated_env,
                    confirm_s=1.0)


def test_a_draft_is_kept_in_an_agent_whose_process_no_pack_claims(
        server: Any, session: Any) -> None:
    # Run as `python` (as Gemini CLI runs as `node`): a plain program by its name, an agent by
    # its screen, and its prompt holds what a person typed.
    pane = session.new_window(window_name="agent", window_shell=f"exec {AGENT}",
                              attach=False).active_pane
    retry_until(lambda: "? for shortcuts" in screen(pane), 10)
    assert pane.display_message("#{pane_current_command}", get_text=True)[0].startswith("python")
    pane.send_keys("half typed by the user", enter=False, literal=True)
    retry_until(lambda: "❯ half typed by the user" in screen(pane), 10)

    line = one_line(pty(server, "send", pane.pane_id, "work 1"))

    assert "unsent input" in line and "half typed by the user" in line
    assert "work 1" not in screen(pane)


# --- a busy shell -------------------------------------------------------------------------------

def test_send_into_a_shell_busy_with_a_program_refuses_unless_forced(
        server: Any, shell: Any, tmp_path: Path, isolated_env: Path) -> None:
    shell.send_keys("sleep 600", enter=True)  # busy until the test ends it (C-c)
    retry_until(lambda: "sleep" in server.cmd("display-message", "-p", "-t", shell.pane_id,
                                              "#{pane_current_command}").stdout[0], 10)
    line = one_line(pty(server, "send", shell.pane_id, "touch TYPED_AHEAD"))
    assert "busy running 'sleep'" in line and "typed ahead" in line and "--force" in line
    assert any("busy running" in detail for _, _, detail in refusals(isolated_env))

    assert pty(server, "send", shell.pane_id, "--force", "touch TYPED_AHEAD").returncode == 0
    retry_until(lambda: "touch TYPED_AHEAD" in screen(shell), 10)  # waits in the terminal
    assert not (tmp_path / "TYPED_AHEAD").exists()  # to run only once sleep ends
    shell.send_keys("C-c", enter=False)


# --- prose only to an agent at its prompt --------------------------------------------------------

def test_agent_only_types_prose_into_an_agent_at_its_prompt_and_nowhere_else(
        server: Any, agent: Any, shell: Any, tmp_path: Path, isolated_env: Path) -> None:
    packs, settings = load_packs(), WatchSettings()

    def type_prose(pane: Any) -> None:
        tmux, target = in_process(server, isolated_env, pane)
        gate.type_text(tmux, target, "Yes, please continue `touch RAN`.", packs, settings,
                       isolated_env, origin="herd", agent_only=True)

    with pytest.raises(Refused, match="shows a shell prompt, not an agent CLI"):
        type_prose(shell)
    shell.send_keys("cat", enter=True)
    retry_until(lambda: "cat" in server.cmd("display-message", "-p", "-t", shell.pane_id,
                                            "#{pane_current_command}").stdout[0], 10)
    with pytest.raises(Refused, match="runs 'cat', not an agent CLI"):
        type_prose(shell)
    assert not (tmp_path / "RAN").exists()

    type_prose(agent)
    retry_until(lambda: "Answer to: Yes, please continue" in screen(agent), 10)
    ask(agent)
    with pytest.raises(Refused, match="conductor pty answer agent"):
        type_prose(agent)


def test_the_daemons_writer_records_the_gates_sends_and_refusals_itself(
        server: Any, agent: Any, shell: Any, isolated_env: Path) -> None:
    """In the watcher the gate writes through the daemon's one writer, never a connection of its
    own (see _OPENING in app/adapters/store.py): its rows are in that writer's journal."""
    packs, settings = load_packs(), WatchSettings()
    writer = StoreWriter(isolated_env)
    try:
        writer.keep_journal()
        tmux, target = in_process(server, isolated_env, shell)
        with pytest.raises(Refused, match="not an agent CLI"):
            gate.type_text(tmux, target, "Go on.", packs, settings, isolated_env,
                           origin="herd", agent_only=True, writer=writer)
        tmux, target = in_process(server, isolated_env, agent)
        gate.type_text(tmux, target, "Go on.", packs, settings, isolated_env, origin="herd",
                       agent_only=True, writer=writer)
        retry_until(lambda: "Answer to: Go on." in screen(agent), 10)
        rows = writer.events.events_after(0)
        journalled = [sql for sql, _, _ in writer.journal() if "INTO events" in sql]
    finally:
        writer.close()
    assert [(r["kind"], r["pane_id"]) for r in rows] == [("refused", shell.pane_id),
                                                         ("send", agent.pane_id)]
    assert len(journalled) == 2
