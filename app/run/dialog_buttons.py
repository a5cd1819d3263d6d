"""Approve, Deny and Open on a dialog's desktop notification.

Each button's name is an answer link (app/act/answer_links.py) made from the screen the watcher
decided NEEDS_CONFIRMATION on: a press answers that dialog through the gate
(:class:`app.run.answer_desk.AnswerDesk`, with the watcher's one store writer), once, or
presses nothing when the pane shows another dialog, none, or the press comes too late; then a
second notification says so ("the dialog changed; nothing pressed"). Open switches the tmux
client to the pane. Only this machine's panes get buttons.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from app.act import gate
from app.adapters.notify import NotificationEvent
from app.adapters.tmux import Tmux
from app.base.errors import ConductorError
from app.base.model import Note, State
from app.run.answer_desk import AnswerDesk

log = logging.getLogger(__name__)

OPEN = "open"
ORIGIN = "desktop notification"
_BUTTONS = (("approve", "Approve"), ("refuse", "Deny"))


class DialogButtons:
    def __init__(self, desk: AnswerDesk, tmux: Tmux,
                 tell: Callable[[NotificationEvent], None]) -> None:
        self._desk = desk
        self._tmux = tmux
        self._tell = tell  # a follow-up notification (the notifier's announce)
        # A button's name travels on notify-send's command line, which every local user can
        # read in /proc: it is a plain name, and the answer link it stands for stays here.
        self._links: dict[str, tuple[str, float]] = {}  # name -> (token, kept until)
        self._count = itertools.count(1)
        self._lock = threading.Lock()  # added on the watcher's thread, pressed on another

    def add_to(self, event: NotificationEvent, screen: str) -> NotificationEvent:
        """``event`` with buttons when it is a dialog whose options can be read off
        ``screen`` (the normalised screen the state was decided on)."""
        if event.state is not State.NEEDS_CONFIRMATION or event.note is not None:
            return event
        actions: list[tuple[str, str]] = []
        now = time.monotonic()
        with self._lock:
            self._links = {n: kept for n, kept in self._links.items() if kept[1] > now}
            for choice, label in _BUTTONS:
                try:
                    decision = gate.decision_on(screen, choice, event.name)
                except ConductorError:
                    continue  # no option of that kind can be read: no button for it
                name = f"{choice}-{next(self._count)}"
                self._links[name] = (self._desk.link(event.worker_id, decision),
                                     now + self._desk.link_ttl_s)
                actions.append((name, label))
        return replace(event, actions=(*actions, (OPEN, "Open"))) if actions else event

    def pressed(self, event: NotificationEvent, name: str) -> None:
        """A button of ``event``'s notification was pressed (on the notifier's thread)."""
        if name == OPEN:
            try:
                self._tmux.switch_to(event.pane_id)
            except ConductorError as exc:
                log.warning("Open on %s's notification: %s", event.name, exc)
            return
        with self._lock:
            token = self._links.pop(name, ("", 0.0))[0]
        try:
            if not token:
                raise ConductorError("not pressed: this button has expired; nothing pressed")
            answered = self._desk.press(token, ORIGIN)
        except ConductorError as exc:
            log.warning("a button on %s's notification: %s", event.name, exc)
            self._tell(replace(event, actions=(), note=Note(
                "answer", "not_pressed", "nothing pressed", body=str(exc))))
            return
        log.info("a button on %s's notification answered %r: %s", event.name, answered.label,
                 answered.subject)
