"""A CLI that draws no end mark (Codex 0.142.5 / 0.152.0) but titles its pane: the real watcher
reads the title with each capture, and a still reply under the CLI's own "stopped" title is READY,
under a spinner title (or a title that is not the CLI's) BUSY, with no turn end ever seen.

The pane runs tests/support/screen_player.py, which draws a captured Codex screen and sets the
title with
the same bytes Codex writes (OSC 0), in a folder named like the project Codex titles it with.
"""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.adapters.store_read import StoreReader
from app.base.screen import normalise
from app.observe.pack_loading import load_packs
from app.run.watcher import Watcher
from tests.support.waiting import retry_until

REPO = Path(__file__).resolve().parents[2]
# A finished turn of 0.142.5 (training set): the reply, no end mark, the idle composer.
FINISHED = REPO / "tests" / "corpus" / "codex-0.142.5" / "codex" / \
    "ready-after-long-answer-200x50.txt"
PROJECT = "lab-project"
STOPPED = PROJECT  # what Codex 0.142.5 sets when its turn stops
SPINNER = f"⠸ {PROJECT}"  # ...and every 0.1 s while it works
TICKS = 12  # far more than the stability window (3 polls, no minimum seconds)


@pytest.mark.parametrize(("cli", "title", "cwd", "stopped"), [
    ("codex", "proj", "/tmp/x/proj", True),
    ("codex", "proj", "/tmp/x/proj/", True),
    ("codex", "Conductor test session | proj", "/tmp/proj", True),
    ("codex", "⠸ proj", "/tmp/proj", False),  # working
    ("codex", "⠦ Conductor test session | proj", "/tmp/proj", False),
    ("codex", "[ ! ] Action Required | proj", "/tmp/proj", False),  # asking
    ("codex", "proj", "/", False),  # no folder name to compare with
    ("codex", "proj", "", False),
    ("codex", "lab@devbox: ~/proj", "/tmp/proj", False),  # a shell's title
    ("codex", "proj2", "/tmp/proj", False),
    ("codex", "", "/tmp/proj", False),
    ("codex", "proj-status-line-colo...", "/tmp/proj-status-line-colour-vim", True),  # seen
    ("codex", "⠼ proj-status-line-colo...", "/tmp/proj-status-line-colour-vim", False),
    ("codex", "proj...", "/tmp/proj-status-line-colour-vim", False),  # too short to tell
    ("codex", "proj-other-thing...", "/tmp/proj-status-line-colour-vim", False),
    ("codex", "aXb", "/tmp/a.b", False),  # the folder's name is text, not a regex
    ("claude", "✳ Fix the tests", "/tmp/proj", True),
    ("claude", "⠂ Fix the tests", "/tmp/proj", False),
    ("claude", "proj", "/tmp/proj", False),
    ("gemini", "proj", "/tmp/proj", False),  # a pack without stopped_titles never reads one
])
def test_a_pack_knows_its_own_stopped_title(cli: str, title: str, cwd: str,
                                            stopped: bool) -> None:
    assert load_packs()[cli].title_says_stopped(title, cwd) is stopped


def test_tmux_default_title_is_never_a_stopped_title() -> None:
    host = socket.gethostname()
    assert not load_packs()["codex"].title_says_stopped(host, f"/tmp/{host}")


def test_the_finished_screen_alone_reads_busy_for_want_of_an_end_mark() -> None:
    verdict = load_packs()["codex"].classify(FINISHED.read_text(encoding="utf-8"))
    assert verdict.state.value == "BUSY" and "no_end_mark" in verdict.reasons


class Player:
    """tests/support/screen_player.py in a window of the test's tmux server, started in
    ``folder``."""

    def __init__(self, session: Any, folder: Path, commands: Path) -> None:
        self.commands = commands
        commands.write_text("")
        window = session.new_window(
            window_name="agent", attach=False, start_directory=str(folder),
            window_shell=f"{sys.executable} "
                         f"{REPO / 'tests' / 'support' / 'screen_player.py'} {commands}")
        self.pane = window.active_pane

    def do(self, *commands: str) -> None:
        with self.commands.open("a", encoding="utf-8") as out:
            out.write("".join(f"{c}\n" for c in commands))

    def shows(self, screen: Path, title: str) -> None:
        self.do(f"show {screen}", f"title {title}")
        retry_until(lambda: self.title() == title, 10)
        last = normalise(screen.read_text(encoding="utf-8")).splitlines()[-1].strip()
        retry_until(lambda: last in self.screen(), 10)

    def title(self) -> str:
        return str(self.pane.cmd("display-message", "-p", "#{pane_title}").stdout[0])

    def screen(self) -> str:
        return "\n".join(self.pane.capture_pane())

    def styled(self) -> str:
        return "\n".join(self.pane.cmd("capture-pane", "-p", "-e").stdout)


def agent_row(workers_dir: Path) -> dict[str, Any]:
    reader = StoreReader(workers_dir)
    try:
        return next((w for w in reader.workers() if w["name"] == "agent"), {})
    finally:
        reader.close()


def states_over_ticks(watcher: Watcher, workers_dir: Path, count: int = TICKS) -> list[str]:
    seen = []
    for index in range(count):
        watcher.tick(time.time(), full=index % 3 == 0)
        seen.append(agent_row(workers_dir).get("state") or "")
    return seen


@pytest.fixture
def player(session: Any, tmp_path: Path) -> Player:
    folder = tmp_path / PROJECT
    folder.mkdir()
    return Player(session, folder, tmp_path / "agent.commands")


def test_a_still_reply_under_the_stopped_title_is_ready_without_any_turn_end_seen(
        watcher: Watcher, player: Player, isolated_env: Path) -> None:
    # The watcher starts after the turn: the first title it ever reads is the quiet one.
    player.shows(FINISHED, STOPPED)

    def ready() -> bool:
        watcher.tick(time.time())
        return agent_row(isolated_env).get("state") == "READY"

    retry_until(ready, 15)
    row = agent_row(isolated_env)
    assert "title_stopped" in row["reasons"] and "no_end_mark" in row["reasons"]
    tracked = next(t for t in watcher.tracked.values() if t.name == "agent")
    assert tracked.pack is not None and tracked.pack.name == "codex"


def test_a_spinner_title_keeps_the_same_still_screen_busy_and_takes_ready_back_at_once(
        watcher: Watcher, player: Player, isolated_env: Path) -> None:
    player.shows(FINISHED, SPINNER)
    states = states_over_ticks(watcher, isolated_env)
    assert "READY" not in states and states[-1] == "BUSY"
    # The turn stops: same screen, quiet title.
    player.shows(FINISHED, STOPPED)
    retry_until(lambda: "READY" in states_over_ticks(watcher, isolated_env, 2), 15)
    # A new turn starts (typed into the pane, no send): the spinner is back before the screen moves.
    player.shows(FINISHED, SPINNER)
    assert states_over_ticks(watcher, isolated_env, 2)[0] == "BUSY"


@pytest.mark.parametrize("title", [
    f"lab@devbox: ~/src/{PROJECT}",  # a shell's title, left over
    f"{PROJECT}-old",  # another folder's name
    socket.gethostname(),  # tmux's default title
    f"[ ! ] Action Required | {PROJECT}",  # asking, not stopped
])
def test_a_title_that_is_not_the_cli_stopping_keeps_it_busy(
        watcher: Watcher, player: Player, isolated_env: Path, title: str) -> None:
    player.shows(FINISHED, title)
    states = states_over_ticks(watcher, isolated_env)
    assert "READY" not in states and states[-1] == "BUSY"


def test_the_corpus_scores_a_titled_screen_as_the_watcher_reports_it(tmp_path: Path) -> None:
    from scripts.corpus import classify_cases, load_cases

    folder = tmp_path / "codex-0.142.5-lab"
    (folder / "codex").mkdir(parents=True)
    rows, titles = [], []
    for name, title in (("quiet", STOPPED), ("spinner", SPINNER), ("shell", "lab@devbox: ~"),
                        ("untitled", None)):
        (folder / "codex" / f"{name}.txt").write_text(FINISHED.read_text(encoding="utf-8"))
        rows.append(f"codex/{name}.txt\tcodex\tREADY\t200x50\t{name}\n")
        if title is not None:
            titles.append(f"codex/{name}.txt\t{title}\t/home/lab/{PROJECT}\n")
    (folder / "labels.tsv").write_text("path\tcli\tstate\tsize\tnote\n" + "".join(rows))
    (folder / "titles.tsv").write_text("path\ttitle\tcwd\n" + "".join(titles))
    cases = load_cases(tmp_path)
    assert {c.note: c.title for c in cases} == {"quiet": STOPPED, "spinner": SPINNER,
                                                "shell": "lab@devbox: ~", "untitled": None}
    said = {r.case.note: (r.predicted.value, r.rule) for r in classify_cases(load_packs(), cases)}
    assert said == {"quiet": ("READY", "reply-without-end-mark+title"),
                    "spinner": ("BUSY", "reply-without-end-mark"),
                    "shell": ("BUSY", "reply-without-end-mark"),
                    "untitled": ("BUSY", "reply-without-end-mark")}


# Claude Code 2.1.80 under a status line (training set): a short reply, no end mark, no idle hint.
CLAUDE_FINISHED = REPO / "tests" / "corpus" / "claude-code-2.1.80-variants" / "claude-code" / \
    "ready-after-answer-sl1-120x40.txt"


def test_claude_codes_quiet_title_ends_its_reply_and_its_spinner_title_does_not(
        watcher: Watcher, player: Player, isolated_env: Path) -> None:
    player.shows(CLAUDE_FINISHED, "✳ Claude Code")  # first sight: no turn end seen
    retry_until(lambda: "READY" in states_over_ticks(watcher, isolated_env, 2), 15)
    tracked = next(t for t in watcher.tracked.values() if t.name == "agent")
    assert tracked.pack is not None and tracked.pack.name == "claude"
    assert "title_stopped" in agent_row(isolated_env)["reasons"]
    player.shows(CLAUDE_FINISHED, "⠂ Claude Code")  # as 2.1.80 titles the pane while it works
    states = states_over_ticks(watcher, isolated_env)
    assert "READY" not in states and states[-1] == "BUSY"


# Claude Code 2.1.79 streaming under a status line (the pairs sets, with its styled copy): a
# short reply, no end mark, the prompt glyph dim (38;5;246) as it is while the turn runs.
CLAUDE_AT_WORK = REPO / "tests" / "corpus" / "claude-code-2.1.79-pairs-sweep" / "ansi" / \
    "busy-streaming-sl1-120x40.ansi"
DIM_GLYPH, GLYPH_AT_REST = "\x1b[38;5;246m❯", "\x1b[39m❯"


def test_claude_codes_prompt_glyph_ends_its_reply_where_no_title_says_so(
        watcher: Watcher, player: Player, isolated_env: Path, tmp_path: Path) -> None:
    """The turn ends and Claude Code draws the glyph in the terminal's own colour again: the
    text is the same, no title is the CLI's; a styled capture of the pane sees it."""
    at_work = CLAUDE_AT_WORK.read_text(encoding="utf-8")
    assert at_work.count(DIM_GLYPH) == 1
    at_rest = tmp_path / "at-rest.ansi"
    at_rest.write_text(at_work.replace(DIM_GLYPH, GLYPH_AT_REST), encoding="utf-8")
    untitled = "Claude Code"  # neither `✳ …` (stopped) nor a spinner frame

    player.shows(CLAUDE_AT_WORK, untitled)
    states = states_over_ticks(watcher, isolated_env)
    assert "READY" not in states and states[-1] == "BUSY"
    tracked = next(t for t in watcher.tracked.values() if t.name == "agent")
    assert tracked.pack is not None and tracked.pack.name == "claude"
    assert tracked.screen.prompt_at_rest is False  # read, and dim

    player.shows(at_rest, untitled)
    retry_until(lambda: "READY" in states_over_ticks(watcher, isolated_env, 2), 15)
    assert "prompt_at_rest" in agent_row(isolated_env)["reasons"]
    # The next turn dims it again: BUSY at once, on the very same text.
    player.shows(CLAUDE_AT_WORK, untitled)
    retry_until(lambda: DIM_GLYPH in player.styled(), 10)  # the text alone cannot say it is up
    assert states_over_ticks(watcher, isolated_env, 3)[-1] == "BUSY"


def test_a_grey_rule_or_a_screen_without_colours_is_no_witness() -> None:
    working = load_packs()["claude"].working_prompt
    assert working is not None
    rule = "─" * 40
    assert working.at_rest(f"{rule}\n❯ \n{rule}") is None  # no colours at all (NO_COLOR)
    assert working.at_rest(f"\x1b[38;5;244m{rule}\n\x1b[39m❯ \n{rule}") is True
    assert working.at_rest(f"\x1b[38;5;244m{rule}\n\x1b[38;5;244m❯ \n{rule}") is False
    assert working.at_rest(f"\x1b[35m{rule}\n\x1b[35m! \n{rule}") is True  # bash mode
    assert working.at_rest(f"\x1b[35m{rule}\n\x1b[90m! \n{rule}") is False
    assert working.at_rest(f"\x1b[38;5;244m{rule}\n\x1b[2;39m❯ \n{rule}") is False  # dim
    # The lowest box decides: a box quoted higher up in a reply is not the prompt.
    assert working.at_rest(f"\x1b[37m{rule}\n\x1b[39m❯ \n\n\x1b[37m{rule}\n\x1b[90m❯ ") is False
    assert working.at_rest("\x1b[38;5;174mno box here\n❯ hello") is None
