"""The vocabulary shared by every module: states, panes, screens, verdicts, transitions and
the daemon's jobs."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class State(str, enum.Enum):
    READY = "READY"
    BUSY = "BUSY"
    NEEDS_CONFIRMATION = "NEEDS_CONFIRMATION"
    ERROR = "ERROR"
    # No positive evidence either way (a stable screen no rule recognises, or a pane just seen).
    # Never treated as READY.
    UNKNOWN = "UNKNOWN"
    # The pane is gone (its program exited with tmux's remain-on-exit off, or it was closed).
    # Final: its row and history stay readable until the history retention prunes them.
    EXITED = "EXITED"

    @property
    def short(self) -> str:
        return "NEEDS_CONF" if self is State.NEEDS_CONFIRMATION else self.value


# What a screen can show: EXITED is only ever decided by tmux (the pane is gone), never by a
# pack rule or the LLM.
SCREEN_STATES: tuple[State, ...] = tuple(s for s in State if s is not State.EXITED)


@dataclass(frozen=True)
class Pane:
    """One tmux pane as listed by the server in one poll."""

    pane_id: str  # tmux's "%N", unique for the server's lifetime
    session_name: str
    window_id: str
    window_index: int
    window_name: str
    pane_index: int
    window_panes: int
    cwd: str
    current_command: str
    pid: int
    title: str
    dead: bool
    dead_status: int | None
    width: int
    height: int
    # Cheap change hint: if none of these moved since the last capture, the screen is unchanged.
    activity: int
    cursor_x: int
    cursor_y: int
    history_size: int
    in_mode: bool = False
    focused: bool = False  # what an attached client shows right now
    session_id: str = ""  # tmux's "$N": what a control-mode client attaches to
    # The session's destroy-unattached option: a client of ours would keep it alive.
    destroy_unattached: bool = False
    tty: str = ""  # the pane's terminal device, /dev/pts/N
    # The pane option a conductor view sets on its own pane ("PID WHAT"; app.observe.views), or "".
    view: str = ""
    # The stored row `conductor pty restore` recreated this pane for (pane option
    # ``@conductor-id``), or "": the watcher keeps that row's id, so its history continues.
    conductor_id: str = ""

    @property
    def change_hint(self) -> tuple[int, int, int, int, int, int, bool, bool]:
        return (
            self.activity,
            self.cursor_x,
            self.cursor_y,
            self.history_size,
            self.width,
            self.height,
            self.dead,
            self.in_mode,
        )

    @property
    def default_name(self) -> str:
        if self.window_panes > 1:
            return f"{self.window_name}.{self.pane_index}"
        return self.window_name


@dataclass(frozen=True)
class Option:
    """One choice a dialog on screen offers, as read from the screen."""

    label: str
    # tmux key names that pick it from the screen as it is: ("1",), ("Down", "Enter"), ("y",
    # "Enter"); empty when the screen does not show how to reach it.
    keys: tuple[str, ...]
    role: str  # "approve", "refuse" or "other", by the label's words
    highlighted: bool = False  # what Enter picks
    shortcut: str = ""  # a key the row names itself, e.g. "y" for "Yes, proceed (y)"


@dataclass(frozen=True)
class Verdict:
    """What one classifier concluded from one screen."""

    state: State
    confidence: int  # 0-100
    reasons: tuple[str, ...]  # reason codes, e.g. "confirmation_prompt", "prompt_visible"
    rule_id: str | None = None
    summary: str = ""
    actions_needed: str = ""
    classifier: str = ""  # "pack:<name>", "llm:<model>", "tmux"
    matched_lines: tuple[str, ...] = ()
    # The dialog's options when the screen asks something and they can be read.
    options: tuple[Option, ...] = ()
    tried: tuple[str, ...] = field(default=(), compare=False)  # rule ids evaluated, for explain


@dataclass(frozen=True)
class Transition:
    pane_key: str
    ts: float
    previous: State | None
    state: State
    verdict: Verdict
    previous_lasted_s: float = 0.0  # how long the pane had been in ``previous``


@dataclass(frozen=True)
class Note:
    """Something herding or the cycle tells the user about one pane (a nudge typed, "needs you").

    Lives here, not in app.adapters.notify, so the steps that write notes stay free of delivery.
    """

    source: str  # "herd" or "cycle": who speaks
    what: str  # a stable code for scripts: "nudged", "max_nudges", "goal_met", "needs_you", ...
    title: str  # the headline after the pane's name: "needs you", "herd nudge 1/3"
    body: str = ""
    urgent: bool = False  # a person must act: shown like a question (critical desktop urgency)


@dataclass(frozen=True)
class RuleTrace:
    """How one rule fared on one screen, for ``explain``."""

    rule_id: str
    state: State
    matched: bool
    detail: str


class _Stored(str, enum.Enum):
    """A word the store holds: printed as itself, and a word this version does not know (a newer
    one wrote it) reads as itself, not as an error that would stop every reader of the jobs."""

    def __str__(self) -> str:
        return str.__str__(self)

    @classmethod
    def _missing_(cls, value: object) -> _Stored | None:
        if not isinstance(value, str):
            return None
        unknown = str.__new__(cls, value)
        unknown._name_ = value
        unknown._value_ = value
        return unknown


class JobKind(_Stored):
    MESSAGE = "message"  # a queued message: typed when its pane is next READY
    CYCLE = "cycle"  # the post-report cycle: check, settle, decide, one directive


class JobState(_Stored):
    """Every state of a job, as the store has always held it: a queued message's states and a
    cycle's ends in lower case, a cycle in motion (and its two shown ends) in upper case. The
    stored strings are kept, so a store written before this type reads as it was."""

    QUEUED = "queued"  # both kinds: written, the watcher has not taken it yet
    WAITING = "WAITING"  # a cycle: its check runs, or it waits ``[cycle] wait`` seconds
    IDLE_SPIN = "IDLE_SPIN"  # a cycle: waiting for the pane to settle
    DECIDING = "DECIDING"  # a cycle: the directive is being decided
    STANDBY = "STANDBY"  # a cycle: its directive was typed; the next report starts a new one
    PAUSED = "PAUSED"  # a cycle: nothing typed into the pane until resume or a new report
    DELIVERED = "delivered"  # a message: typed
    EXPIRED = "expired"  # a message: not delivered in time
    DROPPED = "dropped"  # either: cancelled by hand, or its pane is gone
    SUPERSEDED = "superseded"  # a cycle: a newer report came
    RESUMED = "resumed"  # a paused cycle: the person resumed the pane
    FAILED = "failed"  # either: the watcher could not work it (the reason is in ``detail``)

    @property
    def shown(self) -> str:
        """The cycle state in ``status``'s words (QUEUED, not queued); "" for a cycle that is
        no more (resumed, superseded, dropped) or a message's end."""
        return _SHOWN_JOB_STATES.get(self, "")


_SHOWN_JOB_STATES = {
    JobState.QUEUED: "QUEUED", JobState.WAITING: "WAITING", JobState.IDLE_SPIN: "IDLE_SPIN",
    JobState.DECIDING: "DECIDING", JobState.STANDBY: "STANDBY", JobState.PAUSED: "PAUSED",
    JobState.FAILED: "FAILED",
}


def stamp(timeline: str | None, state: str, ts: float) -> str:
    """A job's timeline with one more ``STATE@epoch`` entry (space separated, oldest first)."""
    entry = f"{state}@{ts:.3f}"
    return f"{timeline} {entry}" if timeline else entry


def timeline_steps(timeline: str | None) -> list[tuple[str, float]]:
    """:func:`stamp`'s entries read back: (state, epoch seconds), oldest first."""
    out = []
    for entry in (timeline or "").split():
        state, _, ts = entry.partition("@")
        out.append((state, float(ts)))
    return out


@dataclass(frozen=True)
class Job:
    """Work for the daemon that outlives the command asking for it: one row of the store's
    ``jobs`` table, in its columns' order (``pane`` is the column ``id``, the pane's worker
    id). ``seq`` is 0 for a job not stored yet. Built from a row only by :meth:`from_row`."""

    seq: int
    pane: str
    kind: JobKind
    state: JobState
    text: str | None = None
    wait_cmd: str | None = None
    origin: str | None = None
    created_ts: float = 0.0
    state_ts: float = 0.0
    expires_ts: float | None = None
    done_ts: float | None = None  # set once the job is finished, whatever its end
    detail: str | None = None  # why it is in its state, for people
    exit_code: int | None = None  # a cycle's check
    output: str | None = None  # the check's output, cleaned
    decision: str | None = None  # a cycle's decision (continue, stop, pause, paused, failed)
    directive: str | None = None  # the directive typed, or the one that could not be
    timeline: str | None = None  # ``stamp``'s STATE@epoch entries

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Job:
        columns: dict[str, Any] = {name: row.get(name) for name in _JOB_COLUMNS}
        columns["created_ts"] = float(row.get("created_ts") or 0.0)
        columns["state_ts"] = float(row.get("state_ts") or 0.0)
        return cls(seq=int(row.get("seq") or 0), pane=str(row["id"]),
                   kind=JobKind(row["kind"]), state=JobState(row["state"]), **columns)

    def row(self) -> dict[str, Any]:
        """The job as the store's columns (``seq`` first, ``id`` for the pane)."""
        out: dict[str, Any] = {"seq": self.seq, "id": self.pane}
        out.update((name, getattr(self, name)) for name in ("kind", "state", *_JOB_COLUMNS))
        return out

    def updated(self, fields: Mapping[str, Any]) -> Job:
        """The job with some columns changed, as the store will hold it once they are written."""
        return Job.from_row({**self.row(), **fields})

    @property
    def finished(self) -> bool:
        return self.done_ts is not None

    def steps(self) -> list[tuple[str, float]]:
        """The timeline: (state, epoch seconds), oldest first."""
        return timeline_steps(self.timeline)


_JOB_COLUMNS = ("text", "wait_cmd", "origin", "created_ts", "state_ts", "expires_ts", "done_ts",
                "detail", "exit_code", "output", "decision", "directive", "timeline")
