"""Notifications: the decision rules, and delivery to real receivers (tmux, D-Bus, a command)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from libtmux.server import Server
from libtmux.session import Session

from app.adapters.notify import (
    NotificationEvent,
    Notifier,
    Receiver,
    command_receiver,
    desktop_argv,
    desktop_receiver,
    format_message,
)
from app.adapters.notify_settings import COMMAND, DESKTOP, TMUX, NotifySettings, parse_command
from app.base.errors import ConfigError, TmuxError
from app.base.model import Note, State
from tests.conftest import RECORD_ENV, read_jsonl, write_script
from tests.support.dbus_notifications import BusUnavailable, NotificationBus
from tests.support.waiting import retry_until, stop_process

NEEDS = State.NEEDS_CONFIRMATION


def make_event(
    state: State,
    previous: State | None = State.BUSY,
    *,
    worker_id: str = "w1",
    name: str = "api",
    summary: str = "Claude wants to run a command",
    actions: str = "",
    focused: bool = False,
    ts: float | None = None,
    note: Note | None = None,
) -> NotificationEvent:
    return NotificationEvent(
        worker_id=worker_id,
        name=name,
        session="work",
        window="@3",
        pane_id="%7",
        cli="claude",
        previous=previous,
        state=state,
        summary=summary,
        actions_needed=actions,
        ts=time.time() if ts is None else ts,
        focused=focused,
        note=note,
    )


GAVE_UP = Note(
    "herd", "max_nudges", "needs you", "herd: max nudges reached (3), still stuck", urgent=True
)
NUDGED = Note("herd", "nudged", "herd nudge 1/3", "Yes,\n please continue.")


def working(previous: State) -> NotificationEvent:
    """BUSY as a pack rule reads it off the screen: a new turn."""
    return replace(make_event(State.BUSY, previous), rule_id="esc-to-interrupt")


def note_event(note: Note = GAVE_UP, **fields: Any) -> NotificationEvent:
    """A note about a READY pane, as the daemon builds one: no transition, so no previous."""
    return make_event(State.READY, previous=None, summary="Shall I continue?", note=note,
                      **fields)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """An in-process receiver that remembers what it was asked to send."""

    def __init__(self, kind: str = TMUX) -> None:
        self.kind = kind
        self.events: list[NotificationEvent] = []

    def send(self, event: NotificationEvent) -> None:
        self.events.append(event)

    @property
    def receiver(self) -> Receiver:
        return Receiver(self.kind, self.send)

    def states(self) -> list[State]:
        return [e.state for e in self.events]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def recording_notifier(recorder: Recorder, clock: FakeClock, **settings: Any) -> Notifier:
    return Notifier(NotifySettings(**settings), None, clock, receivers=[recorder.receiver])


# --- the words ----------------------------------------------------------------------------------


def test_message_names_the_pane_state_and_action() -> None:
    event = make_event(NEEDS, actions="Approve: rm -rf build")
    assert format_message(event).line == "api: NEEDS_CONFIRMATION — Approve: rm -rf build"


def test_message_falls_back_to_summary_and_stays_on_one_line() -> None:
    event = make_event(State.ERROR, summary="rate limited\n  retry in 30 s")
    msg = format_message(event)
    assert (msg.title, msg.body) == ("api: ERROR", "rate limited retry in 30 s")
    assert format_message(make_event(State.READY, summary="")).line == "api: READY"


def test_desktop_argv_is_critical_for_questions_and_never_an_option() -> None:
    argv = desktop_argv(make_event(NEEDS, summary="-rf everything"), "linux")
    assert argv[:3] == ["notify-send", "--app-name=conductor", "--urgency=critical"]
    # The title and body come after "--", so a leading dash is text, not an option.
    assert argv[4:] == ["--", "api: NEEDS_CONFIRMATION", "-rf everything"]
    assert "--urgency=normal" in desktop_argv(make_event(State.READY), "linux")


def test_desktop_sound_is_a_hint_by_kind_and_silence_otherwise() -> None:
    asking = desktop_argv(make_event(NEEDS), "linux", sound=True)
    assert "--hint=string:sound-name:dialog-question" in asking
    assert "--hint=string:sound-name:complete" in desktop_argv(
        make_event(State.READY), "linux", sound=True)
    assert "--hint=boolean:suppress-sound:true" in desktop_argv(make_event(NEEDS), "linux")
    mac = desktop_argv(make_event(NEEDS), "darwin", sound=True)
    assert any('sound name "Glass"' in a for a in mac)
    settings = NotifySettings()
    assert settings.sound_for(make_event(NEEDS).urgent)
    assert not settings.sound_for(make_event(State.READY).urgent)


def test_desktop_argv_on_macos_passes_text_as_arguments_not_script() -> None:
    evil = 'done" & do shell script "touch /tmp/pwned'
    argv = desktop_argv(make_event(State.READY, summary=evil), "darwin")
    assert argv[0] == "osascript"
    script = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    # The user's text never appears inside the AppleScript source...
    assert all(evil not in line for line in script)
    # ...only as run-handler arguments.
    assert argv[-2:] == ["api: READY", evil]


def test_a_note_names_the_pane_and_is_critical_only_when_it_needs_you() -> None:
    gave_up = "api: needs you — herd: max nudges reached (3), still stuck"
    assert format_message(note_event()).line == gave_up
    assert "--urgency=critical" in desktop_argv(note_event(), "linux")
    # One line, like a transition's words.
    assert format_message(note_event(NUDGED)).line == "api: herd nudge 1/3 — Yes, please continue."
    assert "--urgency=normal" in desktop_argv(note_event(NUDGED), "linux")


# --- settings -----------------------------------------------------------------------------------


def test_defaults() -> None:
    s = NotifySettings()
    assert s.kinds == {TMUX, DESKTOP, COMMAND}  # not TERMINAL: asked for, not assumed
    assert (s.sound_needs_you, s.sound_done) == (True, False)
    assert s.states == {State.READY, NEEDS, State.ERROR, State.EXITED}
    assert (s.min_interval, s.timeout, s.skip_focused, s.notify_command) == (10.0, 5.0, False, ())


def test_notify_command_string_is_split_not_shelled() -> None:
    assert parse_command("notify 'my phone' $HOME; rm") == ("notify", "my phone", "$HOME;", "rm")
    assert parse_command(["a b", "c"]) == ("a b", "c")
    assert parse_command("") == ()
    with pytest.raises(ConfigError, match="notify_command"):
        parse_command("unclosed 'quote")


def test_settings_from_config_values() -> None:
    s = NotifySettings.from_mapping(
        {
            "kinds": ["tmux"],
            "states": "needs_conf, error",
            "notify_command": "say hi",
            "min_interval": "30",
        }
    )
    assert s.kinds == {TMUX}
    assert s.states == {NEEDS, State.ERROR}
    assert s.notify_command == ("say", "hi")
    assert s.min_interval == 30.0
    with pytest.raises(ConfigError, match="unknown notification kind"):
        NotifySettings.from_mapping({"kinds": ["pager"]})
    with pytest.raises(ConfigError, match="unknown state 'SLEEPY'"):
        NotifySettings.from_mapping({"states": ["SLEEPY"]})
    with pytest.raises(ConfigError, match="unknown notification setting"):
        NotifySettings.from_mapping({"volume": 11})


# --- deciding -----------------------------------------------------------------------------------


def test_once_per_transition(recorder: Recorder, clock: FakeClock) -> None:
    notifier = recording_notifier(recorder, clock)
    event = make_event(State.READY)
    notifier.on_transition(event)
    notifier.on_transition(event)  # the same transition handed over twice
    notifier.on_transition(make_event(State.READY, previous=State.READY))  # a poll, not a change
    assert notifier.close()
    assert recorder.states() == [State.READY]


def test_only_configured_states_notify(recorder: Recorder, clock: FakeClock) -> None:
    notifier = recording_notifier(recorder, clock, states=frozenset({State.ERROR}))
    notifier.on_transition(make_event(State.BUSY, previous=State.READY))
    notifier.on_transition(make_event(State.READY))
    notifier.on_transition(make_event(NEEDS))
    notifier.on_transition(make_event(State.ERROR))
    assert notifier.close()
    assert recorder.states() == [State.ERROR]


def test_busy_and_unknown_never_notify_by_default(recorder: Recorder, clock: FakeClock) -> None:
    notifier = recording_notifier(recorder, clock)
    notifier.on_transition(make_event(State.BUSY, previous=State.READY))
    notifier.on_transition(make_event(State.UNKNOWN, previous=State.BUSY))
    assert notifier.close()
    assert recorder.events == []


def test_rate_limit_per_pane_and_state(recorder: Recorder, clock: FakeClock) -> None:
    notifier = recording_notifier(recorder, clock)
    notifier.on_transition(make_event(State.READY))
    clock.now += 3
    notifier.on_transition(working(State.READY))
    clock.now += 3
    notifier.on_transition(make_event(State.READY))  # 6 s after the last READY: swallowed
    notifier.on_transition(make_event(State.READY, worker_id="w2"))  # another pane: its own limit
    clock.now += 4.5
    notifier.on_transition(working(State.READY))
    notifier.on_transition(make_event(State.READY))  # 10.5 s after the last one sent
    assert notifier.close()
    assert [(e.worker_id, e.state) for e in recorder.events] == [
        ("w1", State.READY),
        ("w2", State.READY),
        ("w1", State.READY),
    ]


def test_forgotten_pane_starts_afresh(recorder: Recorder, clock: FakeClock) -> None:
    notifier = recording_notifier(recorder, clock)
    notifier.on_transition(make_event(State.READY))
    notifier.forget("w1")  # the pane closed; a new one may reuse the id
    notifier.on_transition(make_event(State.READY))
    assert notifier.close()
    assert recorder.states() == [State.READY, State.READY]


def test_a_question_is_never_swallowed_by_a_ready_just_before(
    recorder: Recorder, clock: FakeClock
) -> None:
    notifier = recording_notifier(recorder, clock)
    notifier.on_transition(make_event(State.READY))
    clock.now += 1
    notifier.on_transition(make_event(NEEDS, previous=State.READY))
    clock.now += 1
    notifier.on_transition(make_event(State.ERROR, previous=NEEDS))
    assert notifier.close()
    assert recorder.states() == [State.READY, NEEDS, State.ERROR]


def test_focused_pane_skipped_only_when_asked(recorder: Recorder, clock: FakeClock) -> None:
    notifier = recording_notifier(recorder, clock, skip_focused=True)
    notifier.on_transition(make_event(NEEDS, focused=True))
    notifier.on_transition(make_event(State.READY, focused=False))
    assert notifier.close()
    assert recorder.states() == [State.READY]

    default = Recorder()
    notifier = recording_notifier(default, clock)
    notifier.on_transition(make_event(NEEDS, focused=True))
    assert notifier.close()
    assert default.states() == [NEEDS]


def test_one_alert_per_turn_and_per_dialog_whatever_the_redraws(
        recorder: Recorder, clock: FakeClock) -> None:
    notifier = recording_notifier(recorder, clock, min_interval=0)
    working = {"rule_id": "esc-to-interrupt"}  # the screen shows the agent at work
    steps: list[tuple[State, str, dict[str, Any]]] = [
        (NEEDS, "Approve: rm -rf build", {}),  # asked: told
        (State.BUSY, "", {}),  # redrawn: "the screen is changing", no rule read it...
        (State.UNKNOWN, "", {"previous_lasted_s": 0.5}),  # ...for a moment
        (NEEDS, "Approve:   rm -rf\n bu ild", {}),  # the same dialog wrapped narrower: not again
        (State.UNKNOWN, "", {}),
        (NEEDS, "Approve: rm -rf dist", {}),  # another dialog in the same turn: told
        (State.READY, "", {}),  # the turn ends: told
        (State.UNKNOWN, "", {}),
        (State.READY, "", {}),  # the same end read again: not again
        (State.BUSY, "", working),  # a new turn...
        (NEEDS, "Approve: rm -rf build", {}),  # ...asks the first question again: told
        (State.READY, "", {}),  # and ends: told
        (State.BUSY, "", {}),  # no rule read it, but it went on: work too
        (State.READY, "", {"previous_lasted_s": 30.0}),  # told
    ]
    previous: State | None = State.BUSY
    for ts, (state, actions, more) in enumerate(steps):
        notifier.on_transition(replace(make_event(state, previous, actions=actions, ts=float(ts)),
                                       **more))
        previous = state
    assert notifier.close()
    assert [(e.state, e.actions_needed) for e in recorder.events] == [
        (NEEDS, "Approve: rm -rf build"), (NEEDS, "Approve: rm -rf dist"), (State.READY, ""),
        (NEEDS, "Approve: rm -rf build"), (State.READY, ""), (State.READY, "")]


def test_first_sight_of_an_idle_pane_is_not_news(recorder: Recorder, clock: FakeClock) -> None:
    notifier = recording_notifier(recorder, clock)
    notifier.on_transition(make_event(State.READY, previous=None, worker_id="idle"))
    notifier.on_transition(make_event(NEEDS, previous=None, worker_id="asking"))
    assert notifier.close()
    assert [(e.worker_id, e.state) for e in recorder.events] == [("asking", NEEDS)]


def test_receivers_get_every_text_redacted_and_cleaned(recorder: Recorder,
                                                      clock: FakeClock) -> None:
    check = "mysql -u root -pHunter2pass shop || echo sk-ant-api03-AbCdEfGhIjKlMnOpQrSt0123"
    note = Note("cycle", "goal_met", "goal met?", f"the check `{check}` passed\x1b]0;t\x07")
    notifier = recording_notifier(recorder, clock)
    notifier.announce(make_event(State.READY, previous=None, note=note, name="api\u202e",
                                 summary=f"ran {check}"))
    notifier.on_transition(make_event(NEEDS, actions=f"Approve: {check}\x1b[2J"))
    assert notifier.close()
    sent = [format_message(e).line + e.summary + e.actions_needed for e in recorder.events]
    assert len(sent) == 2
    for text in sent:
        assert "Hunter2pass" not in text and "AbCdEfGhIj" not in text
        assert "mysql -u root -p[REDACTED] shop" in text
        assert not {"\x1b", "\x07", "\u202e"} & set(text)


def test_notes_skip_the_state_filter_and_the_transition_rate_limit(
    recorder: Recorder, clock: FakeClock
) -> None:
    notifier = recording_notifier(recorder, clock, states=frozenset({State.ERROR}))
    notifier.on_transition(make_event(State.READY))  # a state nobody asked for
    notifier.announce(note_event(NUDGED))  # about the same READY pane: goes all the same
    notifier.announce(note_event())  # "needs you" right after: its own words, so it goes
    clock.now += 5
    notifier.announce(note_event())  # the very same words again: the user has them already
    clock.now += 6
    notifier.announce(note_event())  # past min_interval: a reminder is worth it
    notifier.forget("w1")
    notifier.announce(note_event())
    assert notifier.close()
    assert [e.label for e in recorder.events] == [
        "herd nudged",
        "herd max_nudges",
        "herd max_nudges",
        "herd max_nudges",
    ]


def test_a_note_about_the_focused_pane_follows_skip_focused(
    recorder: Recorder, clock: FakeClock
) -> None:
    notifier = recording_notifier(recorder, clock, skip_focused=True)
    assert notifier.should_announce(note_event(focused=True)) == (False, "focused")
    notifier.announce(note_event(NUDGED, worker_id="w2"))
    assert notifier.close()
    assert [e.worker_id for e in recorder.events] == ["w2"]


def test_disabled_kind_is_not_called(clock: FakeClock) -> None:
    tmux, desktop = Recorder(TMUX), Recorder(DESKTOP)
    notifier = Notifier(
        NotifySettings(kinds=frozenset({DESKTOP})),
        None,
        clock,
        receivers=[tmux.receiver, desktop.receiver],
    )
    assert notifier.active_kinds == [DESKTOP]
    notifier.on_transition(make_event(State.READY))
    assert notifier.close()
    assert (tmux.events, desktop.states()) == ([], [State.READY])


def test_each_kind_notifies_its_own_states(clock: FakeClock) -> None:
    tmux, desktop, command = Recorder(TMUX), Recorder(DESKTOP), Recorder(COMMAND)
    settings = NotifySettings(
        states=frozenset({State.READY, State.ERROR}),
        states_by_kind={DESKTOP: frozenset({NEEDS}), COMMAND: frozenset({NEEDS, State.ERROR})},
    )
    notifier = Notifier(
        settings, None, clock, receivers=[tmux.receiver, desktop.receiver, command.receiver]
    )
    notifier.on_transition(make_event(State.READY))
    notifier.on_transition(make_event(NEEDS, previous=State.READY))
    notifier.on_transition(make_event(State.ERROR, previous=NEEDS))
    notifier.on_transition(make_event(State.UNKNOWN, previous=State.ERROR))
    assert notifier.close()
    # tmux has no list of its own, so it follows ``states``.
    assert tmux.states() == [State.READY, State.ERROR]
    assert desktop.states() == [NEEDS]
    assert command.states() == [NEEDS, State.ERROR]


def test_a_state_only_a_disabled_kind_wants_is_not_notified(clock: FakeClock) -> None:
    tmux = Recorder(TMUX)
    settings = NotifySettings(
        kinds=frozenset({TMUX}),
        states=frozenset({State.ERROR}),
        states_by_kind={DESKTOP: frozenset({State.READY})},
    )
    desktop = Recorder(DESKTOP)
    notifier = Notifier(settings, None, clock, receivers=[tmux.receiver, desktop.receiver])
    assert notifier.should_notify(make_event(State.READY)) == (False, "state_not_notified")
    assert notifier.should_notify(make_event(State.ERROR)) == (True, "notify")
    assert notifier.close()


def test_states_by_kind_from_config_values() -> None:
    s = NotifySettings.from_mapping({"states": ["ready"], "states_by_kind": {"desktop": "error"}})
    assert s.states_for(DESKTOP) == {State.ERROR}
    assert s.states_for(TMUX) == s.states_for(COMMAND) == {State.READY}
    with pytest.raises(ConfigError, match="unknown notification kind"):
        NotifySettings(states_by_kind={"pager": frozenset({State.READY})})
    with pytest.raises(ConfigError, match="unknown state 'SLEEPY'"):
        NotifySettings.from_mapping({"states_by_kind": {"tmux": ["SLEEPY"]}})


# --- startup report -----------------------------------------------------------------------------


def test_startup_report_names_each_missing_receiver() -> None:
    missing_command = command_receiver(["/nonexistent/conductor-hook"], 5.0)
    assert missing_command is not None
    assert command_receiver([], 5.0) is None  # no command set: off, and nothing to report
    notifier = Notifier(
        NotifySettings(),
        None,
        receivers=[desktop_receiver(5.0, platform="linux", which=lambda _: None), missing_command],
    )
    notifier.close()
    assert notifier.startup_report() == [
        "desktop notifications off: neither notify-send nor osascript found",
        "notify_command off: '/nonexistent/conductor-hook' not found or not executable",
    ]
    defaults = Notifier(NotifySettings(), None)
    assert defaults.startup_report()[0].startswith("tmux messages off")
    assert COMMAND not in defaults.active_kinds
    assert defaults.close()
    # A kind the user turned off is not "unavailable": nothing to report.
    quiet = Notifier(NotifySettings(kinds=frozenset()), None)
    assert quiet.startup_report() == []
    assert quiet.close()


def test_desktop_off_without_a_session_bus(tmp_path: Path) -> None:
    found = "/usr/bin/notify-send"
    headless = desktop_receiver(5.0, "linux", which=lambda _: found, env={"HOME": "/root"})
    assert headless.unavailable.startswith("desktop notifications off: no D-Bus session bus")
    (tmp_path / "bus").touch()
    for env in (
        {"DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus"},
        {"DISPLAY": ":0"},
        {"XDG_RUNTIME_DIR": str(tmp_path)},
    ):
        assert desktop_receiver(5.0, "linux", which=lambda _: found, env=env).unavailable == ""
    # macOS has no D-Bus to look for.
    assert (
        desktop_receiver(5.0, "darwin", which=lambda _: "/usr/bin/osascript", env={}).unavailable
        == ""
    )


# --- real receivers: D-Bus ----------------------------------------------------------------------


def test_desktop_notification_delivered_once_per_transition(
    notification_bus: NotificationBus,
) -> None:
    notifier = Notifier(NotifySettings(kinds=frozenset({DESKTOP})), None)
    assert notifier.startup_report() == []
    question = make_event(NEEDS, actions="Approve: rm -rf build")
    notifier.on_transition(question)
    notifier.on_transition(question)
    notifier.on_transition(make_event(State.BUSY, previous=NEEDS))
    notifier.on_transition(make_event(State.READY, summary="Tests pass & branch pushed"))
    # close() drains the queue, and notify-send returns only after the server answered Notify.
    assert notifier.close()

    got = [
        (r["app_name"], r["summary"], r["body"], r["hints"].get("urgency"))
        for r in notification_bus.records()
    ]
    assert got == [
        ("conductor", "api: NEEDS_CONFIRMATION", "Approve: rm -rf build", 2),
        ("conductor", "api: READY", "Tests pass & branch pushed", 1),
    ]


def test_desktop_failure_is_logged_and_later_events_still_go_out(
    notification_bus: NotificationBus,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    clock: FakeClock,
) -> None:
    notifier = Notifier(NotifySettings(kinds=frozenset({DESKTOP})), None, clock)
    # No bus at that address: notify-send exits non-zero.
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
    notifier.on_transition(make_event(NEEDS))
    retry_until(lambda: "exited" in caplog.text, 10, message="notify-send failure not logged")
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", notification_bus.address)
    notifier.on_transition(make_event(State.ERROR, summary="crashed"))
    assert notifier.close()
    assert [r["summary"] for r in notification_bus.records()] == ["api: ERROR"]


def test_a_note_reaches_the_desktop_and_the_command_with_the_pane_fields(
    notification_bus: NotificationBus, tmp_path: Path
) -> None:
    out = tmp_path / "calls.jsonl"
    script = write_script(tmp_path / "hook", RECORD_ENV)
    notifier = Notifier(NotifySettings(notify_command=(str(script), str(out))), None)
    assert notifier.active_kinds == [DESKTOP, COMMAND]
    notifier.announce(note_event())
    notifier.on_transition(make_event(NEEDS, actions="Approve: rm -rf build"))
    assert notifier.close()

    assert [
        (r["summary"], r["body"], r["hints"].get("urgency")) for r in notification_bus.records()
    ] == [
        ("api: needs you", "herd: max nudges reached (3), still stuck", 2),
        ("api: NEEDS_CONFIRMATION", "Approve: rm -rf build", 2),
    ]
    note, transition = (c["env"] for c in read_jsonl(out))
    # The pane's fields as for a transition; what happened in EVENT, NOTE, TITLE and BODY.
    assert (
        note.items()
        >= {
            "CONDUCTOR_EVENT": "herd",
            "CONDUCTOR_NOTE": "max_nudges",
            "CONDUCTOR_ID": "w1",
            "CONDUCTOR_NAME": "api",
            "CONDUCTOR_STATE": "READY",
            "CONDUCTOR_PREVIOUS_STATE": "",
            "CONDUCTOR_SUMMARY": "Shall I continue?",
            "CONDUCTOR_SESSION": "work",
            "CONDUCTOR_WINDOW": "@3",
            "CONDUCTOR_PANE": "%7",
            "CONDUCTOR_CLI": "claude",
            "CONDUCTOR_TITLE": "api: needs you",
            "CONDUCTOR_BODY": "herd: max nudges reached (3), still stuck",
            "CONDUCTOR_URGENCY": "critical",
            "CONDUCTOR_MESSAGE": "api: needs you — herd: max nudges reached (3), still stuck",
        }.items()
    )
    assert (
        transition.items()
        >= {
            "CONDUCTOR_EVENT": "transition",
            "CONDUCTOR_NOTE": "",
            "CONDUCTOR_STATE": "NEEDS_CONFIRMATION",
            "CONDUCTOR_TITLE": "api: NEEDS_CONFIRMATION",
            "CONDUCTOR_BODY": "Approve: rm -rf build",
            "CONDUCTOR_URGENCY": "critical",
        }.items()
    )


@pytest.mark.parametrize(
    ("kinds", "commands"), [(frozenset(), 0), (frozenset({COMMAND}), 1)], ids=["none", "command"]
)
def test_a_note_goes_only_to_the_enabled_kinds(
    notification_bus: NotificationBus, tmp_path: Path, kinds: frozenset[str], commands: int
) -> None:
    # No kinds at all is what `watch --no-notify` sets.
    out = tmp_path / "calls.jsonl"
    script = write_script(tmp_path / "hook", RECORD_ENV)
    notifier = Notifier(NotifySettings(kinds=kinds, notify_command=(str(script), str(out))), None)
    notifier.announce(note_event())
    assert notifier.close()
    assert len(read_jsonl(out)) == commands
    assert notification_bus.records() == []


# --- real receivers: tmux -----------------------------------------------------------------------


@pytest.fixture
def attached_client(server: Server, session: Session) -> Iterator[str]:
    """A real terminal client attached to the test server; tmux shows messages only to clients."""
    if shutil.which("script") is None:
        pytest.skip("script (util-linux) not found: cannot attach a tmux client without a tty")
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    env["TERM"] = "xterm-256color"
    attach = f"tmux -L {server.socket_name} attach-session -t {session.session_id}"
    # stdin stays an open pipe: script ends its child when its input reaches EOF.
    proc = subprocess.Popen(
        ["script", "-qc", attach, "/dev/null"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )

    def clients() -> list[str]:
        return [c for c in server.cmd("list-clients", "-F", "#{client_name}").stdout if c]

    retry_until(clients, 10, message="tmux client did not attach")
    yield clients()[0]
    stop_process(proc)
    assert proc.stdin is not None
    proc.stdin.close()


def display_on_every_client(server: Server) -> Callable[[str], None]:
    """What app/adapters/tmux.py should offer the daemon: show ``text`` literally on every client.

    display-message expands formats, so a literal '#' must be sent as '##'. Without -c it would
    pick one client (or none, from outside tmux), so we address each one.
    """

    def show(text: str) -> None:
        literal = text.replace("#", "##")
        names = server.cmd("list-clients", "-F", "#{client_name}").stdout
        for name in filter(None, names):
            server.cmd("display-message", "-c", name, "-d", "5000", literal)

    return show


def messages_shown(server: Server, client: str) -> list[str]:
    """Messages tmux displayed to ``client``, from the server's message log, oldest first."""
    out = server.cmd("show-messages", "-t", client).stdout
    marker = f"{client} message: "
    # show-messages lists the newest first.
    return [line.split(marker, 1)[1] for line in reversed(out) if marker in line]


def test_tmux_message_read_back_from_the_server(
    server: Server, attached_client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The em dash travels back through a tmux client, which must speak UTF-8 to keep it.
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    notifier = Notifier(NotifySettings(kinds=frozenset({TMUX})), display_on_every_client(server))
    assert notifier.startup_report() == []
    question = make_event(NEEDS, actions="Approve: rm -rf #{build} #S")
    notifier.on_transition(question)
    notifier.on_transition(question)
    notifier.on_transition(make_event(State.BUSY, previous=NEEDS))
    notifier.on_transition(make_event(State.READY, summary="done"))
    notifier.announce(note_event(NUDGED))
    assert notifier.close()
    assert messages_shown(server, attached_client) == [
        "api: NEEDS_CONFIRMATION — Approve: rm -rf #{build} #S",
        "api: READY — done",
        "api: herd nudge 1/3 — Yes, please continue.",
    ]


# --- real receivers: a user command -------------------------------------------------------------


def test_command_gets_details_in_env_and_argv_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "with space"
    folder.mkdir()
    script = write_script(folder / "hook", RECORD_ENV)
    out = tmp_path / "calls.jsonl"
    # A string setting, split like words but never given to a shell: $HOME and ; stay literal.
    settings = NotifySettings.from_mapping(
        {"kinds": [COMMAND], "notify_command": f"'{script}' {out} '$HOME;' x"}
    )
    notifier = Notifier(settings, None)
    assert notifier.startup_report() == []
    notifier.on_transition(
        make_event(NEEDS, summary='Run "rm -rf build"?', actions="Approve: rm -rf build")
    )
    notifier.on_transition(make_event(State.READY, previous=NEEDS, summary=""))
    assert notifier.close()

    calls = read_jsonl(out)
    assert [c["argv"] for c in calls] == [[str(out), "$HOME;", "x"]] * 2
    first = calls[0]["env"]
    # Other CONDUCTOR_* variables from the test's own environment pass through untouched.
    assert (
        first.items()
        >= {
            "CONDUCTOR_ID": "w1",
            "CONDUCTOR_NAME": "api",
            "CONDUCTOR_STATE": "NEEDS_CONFIRMATION",
            "CONDUCTOR_PREVIOUS_STATE": "BUSY",
            "CONDUCTOR_SUMMARY": 'Run "rm -rf build"?',
            "CONDUCTOR_ACTIONS": "Approve: rm -rf build",
            "CONDUCTOR_SESSION": "work",
            "CONDUCTOR_WINDOW": "@3",
            "CONDUCTOR_PANE": "%7",
            "CONDUCTOR_CLI": "claude",
            "CONDUCTOR_TS": first["CONDUCTOR_TS"],
            "CONDUCTOR_MESSAGE": "api: NEEDS_CONFIRMATION — Approve: rm -rf build",
        }.items()
    )
    assert calls[1]["env"]["CONDUCTOR_STATE"] == "READY"
    assert calls[1]["env"]["CONDUCTOR_PREVIOUS_STATE"] == "NEEDS_CONFIRMATION"


def test_command_runs_only_for_its_own_states(tmp_path: Path, recorder: Recorder) -> None:
    out = tmp_path / "calls.jsonl"
    script = write_script(tmp_path / "hook", RECORD_ENV)
    config = NotifySettings(
        kinds=frozenset({TMUX, COMMAND}),
        notify_command=(str(script), str(out)),
        states_by_kind={COMMAND: frozenset({NEEDS})},
    )
    real = command_receiver(config.notify_command, config.timeout)
    assert real is not None
    notifier = Notifier(config, None, receivers=[recorder.receiver, real])
    notifier.on_transition(make_event(State.READY))
    notifier.on_transition(make_event(NEEDS, previous=State.READY))
    notifier.on_transition(make_event(State.ERROR, previous=NEEDS))
    assert notifier.close()
    assert [c["env"]["CONDUCTOR_STATE"] for c in read_jsonl(out)] == ["NEEDS_CONFIRMATION"]
    assert recorder.states() == [State.READY, NEEDS, State.ERROR]


# --- faults -------------------------------------------------------------------------------------


def command_and_tmux(argv: list[str], tmux: Recorder, **settings: Any) -> Notifier:
    """The real command receiver beside an in-process one, to show the other keeps going."""
    config = NotifySettings(
        kinds=frozenset({TMUX, COMMAND}), notify_command=tuple(argv), **settings
    )
    real = command_receiver(config.notify_command, config.timeout)
    assert real is not None
    return Notifier(config, None, receivers=[tmux.receiver, real])


def test_missing_program_is_reported_at_start_and_the_rest_goes_on(recorder: Recorder) -> None:
    notifier = command_and_tmux(["/nonexistent/conductor-hook"], recorder)
    assert notifier.startup_report() == [
        "notify_command off: '/nonexistent/conductor-hook' not found or not executable"
    ]
    notifier.on_transition(make_event(State.READY))
    assert notifier.close()
    assert recorder.states() == [State.READY]


def test_program_vanishing_later_is_logged_and_survived(
    tmp_path: Path, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "calls.jsonl"
    script = write_script(tmp_path / "hook", RECORD_ENV)
    notifier = command_and_tmux([str(script), str(out)], recorder)
    script.unlink()
    notifier.on_transition(make_event(NEEDS))
    retry_until(lambda: "could not start" in caplog.text, 10, message="missing program not logged")
    write_script(script, RECORD_ENV)
    notifier.on_transition(make_event(State.ERROR))
    assert notifier.close()
    assert [c["env"]["CONDUCTOR_STATE"] for c in read_jsonl(out)] == ["ERROR"]
    assert recorder.states() == [NEEDS, State.ERROR]


def test_non_zero_exit_is_logged_with_its_stderr(
    tmp_path: Path, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    script = write_script(
        tmp_path / "hook", "import sys\nprint('webhook said 503', file=sys.stderr)\nsys.exit(3)\n"
    )
    notifier = command_and_tmux([str(script)], recorder)
    notifier.on_transition(make_event(NEEDS))
    assert notifier.close()
    failures = [
        r for r in caplog.records
        if r.name == "app.adapters.notify" and r.levelno == logging.WARNING
    ]
    assert len(failures) == 1
    assert "exited 3: webhook said 503" in failures[0].getMessage()
    assert recorder.states() == [NEEDS]


HANG_ON_QUESTIONS = """#!/bin/sh
# Hangs (with a grandchild, like a real script would) for a question; records anything else.
if [ "$CONDUCTOR_STATE" = NEEDS_CONFIRMATION ]; then
    sleep 60 &
    echo $! > "$1.sleep-pid"
    wait
fi
echo "$CONDUCTOR_STATE" >> "$1"
"""


def test_hanging_command_is_killed_and_blocks_nothing(
    tmp_path: Path, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "states.txt"
    script = tmp_path / "hook.sh"
    script.write_text(HANG_ON_QUESTIONS, encoding="utf-8")
    script.chmod(0o755)
    notifier = command_and_tmux([str(script), str(out)], recorder, timeout=3.0)

    started = time.monotonic()
    notifier.on_transition(make_event(NEEDS))
    notifier.on_transition(make_event(State.ERROR))
    assert time.monotonic() - started < 0.5, "on_transition waited for a receiver"

    # The tmux receiver has its own worker: it is not held up by the hanging command.
    retry_until(lambda: recorder.states() == [NEEDS, State.ERROR], 2.5)
    pid_file = Path(f"{out}.sleep-pid")
    retry_until(pid_file.exists, 5)
    sleep_pid = int(pid_file.read_text())
    retry_until(lambda: "killed after 3.0 s timeout" in caplog.text, 10)

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie not yet reaped by init still answers kill(0); its state says it is dead.
        stat = Path(f"/proc/{pid}/stat")
        return stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z")

    retry_until(lambda: gone(sleep_pid), 5, message="the hung command's child survived")
    # The next event for the same receiver still runs.
    retry_until(lambda: out.exists() and out.read_text() == "ERROR\n", 10)
    assert notifier.close()


def test_receiver_exception_is_logged_and_the_worker_survives(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    sent: list[State] = []

    def flaky(event: NotificationEvent) -> None:
        if event.state is NEEDS:
            raise RuntimeError("receiver bug")
        if event.state is State.ERROR:
            raise TmuxError("tmux display-message did not answer within 5 s")
        sent.append(event.state)

    notifier = Notifier(NotifySettings(), None, clock, receivers=[Receiver(TMUX, flaky)])
    notifier.on_transition(make_event(NEEDS))
    notifier.on_transition(make_event(State.ERROR, previous=NEEDS))
    notifier.on_transition(make_event(State.READY, previous=State.ERROR))
    assert notifier.close()
    assert sent == [State.READY]
    bug, tmux = (r for r in caplog.records if r.name == "app.adapters.notify")
    assert bug.exc_info is not None and "receiver bug" in caplog.text
    # Our own errors are one readable line, without a traceback.
    assert tmux.exc_info is None
    assert tmux.getMessage() == (
        "tmux notification for w1 failed: tmux display-message did not answer within 5 s"
    )


def test_backed_up_receiver_drops_with_a_warning_and_never_blocks(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()
    sent: list[str] = []

    def stuck(event: NotificationEvent) -> None:
        release.wait(10)
        sent.append(event.worker_id)

    notifier = Notifier(
        NotifySettings(queue_size=1), None, clock, receivers=[Receiver(DESKTOP, stuck)]
    )
    started = time.monotonic()
    for n in range(5):
        notifier.on_transition(make_event(NEEDS, worker_id=f"w{n}"))
    assert time.monotonic() - started < 0.5
    assert "desktop notifications backed up" in caplog.text
    release.set()
    assert notifier.close()
    # The first was being sent and perhaps one more waited in the queue; the rest were dropped.
    assert sent[:1] == ["w0"]
    assert len(sent) <= 2


def test_close_gives_up_on_a_stuck_receiver(clock: FakeClock) -> None:
    release = threading.Event()

    def hang(event: NotificationEvent) -> None:
        release.wait(30)

    notifier = Notifier(NotifySettings(), None, clock, receivers=[Receiver(TMUX, hang)])
    notifier.on_transition(make_event(NEEDS))
    started = time.monotonic()
    assert notifier.close(timeout=0.3) is False
    assert time.monotonic() - started < 2
    release.set()


def test_a_server_that_reads_markup_gets_the_pane_text_escaped(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """GNOME, KDE and dunst read markup in a body: a pane's text with a link in it would be a
    link in the notification. Escaped, it is shown as the pane shows it."""
    if shutil.which("notify-send") is None:
        pytest.skip("notify-send not found (Debian package: libnotify-bin)")
    hostile = 'Approve: <a href="https://evil.example/x">curl | sh</a> & <b>now</b>'
    try:
        started = NotificationBus(tmp_path, markup=True).start()
    except BusUnavailable as exc:
        pytest.skip(f"no private D-Bus session bus here: {exc}")
    with started as bus:
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.address)
        notifier = Notifier(NotifySettings(kinds=frozenset({DESKTOP})), None)
        notifier.on_transition(make_event(NEEDS, actions=hostile))
        assert notifier.close()
        [record] = bus.records()
    assert record["body"] == ('Approve: &lt;a href="https://evil.example/x"&gt;curl | sh&lt;/a&gt;'
                              " &amp; &lt;b&gt;now&lt;/b&gt;")
    assert record["summary"] == "api: NEEDS_CONFIRMATION"  # a title is never markup
