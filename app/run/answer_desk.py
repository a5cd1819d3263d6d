"""What the answer page can do, and nothing more: list the panes of this machine that ask the
person something, with their question and options, and press one option through a signed,
single-use link (:mod:`app.act.answer_links`). No typing, no commands, no screens beyond the
question: the page is a front over this and nothing else.

Every press, honoured or not, is recorded in the store's events (kind ``press``) with the
client's address and the outcome.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.act import gate
from app.act.answer_links import Grant, LinkKeys, LinkRefused
from app.adapters import store
from app.adapters.store import StoreWriter
from app.adapters.store_read import StoreReader
from app.adapters.tmux import Tmux
from app.base.errors import ConductorError, StoreError
from app.base.inputs import Refused
from app.base.model import State
from app.base.redact import redact
from app.base.settings import WatchSettings
from app.observe.one_pane import Target, resolve
from app.observe.pack_loading import load_packs

log = logging.getLogger(__name__)

ORIGIN = "serve"
_CHANGED = "not pressed: the dialog changed; nothing pressed"


@dataclass(frozen=True)
class Offered:
    label: str  # the option as the dialog shows it
    role: str  # "approve", "refuse" or "other"
    token: str


@dataclass(frozen=True)
class Question:
    worker_id: str
    name: str
    subject: str  # what the dialog asks about, redacted
    options: tuple[Offered, ...]


@dataclass(frozen=True)
class Preview:
    """What a link would press, for the page that asks "press it?" before anything is
    pressed (a link preview, a prefetch or a crawler only ever GETs)."""

    name: str
    choice: str


class AnswerDesk:
    """What answers a dialog from afar (the page, a notification's button): the one owner of
    the link keys in its process; tmux, the store and the gate as its process has them."""

    def __init__(self, tmux: Tmux, workers_dir: Path, settings: WatchSettings, links: LinkKeys,
                 link_ttl_s: float, *, writer: StoreWriter | None = None,
                 origin: str = ORIGIN, clock: Callable[[], float] = time.time) -> None:
        self._tmux = tmux
        self._dir = workers_dir
        self._settings = settings
        self._links = links
        self.link_ttl_s = link_ttl_s
        self._writer = writer  # in the watcher: its one writer (see _OPENING in store.py)
        self._clock = clock
        self._packs = load_packs()
        self._lock = threading.Lock()  # one look or press at a time: the page is for one person
        self.origin = origin  # who pressed, in the store's events: the page, a notification

    def questions(self) -> list[Question]:
        """The panes of this machine's tmux server asking something now, checked live."""
        with self._lock:
            asking = [row for row in self._rows()
                      if row.get("state") == State.NEEDS_CONFIRMATION.value
                      and row.get("host", "local") == "local"]
            found: list[Question] = []
            for row in asking:
                question = self._question(str(row["id"]), _asked_ts(row))
                if question is not None:
                    found.append(question)
            return found

    def preview(self, token: str) -> Preview:
        """What ``token`` would press, pressing nothing; :class:`Refused` when it is no link
        of ours, or has expired."""
        grant = self._links.read(token, self._clock())
        self._links.check_unspent(grant)
        target = self._target(grant)
        return Preview(target.label, grant.choice)

    def press(self, token: str, client: str) -> gate.Answered:
        """Press the option ``token`` names, in the dialog it was made for, or nothing
        (:class:`Refused` naming why)."""
        with self._lock:
            try:
                grant = self._links.read(token, self._clock())
                self._links.spend(grant, self._clock())
                answered = self._press(grant)
            except ConductorError as exc:
                self._record(client, f"refused: {exc}", None)
                raise
            self._record(client, f"pressed {answered.label!r}", grant)
            return answered

    def _press(self, grant: Grant) -> gate.Answered:
        target = self._target(grant)
        if target.worker_id != grant.worker_id or grant.asked_ts is None or \
                grant.asked_ts != self._asking_since(grant.worker_id):
            # Answered since and asked again, word for word: the same face, another dialog.
            raise LinkRefused(_CHANGED, "changed")
        try:
            decision = gate.decide(self._tmux, target, grant.choice, self._packs,
                                   self._settings, self._dir)
        except Refused:
            raise LinkRefused(_CHANGED, "changed") from None  # answered by hand, or another
        if decision.fingerprint != grant.fingerprint:
            raise LinkRefused(_CHANGED, "changed")
        return gate.answer(self._tmux, target, grant.choice, self._packs, self._settings,
                           self._dir, origin=self.origin, decided_on=decision,
                           writer=self._writer)

    def _target(self, grant: Grant) -> Target:
        try:
            return resolve(self._tmux, self._dir, grant.worker_id)
        except ConductorError:
            raise LinkRefused("not pressed: that pane is gone; nothing pressed", "gone") from None

    def _question(self, worker_id: str, asked_ts: float | None) -> Question | None:
        try:
            target = resolve(self._tmux, self._dir, worker_id)
            offered = gate.offer(self._tmux, target, self._packs, self._settings, self._dir)
        except ConductorError:
            return None  # answered or gone since the watcher's last look
        if not offered:
            return None
        options = tuple(Offered(d.label, _role(d), self.link(worker_id, d, asked_ts))
                        for d in offered)
        return Question(worker_id, target.label, redact(offered[0].subject), options)

    def link(self, worker_id: str, decision: gate.Decision,
             asked_ts: float | None = None) -> str:
        """A token that presses ``decision``'s option in its dialog of ``worker_id``, once, while
        the pane asks since ``asked_ts`` (by default, as the store says now)."""
        if asked_ts is None:
            asked_ts = self._asking_since(worker_id)
        return self._links.mint(worker_id, decision.fingerprint, decision.label, self._clock(),
                                self.link_ttl_s, asked_ts)

    def _asking_since(self, worker_id: str) -> float | None:
        """When the store says ``worker_id`` began asking; None when it is not asking."""
        row = next((r for r in self._rows() if r.get("id") == worker_id), None)
        return _asked_ts(row) if row is not None \
            and row.get("state") == State.NEEDS_CONFIRMATION.value else None

    def _rows(self) -> list[dict[str, object]]:
        try:
            reader = StoreReader(self._dir)
        except StoreError:
            return []
        try:
            return reader.workers(self._tmux.label)
        finally:
            reader.close()

    def _record(self, client: str, outcome: str, grant: Grant | None) -> None:
        row = {
            "ts": self._clock(), "kind": "press", "event": "press", "name": self.origin, "cli": "",
            "pane_id": "", "server_pid": None, "socket": self._tmux.label, "session_id": "",
            "detail": f"{grant.worker_id if grant else '-'} from {client}: {outcome}"[:500],
        }
        try:
            if self._writer is None:
                store.record_event(str(self._dir), row)
            else:
                with self._writer.transaction() as conn:
                    self._writer.events.add_event(conn, row)
        except StoreError as exc:
            log.warning("answer page: the press could not be recorded: %s", exc)
        log.info("answer page: press from %s: %s", client, outcome)


def _asked_ts(row: dict[str, object]) -> float | None:
    since = row.get("state_entered_ts")
    return float(since) if isinstance(since, (int, float)) else None


def _role(decision: gate.Decision) -> str:
    return next((o.role for o in decision.dialog.options if o.label == decision.label), "other")
