"""Conductor's own views in tmux panes: the watcher's log, ``status --watch``, ``logs -f`` and
the other follow modes. Their screens repeat other panes' questions and summaries, so read as an
agent's they would turn NEEDS_CONFIRMATION, notify and draw nudges. The watcher leaves them alone.

How a pane is known as one, by what tmux and the kernel say, never by its screen:

- The watcher's own pane: the terminal its log goes to (stdout or stderr) or whose keys it reads
  in the foreground is the pane's ``#{pane_tty}``.
- A window ``switch`` made to show another host's pane: marked ``@conductor-view`` ``"mirror
  NAME@HOST"`` for as long as it is there (that pane is watched on its host).
- Any view, the watcher included: it sets the pane option ``@conductor-view`` on its own pane
  (``"PID WHAT"``, e.g. ``"4242 status --watch"``) while it runs and unsets it when it ends. Only
  a pane whose tty is the view's own terminal is marked (a popup, which is no pane, and a
  ``$TMUX_PANE`` inherited from elsewhere mark nothing). A marker whose process is gone (a view
  killed with SIGKILL) is ignored, so the pane is watched again.

The popup of ``conductor-pty.tmux`` is a tmux popup, not a pane: tmux lists no pane for it, so it
is never watched in the first place.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from app.adapters.tmux import Tmux
from app.base.errors import ConductorError
from app.base.model import Pane, State, Transition, Verdict
from app.base.render import clean_text
from app.observe.assess import Assessment
from app.observe.pane import Tracked

log = logging.getLogger(__name__)

VIEW_OPTION = "@conductor-view"
WATCHER = "watch"  # what the watcher writes into its own pane's marker
MIRROR = "mirror"  # a marker's first word for a window showing another host's pane
# What a view pane is listed as: its CLI column and the reason on its status row.
VIEW_CLI = "conductor"
VIEW_REASON = "conductor_view"


def marker(what: str, pid: int | None = None) -> str:
    return f"{os.getpid() if pid is None else pid} {what}"


def mirror_marker(shown: str) -> str:
    """The marker of a window that shows another host's pane (``switch``), for as long as the
    window is there: its screen is that pane's, which is watched on its host, and once its ssh
    ended the window only keeps what ssh said."""
    return f"{MIRROR} {shown}"


def live_view(value: str) -> str:
    """What a pane's ``@conductor-view`` marker says it shows, while the process that set it runs
    (a mirror's, while the window is there); "" for no marker, a malformed one, or one left behind
    by a process that is gone."""
    pid_text, _, what = value.strip().partition(" ")
    if pid_text == MIRROR and what:
        return f"{MIRROR} of " + " ".join(clean_text(what).split())[:60]
    if not pid_text.isdigit() or not what or int(pid_text) <= 1:
        return ""
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return ""
    except PermissionError:
        pass  # alive, another user's
    except OSError:
        return ""
    return " ".join(clean_text(what).split())[:60]


def own_terminals() -> set[str]:
    """The terminals this process writes its output to, and the one whose keys it reads as the
    foreground job: a pane on one of them is this process's own."""
    ttys: set[str] = set()
    for fd in (1, 2, 0):
        try:
            if not os.isatty(fd):
                continue
            if fd == 0 and os.tcgetpgrp(fd) != os.getpgrp():
                continue  # a background job does not get the pane's keys
            ttys.add(os.ttyname(fd))
        except OSError:
            continue
    return ttys


def _own_pane() -> tuple[Tmux, str] | None:
    """The tmux server and pane this process runs in, when its output goes to that pane."""
    socket = os.environ.get("TMUX", "").rsplit(",", 2)[0]
    pane_id = os.environ.get("TMUX_PANE", "")
    mine = own_terminals()
    if not socket or not pane_id.startswith("%") or not mine:
        return None
    tmux = Tmux(socket_path=socket)
    try:
        tty = tmux.pane_tty(pane_id)
    except ConductorError:
        return None
    return (tmux, pane_id) if tty and tty in mine else None


def mark_own_pane(what: str, mark: bool = True) -> Callable[[], None]:
    """Mark the pane this process shows ``what`` in as conductor's own view; returns what
    unmarks it. Nothing to mark outside tmux, in a popup, with the output redirected, or with
    ``mark`` False (a command that shows a view only with some option)."""
    found = _own_pane() if mark else None
    if found is None:
        return lambda: None
    tmux, pane_id = found
    value = marker(what)
    try:
        tmux.set_pane_option(pane_id, VIEW_OPTION, value)
    except ConductorError as exc:
        log.debug("cannot mark pane %s as conductor's view: %s", pane_id, exc)
        return lambda: None
    return lambda: unmark(tmux, pane_id, value)


@contextmanager
def shown_in_pane(what: str) -> Iterator[None]:
    """:func:`mark_own_pane` for the length of a block."""
    undo = mark_own_pane(what)
    try:
        yield
    finally:
        undo()


def unmark(tmux: Tmux, pane_id: str, value: str) -> None:
    """Unset a pane's marker if it is still ``value`` (another view may have marked it since)."""
    try:
        if tmux.pane_option(pane_id, VIEW_OPTION) == value:
            tmux.set_pane_option(pane_id, VIEW_OPTION, None)
    except ConductorError:
        pass  # the pane or its server is gone: nothing left to unmark


class WatcherViews:
    """The panes of one tmux server that show conductor's own views, as its watcher finds them:
    the watcher's own (its log's terminal), which it marks for other conductor processes while
    it runs, and every pane a live view marked."""

    def __init__(self, tmux: Tmux) -> None:
        self.tmux = tmux
        self._own_marker: tuple[str, str] | None = None  # (pane id, marker) of our own pane
        self.found: dict[str, str] = {}  # worker id -> the view it shows, at the last listing

    def conductor_views(self, current: Mapping[str, Pane]) -> dict[str, str]:
        """Worker id -> the view it shows, of the panes in ``current`` (worker id -> pane); kept
        as ``found``."""
        found: dict[str, str] = {}
        self.found = found
        if self.tmux.via is not None:
            return found  # another host's ttys and pids are not ours to compare with
        mine = own_terminals()
        for wid, pane in current.items():
            if pane.tty and pane.tty in mine:
                found[wid] = "this watcher's log"
                self._mark_own(pane)
            elif pane.view:
                what = live_view(pane.view)
                if what:
                    found[wid] = what
        return found

    def _mark_own(self, pane: Pane) -> None:
        value = marker(WATCHER)
        if pane.view == value:
            return
        try:
            self.tmux.set_pane_option(pane.pane_id, VIEW_OPTION, value)
        except ConductorError as exc:
            log.debug("cannot mark our own pane %s: %s", pane.pane_id, exc)
            return
        self._own_marker = (pane.pane_id, value)

    def close(self) -> None:
        """Unmark our own pane, so it is an ordinary pane again once we are gone."""
        if self._own_marker is not None:
            unmark(self.tmux, *self._own_marker)
            self._own_marker = None


def as_view(tracked: Tracked, now: float) -> Transition | None:
    """The assessment of a pane showing a conductor view, made without looking at its screen:
    UNKNOWN, so nothing treats it as READY or asking; the transition when it just became one."""
    summary = f"conductor's own view: {tracked.view}"
    previous = tracked.assessment
    if previous is not None and previous.summary == summary and \
            previous.reasons == (VIEW_REASON,):
        return None
    verdict = Verdict(state=State.UNKNOWN, confidence=100, reasons=(VIEW_REASON,),
                      rule_id="conductor-view", summary=summary, classifier=VIEW_CLI)
    # A view restored after a restart keeps its time.
    entered = previous.state_entered if previous is not None and \
        previous.state is State.UNKNOWN and previous.summary == summary else now
    tracked.assessment = Assessment(
        state=State.UNKNOWN, state_entered=entered, last_change=entered, verdict=verdict,
        reasons=verdict.reasons, summary=summary, confidence=100, signals=("view=conductor",))
    before = previous.state if previous is not None else None
    if before is None or before is State.UNKNOWN:
        return None
    return Transition(tracked.worker_id, now, before, State.UNKNOWN, verdict,
                      previous.seconds_in_state(now) if previous is not None else 0.0)


def leave_alone(tracked: Tracked, view: str) -> bool:
    """Take what view the pane shows now (``view``, "" for none); whether that changed. A pane
    that just began or stopped showing one is judged from scratch, as if first seen."""
    if view == tracked.view:
        return False
    if not tracked.view:
        log.info("%s (%s): conductor's own view (%s); left alone", tracked.name,
                 tracked.worker_id, view)
    elif not view:
        log.info("%s (%s): no longer conductor's view; watched again", tracked.name,
                 tracked.worker_id)
        tracked.assessment = None  # first sight again: its first state is no news
    tracked.forget_screen()
    tracked.view = view
    return True
