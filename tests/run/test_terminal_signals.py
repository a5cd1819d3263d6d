"""The terminal's own signals (titles, progress, bells) as a second channel beside the screen:
read from control mode's stream and from tmux's pane title, folded into the assessment like hook
events; a turn end makes an idle screen READY at once and never overrules work or a dialog."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from app.adapters.control import ControlMode
from app.adapters.store import StoreWriter
from app.adapters.store_read import StoreReader
from app.adapters.tmux import Tmux
from app.base.model import State, Verdict
from app.base.settings import WatchSettings
from app.base.termsignals import BELL, NOTIFY, PROGRESS, TITLE, SignalScanner, TermSignal, scan
from app.observe.assess import NO_SIGNALS, Assessment, Policy, assess
from app.observe.pack_loading import load_packs
from app.observe.signals import ASKING, STOPPED, TERMINAL, WORKING, TerminalWatch, title_phase
from app.run.watcher import Watcher
from tests.support.waiting import retry_until, stays_false

REPO = Path(__file__).resolve().parents[2]
CLAUDE = REPO / "tests" / "corpus" / "shared" / "claude-code"
BUSY_SCREEN = CLAUDE / "busy-streaming-200x50.txt"
IDLE_SCREEN = CLAUDE / "ready-after-answer-200x50.txt"
DIALOG_SCREEN = CLAUDE / "confirm-shell-command-200x50.txt"
WORKING_TITLE = "⠂ Fix the tests"  # Claude Code 2.1.197 while the model works
STOPPED_TITLE = "✳ Fix the tests"  # ...when it stops: idle, or a dialog up
GEMINI_READY_TITLE = "◇  Ready (project)"  # Gemini CLI 0.61.0 idle


class ScanCase(NamedTuple):
    data: bytes
    expected: list[TermSignal]


SCAN_CASES = {
    "title-bel": ScanCase(b"x\x1b]0;\xe2\xa0\x82 Fix\x07y", [TermSignal(TITLE, "⠂ Fix")]),
    "title-st": ScanCase(b"\x1b]2;Codex | project\x1b\\", [TermSignal(TITLE, "Codex | project")]),
    "progress": ScanCase(b"\x1b]9;4;1;40\x1b\\", [TermSignal(PROGRESS, "1;40")]),
    "osc9-notify": ScanCase(b"\x1b]9;Task done\x07", [TermSignal(NOTIFY, "Task done")]),
    "osc777": ScanCase(b"\x1b]777;notify;Claude;Needs you\x07",
                       [TermSignal(NOTIFY, "Claude;Needs you")]),
    "bells": ScanCase(b"a\x07b\x07", [TermSignal(BELL), TermSignal(BELL)]),
    "bell-then-title": ScanCase(b"\x07\x1b]0;t\x07\x07",
                                [TermSignal(BELL), TermSignal(TITLE, "t"), TermSignal(BELL)]),
    "other-osc": ScanCase(b"\x1b]8;;https://x\x07link\x1b]8;;\x07", []),
    "plain": ScanCase(b"hello \x1b[31mred\x1b[0m", []),
    "controls-cleaned": ScanCase(b"\x1b]0;a\tb\x1b\\", [TermSignal(TITLE, "a b")]),
}


@pytest.mark.parametrize("case", SCAN_CASES.values(), ids=SCAN_CASES.keys())
def test_signals_are_picked_out_of_output(case: ScanCase) -> None:
    assert scan(case.data) == case.expected


def test_a_sequence_split_between_two_pieces_of_output_is_joined_and_an_endless_one_dropped(
        ) -> None:
    scanner = SignalScanner()
    assert scanner.feed(b"abc\x1b]0;Fix th") == []
    assert scanner.pending
    assert scanner.feed(b"e tests\x07") == [TermSignal(TITLE, "Fix the tests")]
    assert not scanner.pending
    assert scanner.feed(b"\x1b]0;" + b"x" * 5000) == []
    assert not scanner.pending, "an OSC that never ends must not be kept forever"


@pytest.mark.parametrize(("title", "phase"), [
    ("⠂ Conductor test session", WORKING), ("⠦ Conductor test session | project", WORKING),
    ("[ ! ] Action Required | project", ASKING), ("[ . ] Action Required | s | project", ASKING),
    ("✳ Conductor test session", STOPPED), ("project", STOPPED), ("", STOPPED),
    ("⠂nospace", STOPPED), ("bash: ~/src", STOPPED),
    ("✦  Working… (project)", WORKING), ("✋  Action Required (project)", ASKING),
    ("◇  Ready (project)", STOPPED),
    ("◐\ufe0e Qwen - project", WORKING), ("✳\ufe0e Qwen - project", ASKING),
    ("Qwen - project", STOPPED), ("✳ Qwen - project", STOPPED),
    ("OpenCode", STOPPED), ("OC | Lab B", STOPPED),
])
def test_titles_say_where_the_turn_is_as_each_cli_draws_them(title: str, phase: str) -> None:
    assert title_phase(title) == phase


def test_only_a_change_of_phase_is_an_event_and_a_stale_signal_is_ignored() -> None:
    watch = TerminalWatch()
    assert watch.observe_title("✳ idle at start", 1.0) is None  # no turn seen ending
    started = watch.observe_title("⠂ work", 2.0)
    assert started is not None and started.event == "turn_start" and started.ts == 2.0
    assert watch.observe_title("⠐ work", 2.5) is None  # the spinner turning is no news
    assert watch.observe(TermSignal(TITLE, "✳ work"), 2.4) is None  # older than what we know
    asked = watch.observe_title("[ ! ] Action Required | p", 3.0)
    assert asked is not None and asked.event == "permission"
    ended = watch.observe_title("p", 4.0)
    assert ended is not None and ended.event == "turn_end" and ended.name == "title:stopped"
    assert watch.observe(TermSignal(BELL), 5.0) is None
    assert watch.last == "bell"
    assert watch.observe(TermSignal(PROGRESS, "3;0"), 6.0) is not None  # working again
    stopped = watch.observe(TermSignal(PROGRESS, "0;0"), 7.0)
    assert stopped is not None and stopped.event == "turn_end"


# --- the assessment: as strong as a hook, never over the screen ----------------------------------


def verdict(state: State) -> Verdict:
    return Verdict(state=state, confidence=90, reasons=("test",), rule_id="test")


def test_a_turn_end_signal_makes_the_idle_screen_ready_at_once_but_never_work_or_a_dialog(
        ) -> None:
    policy = Policy(stable_polls=3, ready_min_s=3600)
    busy = assess(None, verdict(State.BUSY), "busy", 100.0, 3, policy=policy)
    busy = assess(busy, verdict(State.BUSY), "busy", 100.5, 3, policy=policy)
    assert busy.state is State.BUSY
    started = NO_SIGNALS.with_event(TERMINAL, "turn_start", "title:⠂ x", 100.2)
    ended = started.with_event(TERMINAL, "turn_end", "title:✳ x", 101.0)
    assert ended.last_terminal == "title:✳ x" and ended.last_hook == ""

    for state in (State.BUSY, State.NEEDS_CONFIRMATION):
        still = assess(busy, verdict(state), state.value, 101.1, 3, policy=policy,
                       signals=ended)
        assert still.state is state, f"a turn end overruled a {state.value} screen"
    ready = assess(busy, verdict(State.READY), "idle", 101.1, 3, policy=policy, signals=ended)
    assert ready.state is State.READY and "title_event" in ready.reasons
    assert "term=title:✳ x" in ready.signals
    # Without the signal the same idle screen waits for the (here endless) stability window.
    waiting = assess(busy, verdict(State.READY), "idle", 101.1, 3, policy=policy,
                     signals=started)
    assert waiting.state is not State.READY


def test_a_turn_end_signal_vouches_for_no_screen_after_a_new_turn_start() -> None:
    policy = Policy(stable_polls=3, ready_min_s=3600)
    prior: Assessment = assess(None, verdict(State.BUSY), "busy", 100.0, 3, policy=policy)
    signals = NO_SIGNALS.with_event(TERMINAL, "turn_end", "title:✳ x", 101.0) \
        .with_event(TERMINAL, "turn_start", "title:⠂ x", 101.5)
    after = assess(prior, verdict(State.READY), "idle", 101.6, 3, policy=policy,
                   signals=signals)
    assert after.state is not State.READY


def test_a_turn_end_vouches_for_its_idle_screen_once_not_when_that_picture_comes_back() -> None:
    """Gemini CLI clears a prompt typed by hand a frame before echoing it: for that frame the
    screen is the very idle screen the last turn end vouched for, yet a new turn has begun."""
    policy = Policy(stable_polls=3, ready_min_s=3600)
    started = NO_SIGNALS.with_event(TERMINAL, "turn_start", "title:working", 99.0)
    ended = started.with_event(TERMINAL, "turn_end", "title:stopped", 101.0)
    busy = assess(None, verdict(State.BUSY), "busy", 100.0, 3, policy=policy, signals=started)
    busy = assess(busy, verdict(State.BUSY), "busy", 100.5, 3, policy=policy, signals=started)
    ready = assess(busy, verdict(State.READY), "idle", 101.1, 3, policy=policy, signals=ended)
    assert ready.state is State.READY and "title_event" in ready.reasons
    typed = assess(ready, verdict(State.READY), "idle + draft", 102.0, 3, policy=policy,
                   signals=ended)
    cleared = assess(typed, verdict(State.READY), "idle", 102.5, 3, policy=policy,
                     signals=ended)
    assert "title_event" not in cleared.reasons
    assert cleared.state is not State.READY


# --- real tmux: the stream, the title, the watcher -----------------------------------------------


@pytest.fixture
def control(server: Any) -> Iterator[ControlMode]:
    mode = ControlMode(Tmux(socket_name=server.socket_name), threading.Event().set)
    yield mode
    mode.close()


class Player:
    """tests/support/screen_player.py in a window of the test's tmux server."""

    def __init__(self, session: Any, folder: Path, name: str = "agent") -> None:
        self.commands = folder / f"{name}.commands"
        self.commands.write_text("")
        window = session.new_window(
            window_name=name, attach=False,
            window_shell=f"{sys.executable} {REPO / 'tests' / 'support' / 'screen_player.py'} "
                         f"{self.commands}")
        self.pane = window.active_pane
        self.lines = 0

    def do(self, *commands: str) -> None:
        with self.commands.open("a", encoding="utf-8") as out:
            out.write("".join(f"{c}\n" for c in commands))
        self.lines += len(commands)

    def title(self) -> str:
        return str(self.pane.cmd("display-message", "-p", "#{pane_title}").stdout[0])

    def screen(self) -> str:
        return "\n".join(self.pane.capture_pane())


def test_control_mode_hears_titles_bells_and_notifications_as_the_pane_prints_them(
        server: Any, session: Any, control: ControlMode, tmp_path: Path) -> None:
    player = Player(session, tmp_path)
    control.follow({session.session_id})
    retry_until(lambda: control.watching(), 10)
    heard: list[TermSignal] = []

    def got_all() -> bool:
        for _, signal in control.take_signals().get(player.pane.pane_id, []):
            heard.append(signal)
        return TermSignal(NOTIFY, "Codex;Approve?") in heard

    player.do("title ⠂ Fix the tests", "bell", "progress 1;50", "notify Codex;Approve?")
    retry_until(got_all, 10)
    assert heard[:4] == [TermSignal(TITLE, "⠂ Fix the tests"), TermSignal(BELL),
                         TermSignal(PROGRESS, "1;50"), TermSignal(NOTIFY, "Codex;Approve?")]


def test_a_flooding_pane_s_title_is_heard_while_our_client_has_it_paused(
        server: Any, session: Any, control: ControlMode) -> None:
    """Gemini CLI and Qwen Code flood while they stream (our client pauses them) and tell
    their turn's end by their title: a paused pane's title changes still reach us, without a
    capture and without its output."""
    pane = session.new_window(window_name="flood", window_shell="yes", attach=False).active_pane
    control.follow({session.session_id})
    retry_until(lambda: control.watching(), 10)
    retry_until(lambda: pane.pane_id in control.take()[0], 10)
    retry_until(lambda: any(pane.pane_id in client._paused
                            for client in control._clients.values()), 10)
    control.take_signals()
    heard: list[TermSignal] = []

    def heard_ready() -> bool:
        heard.extend(signal for _, signal in control.take_signals().get(pane.pane_id, []))
        return TermSignal(TITLE, GEMINI_READY_TITLE) in heard

    pane.cmd("select-pane", "-T", GEMINI_READY_TITLE)  # no output: tmux holds the title
    retry_until(heard_ready, 10, message="the paused pane's title went unheard")
    # Once: not again with each look while it stays.
    assert stays_false(lambda: control.take_signals().get(pane.pane_id), 0.5)


def test_capture_reads_each_pane_title_with_its_screen(server: Any, session: Any,
                                                       tmp_path: Path) -> None:
    player = Player(session, tmp_path)
    player.do(f"show {IDLE_SCREEN}", f"title {STOPPED_TITLE}")
    retry_until(lambda: player.title() == STOPPED_TITLE, 10)
    titles: dict[str, str] = {}
    other = session.active_window.active_pane.pane_id
    screens = Tmux(socket_name=server.socket_name).capture([other, player.pane.pane_id],
                                                           titles)
    assert titles[player.pane.pane_id] == STOPPED_TITLE
    assert "Fix the tests" not in screens[player.pane.pane_id]
    assert set(titles) == {other, player.pane.pane_id}


@pytest.fixture
def signal_watcher(server: Any, isolated_env: Path, control: ControlMode) -> Iterator[Watcher]:
    """Control mode on, and a stability window no test outlives: READY can only come from a
    turn-end signal."""
    store = StoreWriter(isolated_env)
    yield Watcher(Tmux(socket_name=server.socket_name), store, load_packs(),
                  WatchSettings(interval_s=3600, ready_min_s=3600), control=control)
    store.close()


def stored(workers_dir: Path, name: str) -> dict[str, Any]:
    reader = StoreReader(workers_dir)
    try:
        return next((w for w in reader.workers() if w["name"] == name), {})
    finally:
        reader.close()


def light_ticks_until(watcher: Watcher, workers_dir: Path, state: str) -> None:
    def reached() -> bool:
        watcher.tick(time.time(), full=False)
        return stored(workers_dir, "agent").get("state") == state

    retry_until(reached, 15)


def settle_busy(watcher: Watcher, player: Player, workers_dir: Path,
                screen: Path = BUSY_SCREEN, title: str = WORKING_TITLE) -> None:
    player.do(f"show {screen}", f"title {title}")
    retry_until(lambda: player.title() == title, 10)
    watcher.tick(time.time())
    assert watcher.control is not None
    retry_until(lambda: watcher.control.watching(), 10)  # type: ignore[union-attr]
    watcher.tick(time.time())
    light_ticks_until(watcher, workers_dir, "BUSY")


def ticks_after(watcher: Watcher, player: Player, title: str, count: int = 8) -> set[str]:
    """The states stored over ``count`` ticks once tmux holds ``title`` for the pane."""
    retry_until(lambda: player.title() == title, 10)
    seen = set()
    for index in range(count):
        watcher.tick(time.time(), full=index % 4 == 0)
        seen.add(stored(watcher.workers_dir, "agent").get("state") or "")
    return seen


def test_a_turn_end_title_makes_ready_at_once_on_an_idle_screen(
        server: Any, session: Any, signal_watcher: Watcher, isolated_env: Path,
        tmp_path: Path) -> None:
    player = Player(session, tmp_path)
    settle_busy(signal_watcher, player, isolated_env)
    player.do(f"show {IDLE_SCREEN}", f"title {STOPPED_TITLE}")
    light_ticks_until(signal_watcher, isolated_env, "READY")
    row = stored(isolated_env, "agent")
    assert "title_event" in row["reasons"]
    assert "term=title:stopped" in row["signals"]


def test_a_turn_end_title_over_a_spinner_or_a_dialog_never_makes_ready(
        server: Any, session: Any, signal_watcher: Watcher, isolated_env: Path,
        tmp_path: Path) -> None:
    player = Player(session, tmp_path)
    settle_busy(signal_watcher, player, isolated_env)
    # The title says the turn stopped while the screen still shows the spinner.
    player.do(f"title {STOPPED_TITLE}")
    assert ticks_after(signal_watcher, player, STOPPED_TITLE) == {"BUSY"}
    # Claude Code shows the same title with a permission dialog.
    player.do(f"title {WORKING_TITLE}", f"show {DIALOG_SCREEN}", f"title {STOPPED_TITLE}")
    retry_until(lambda: "Do you want to proceed" in player.screen(), 10)
    assert "READY" not in ticks_after(signal_watcher, player, STOPPED_TITLE)
    light_ticks_until(signal_watcher, isolated_env, "NEEDS_CONFIRMATION")
    assert "READY" not in ticks_after(signal_watcher, player, STOPPED_TITLE)


STREAM_THEN_ASK = ("sh -c 'i=0; while [ $i -lt 60 ]; do i=$((i+1)); echo line $i; sleep 0.05; "
                   "done; printf \"Go on? (y/N) \"; read x; sleep 600'")


def test_a_question_at_the_end_of_a_stream_is_seen_by_light_ticks_once_output_stops(
        server: Any, session: Any, signal_watcher: Watcher, isolated_env: Path) -> None:
    """While a pane prints nonstop it is captured at the streaming pace; the moment its output
    stops (the question drawn) control mode says it went quiet and it is captured."""
    session.new_window(window_name="agent", window_shell=STREAM_THEN_ASK, attach=False)
    signal_watcher.tick(time.time())
    assert signal_watcher.control is not None
    retry_until(lambda: signal_watcher.control.watching(), 10)  # type: ignore[union-attr]
    signal_watcher.tick(time.time())
    light_ticks_until(signal_watcher, isolated_env, "NEEDS_CONFIRMATION")
    tracked = next(t for t in signal_watcher.tracked.values() if t.name == "agent")
    assert "Go on?" in tracked.text


# --- the other CLIs' titles, as recorded from their real releases -------------------------------

# scripts/record_signals.py CLI VERSION --out FILE: every signal of one session (idle, a streamed
# reply, a shell command approved in its dialog, the end of the turn), with the phase it came in.
RECORDINGS = REPO / "tests" / "run" / "signal_recordings"
CORPUS = REPO / "tests" / "corpus"
# The events a hook would have made in that session; a CLI whose titles say nothing makes none.
WHOLE_SESSION = ["turn_start", "turn_end", "turn_start", "permission", "turn_start", "turn_end"]
SESSIONS = {
    "gemini-cli-0.61.0": WHOLE_SESSION,
    "gemini-cli-0.31.0": WHOLE_SESSION,
    "qwen-code-0.24.4": WHOLE_SESSION,
    "qwen-code-0.15.10": [],  # its title, set once at start-up, never changes
    "opencode-1.18.33": [],  # "OpenCode", then "OC | <session>": the same working or not
    "opencode-1.2.27": [],
    "aider-0.86.2": [],  # no title, no bell, nothing
    "aider-0.84.0": [],
}


def recorded(name: str) -> list[tuple[str, TermSignal]]:
    """(phase, signal) in the order the CLI sent them."""
    rows = (RECORDINGS / f"{name}.tsv").read_text(encoding="utf-8").splitlines()[1:]
    found = []
    for row in rows:
        phase, _seconds, kind, text = row.split("\t")
        found.append((phase, TermSignal(kind, text)))
    return found


@pytest.mark.parametrize("name", SESSIONS)
def test_a_recorded_session_makes_the_events_a_hook_would(name: str) -> None:
    watch = TerminalWatch()
    events = [event.event for index, (_, signal) in enumerate(recorded(name))
              if (event := watch.observe(signal, float(index))) is not None]
    assert events == SESSIONS[name]


class ReleaseScreens(NamedTuple):
    """A release's recorded titles and its corpus screens of the same moments."""

    recording: str
    busy: Path
    dialog: Path
    idle: Path
    dialog_text: str

    def title(self, phase: str, last: bool = False) -> str:
        titles = [s.text for p, s in recorded(self.recording) if p == phase and s.kind == TITLE]
        return titles[-1] if last else titles[0]


GEMINI_SCREENS = CORPUS / "gemini-cli-0.61.0" / "gemini-cli"
QWEN_SCREENS = CORPUS / "qwen-code-0.24.4" / "qwen-code"
REPLAYS = {
    "gemini-cli": ReleaseScreens(
        "gemini-cli-0.61.0", GEMINI_SCREENS / "footer-items-busy-todo-200x50.txt",
        GEMINI_SCREENS / "footer-items-confirm-shell-200x50.txt",
        GEMINI_SCREENS / "footer-items-ready-after-todo-200x50.txt", "Allow execution of"),
    "qwen-code": ReleaseScreens(
        "qwen-code-0.24.4", QWEN_SCREENS / "busy-tool-running-200x50.txt",
        QWEN_SCREENS / "confirm-shell-200x50.txt", QWEN_SCREENS / "ready-after-tool-200x50.txt",
        "Allow execution of"),
}


@pytest.mark.parametrize("cli", REPLAYS)
def test_recorded_titles_over_the_release_s_screens_read_as_the_screen_allows(
        cli: str, server: Any, session: Any, signal_watcher: Watcher, isolated_env: Path,
        tmp_path: Path) -> None:
    """Working, a stopped title over a busy screen (BUSY), the approval title over the dialog
    (NEEDS_CONFIRMATION, never READY), working again, then the turn end over the idle screen:
    READY at once, which only the signal can give with a window of an hour."""
    release = REPLAYS[cli]
    working, asking = release.title("turn1"), release.title("turn2", last=True)
    stopped = release.title("turn1-end")
    player = Player(session, tmp_path)
    settle_busy(signal_watcher, player, isolated_env, release.busy, working)
    player.do(f"title {stopped}")
    assert ticks_after(signal_watcher, player, stopped) == {"BUSY"}
    player.do(f"title {working}", f"show {release.dialog}", f"title {asking}")
    retry_until(lambda: release.dialog_text in player.screen(), 10)
    light_ticks_until(signal_watcher, isolated_env, "NEEDS_CONFIRMATION")
    assert "READY" not in ticks_after(signal_watcher, player, asking)
    player.do(f"show {release.busy}", f"title {release.title('approved')}")
    light_ticks_until(signal_watcher, isolated_env, "BUSY")
    player.do(f"show {release.idle}", f"title {release.title('turn2-end')}")
    light_ticks_until(signal_watcher, isolated_env, "READY")
    row = stored(isolated_env, "agent")
    assert "title_event" in row["reasons"]
    assert "term=title:stopped" in row["signals"]
