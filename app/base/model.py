"""The vocabulary shared by every module: states, panes, screens, verdicts and transitions."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


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
