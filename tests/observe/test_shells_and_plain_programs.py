"""Shell panes and plain programs on a real tmux server: ``send`` never types onto a draft it
cannot rule out (issue 10 item 1), a silent command is BUSY in a pane that stays a shell pane
(item 2), and a program redrawing on a timer does not flap (item 3)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from app.adapters.store_read import StoreReader
from app.base.model import State, Verdict
from app.observe.assess import Assessment, Policy, assess
from app.observe.pack_loading import load_packs
from app.run.watcher import Watcher
from tests.conftest import conductor
from tests.support.waiting import retry_until

SHELL = "env -i PATH=/usr/bin:/bin HOME=/tmp TERM=tmux-256color PS1='dev@host:\\w$ ' " \
        "bash --norc --noprofile"


def screen(pane: Any) -> str:
    return "\n".join(pane.capture_pane())


def shell_pane(session: Any, cwd: Path, name: str = "sh", prompt_end: str = "$") -> Any:
    cwd.mkdir(parents=True, exist_ok=True)
    command = SHELL.replace("w$", f"w{prompt_end}")
    window = session.new_window(window_name=name, window_shell=command,
                                start_directory=str(cwd), attach=False)
    pane = window.active_pane
    retry_until(lambda: screen(pane).rstrip().endswith(f"{cwd.name}{prompt_end}"), 10)
    return pane


def send(server: Any, *args: str) -> Any:
    return conductor("-L", server.socket_name, "pty", "send", *args)


def test_send_refuses_to_type_onto_a_draft_after_a_cwd_ending_in_a_digit(
        server: Any, session: Any, tmp_path: Path) -> None:
    pane = shell_pane(session, tmp_path / "d1")
    pane.send_keys("echo draft-unsent", enter=False, literal=True)
    retry_until(lambda: screen(pane).rstrip().endswith("d1$ echo draft-unsent"), 10)

    refused = send(server, pane.pane_id, "echo second")

    assert refused.returncode == 1, refused.stdout
    assert "unsent input" in refused.stderr and "echo draft-unsent" in refused.stderr
    assert "draft-unsentecho" not in screen(pane)
    pane.send_keys("C-u", enter=False)
    retry_until(lambda: screen(pane).rstrip().endswith("d1$"), 10)
    sent = send(server, pane.pane_id, "echo second")
    assert sent.returncode == 0, sent.stderr
    retry_until(lambda: "\nsecond" in screen(pane), 10)


def test_send_refuses_a_shell_whose_prompt_it_cannot_read(
        server: Any, session: Any, tmp_path: Path) -> None:
    pane = shell_pane(session, tmp_path / "odd", prompt_end=" ::")
    pane.send_keys("typed by someone", enter=False, literal=True)
    retry_until(lambda: screen(pane).rstrip().endswith("typed by someone"), 10)

    refused = send(server, pane.pane_id, "echo second")

    assert refused.returncode == 1
    assert "cannot find the shell prompt" in refused.stderr and "--force" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "typed by someoneecho" not in screen(pane)


def row(workers: Path, pane_id: str) -> dict[str, Any]:
    reader = StoreReader(workers)
    try:
        return next(w for w in reader.workers() if w["pane_id"] == pane_id)
    finally:
        reader.close()


def tick_until(watcher: Watcher, workers: Path, pane_id: str, state: str, seconds: float = 15
               ) -> dict[str, Any]:
    seen: list[str] = []

    def reached() -> bool:
        watcher.tick(time.time())
        seen.append(row(workers, pane_id)["state"])
        return seen[-1] == state
    retry_until(reached, seconds, interval=0.3, message=f"{pane_id} never {state}: {seen}")
    return row(workers, pane_id)


def test_a_silent_command_in_a_shell_is_busy_and_the_pane_stays_a_shell(
        server: Any, session: Any, tmp_path: Path, watcher: Watcher, isolated_env: Path) -> None:
    pane = shell_pane(session, tmp_path / "work1")
    idle = tick_until(watcher, isolated_env, pane.pane_id, "READY")
    assert idle["cli_type"] == "shell"

    pane.send_keys("sleep 30", enter=True)
    retry_until(lambda: pane.display_message("#{pane_current_command}", get_text=True)
                == ["sleep"], 10)
    busy = tick_until(watcher, isolated_env, pane.pane_id, "BUSY")
    seen = set()
    for _ in range(8):  # the screen does not move; the verdict must not decay into UNKNOWN
        watcher.tick(time.time())
        seen.add(row(isolated_env, pane.pane_id)["state"])
        time.sleep(0.3)

    assert seen == {"BUSY"}
    latest = row(isolated_env, pane.pane_id)
    assert latest["cli_type"] == "shell" and busy["cli_type"] == "shell"
    assert latest["summary"] == "sleep is running"
    pane.send_keys("C-c", enter=False)
    back = tick_until(watcher, isolated_env, pane.pane_id, "READY")
    assert back["cli_type"] == "shell"


def test_a_program_redrawing_on_a_timer_holds_one_state(
        server: Any, session: Any, tmp_path: Path, watcher: Watcher, isolated_env: Path) -> None:
    """Issue 10 item 3: `top` flipped BUSY and UNKNOWN every few polls."""
    pane = shell_pane(session, tmp_path / "top", name="top")
    pane.send_keys("watch -n 0.5 date", enter=True)
    retry_until(lambda: "Every 0.5s" in screen(pane), 10)
    tick_until(watcher, isolated_env, pane.pane_id, "BUSY")
    states = []
    for _ in range(16):
        watcher.tick(time.time())
        states.append(row(isolated_env, pane.pane_id)["state"])
        time.sleep(0.25)

    assert set(states) == {"BUSY"}, states
    assert "date" in row(isolated_env, pane.pane_id)["summary"]


def test_anti_flap_holds_across_unknown() -> None:
    """A screen that changes, then rests two polls with nothing recognised, then changes again,
    stays BUSY: UNKNOWN must hold like any other state before it is reported."""
    unknown = Verdict(State.UNKNOWN, 20, ("no_rule_matched",))
    policy = Policy(stable_polls=3, ready_min_s=0)
    previous: Assessment | None = None
    reported = []
    now = 1000.0
    for i in range(30):
        screen_hash = f"frame-{i // 3}"  # a redraw every third poll
        previous = assess(previous, unknown, screen_hash, now, 3, policy=policy)
        reported.append(previous.state)
        now += 1
    started = reported.index(State.BUSY)  # the first redraw; before it the pane was just seen
    assert started <= 3 and set(reported[started:]) == {State.BUSY}, reported


def test_a_pager_started_from_a_shell_asks_for_a_person(
        server: Any, session: Any, tmp_path: Path, watcher: Watcher, isolated_env: Path) -> None:
    text = tmp_path / "long.txt"
    text.write_text("".join(f"line {i}\n" for i in range(500)))
    pane = shell_pane(session, tmp_path / "pager2", name="pager")
    tick_until(watcher, isolated_env, pane.pane_id, "READY")

    pane.send_keys(f"less {text}", enter=True)
    asking = tick_until(watcher, isolated_env, pane.pane_id, "NEEDS_CONFIRMATION")

    assert asking["summary"] == "less is showing text in a pager"
    assert "q quits" in asking["actions_needed"]
    assert asking["cli_type"] == "shell"
    pane.send_keys("q", enter=False)
    assert tick_until(watcher, isolated_env, pane.pane_id, "READY")["cli_type"] == "shell"


def test_a_shell_running_a_silent_program_is_a_shell_pane_from_first_sight() -> None:
    """A watcher started while `sleep 30` runs: the CLI column says shell, the verdict BUSY."""
    from app.observe.pack_detection import detect_pack, judge_for

    packs = load_packs()
    screen_text = "dev@host:/tmp/work1$ ls\nnotes.md\ndev@host:/tmp/work1$ sleep 30"
    pack = detect_pack(packs, screen_text, command="sleep")
    judge, program = judge_for(packs, pack, "sleep")

    assert pack.name == "shell"
    assert (judge.name, program) == ("generic", "sleep")
    assert judge.classify(screen_text, program).state is State.BUSY


def test_an_agent_that_draws_its_screen_within_a_second_of_its_shell_is_still_found() -> None:
    """A shell pane's pack is chosen again on a screen it was not chosen on, at most once a
    REDETECT_S: an agent that draws its whole screen inside that second, then sits still at its
    prompt, must not stay a shell (its screen "not recognised") for good."""

    from app.base.model import Pane
    from app.base.settings import WatchSettings
    from app.observe.pack_loading import load_packs
    from app.observe.pane import REDETECT_S, PaneObserver, Tracked

    agent_screen = (Path(__file__).parents[1] / "corpus" / "claude-code-2.1.330" / "claude-code"
                    / "ready-startup-automode-200x50.txt").read_text(encoding="utf-8")
    pane = Pane(pane_id="%1", session_name="s", window_id="@1", window_index=0,
                window_name="w", pane_index=0, window_panes=1, cwd="/", current_command="python3",
                pid=1, title="", dead=False, dead_status=None, width=200, height=50,
                activity=0, cursor_x=0, cursor_y=0, history_size=0)
    tracked = Tracked(worker_id="w1", pane=pane, name="w", named_by_user=False, cli_forced=None)
    observer = PaneObserver(load_packs(), WatchSettings())
    observer.classify(tracked, "$ ")
    assert tracked.pack is not None and tracked.pack.name in ("shell", "generic")
    observer.classify(tracked, agent_screen)  # drawn at once: too soon to choose again
    time.sleep(REDETECT_S)
    observer.classify(tracked, agent_screen)  # the same screen, a second later
    assert tracked.pack.name == "claude"
