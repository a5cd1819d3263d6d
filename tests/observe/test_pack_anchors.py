"""Anchors: a pack finds a landmark (an input box, a dialog's option block) by its structure,
wherever it sits, and places regions by it; what sits under the box is footer, any number of
lines of it."""

from __future__ import annotations

import textwrap

import pytest

from app.base.errors import PackError
from app.base.model import State
from app.observe.assess import NO_END_MARK
from app.observe.pack_loading import load_packs, parse_pack
from app.observe.packs import Pack

BOXED = r"""
name: boxed
detect:
  commands: [boxed]
anchors:
  box:
    region: {last: 30}
    pattern: '^\+-+\+\n\| >[^\n]*\n\+-+\+$'
  turn:
    region: {above: box, lines: 20}
    pattern: '^\S[^\n]*(?:\n\s[^\n]*)*\Z'
input:
  region: {at: box}
  match: '\A\+-+\+\n\| >(?: (?P<draft>[^\n]*))?\n\+-+\+\Z'
rules:
  - id: working
    state: BUSY
    region: {at: turn}
    match: '\A\* [^\n]*\.\.\.'
  - id: busy-footer
    state: BUSY
    region: {below: box}
    match: 'ctrl-c to stop'
  - id: idle
    state: READY
    match:
      - pattern: '\A\+'
        region: {at: box}
    unless:
      - pattern: 'ctrl-c to stop'
        region: {from: box, lines: 5}
"""


def boxed() -> Pack:
    return parse_pack(BOXED, "boxed.yml")


def screen(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def test_footer_under_the_box_is_read_whatever_its_length() -> None:
    pack = boxed()
    for footer in ("", "model x | 23%", "line one\nline two\n> branch main ✚2"):
        idle = screen("""
            reply
            +-----+
            | >
            +-----+
            """) + ("\n" + footer if footer else "")
        assert pack.classify(idle).state is State.READY, footer
        busy = idle + "\n  ctrl-c to stop"
        verdict = pack.classify(busy)
        assert (verdict.state, verdict.rule_id) == (State.BUSY, "busy-footer"), footer


def test_an_anchor_placed_by_another_finds_the_turn_past_indented_lines() -> None:
    working = screen("""
        * Thinking... (3s)
          [x] read the file
          [ ] write the summary
        +-----+
        | >
        +-----+
        status line
        """)
    verdict = boxed().classify(working)
    assert (verdict.state, verdict.rule_id) == (State.BUSY, "working")
    done = working.replace("* Thinking... (3s)", "* Done in 3s")
    assert boxed().classify(done).state is State.READY


def test_the_lowest_match_wins_and_old_boxes_above_do_not_count() -> None:
    text = screen("""
        +-----+
        | > old session
        +-----+
        ctrl-c to stop
        banner of the new session
        version 2
        model x
        folder ~/src
        tip: press ? for help
        +-----+
        | > typed
        +-----+
        """)
    pack = boxed()
    assert pack.classify(text).state is State.READY
    assert pack.draft(text) == "typed"


def test_without_its_anchor_a_region_is_empty_match_fails_unless_vetoes_nothing() -> None:
    pack = boxed()
    verdict = pack.classify("no box here\nctrl-c to stop")
    assert verdict.state is State.UNKNOWN
    assert pack.draft("no box here") is None
    assert pack.input_visible("no box here") is False


@pytest.mark.parametrize(("region", "message"), [
    ("{below: nowhere}", "unknown anchor 'nowhere'"),
    ("{above: box}", "needs lines"),
    ("{at: box, lines: 3}", "takes no lines"),
    ("{below: box, last: 3}", "region must be"),
])
def test_bad_anchored_regions_are_refused_with_the_line(region: str, message: str) -> None:
    text = BOXED.replace("region: {below: box}", f"region: {region}")
    with pytest.raises(PackError) as caught:
        parse_pack(text, "boxed.yml")
    assert message in str(caught.value)
    assert "boxed.yml:" in str(caught.value)


def test_an_anchor_may_only_use_anchors_defined_before_it() -> None:
    text = BOXED.replace("region: {last: 30}", "region: {above: turn, lines: 3}")
    with pytest.raises(PackError, match="unknown anchor 'turn'"):
        parse_pack(text, "boxed.yml")


# --- the claude pack on the shapes users' screens take ---------------------------------------

RULE = "─" * 60


@pytest.fixture(scope="module")
def claude() -> Pack:
    return load_packs()["claude"]


STATUS_LINES = (
    "  Opus 4.5 | ~/src/app | ctx 23% | $0.42",
    "  🤖 Sonnet 4.5 │ 📁 proj │ 🌿 main*\n  ▓▓░░░░░░░░ 23% ctx · 💰 $1.27",
    "╭─ me@box ── ~/src/proj ── (main ✚2)\n> Opus · context 45% used · $0.120\n"
    "current: 2.1.19 · latest: 2.1.19",
    "  " + "─" * 30 + " main " + "─" * 10,
)


@pytest.mark.parametrize("status", STATUS_LINES)
def test_claude_reads_through_any_status_line(claude: Pack, status: str) -> None:
    box = f"{RULE}\n❯\xa0\n{RULE}\n{status}"
    idle = f"● Done. The build directory is gone.\n✻ Cooked for 3s\n{box}"
    assert claude.classify(idle).state is State.READY
    spinning = (f"● Bash(sleep 14)\n  ⎿  Running…\n"
                f"✻ Processing… (esc to interrupt · ctrl+t to hide tasks · 3m 1s)\n"
                f"  ⎿  ◼ #1 Read the README\n     ◻ #2 Clean the build directory\n"
                f"     ✔ #3 Write a summary\n{box}")
    assert claude.classify(spinning).state is State.BUSY
    footer_says_busy = f"● lorem ipsum\n{box}\n  ⏸ manual mode on · esc to interrupt"
    assert claude.classify(footer_says_busy).state is State.BUSY
    question = ("╭─── Claude Code v2.1.19 ───╮\n"
                "● Which option do you prefer?\n  1. Yes, delete it\n  2. No, keep it\n"
                f"  Do you want to proceed?\n{box}")
    assert claude.classify(question).state is State.READY


def test_claude_dialog_is_its_option_block_whatever_follows(claude: Pack) -> None:
    dialog = (f"● Bash(rm -rf build)\n{RULE}\n Bash command\n   rm -rf build\n"
              " Do you want to proceed?\n ❯ 1. Yes\n   2. No\n")
    for tail in ("", " Esc to cancel · Tab to amend", "  🤖 Sonnet │ main\n  23% ctx"):
        verdict = claude.classify(dialog + tail)
        assert verdict.state is State.NEEDS_CONFIRMATION, tail
        assert verdict.summary == "Claude Code wants to run: rm -rf build"
    answered = dialog + f"● Done.\n{RULE}\n❯\xa0\n{RULE}\n  ? for shortcuts"
    assert claude.classify(answered).state is State.READY


def test_above_takes_what_there_is_on_a_short_screen() -> None:
    # fewer lines above the anchor than asked for: all of them, not a wrapped-around slice
    working = screen("""
        * Thinking... (3s)
          [x] one
          [ ] two
          [ ] three
        +-----+
        | >
        +-----+
        """)
    pack = parse_pack(BOXED.replace("region: {above: box, lines: 20}",
                                    "region: {above: box, lines: 50}"), "boxed.yml")
    assert pack.classify(working).rule_id == "working"


def test_claude_reply_without_end_mark_is_busy_only_where_the_release_draws_end_marks(
        claude: Pack) -> None:
    box = f"{RULE}\n❯\xa0\n{RULE}\n  🤖 Opus │ 📁 proj │ 🌿 main*"
    reply = "● lorem ipsum dolor sit amet\n  sed do eiusmod\n  3 tasks (2 done, 1 in progress)\n"
    # 2.1.19-2.1.23: a spinner for as long as it works, no end mark after a short turn; read
    # off the screen (their banner, a status line naming the release)
    banner = "╭─── Claude Code v2.1.23 ───╮\n"
    assert claude.classify(banner + reply + box).state is State.READY
    assert claude.classify(reply + box + "\n  current: 2.1.19 · latest: 2.1.19").state \
        is State.READY
    # with no release on screen, as 2.1.80 streams (no spinner, no newer marks): BUSY until the
    # Stop hook says the turn ended
    verdict = claude.classify(reply + box)
    assert (verdict.state, verdict.rule_id) == (
        State.BUSY, "reply-without-end-mark-release-unknown")
    assert NO_END_MARK in verdict.reasons
    # 2.1.197 and later close every turn with an end mark; their footer says so
    verdict = claude.classify(reply + box + "\n  ← for agents")
    assert (verdict.state, verdict.rule_id) == (
        State.BUSY, "reply-without-end-mark-newer-release")
    ended = reply.replace("  3 tasks", "✻ Worked for 3s · done 11:22 PM\n  3 tasks")
    assert claude.classify(ended + box + "\n  ← for agents").state is State.READY


@pytest.mark.parametrize("glyph", ["✻", "✳", "✽", "⠋", "◐"])
def test_claude_spinner_is_the_turn_line_whatever_its_glyph(claude: Pack, glyph: str) -> None:
    box = f"{RULE}\n❯\xa0\n{RULE}\n  Opus | ~/proj | 23%"
    working = (f"● Bash(sleep 10)\n  ⎿  Running…\n{glyph} Cleaning the build directory… (2m 3s)\n"
               f"  ⎿  ✔ Read the README\n     ◼ Clean the build directory\n{box}")
    assert claude.classify(working).state is State.BUSY
    # a reply whose text ends in an ellipsis is not a spinner
    idle = f"╭─── Claude Code v2.1.19 ───╮\n● I looked at it and will wait for you…\n{box}"
    assert claude.classify(idle).state is State.READY


def test_claude_draft_that_looks_like_an_option_is_a_draft(claude: Pack) -> None:
    screen_text = (f"✻ Worked for 3s\n{RULE}\n❯ 1. fix the parser\n  2. then the tests\n{RULE}\n"
                   "  ? for shortcuts")
    verdict = claude.classify(screen_text)
    assert verdict.state is State.READY
    assert claude.draft(screen_text) == "1. fix the parser 2. then the tests"


def test_claude_bare_menu_is_found_whatever_follows_it(claude: Pack) -> None:
    menu = (f"{RULE}\n  Make auto mode your default permission mode?\n"
            "  ❯ Yes, set auto mode as my default permission mode\n    No, keep manual mode\n")
    for tail in ("", "  2/3 tasks done · 1 in progress\n  ✔ Read the README\n  ◼ Write a summary"):
        verdict = claude.classify(menu + tail)
        assert (verdict.state, verdict.rule_id) == (State.NEEDS_CONFIRMATION, "bare-menu"), tail
        assert "default permission mode?" in verdict.summary


def test_a_volatile_region_leaves_a_ticking_status_line_out_of_the_fingerprint(
        claude: Pack) -> None:
    idle = (f"● Done.\n✻ Worked for 3s\n{RULE}\n❯\xa0\n{RULE}\n"
            "  🕐 23:59:58 │ session 12m 4s\n  ? for shortcuts")
    ticked = idle.replace("23:59:58", "23:59:59").replace("12m 4s", "12m 5s")
    assert claude.fingerprint(idle) == claude.fingerprint(ticked)
    assert claude.fingerprint(idle) != claude.fingerprint(idle.replace("Done.", "Done!"))
    assert claude.fingerprint(idle) != claude.fingerprint(idle.replace("❯\xa0", "❯ typed"))


def test_volatile_takes_regexes_and_anchored_regions_only() -> None:
    text = BOXED.replace("rules:", "volatile:\n  - 'clock \\d+'\n  - region: {below: box}\nrules:")
    pack = parse_pack(text, "boxed.yml")
    assert len(pack.volatile) == 1 and len(pack.volatile_regions) == 1
    with pytest.raises(PackError, match="unknown key"):
        parse_pack(BOXED.replace("rules:", "volatile:\n  - {when: box}\nrules:"), "boxed.yml")
