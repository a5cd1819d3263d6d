"""Event-driven watching: tmux control mode against real tmux servers, the light ticks of the
watcher, and a real ``conductor pty watch`` through sessions, floods, killed clients and a
restarted server."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from app.adapters.control import (
    QUIET_S,
    ControlMode,
    Notification,
    decode_output,
    parse_notification,
)
from app.adapters.store import StoreWriter
from app.adapters.store_read import StoreReader
from app.adapters.tmux import Tmux, tmux_version
from app.base.errors import StoreError
from app.base.model import State
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.observe.pane import EVENTS, POLL
from app.run.clock import STREAM_CAPTURE_S
from app.run.watcher import Watcher
from tests.conftest import conductor
from tests.support.waiting import retry_until, stays_false

QUESTION = "bash --norc --noprofile -c \"read -p 'Overwrite? (y/N) ' a; sleep 600\""
PRINTER = "sh -c 'i=0; while :; do i=$((i+1)); echo line $i; sleep 0.05; done'"
SHELL = "env PS1='$ ' sh"


class ParseCase(NamedTuple):
    line: bytes
    expected: Notification | None


PARSE_CASES = {
    "output": ParseCase(b"%output %3 hi\\015\\012\n",
                        Notification("output", ("%3",), b"hi\\015\\012")),
    "output-empty": ParseCase(b"%output %3", Notification("output", ("%3",), b"")),
    "extended-output": ParseCase(b"%extended-output %7 120 x y : data \\134 :",
                                 Notification("extended-output", ("%7", "120", "x", "y"),
                                              b"data \\134 :")),
    "sessions-changed": ParseCase(b"%sessions-changed\r\n", Notification("sessions-changed")),
    "window-add": ParseCase(b"%window-add @12\n", Notification("window-add", ("@12",))),
    "odd-utf8": ParseCase(b"%window-renamed @1 \xff\xfe",
                          Notification("window-renamed", ("@1", "\ufffd\ufffd"))),
    "command-output": ParseCase(b"0: ksh* (1 panes) [80x24]\n", None),
    "blank": ParseCase(b"\n", None),
    "lone-percent": ParseCase(b"%\n", None),
    "empty": ParseCase(b"", None),
}


@pytest.mark.parametrize("case", PARSE_CASES.values(), ids=PARSE_CASES.keys())
def test_control_lines_parse_and_odd_ones_are_not_notifications(case: ParseCase) -> None:
    assert parse_notification(case.line) == case.expected


@pytest.mark.parametrize(("line", "pane"), [
    (b"%output %3 x", "%3"), (b"%pause %12", "%12"), (b"%output %x y", None),
    (b"%output", None), (b"%output %3;kill-server x", None), (b"%window-add @3", None),
])
def test_only_a_well_formed_pane_id_is_taken_from_a_notification(line: bytes,
                                                                 pane: str | None) -> None:
    note = parse_notification(line)
    assert note is not None and note.pane_id == pane


def tmux_escape(data: bytes) -> bytes:
    """What tmux does to pane output in %output: control characters and backslash as octal."""
    return b"".join(b"\\%03o" % c if c < 32 or c == 92 else bytes((c,)) for c in data)


def test_output_escaping_round_trips_every_byte_and_leaves_odd_escapes_alone() -> None:
    every = bytes(range(256)) * 2
    assert decode_output(tmux_escape(every)) == every
    # Not escapes tmux would write: taken as they are, never an error.
    for odd in (b"\\", b"ab\\", b"\\9", b"\\77", b"\\777", b"\\400x", b"\\\\\\", b"\xff\\0"):
        assert decode_output(odd) == odd


@pytest.mark.parametrize(("text", "version"), [
    ("tmux 3.3a\n", (3, 3)), ("tmux 3.2", (3, 2)), ("tmux 2.9a", (2, 9)), ("tmux 10.1", (10, 1)),
    ("tmux master", None), ("tmux next-3.5", None), ("", None), ("garbage", None),
])
def test_tmux_versions_are_read_and_unknown_ones_are_not_guessed(
        text: str, version: tuple[int, int] | None) -> None:
    assert tmux_version(text) == version


# --- control mode against a real tmux server ---------------------------------------------------



def session_ids(server: Any) -> set[str]:
    return set(server.cmd("list-sessions", "-F", "#{session_id}").stdout)


def control_clients(server: Any) -> list[str]:
    """(pid) of every control-mode client attached to the server."""
    rows = server.cmd("list-clients", "-F", "#{client_control_mode} #{client_pid}").stdout
    return [row.split()[1] for row in rows if row.startswith("1 ")]


def test_a_printing_pane_is_reported_once_until_resumed(
        server: Any, session: Any, control: tuple[ControlMode, threading.Event]) -> None:
    mode, woken = control
    pane = session.new_window(window_name="printer", window_shell=PRINTER,
                              attach=False).active_pane
    mode.follow(session_ids(server))
    retry_until(lambda: session.session_id in mode.watching(), 10)
    seen: dict[str, float] = {}

    def reported() -> bool:
        seen.update(mode.take()[0])
        return pane.pane_id in seen

    retry_until(reported, 10)
    assert woken.is_set()
    # Paused for our client after its first report: it keeps printing, we hear nothing more
    # (once output already on its way when the pause was asked for has arrived).
    retry_until(lambda: pane.pane_id not in mode.take()[0], 5, interval=0.2)
    assert stays_false(lambda: pane.pane_id in mode.take()[0], 1.0)
    mode.resume([pane.pane_id])
    retry_until(lambda: pane.pane_id in mode.take()[0], 10)
    # Pausing is per client: the pane itself kept printing all along.
    retry_until(lambda: "line 30" in "\n".join(pane.capture_pane(start=-200)), 10)


def test_a_stream_resumed_as_streaming_is_still_reported_and_output_after_a_still_spell_wakes(
        server: Any, session: Any, control: tuple[ControlMode, threading.Event]) -> None:
    mode, woken = control
    printer = session.new_window(window_name="printer", window_shell=PRINTER,
                                 attach=False).active_pane
    shell = session.new_window(window_name="shell", window_shell=SHELL, attach=False).active_pane
    retry_until(lambda: "$" in "\n".join(shell.capture_pane()), 10)
    mode.follow(session_ids(server))
    retry_until(lambda: session.session_id in mode.watching(), 10)
    retry_until(lambda: printer.pane_id in mode.take()[0], 10)

    # The stream goes on after its capture: it is reported all the same, wake or no wake.
    mode.resume([printer.pane_id], streaming=[printer.pane_id])
    retry_until(lambda: printer.pane_id in mode.take()[0], 10)

    # A pane taken for a stream that then printed nothing for longer than QUIET_S: what it
    # prints next (a question drawn at the end of a stream) is news at once.
    mode.resume([shell.pane_id], streaming=[shell.pane_id])
    resumed = time.monotonic()
    retry_until(lambda: time.monotonic() - resumed > 2 * QUIET_S, 5)
    woken.clear()
    shell.send_keys("echo asked", enter=True)
    retry_until(woken.is_set, 10, message="output after a still spell woke nobody")
    assert shell.pane_id in mode.take()[0]


def test_control_clients_neither_resize_windows_nor_count_as_someone_looking(
        server: Any, session: Any, control: tuple[ControlMode, threading.Event]) -> None:
    mode, _ = control
    tmux = Tmux(socket_name=server.socket_name)
    sizes = {p.pane_id: (p.width, p.height) for p in tmux.list_panes().panes}
    mode.follow(session_ids(server))
    retry_until(lambda: mode.watching() == session_ids(server), 10)
    assert len(control_clients(server)) == len(session_ids(server))
    listing = tmux.list_panes()
    assert {p.pane_id: (p.width, p.height) for p in listing.panes} == sizes
    assert not any(p.focused for p in listing.panes)
    target = listing.panes[0].pane_id
    assert tmux.switch_to(target) == "selected (no client attached)"
    tmux.display_message("nobody sees this")  # no client to show it to, and no error
    tmux.refresh_status()


def test_sessions_coming_and_going_and_a_killed_client_are_followed(
        server: Any, session: Any, control: tuple[ControlMode, threading.Event]) -> None:
    mode, _ = control
    mode.follow(session_ids(server))
    retry_until(lambda: mode.watching() == session_ids(server), 10)
    mode.take()

    extra = server.new_session(session_name="extra", attach=False)
    retry_until(lambda: mode.take()[1], 10, message="no %sessions-changed")
    mode.follow(session_ids(server))
    retry_until(lambda: extra.session_id in mode.watching(), 10)

    extra.kill()
    retry_until(lambda: mode.take()[1], 10)
    mode.follow(session_ids(server))
    assert extra.session_id not in mode.watching()

    victim = control_clients(server)[0]
    os.kill(int(victim), signal.SIGKILL)
    retry_until(lambda: mode.take()[1], 10, message="a killed client went unnoticed")
    retry_until(lambda: victim not in control_clients(server), 10)
    mode.follow(session_ids(server))
    retry_until(lambda: mode.watching() == session_ids(server), 10)
    assert victim not in control_clients(server)


# --- the watcher's light ticks -----------------------------------------------------------------


@pytest.fixture
def event_watcher(server: Any, isolated_env: Path,
                  control: tuple[ControlMode, threading.Event]) -> Iterator[Watcher]:
    store = StoreWriter(isolated_env)
    yield Watcher(Tmux(socket_name=server.socket_name), store, load_packs(),
                  WatchSettings(interval_s=3600), control=control[0])
    store.close()


def stored(workers_dir: Path, name: str) -> dict[str, Any]:
    try:
        reader = StoreReader(workers_dir)
    except StoreError:
        return {}  # the daemon has not made its store yet
    try:
        return next((w for w in reader.workers() if w["name"] == name), {})
    except StoreError:
        return {}  # nor finished making it
    finally:
        reader.close()


def test_light_ticks_alone_see_a_question_and_then_ready_once_the_screen_is_quiet(
        server: Any, session: Any, event_watcher: Watcher, isolated_env: Path) -> None:
    window = session.new_window(window_name="asker", window_shell=SHELL, attach=False)
    pane = window.active_pane
    retry_until(lambda: "$" in "\n".join(pane.capture_pane()), 10)
    assert event_watcher.tick(time.time()).full
    retry_until(lambda: session.session_id in event_watcher.control.watching(), 10)  # type: ignore[union-attr]
    assert event_watcher.tick(time.time()).full  # the client attached: look once more

    def light_until(state: str) -> bool:
        report = event_watcher.tick(time.time(), full=False)
        assert not report.full, "nothing came or went: a light tick must stay light"
        return stored(isolated_env, "asker").get("state") == state

    retry_until(lambda: light_until("READY"), 15)
    pane.send_keys("read -p 'Go on? (y/N) ' x", enter=True)
    retry_until(lambda: light_until("NEEDS_CONFIRMATION"), 15)
    row = stored(isolated_env, "asker")
    assert f"watch={EVENTS}" in row["signals"]
    pane.send_keys("n", enter=True)
    retry_until(lambda: light_until("READY"), 15)


def test_a_streaming_pane_is_captured_no_more_often_than_min_capture(
        server: Any, session: Any, event_watcher: Watcher) -> None:
    session.new_window(window_name="printer", window_shell=PRINTER, attach=False)
    event_watcher.tick(time.time())
    retry_until(lambda: event_watcher.control.watching(), 10)  # type: ignore[union-attr]
    event_watcher.tick(time.time())
    printer = next(t for t in event_watcher.tracked.values() if t.name == "printer")
    captures: list[float] = []

    def captured_thrice() -> bool:
        before = printer.captured_at
        event_watcher.tick(time.time(), full=False)
        if printer.captured_at != before:
            captures.append(printer.captured_at)
        return len(captures) >= 3

    # Once a second at first (STREAM_CAPTURE_S): three captures come within a few seconds.
    retry_until(captured_thrice, 20, interval=0.01,
                message="a pane printing every 50 ms was not followed")
    gaps = [b - a for a, b in itertools.pairwise(captures)]
    assert min(gaps) >= event_watcher.settings.min_capture_s


def test_a_stream_that_begins_after_a_look_is_looked_at_again_after_min_capture(
        server: Any, session: Any, event_watcher: Watcher) -> None:
    """A prompt submitted a moment after the pane's last capture starts a stream (the agent's
    spinner): the next look is due min_capture_s after that capture, not a second later with
    the idle screen's READY standing meanwhile; from that look on, the stream's own pace."""
    session.new_window(window_name="printer", window_shell=PRINTER, attach=False)
    event_watcher.tick(time.time())
    control = event_watcher.control
    assert control is not None
    retry_until(lambda: control.watching(), 10)
    event_watcher.tick(time.time())
    printer = next(t for t in event_watcher.tracked.values() if t.name == "printer")
    pane_id = printer.pane.pane_id
    retry_until(lambda: not control.quiet(pane_id, time.time()), 10, interval=0.01)
    # The watcher as it stands when a stream began QUIET_S / 3 after a capture of a pane that
    # was not streaming (the stream found by this very look).
    now = time.time()
    clock = event_watcher.clock
    clock._streaming.pop(pane_id, None)
    printer.looks.captured_at = now - QUIET_S / 2
    clock._pending[pane_id] = now - QUIET_S / 6
    min_capture = event_watcher.settings.min_capture_s
    assert clock.capture_due(printer, now) == printer.captured_at + min_capture
    # Looked at during the stream: the stream's pace (at least STREAM_CAPTURE_S) from then on.
    printer.looks.captured_at = now + 0.01
    assert clock.capture_due(printer, now + 0.02) >= now + 0.01 + STREAM_CAPTURE_S


def test_a_stream_whose_turn_end_was_heard_wakes_the_watcher_with_its_next_frame(
        server: Any, session: Any, event_watcher: Watcher,
        control: tuple[ControlMode, threading.Event]) -> None:
    """Qwen Code streams until its turn ends and draws its idle screen a moment after its
    turn-end title: once that is heard, the pane is resumed as drawing, not as a stream we
    come back to at our pace, so the frame it prints next wakes the watcher at once."""
    mode, woken = control
    session.new_window(window_name="printer", window_shell=PRINTER, attach=False)
    event_watcher.tick(time.time())
    retry_until(lambda: mode.watching(), 10)
    printer = next(t for t in event_watcher.tracked.values() if t.name == "printer")

    def followed_as_stream() -> bool:
        event_watcher.tick(time.time(), full=False)
        return event_watcher.clock.streams(printer.pane.pane_id)
    retry_until(followed_as_stream, 20, interval=0.01)
    assert printer.assessment is not None and printer.assessment.state is not State.READY
    printer.signals = printer.signals.with_event("terminal", "turn_end", "title", time.time())

    def captured() -> bool:
        before = printer.captured_at
        woken.clear()
        event_watcher.tick(time.time(), full=False)
        return printer.captured_at != before
    retry_until(captured, 10, interval=0.01)
    retry_until(woken.is_set, 5, message="the frame after the turn end woke nobody")


STREAM_THEN_STOP = ("sh -c 'i=0; while [ $i -lt 60 ]; do i=$((i+1)); echo line $i; "
                    "sleep 0.05; done; echo stream over; sleep 600'")


def test_a_stream_is_followed_without_wakes_for_its_output_and_its_end_is_captured(
        server: Any, session: Any, event_watcher: Watcher,
        control: tuple[ControlMode, threading.Event]) -> None:
    """The daemon's loop in small: sleep until a wake or the watcher's own due time, then a
    light tick. A stream's output after each capture wakes nobody; the watcher comes back on
    its own, and the screen the stream ends on is captured once the pane is quiet."""
    _, woken = control
    pane = session.new_window(window_name="printer", window_shell=STREAM_THEN_STOP,
                              attach=False).active_pane
    event_watcher.tick(time.time())
    retry_until(lambda: event_watcher.control.watching(), 10)  # type: ignore[union-attr]
    event_watcher.tick(time.time())
    printer = next(t for t in event_watcher.tracked.values() if t.name == "printer")
    captures: set[float] = set()

    def rest_and_tick() -> bool:
        due = event_watcher.next_due()
        woken.wait(max(0.0, min(1.0, (due or time.time() + 1.0) - time.time())))
        woken.clear()
        event_watcher.tick(time.time(), full=False)
        captures.add(printer.captured_at)
        return "stream over" in printer.text

    retry_until(rest_and_tick, 30, interval=0, message="the end of the stream went unseen")
    assert len(captures) >= 2, "the stream was not followed while it printed"
    assert "stream over" in "\n".join(pane.capture_pane())


# --- a real `conductor pty watch` --------------------------------------------------------------


def write_config(text: str) -> None:
    Path(os.environ["CONDUCTOR_CONFIG"]).write_text(text)


def pane_state(workers_dir: Path, name: str, state: str, watched: str = EVENTS) -> bool:
    row = stored(workers_dir, name)
    return row.get("state") == state and f"watch={watched}" in row.get("signals", [])


def test_between_polls_the_daemon_follows_output_sessions_floods_and_killed_clients(
        server: Any, session: Any, watcher_process: Any, isolated_env: Path) -> None:
    # A poll every 10 minutes: everything below can only be seen through control mode.
    write_config("[watch]\ninterval = 600\n")
    asker = session.new_window(window_name="asker", window_shell=SHELL,
                               attach=False).active_pane
    retry_until(lambda: "$" in "\n".join(asker.capture_pane()), 10)
    daemon = watcher_process("-q")
    retry_until(lambda: pane_state(isolated_env, "asker", "READY"), 30)

    asker.send_keys("read -p 'Go on? (y/N) ' x", enter=True)
    retry_until(lambda: pane_state(isolated_env, "asker", "NEEDS_CONFIRMATION"), 20)

    # A session created while watching, then killed.
    late = server.new_session(session_name="late", window_name="late", window_command=QUESTION,
                              attach=False)
    retry_until(lambda: pane_state(isolated_env, "late", "NEEDS_CONFIRMATION"), 20)
    late.kill()
    retry_until(lambda: stored(isolated_env, "late").get("state") == "EXITED", 20)

    # A pane flooding output and a pane printing random bytes, next to the one we care about.
    session.new_window(window_name="flood", window_shell="yes", attach=False)
    session.new_window(window_name="noise", attach=False,
                       window_shell="sh -c 'head -c 65536 /dev/urandom; sleep 600'")
    retry_until(lambda: pane_state(isolated_env, "flood", "BUSY")
                or pane_state(isolated_env, "flood", "UNKNOWN"), 20)
    retry_until(lambda: stored(isolated_env, "noise"), 20)

    # Our control clients killed from outside: new ones take over.
    victims = control_clients(server)
    for pid in victims:
        os.kill(int(pid), signal.SIGKILL)
    retry_until(lambda: control_clients(server) and not set(control_clients(server))
                & set(victims), 20, message="the killed control clients were not replaced")
    asker.send_keys("n", enter=True)
    retry_until(lambda: pane_state(isolated_env, "asker", "READY"), 20)
    asker.send_keys("read -p 'Once more? (y/N) ' x", enter=True)
    retry_until(lambda: pane_state(isolated_env, "asker", "NEEDS_CONFIRMATION"), 20)

    explained = conductor("-L", server.socket_name, "pty", "explain", "asker")
    assert "watched: on output (tmux control mode)" in explained.stdout, explained.stderr
    assert daemon.poll() is None, daemon.stderr.read()


def test_with_events_off_the_daemon_only_polls_and_starts_no_control_client(
        server: Any, session: Any, watcher_process: Any, isolated_env: Path) -> None:
    write_config("[watch]\nevents = false\ninterval = 1\n")
    session.new_window(window_name="asks", window_shell=QUESTION, attach=False)
    daemon = watcher_process("-q")
    retry_until(lambda: pane_state(isolated_env, "asks", "NEEDS_CONFIRMATION", POLL), 30)
    assert control_clients(server) == []
    assert daemon.poll() is None


def test_the_daemon_survives_a_tmux_server_restart_and_watches_the_new_one(
        server: Any, session: Any, watcher_process: Any, isolated_env: Path) -> None:
    write_config("[watch]\ninterval = 1\n")
    session.new_window(window_name="before", window_shell=QUESTION, attach=False)
    daemon = watcher_process("-q")
    retry_until(lambda: pane_state(isolated_env, "before", "NEEDS_CONFIRMATION"), 30)

    server.kill()
    retry_until(lambda: not control_clients_alive(server.socket_name), 20)
    again = server.new_session(session_name="again", window_name="after", window_command=SHELL,
                               attach=False)
    retry_until(lambda: pane_state(isolated_env, "after", "READY"), 30)
    again.active_window.active_pane.send_keys("read -p 'Go on? (y/N) ' x", enter=True)
    retry_until(lambda: pane_state(isolated_env, "after", "NEEDS_CONFIRMATION"), 20)
    assert stored(isolated_env, "before").get("state") == "EXITED"  # kept, not vanished
    assert daemon.poll() is None, daemon.stderr.read()


def control_clients_alive(socket_name: str) -> bool:
    """Whether any `tmux -C` client process of ours for this socket still runs."""
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"-C" in argv and socket_name.encode() in argv:
            return True
    return False


def test_wait_takes_ready_from_a_watcher_on_control_mode_for_the_screen_it_sees(
        server: Any, session: Any, event_watcher: Watcher, isolated_env: Path) -> None:
    from app.observe.one_pane import PaneWatch, resolve

    pane = session.new_window(window_name="asker", window_shell=SHELL, attach=False).active_pane
    retry_until(lambda: "$" in "\n".join(pane.capture_pane()), 10)
    event_watcher.tick(time.time())
    retry_until(lambda: event_watcher.control.watching(), 10)  # type: ignore[union-attr]
    event_watcher.tick(time.time())

    def ready_after(entered: float) -> bool:
        event_watcher.tick(time.time(), full=False)
        row = stored(isolated_env, "asker")
        return row.get("state") == "READY" and row["state_entered_ts"] > entered

    retry_until(lambda: ready_after(0.0), 15)

    tmux = Tmux(socket_name=server.socket_name)
    target = resolve(tmux, isolated_env, "asker")
    # A READY from before this wait began, on the screen still up, with no turn asked for
    # since: the pane has been idle all along, and the first look says so.
    idle = PaneWatch(tmux, target, load_packs(), WatchSettings(), isolated_env).poll()
    assert idle.state.value == "READY"
    assert idle.reasons[-1] == "watcher_verdict"
    # Where a turn was just asked for, that old READY is the idle screen still up: no vouch.
    watch = PaneWatch(tmux, target, load_packs(), WatchSettings(), isolated_env,
                      turn_asked_at=time.time())
    assert "watcher_verdict" not in watch.poll().reasons

    pane.send_keys("echo done", enter=True)
    retry_until(lambda: "done" in "\n".join(pane.capture_pane()), 10)
    entered = stored(isolated_env, "asker")["state_entered_ts"]
    retry_until(lambda: ready_after(entered), 15)
    # Our own first look at this screen could not call it stable yet; the watcher's can.
    assessment = watch.poll()
    assert assessment.state.value == "READY"
    assert assessment.reasons[-1] == "watcher_verdict"


@pytest.mark.slow
def test_a_transition_redraws_the_status_line_of_attached_clients_at_once(
        server: Any, session: Any, watcher_process: Any, isolated_env: Path,
        tmp_path: Path) -> None:
    from tests.front.test_cli import attach_client

    drawn = tmp_path / "drawn.txt"
    # No tmux message either: its end redraws the status line too.
    write_config("[watch]\ninterval = 600\n[notify.tmux]\nenabled = false\n")
    # The status line runs its job only when told to: no timer would redraw it for an hour.
    server.cmd("set-option", "-g", "status-interval", "3600")
    server.cmd("set-option", "-g", "status-right", f"#(echo x >> {drawn})")
    asker = session.new_window(window_name="asker", window_shell=SHELL,
                               attach=False).active_pane
    client = attach_client(server, session)
    try:
        watcher_process("-q")
        retry_until(lambda: pane_state(isolated_env, "asker", "READY"), 30)
        retry_until(drawn.exists, 10)
        before = len(drawn.read_text().splitlines())
        asker.send_keys("read -p 'Go on? (y/N) ' x", enter=True)
        retry_until(lambda: pane_state(isolated_env, "asker", "NEEDS_CONFIRMATION"), 20)
        retry_until(lambda: len(drawn.read_text().splitlines()) > before, 10,
                    message="the status line was not redrawn after the transition")
    finally:
        client.kill()
        client.wait(timeout=10)


@pytest.mark.slow
def test_a_session_that_dies_unattached_is_polled_and_still_dies_when_its_user_leaves(
        server: Any, session: Any, event_watcher: Watcher, isolated_env: Path) -> None:
    from tests.front.test_cli import attach_client

    fleeting = server.new_session(session_name="fleeting", window_name="fleeting",
                                  window_command=SHELL, attach=False)
    client = attach_client(server, fleeting)
    try:
        fleeting.set_option("destroy-unattached", "on")
        event_watcher.tick(time.time())
        retry_until(lambda: session.session_id in event_watcher.control.watching(), 10)  # type: ignore[union-attr]
        event_watcher.tick(time.time())
        assert fleeting.session_id not in event_watcher.control.watching()  # type: ignore[union-attr]
        assert f"watch={POLL}" in stored(isolated_env, "fleeting")["signals"]
    finally:
        client.kill()
        client.wait(timeout=10)
    retry_until(lambda: "fleeting" not in server.cmd("list-sessions", "-F",
                                                     "#{session_name}").stdout, 10)
