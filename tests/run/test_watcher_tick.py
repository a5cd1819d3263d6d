"""The poll cycle against a real tmux server, one ``tick`` at a time."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.adapters.notify import NotificationEvent, format_message
from app.adapters.store import record_event
from app.adapters.store_read import StoreReader
from app.base.model import State, Transition
from app.observe.pane import Tracked
from app.run.watcher import Watcher
from tests.conftest import RECORD_ENV, REPO, conductor, read_jsonl, write_script
from tests.support.waiting import (
    STARTS_WITHIN_S,
    retry_until,
    stays_false,
    wait_for_exit_status,
    wait_for_shell_prompt,
)

PRINTER = "sh -c 'i=0; while :; do i=$((i+1)); echo line $i; sleep 0.1; done'"
QUESTION = "bash --norc --noprofile -c \"read -p 'Overwrite? (y/N) ' a; sleep 60\""
CRASHER = "sh -c 'echo boom >&2; exit 3'"


def screen_of(session: Any, window_name: str) -> str:
    pane = session.windows.get(window_name=window_name).active_pane
    return "\n".join(pane.capture_pane())


def states_by_name(workers_dir: Path) -> dict[str, dict[str, Any]]:
    reader = StoreReader(workers_dir)
    try:
        return {w["name"]: w for w in reader.workers()}
    finally:
        reader.close()


def test_each_kind_of_pane_reaches_its_state_within_three_polls(
    server: Any, session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    server.cmd("set-option", "-g", "remain-on-exit", "on")
    session.new_window(window_name="idle", attach=False)
    session.new_window(window_name="printer", window_shell=PRINTER, attach=False)
    session.new_window(window_name="question", window_shell=QUESTION, attach=False)
    session.new_window(window_name="crashed", window_shell=CRASHER, attach=False)
    retry_until(lambda: "Overwrite? (y/N)" in screen_of(session, "question"), 30)
    retry_until(lambda: "line 3" in screen_of(session, "printer"), 30)
    wait_for_shell_prompt(lambda: screen_of(session, "idle"))
    wait_for_exit_status(server, session.windows.get(window_name="crashed").active_pane, 3)
    for _ in range(3):
        watcher.tick(time.time())
        time.sleep(0.5)

    states = states_by_name(isolated_env)
    assert states["idle"]["state"] == "READY"
    assert states["idle"]["cli_type"] == "shell"
    assert states["printer"]["state"] == "BUSY", json.dumps(states["printer"])
    assert states["question"]["state"] == "NEEDS_CONFIRMATION"
    assert "Overwrite? (y/N)" in states["question"]["summary"]
    assert states["crashed"]["state"] == "ERROR"
    assert "status 3" in states["crashed"]["summary"]

    # status.json mirrors the store, one folder per pane.
    for worker in states.values():
        data = json.loads((isolated_env / worker["id"] / "status.json").read_text())
        assert data["state"] == worker["state"]
        assert data["pane_id"] == worker["pane_id"]
        assert set(data) >= {
            "id",
            "name",
            "tmux_session",
            "tmux_window",
            "pane_id",
            "cwd",
            "cli_type",
            "state",
            "summary",
            "actions_needed",
            "state_entered_ts",
            "last_change_ts",
        }


def test_a_closed_window_becomes_a_final_exited_row_that_keeps_its_history(
    session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    seen: list[tuple[Transition, str]] = []
    watcher.on_transition = lambda t, tracked: seen.append((t, tracked.name))
    window = session.new_window(window_name="doomed", attach=False)
    for _ in range(3):
        watcher.tick(time.time())
    doomed = states_by_name(isolated_env)["doomed"]
    assert doomed["state"] == State.READY.value

    window.kill()
    report = watcher.tick(time.time())

    assert report.exited == [doomed["id"]] and report.removed == []
    final = states_by_name(isolated_env)["doomed"]
    assert final["state"] == State.EXITED.value
    assert final["summary"] == "the shell exited" and final["reasons"] == ["pane_gone"]
    on_disk = json.loads((isolated_env / doomed["id"] / "status.json").read_text())
    assert on_disk["state"] == State.EXITED.value and on_disk["name"] == "doomed"
    reader = StoreReader(isolated_env)
    try:
        states = [(r.previous_state, r.state) for r in reader.history(doomed["id"])]
    finally:
        reader.close()
    assert states[-1] == ("READY", "EXITED")
    [(transition, name)] = [(t, n) for t, n in seen if t.state is State.EXITED]
    assert name == "doomed" and transition.previous is State.READY
    message = format_message(NotificationEvent(
        worker_id=doomed["id"], name=name, session="s", window="doomed", pane_id="%1", cli="shell",
        previous=transition.previous, state=transition.state, summary=transition.verdict.summary))
    assert message.line == "doomed: the shell exited"

    # Final: later cycles neither repeat the transition nor touch the row.
    assert watcher.tick(time.time()).exited == []
    assert states_by_name(isolated_env)["doomed"]["state_entered_ts"] == final["state_entered_ts"]


def test_a_program_that_exits_without_remain_on_exit_is_exited_not_vanished(
    session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    session.new_window(window_name="brief", window_shell="sh -c 'read x'", attach=False)
    watcher.tick(time.time())
    brief = states_by_name(isolated_env)["brief"]
    session.windows.get(window_name="brief").active_pane.send_keys("", enter=True)
    retry_until(lambda: watcher.tick(time.time()).exited == [brief["id"]], 10)
    assert states_by_name(isolated_env)["brief"]["state"] == State.EXITED.value


def test_exited_rows_are_pruned_with_the_history_retention(
    session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    window = session.new_window(window_name="old", attach=False)
    watcher.tick(time.time())
    old = states_by_name(isolated_env)["old"]
    window.kill()
    watcher.tick(time.time())
    assert (isolated_env / old["id"] / "status.json").exists()

    # A restarted watcher prunes on its first cycle; eight days on, a 7-day retention drops it.
    later = Watcher(watcher.tmux, watcher.store, watcher.packs, watcher.settings)
    report = later.tick(time.time() + 8 * 86400)

    assert report.removed == [old["id"]]
    assert "old" not in states_by_name(isolated_env)
    assert not (isolated_env / old["id"]).exists()


def test_start_up_gives_panes_gone_meanwhile_a_final_row_and_cleans_orphan_folders(
    session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    leftover = isolated_env / "0123456789"
    leftover.mkdir()
    (leftover / "status.json").write_text('{"state": "REA')  # a killed daemon's leftover
    with watcher.store.transaction() as conn:
        watcher.store.upsert_pty(conn, {"id": "abcdefabcd", "name": "ghost", "pane_id": "%999",
                                        "cli_type": "claude"})
        watcher.store.upsert_status(conn, [{"id": "abcdefabcd", "state": "BUSY",
                                            "state_entered_ts": time.time() - 60}])

    report = watcher.tick(time.time())

    assert not leftover.exists() and report.removed == ["0123456789"]
    assert report.exited == ["abcdefabcd"]
    ghost = states_by_name(isolated_env)["ghost"]
    assert (ghost["state"], ghost["summary"]) == ("EXITED", "Claude Code exited")
    assert watcher.tick(time.time()).exited == []


def test_status_json_is_rewritten_when_truncated_and_only_when_it_changes(
    session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    session.new_window(window_name="calm", attach=False)
    watcher.tick(time.time())
    calm = states_by_name(isolated_env)["calm"]
    path = isolated_env / calm["id"] / "status.json"
    path.write_text('{"id": "trunc')

    restarted = Watcher(watcher.tmux, watcher.store, watcher.packs, watcher.settings)
    restarted.tick(time.time())
    assert json.loads(path.read_text())["id"] == calm["id"]

    stamp = path.stat().st_mtime_ns
    restarted.tick(time.time())
    if json.loads(path.read_text())["state"] == calm["state"]:
        assert path.stat().st_mtime_ns == stamp


def test_state_entered_survives_a_watcher_restart(
    session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    session.new_window(window_name="steady", attach=False)
    for _ in range(3):
        watcher.tick(time.time())
    first = states_by_name(isolated_env)["steady"]
    assert first["state"] == State.READY.value

    restarted = Watcher(watcher.tmux, watcher.store, watcher.packs, watcher.settings)
    restarted.tick(time.time() + 30)

    again = states_by_name(isolated_env)["steady"]
    assert again["state"] == State.READY.value
    assert again["state_entered_ts"] == first["state_entered_ts"]


def test_a_stopped_server_is_reported_not_raised(server: Any, watcher: Watcher) -> None:
    server.kill()
    report = watcher.tick(time.time())
    assert report.server_running is False


def test_a_pane_first_seen_idle_has_no_previous_state(session: Any, watcher: Watcher) -> None:
    window = session.new_window(window_name="fresh", attach=False)
    # A shell that has not drawn its prompt yet is a blank, moving screen: wait for the prompt so
    # the first look is the idle screen this test is about.
    retry_until(lambda: any(line.strip() for line in window.active_pane.capture_pane()))
    transitions = []
    for _ in range(3):
        transitions += watcher.tick(time.time()).transitions
    fresh = [t for t in transitions if watcher.tracked[t.pane_key].name == "fresh"]
    assert [(t.previous, t.state) for t in fresh] == [(None, State.READY)]


def test_a_permission_hook_makes_the_pane_needs_confirmation_on_the_next_poll(
    server: Any, session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    pane = session.new_window(window_name="agent", attach=False).active_pane
    wait_for_shell_prompt(lambda: screen_of(session, "agent"))
    for _ in range(3):
        watcher.tick(time.time())
        time.sleep(0.2)
    assert states_by_name(isolated_env)["agent"]["state"] == "READY"

    record_event(str(isolated_env), {
        "ts": time.time(), "kind": "hook", "event": "permission", "name": "Notification",
        "cli": "claude", "pane_id": pane.pane_id, "server_pid": int(server.cmd(
            "display-message", "-p", "#{pid}").stdout[0]),
    })
    watcher.tick(time.time())

    agent = states_by_name(isolated_env)["agent"]
    assert agent["state"] == "NEEDS_CONFIRMATION"
    assert "hook_event" in agent["reasons"]
    assert "hook=Notification" in agent["signals"]


def test_a_flapping_screen_gives_no_flapping_transitions(
    session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    corpus = Path(__file__).resolve().parents[1] / "corpus" / "shared" / "claude-code"
    screens = [corpus / "ready-after-answer-200x50.txt", corpus / "error-500-final-200x50.txt"]
    pane = session.new_window(
        window_name="flappy", attach=False,
        window_shell="sh -c 'stty -echo; while read f; do printf \"\\033[H\\033[2J\"; "
                     "cat \"$f\"; done'").active_pane

    def shows(path: Path) -> bool:
        text = screen_of(session, "flappy")
        return "for shortcuts" in text and ("API Error" in text) == ("error" in path.name)

    transitions = []
    for i in range(12):
        shown = screens[i % 2]
        pane.send_keys(str(shown), enter=True, literal=True)
        retry_until(functools.partial(shows, shown), 10)
        transitions += watcher.tick(time.time()).transitions

    states = [t.state for t in transitions if watcher.tracked[t.pane_key].name == "flappy"]
    # Each poll shows the other screen: the pane is reported busy (its screen keeps changing)
    # once, and the error screen never holds long enough to be reported.
    assert states == [State.BUSY]


def test_a_restart_with_earlier_hooks_and_sends_keeps_a_ready_pane_ready(
    server: Any, session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    pane = session.new_window(window_name="steady", attach=False).active_pane
    for _ in range(3):
        watcher.tick(time.time())
    first = states_by_name(isolated_env)["steady"]
    assert first["state"] == State.READY.value
    server_pid = int(server.cmd("display-message", "-p", "#{pid}").stdout[0])
    for kind, event in (("send", "send"), ("hook", "turn_start"), ("hook", "permission")):
        record_event(str(isolated_env), {"ts": time.time() - 60, "kind": kind, "event": event,
                                         "name": event, "pane_id": pane.pane_id,
                                         "server_pid": server_pid})

    restarted = Watcher(watcher.tmux, watcher.store, watcher.packs, watcher.settings)
    report = restarted.tick(time.time())

    assert report.transitions == []
    again = states_by_name(isolated_env)["steady"]
    assert (again["state"], again["state_entered_ts"]) == ("READY", first["state_entered_ts"])


# --- conductor's own views (issue 19, item 9) ----------------------------------------------------


def _own_view_config(tmp_path: Path, calls: Path) -> None:
    script = write_script(tmp_path / "notify", RECORD_ENV)
    (tmp_path / "config.toml").write_text(
        "[watch]\ninterval = 0.3\n\n[notify]\nmin_interval = 0\n\n[notify.command]\n"
        f"argv = {json.dumps([str(script), str(calls)])}\n")


def _history_states(workers_dir: Path, worker_id: str) -> list[str]:
    reader = StoreReader(workers_dir)
    try:
        return [row.state for row in reader.history(worker_id)]
    finally:
        reader.close()


@pytest.mark.slow
def test_the_watcher_run_in_a_pane_leaves_its_own_pane_alone(
        server: Any, session: Any, isolated_env: Path, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    _own_view_config(tmp_path, calls)
    env = (f"env CONDUCTOR_WORKERS_DIR={isolated_env} CONDUCTOR_CONFIG={tmp_path / 'config.toml'}"
           f" PYTHONPATH={REPO}")
    # The natural place: a pane of the server it watches, its log on screen (each transition,
    # with the question it read, lands on its last line: read as a screen, a question).
    daemon = session.new_window(
        window_name="daemon", attach=False, start_directory=str(REPO),
        window_shell=f"{env} {sys.executable} -m app -L {server.socket_name} pty watch",
    ).active_pane
    retry_until(lambda: "watching tmux server" in "\n".join(daemon.capture_pane()), 30)
    session.new_window(window_name="question", window_shell=QUESTION, attach=False)

    def workers() -> dict[str, dict[str, Any]]:
        return states_by_name(isolated_env) if (isolated_env / "status.db").exists() else {}

    retry_until(lambda: workers().get("question", {}).get("state") == "NEEDS_CONFIRMATION", 30,
                interval=0.2)
    # Its log repeats the question on its last line, the screen that fooled it before.
    retry_until(lambda: "Overwrite? (y/N)" in "\n".join(daemon.capture_pane()), 10)
    retry_until(lambda: [c["env"]["CONDUCTOR_NAME"] for c in read_jsonl(calls)
                         if c["env"]["CONDUCTOR_STATE"] == "NEEDS_CONFIRMATION"] == ["question"],
                10, interval=0.2)

    own = workers()["daemon"]
    assert (own["cli_type"], own["state"], own["reasons"]) == (
        "conductor", "UNKNOWN", ["conductor_view"])
    assert own["summary"] == "conductor's own view: this watcher's log"
    assert own["herd_reason"] == "not_an_agent"
    # The daemon keeps logging (its own pane's rows among them) and still never reads it.
    session.new_window(window_name="second", window_shell=QUESTION, attach=False)
    retry_until(lambda: workers().get("second", {}).get("state") == "NEEDS_CONFIRMATION", 30,
                interval=0.2)
    assert stays_false(lambda: workers()["daemon"]["state"] != "UNKNOWN", 2.0, interval=0.2)
    assert "NEEDS_CONFIRMATION" not in _history_states(isolated_env, own["id"])
    assert "READY" not in _history_states(isolated_env, own["id"])
    assert not [c for c in read_jsonl(calls) if c["env"]["CONDUCTOR_NAME"] == "daemon"]
    # Other conductor processes know the pane too: nothing is typed into it, even forced.
    done = conductor("-L", server.socket_name, "pty", "send", "--force", daemon.pane_id, "y")
    assert done.returncode == 1
    assert "conductor's own view (watch)" in done.stderr and done.stderr.count("\n") == 1
    # Kept on screen once it has exited: the line below must not race the window closing.
    server.cmd("set-option", "-w", "-t", daemon.window_id, "remain-on-exit", "on")
    daemon.send_keys("C-c", enter=False)
    retry_until(lambda: "stopped" in "\n".join(daemon.capture_pane()), STARTS_WITHIN_S)


def _tracked(watcher: Watcher, pane_id: str) -> Tracked:
    return next(t for t in watcher.tracked.values() if t.pane.pane_id == pane_id)


def test_a_status_watch_pane_is_listed_as_conductors_view_and_never_read(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> None:
    session.new_window(window_name="question", window_shell=QUESTION, attach=False)
    view = session.new_window(window_name="view", attach=False, start_directory=str(REPO),
                              window_shell="bash --norc --noprofile").active_pane
    wait_for_shell_prompt(lambda: "\n".join(view.capture_pane()))
    view.send_keys(f"CONDUCTOR_WORKERS_DIR={isolated_env} {sys.executable} -m app "
                   f"-L {server.socket_name} pty status --watch --interval 0.3", enter=True)

    def ticked_view() -> bool:
        watcher.tick(time.time())
        return _tracked(watcher, view.pane_id).view == "status --watch"

    retry_until(ticked_view, 20, interval=0.2)
    # It shows the other pane's question, read by the watcher from that pane only.
    retry_until(lambda: "Overwrite? (y/N)" in "\n".join(view.capture_pane()), 20)
    for _ in range(3):
        watcher.tick(time.time())
    states = states_by_name(isolated_env)
    assert states["question"]["state"] == "NEEDS_CONFIRMATION"
    shown = states["view"]
    assert (shown["cli_type"], shown["state"], shown["reasons"], shown["summary"]) == (
        "conductor", "UNKNOWN", ["conductor_view"], "conductor's own view: status --watch")
    tracked = _tracked(watcher, view.pane_id)
    assert (tracked.captured_at, tracked.text, tracked.verdict, tracked.pack) == (
        0.0, "", None, None)
    assert "[view:" not in conductor("pty", "status", "--short").stdout
    table = conductor("pty", "status").stdout
    assert "conductor's own view: status --watch" in table
    explained = conductor("-L", server.socket_name, "pty", "explain", "view").stdout
    assert "conductor's own view, never read" in explained

    # Stopped, the view unmarks its pane, which is an ordinary shell pane again.
    view.send_keys("C-c", enter=False)

    def ticked_shell() -> bool:
        watcher.tick(time.time())
        return bool(states_by_name(isolated_env)["view"]["cli_type"] == "shell")

    retry_until(ticked_shell, 20, interval=0.2)
    assert server.cmd("show-options", "-p", "-q", "-v", "-t", view.pane_id,
                      "@conductor-view").stdout == []
    assert _tracked(watcher, view.pane_id).view == ""

    # Following the log is a view too.
    view.send_keys(f"CONDUCTOR_WORKERS_DIR={isolated_env} {sys.executable} -m app pty logs -f",
                   enter=True)

    def ticked_logs() -> bool:
        watcher.tick(time.time())
        summary = states_by_name(isolated_env)["view"]["summary"]
        return bool(summary == "conductor's own view: logs -f")

    retry_until(ticked_logs, 20, interval=0.2)
    view.send_keys("C-c", enter=False)
    retry_until(ticked_shell, 20, interval=0.2)


def test_a_marker_left_by_a_view_that_is_gone_is_ignored(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> None:
    pane = session.new_window(window_name="left", attach=False,
                              window_shell="bash --norc --noprofile").active_pane
    wait_for_shell_prompt(lambda: "\n".join(pane.capture_pane()))
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid names no process now: a view killed before it could unmark
    server.cmd("set-option", "-p", "-t", pane.pane_id, "@conductor-view",
               f"{gone.pid} status --watch")

    def ready() -> bool:
        watcher.tick(time.time())
        return bool(states_by_name(isolated_env).get("left", {}).get("state") == "READY")

    retry_until(ready, 20, interval=0.2)
    assert states_by_name(isolated_env)["left"]["cli_type"] == "shell"
    assert _tracked(watcher, pane.pane_id).view == ""


def test_with_no_server_the_watcher_asks_for_no_turn_before_the_next_poll(
        isolated_env: Path) -> None:
    """A watcher waiting for its tmux server (the README's first command on a machine with
    none): only the next full tick, each interval, can find one, so it asks for no earlier turn
    whatever its steps would like. The cycle step wants one at once until its first turn, which
    never comes without a server: the watcher listed an absent server every 20 ms."""
    from app.act.cycle.jobs import CycleSettings
    from app.act.cycle.step import CycleStep
    from app.adapters.store import StoreWriter
    from app.adapters.tmux import Tmux
    from app.base.settings import WatchSettings
    from app.observe.pack_loading import load_packs

    tmux = Tmux(socket_name=f"absent-{os.getpid()}")
    store = StoreWriter(isolated_env)
    settings = WatchSettings(interval_s=1, ready_min_s=0)
    step = CycleStep(tmux, store, load_packs(), CycleSettings(), settings)
    watcher = Watcher(tmux, store, load_packs(), settings, steps=[step])
    try:
        assert watcher.tick(time.time()).server_running is False
        assert step.next_due(time.time()) is not None  # the step's own hurry
        assert watcher.next_due() is None
    finally:
        watcher.close()
        step.close()
        store.close()
