"""The tmux adapter on a private server: batched listing and capture, typing, and the lines a
real control-mode client sends, parsed back to the bytes a pane printed."""

from __future__ import annotations

import subprocess
import threading
from typing import Any

import pytest

import app.adapters.tmux as tmux_module
from app.adapters.control import CONTROL_FLAGS, decode_output, output_signals, parse_notification
from app.adapters.tmux import Tmux
from app.base.screen import Cursor, normalise
from app.base.termsignals import TITLE, SignalScanner, TermSignal
from tests.support.waiting import retry_until, stop_process


def test_panes_are_listed_and_captured_in_batches_and_a_vanished_one_is_left_out(
        server: Any, session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Batches of two: five panes take three chained capture-pane calls.
    monkeypatch.setattr(tmux_module, "_CAPTURE_BATCH", 2)
    tmux = Tmux(socket_name=server.socket_name)
    words = {tmux.new_window("/", f"w{n}", f"sh -c 'echo word-{n}; sleep 600'").pane_id:
             f"word-{n}" for n in range(5)}
    listing = tmux.list_panes()
    assert set(words) <= {p.pane_id for p in listing.panes}
    assert listing.server_pid > 0
    gone = next(iter(words))
    server.cmd("kill-pane", "-t", gone)
    alive = {pane: word for pane, word in words.items() if pane != gone}
    titles: dict[str, str] = {}

    def captured() -> bool:
        screens = tmux.capture(list(words), titles)
        return gone not in screens and all(word in screens.get(pane, "")
                                           for pane, word in alive.items())

    retry_until(captured, 10, message="the captures never showed each pane's own word")
    assert set(alive) <= set(titles)


def test_only_the_panes_asked_for_keep_their_colours_in_one_batch(server: Any,
                                                                   session: Any) -> None:
    tmux = Tmux(socket_name=server.socket_name)
    printing = "printf '\\033[35mmagenta-word\\033[39m'; sleep 600"
    styled, plain = (tmux.new_window("/", name, f"sh -c \"{printing}\"").pane_id
                     for name in ("styled", "plain"))

    def captured() -> bool:
        screens = tmux.capture([styled, plain], styled={styled})
        return all("magenta-word" in screens.get(p, "") for p in (styled, plain))

    retry_until(captured, 10, message="the coloured word never showed")
    screens = tmux.capture([styled, plain], styled={styled})
    assert "\x1b[35mmagenta-word" in screens[styled]
    assert "\x1b" not in screens[plain] and normalise(screens[styled]) == normalise(screens[plain])


def test_a_capture_of_many_panes_with_all_their_facts_stays_within_tmuxs_command_limit(
        server: Any, session: Any) -> None:
    # 120 panes, each captured with its colours, title and cursor: one command line for them
    # all would be over tmux's 16 KB ("command too long").
    tmux = Tmux(socket_name=server.socket_name)
    making: list[str] = []
    for _ in range(120):  # one tmux call for them all
        making += ["new-window", "-d", "sleep 600", ";"]
    tmux.run(*making[:-1])
    panes = [p.pane_id for p in tmux.list_panes().panes]
    assert len(panes) >= 120
    titles: dict[str, str] = {}
    cursors: dict[str, Cursor] = {}
    screens = tmux.capture(panes, titles, styled=set(panes), cursors=cursors)
    assert set(panes) <= set(screens) and set(panes) <= set(titles) and set(panes) <= set(cursors)


def test_text_and_keys_arrive_literally(server: Any, session: Any) -> None:
    tmux = Tmux(socket_name=server.socket_name)
    pane = tmux.new_window("/", "typing", "cat").pane_id
    text = "#{pane_id} ; $HOME 'quoted' \\back"
    tmux.send_text(pane, text, enter_delay=0)
    tmux.send_keys(pane, ["o", "k", "Space", "!", "Enter"])

    def shown() -> bool:
        screen = tmux.capture([pane]).get(pane, "")
        # cat prints each line back after the tty's own echo: each shows twice.
        return screen.count(text) == 2 and screen.count("ok !") == 2

    # As long as a loaded machine needs to start cat and let it echo (as the shell waits do).
    retry_until(shown, 30, message="the typed text never showed as it was")


def test_a_real_control_client_reports_output_that_parses_back_to_the_bytes_printed(
        server: Any, session: Any) -> None:
    tmux = Tmux(socket_name=server.socket_name)
    # Waits for a line before printing, so nothing is printed before the client attaches.
    script = r"read x; printf 'a\tb\\c\033]0;done here\007\n'; sleep 600"
    pane = tmux.new_window("/", "printer", f"sh -c \"{script}\"",
                           session_name=session.session_name).pane_id
    client = subprocess.Popen(
        ["tmux", "-L", server.socket_name, "-C", "attach-session", "-t", session.session_id,
         "-f", CONTROL_FLAGS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL)
    out = client.stdout
    assert out is not None
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(out.readline, b"")),
                              daemon=True)
    reader.start()
    try:
        retry_until(lambda: "1" in tmux.run("list-clients", "-F",
                                            "#{client_control_mode}").stdout, 10,
                    message="the control client never attached")
        tmux.send_keys(pane, ["Enter"])
        printed = b"a\tb\\c\x1b]0;done here\x07"
        signals: list[TermSignal] = []

        def heard() -> bool:
            notes = [parse_notification(line) for line in list(lines)]
            values = [n.value for n in notes
                      if n is not None and n.name == "output" and n.pane_id == pane]
            # One scanner for the pane's whole stream: a sequence may be split between values.
            scanner = SignalScanner()
            signals[:] = [s for value in values for s in output_signals(scanner, value)]
            return printed in b"".join(decode_output(value) for value in values)

        retry_until(heard, 10, message="the printed bytes never came back from %output")
        assert [(s.kind, s.text) for s in signals] == [(TITLE, "done here")]
    finally:
        if client.stdin is not None:
            client.stdin.close()
        stop_process(client)
        reader.join(5)
