"""Terminal notifications: the bytes a real tmux client's terminal receives, through a pty."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.adapters.notify import NotificationEvent, Notifier
from app.adapters.notify_settings import TERMINAL, NotifySettings
from app.adapters.termnotify import (
    Part,
    Terminals,
    clean,
    payload,
    printf_args,
    remote_argv,
    tty_checked,
    write_local,
)
from app.adapters.tmux import LOCAL_HOST, Tmux, client_terminals
from app.base.model import State
from tests.run.test_terminal_signals import DIALOG_SCREEN
from tests.support.tmux_client import AttachedClient
from tests.support.waiting import retry_until

OSC9_QUESTION = b"\x1b]9;api: NEEDS_CONFIRMATION \xe2\x80\x94 Approve: rm -rf build\x07"


@pytest.fixture
def two_sessions(server: Any) -> Iterator[tuple[Tmux, str, str, list[AttachedClient]]]:
    """A server with sessions "work" and "other", each with a pane; clients attached by the test
    go in the list and are detached at the end."""
    work = server.new_session(session_name="work", attach=False)
    other = server.new_session(session_name="other", attach=False)
    # No status line: nothing of tmux's own is drawn between our notifications.
    server.cmd("set-option", "-g", "status", "off")
    clients: list[AttachedClient] = []
    yield (Tmux(socket_name=server.socket_name), work.active_window.active_pane.pane_id,
           other.active_window.active_pane.pane_id, clients)
    for client in clients:
        client.close()


def attach(tmux: Tmux, pane_id: str, session: str, term: str,
           clients: list[AttachedClient]) -> AttachedClient:
    before = len(client_terminals(tmux, pane_id))
    assert tmux.socket_name is not None
    client = AttachedClient(["-L", tmux.socket_name], session, term)
    clients.append(client)
    retry_until(lambda: len(client_terminals(tmux, pane_id)) > before, 30,
                message=f"no client attached to {session}")
    return client


def test_a_client_of_the_panes_session_gets_osc_and_bell_and_another_session_none(
        two_sessions: tuple[Tmux, str, str, list[AttachedClient]]) -> None:
    tmux, work_pane, other_pane, clients = two_sessions
    mine = attach(tmux, work_pane, "work", "xterm-256color", clients)
    theirs = attach(tmux, other_pane, "other", "xterm-256color", clients)
    terminals = Terminals(tmux)

    told = terminals.tell(LOCAL_HOST, work_pane, "api: NEEDS_CONFIRMATION",
                          "Approve: rm -rf build", bell=True, timeout=5.0)
    assert told == 1
    retry_until(lambda: OSC9_QUESTION + b"\x1b]99;" in mine.seen, 10)
    assert b"\x1b]777;notify;api: NEEDS_CONFIRMATION;Approve: rm -rf build\x07\x07" in mine.seen
    # The other session's client: a notification for its own pane arrives, the first never did
    # (writes are in order, one client after the other).
    terminals.tell(LOCAL_HOST, other_pane, "db: READY", "", bell=False, timeout=5.0)
    retry_until(lambda: b"\x1b]9;db: READY\x07" in theirs.seen, 10)
    assert b"NEEDS_CONFIRMATION" not in theirs.seen
    assert b"db: READY" not in mine.seen


def test_a_client_inside_another_tmux_gets_it_wrapped_for_passthrough(
        two_sessions: tuple[Tmux, str, str, list[AttachedClient]]) -> None:
    tmux, work_pane, _, clients = two_sessions
    nested = attach(tmux, work_pane, "work", "tmux-256color", clients)
    Terminals(tmux).tell(LOCAL_HOST, work_pane, "api: NEEDS_CONFIRMATION",
                         "Approve: rm -rf build", bell=True, timeout=5.0)
    # Every ESC inside doubled, the whole in ESC P tmux; ... ESC \, the bell outside.
    wrapped = b"\x1bPtmux;\x1b\x1b]9;api: NEEDS_CONFIRMATION \xe2\x80\x94 Approve: rm -rf build\x07"
    end = b"\x1b\x1b]777;notify;api: NEEDS_CONFIRMATION;Approve: rm -rf build\x07\x1b\\\x07"
    retry_until(lambda: end in nested.seen, 10)
    assert wrapped in nested.seen
    assert nested.seen.index(wrapped) < nested.seen.index(end)


def test_the_notifier_sends_a_pane_s_words_cleaned_and_the_bell_by_sound_setting(
        two_sessions: tuple[Tmux, str, str, list[AttachedClient]]) -> None:
    tmux, work_pane, _, clients = two_sessions
    client = attach(tmux, work_pane, "work", "xterm-256color", clients)
    settings = NotifySettings(kinds=frozenset({TERMINAL}), min_interval=0)
    notifier = Notifier(settings, None, terminals=Terminals(tmux))
    assert notifier.active_kinds == [TERMINAL]
    evil = "\x1b]52;c;cHduZWQ=\x07api\x1b[2J;\x9b31m"
    try:
        notifier.on_transition(NotificationEvent(
            worker_id="w1", name=evil, session="work", window="@1", pane_id=work_pane,
            cli="claude", previous=State.BUSY, state=State.READY, summary="done; all green"))
        notifier.on_transition(NotificationEvent(
            worker_id="w1", name="api", session="work", window="@1", pane_id=work_pane,
            cli="claude", previous=State.READY, state=State.NEEDS_CONFIRMATION,
            actions_needed="Approve: rm -rf build"))
    finally:
        assert notifier.close()
    retry_until(lambda: OSC9_QUESTION in client.seen, 10)
    seen = client.seen
    ready = seen[seen.index(b"\x1b]9;"):seen.index(OSC9_QUESTION)]
    # The pane's escapes never reached the terminal (no clipboard write, no clear screen): the
    # only ESCs are our four (OSC 9, 99 and its ST, 777), the only C1 none.
    assert ready.count(b"\x1b") == 4 and b"\x9b" not in ready, ready
    # READY: no bell (sound_done is off); the question: its bell (sound_needs_you is on).
    assert ready.endswith(b"done, all green\x07") and b"\x07\x07" not in ready
    assert b"rm -rf build\x07\x07" in seen


def test_a_failing_terminal_is_logged_and_the_notifier_goes_on(
        server: Any, caplog: pytest.LogCaptureFixture) -> None:
    # No server behind the socket: list-clients fails; the worker logs one line and lives.
    tmux = Tmux(socket_name=server.socket_name + "-none")
    notifier = Notifier(NotifySettings(kinds=frozenset({TERMINAL}), min_interval=0), None,
                        terminals=Terminals(tmux))
    event = NotificationEvent(worker_id="w1", name="api", session="s", window="@1",
                              pane_id="%0", cli="", previous=State.BUSY, state=State.ERROR)
    notifier.on_transition(event)
    assert notifier.close()
    assert any("terminal notification for w1 failed" in r.getMessage() for r in caplog.records)


def test_texts_lose_every_control_and_the_field_separator() -> None:
    assert clean("a\x1b]0;x\x07b\tc\u202ed;e\x9bf") == "a]0,xb cd,ef"
    assert len(clean("x" * 1000)) == 200


def test_on_a_remote_host_texts_are_printf_arguments_never_format_or_script() -> None:
    parts = payload("api: NEEDS_CONFIRMATION", "100% sure? \\n $(touch /tmp/x)", bell=True,
                    wrap=False)
    argv = remote_argv("/dev/pts/3", parts)
    assert argv[:5] == ["sh", "-c", 'tty=$1; shift; printf "$@" > "$tty"', "sh", "/dev/pts/3"]
    fmt, *args = argv[5:]
    assert "\x1b" not in fmt and "\x07" not in fmt and fmt.startswith("\\033]9;%s\\007")
    assert "100% sure? \\n $(touch /tmp/x)" in args[0]
    with pytest.raises(ValueError):
        printf_args([Part("a\x1bb", True)])
    for bad in ("/dev/../etc/passwd", "/tmp/x", "/dev/pts/1; rm", ""):
        with pytest.raises(ValueError):
            tty_checked(bad)


def test_skip_focused_spares_the_terminal_of_the_pane_it_shows(
        two_sessions: tuple[Tmux, str, str, list[AttachedClient]], server: Any) -> None:
    tmux, work_pane, _, clients = two_sessions
    client = attach(tmux, work_pane, "work", "xterm-256color", clients)
    behind = server.sessions.get(session_name="work").new_window(
        window_name="behind", attach=False).active_pane.pane_id
    focused = {p.pane_id: p.focused for p in tmux.list_panes().panes}
    assert focused[work_pane] and not focused[behind]  # as tmux tells the watcher
    settings = NotifySettings(kinds=frozenset({TERMINAL}), min_interval=0, skip_focused=True)
    notifier = Notifier(settings, None, terminals=Terminals(tmux))
    for pane, name in ((work_pane, "seen"), (behind, "behind")):
        notifier.on_transition(NotificationEvent(
            worker_id=pane, name=name, session="work", window="@1", pane_id=pane, cli="",
            previous=State.BUSY, state=State.NEEDS_CONFIRMATION, actions_needed="Approve?",
            focused=focused[pane]))
    assert notifier.close()
    retry_until(lambda: b"\x1b]9;behind: NEEDS_CONFIRMATION" in client.seen, 10)
    assert b"seen: NEEDS_CONFIRMATION" not in client.seen


@pytest.mark.slow
def test_the_watcher_tells_the_terminal_of_a_client_when_enabled_in_the_config(
        server: Any, session: Any, tmp_path: Path, watcher_process: Any) -> None:
    (tmp_path / "config.toml").write_text(
        "[notify]\nmin_interval = 0\n\n[notify.tmux]\nenabled = false\n\n"
        "[notify.desktop]\nenabled = false\n\n[notify.terminal]\nenabled = true\n")
    tmux = Tmux(socket_name=server.socket_name)
    client = AttachedClient(["-L", server.socket_name], session.session_name,
                            "xterm-256color")
    try:
        first = session.active_window.active_pane.pane_id
        retry_until(lambda: client_terminals(tmux, first), 30)
        watcher_process()
        # A question behind the window the client shows.
        session.new_window(window_name="asks", attach=False,
                           window_shell=f"cat {DIALOG_SCREEN}; sleep 600")
        retry_until(lambda: b"\x1b]9;asks: NEEDS_CONFIRMATION" in client.seen, 60,
                    interval=0.2, message=f"nothing told: {client.seen[-300:]!r}")
        assert b"\x07\x07" in client.seen.split(b"\x1b]777;notify;asks: NEEDS", 1)[1]
    finally:
        client.close()


def test_a_terminal_that_takes_nothing_more_fails_the_write_instead_of_holding_it() -> None:
    master, slave = os.openpty()
    try:
        # Nobody reads the terminal: its buffer fills, as behind a stopped or stuck client.
        with pytest.raises(OSError, match=r"bytes in 0\.2 s"):
            write_local(os.ttyname(slave), b"x" * 1_000_000, 0.2)
        with pytest.raises(OSError, match="not a terminal"):
            write_local("/dev/null", b"x", 0.2)
    finally:
        os.close(slave)
        os.close(master)
