"""A pane as the watcher and ``wait`` know it: its identity (``worker_id``), what is remembered
between looks (``Tracked``), and ``PaneObserver``, which classifies and assesses one pane at a time.

The watcher runs one observer over every pane; ``wait`` and ``send`` run one over a single pane
when they look for themselves, so both judge a screen by the same rules.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.base.model import Pane, State, Transition, Verdict
from app.base.screen import Cursor, normalise, screen_hash
from app.base.settings import WatchSettings
from app.base.termsignals import TermSignal
from app.observe.assess import NO_END_MARK, NO_SIGNALS, Assessment, Policy, Signals, assess
from app.observe.background_work import PLAIN_PACKS, hold_for_background
from app.observe.exits import dead_pane_verdict
from app.observe.llm import AsyncLLM, merge, worth_asking
from app.observe.pack_detection import detect_pack, judge_for, plain_program
from app.observe.pack_patterns import PatternTimeout, time_limit
from app.observe.packs import GENERIC_PACK, Pack
from app.observe.signals import TERMINAL, TerminalWatch

log = logging.getLogger(__name__)

# Wall-clock budget for choosing and running one pane's pack on one screen; a pattern that runs
# past it makes that screen UNKNOWN (reason ``pattern_timeout``) instead of stalling every pane.
CLASSIFY_BUDGET_S = 0.5
# A shell's (or an unclaimed program's) pane is looked at again for an agent CLI's marks on a
# changed screen at most this often (seconds): an agent started from it shows within a second,
# and a shell printing nonstop does not pay for a search of every pack's marks on every capture.
REDETECT_S = 1.0
# A program redraws its screen for a new size within this many seconds of the resize (Claude
# Code draws its box again, tmux rewraps long lines at once).
REDRAW_S = 2.0
# How a pane is watched, as shown in its signals ("watch=events"): control mode reports its
# output, or only the poll looks at it.
EVENTS, POLL = "events", "poll"

def worker_id(socket_label: str, server_pid: int, pane_id: str) -> str:
    """Stable for the life of a pane and safe as a folder name: tmux reuses ``%N`` after a server
    restart, so the server's pid and socket are part of the identity."""
    key = f"{socket_label}\0{server_pid}\0{pane_id}"
    return hashlib.blake2b(key.encode(), digest_size=5).hexdigest()


# What worker_id makes: the only value a pane's ``@conductor-id`` option is taken as.
WORKER_ID = re.compile(r"[0-9a-f]{10}")


def panes_by_id(socket_label: str, server_pid: int, panes: Iterable[Pane]) -> dict[str, Pane]:
    """The panes by worker id. A pane `restore` recreated for a stored row carries that row's
    id (``@conductor-id``) and keeps it, so its history continues; a second pane claiming an id
    already taken (a copy of the option) gets its own."""
    found: dict[str, Pane] = {}
    claimed = [p for p in panes if WORKER_ID.fullmatch(p.conductor_id)]
    for pane in claimed:
        found.setdefault(pane.conductor_id, pane)
    for pane in panes:
        if found.get(pane.conductor_id) is not pane:
            found[worker_id(socket_label, server_pid, pane.pane_id)] = pane
    return found


@dataclass
class Screen:
    """What the observer read on the pane's screen: written by PaneObserver.classify only."""

    pack: Pack | None = None
    pack_command: str = ""
    detected_at: float = 0.0  # time.monotonic() of the last choice of pack
    detected_hash: str = ""  # the screen that choice was made on
    # A plain program in the foreground (``less``, ``sleep``; "" for none): its screen is judged
    # by the generic pack while the pane keeps its shell pack.
    program: str = ""
    text: str = ""
    text_hash: str | None = None
    # What stability is judged on: the screen with the pack's volatile parts (fading hints,
    # clocks) blanked, so they do not hold READY back.
    stability_hash: str | None = None
    verdict: Verdict | None = None
    # The pane's size at the last assessment, and when it last changed (epoch seconds): the
    # screen a program redraws for its new size is the same screen, not news.
    size: tuple[int, int] | None = None
    resized_at: float = 0.0
    # The pack's working prompt as the last styled capture drew it (None: not read): at rest
    # once the turn is over, on a screen whose text cannot show it (``Pack.working_prompt``).
    prompt_at_rest: bool | None = None
    # The terminal's cursor read with the screen (None: not read), for packs whose rules ask
    # where it is (Pack.reads_cursor): a line accepted moves it without changing the text.
    cursor: Cursor | None = None


@dataclass
class Looks:
    """When the pane was captured and is looked at again: written by the capture clock only
    (app.run.clock)."""

    hint: tuple[Any, ...] | None = None  # the listing's change hint at the last capture
    captured_at: float = 0.0
    recheck_at: float = 0.0  # when a light tick should look at the quiet pane again; 0: never


@dataclass
class Stored:
    """What the store holds of the pane, as the watcher last wrote it: a row is written again
    only when it differs. Written by the watcher only; a step returns the columns it moved."""

    status_row: dict[str, Any] | None = None
    pty_row: dict[str, Any] | None = None
    status_json: str | None = None  # the status.json text last written


@dataclass
class News:
    """What the person was told of the pane: written by app.run.telling only."""

    # A pane's first seconds: its transitions are held back until one state has held (see
    # Teller.settle), so a program starting up does not notify every state it passes.
    settled: bool = False
    held_back: Transition | None = None
    # The last known (not UNKNOWN) state handed to the notifier: UNKNOWN between two equal
    # states is not a change worth telling.
    told: State | None = None


@dataclass
class Tracked:
    """What the watcher remembers about one pane between cycles. Its own fields are the pane as
    listed, the assessment and the evidence besides the screen (hooks, sends, the terminal's
    signals); ``screen``, ``looks``, ``stored`` and ``news`` are each written by one owner only
    (tests/test_layers.py checks it), and read through the properties below."""

    worker_id: str
    pane: Pane
    name: str
    named_by_user: bool
    cli_forced: str | None
    assessment: Assessment | None = None
    signals: Signals = NO_SIGNALS  # hooks and sends, folded from the events table
    # The terminal's own signals (titles, progress) as they moved the turn; folded into
    # ``signals`` like hooks (app.observe.signals).
    terminal: TerminalWatch = field(default_factory=TerminalWatch)
    mode: str = POLL
    # What conductor view the pane shows ("status --watch", "this watcher's log"), else "": such
    # a pane is never captured, classified, notified, herded or typed into (app.observe.views).
    view: str = ""
    # The worker id of the pane whose agent started this one ("" for none; design/states.md,
    # "Leads and teammates"), and how many of this pane's own teammates work now (the watcher
    # counts them each tick): a lead is not READY while a teammate it waits on works.
    lead: str = ""
    teammates: int = 0
    screen: Screen = field(default_factory=Screen)
    looks: Looks = field(default_factory=Looks)
    stored: Stored = field(default_factory=Stored)
    news: News = field(default_factory=News)

    @property
    def pack(self) -> Pack | None:
        return self.screen.pack

    @property
    def program(self) -> str:
        return self.screen.program

    @property
    def text(self) -> str:
        return self.screen.text

    @property
    def text_hash(self) -> str | None:
        return self.screen.text_hash

    @property
    def stability_hash(self) -> str | None:
        return self.screen.stability_hash

    @property
    def verdict(self) -> Verdict | None:
        return self.screen.verdict

    @property
    def captured_at(self) -> float:
        return self.looks.captured_at

    @property
    def wants_styled(self) -> bool:
        """Whether the next capture should keep its colours: only a screen whose reply has no
        end mark, in a CLI whose prompt glyph shows the turn at work (``Pack.working_prompt``)."""
        pack, verdict = self.screen.pack, self.screen.verdict
        return pack is not None and pack.working_prompt is not None and verdict is not None \
            and NO_END_MARK in verdict.reasons

    @property
    def status_row(self) -> dict[str, Any] | None:
        return self.stored.status_row

    @property
    def pty_row(self) -> dict[str, Any] | None:
        return self.stored.pty_row

    @property
    def settled(self) -> bool:
        return self.news.settled

    def take_title(self, title: str, ts: float) -> None:
        """Fold in the pane's title as tmux holds it at ``ts`` (a listing's, a capture's)."""
        event = self.terminal.observe_title(title, ts)
        if event is not None:
            self.signals = self.signals.with_event(TERMINAL, event.event, event.name, event.ts)

    def take_signals(self, signals: Sequence[tuple[float, TermSignal]]) -> None:
        """Fold in terminal signals read from the pane's output, oldest first."""
        for ts, signal in signals:
            event = self.terminal.observe(signal, ts)
            if event is not None:
                self.signals = self.signals.with_event(TERMINAL, event.event, event.name,
                                                       event.ts)

    def forget_screen(self) -> None:
        """Drop what was read from the screen, so the next capture is judged from scratch."""
        # The pack's choice is made again (it is None), so its time and screen start afresh too.
        self.screen = Screen()
        self.looks = Looks()


class PaneObserver:
    """Classify and assess one pane at a time: the watcher runs one over every pane, and ``wait``
    runs one over a single pane when it looks for itself."""

    def __init__(self, packs: Mapping[str, Pack], settings: WatchSettings,
                 llm: AsyncLLM | None = None) -> None:
        self.packs = packs
        self.settings = settings
        self.llm = llm
        # By the pack's stable_polls and whether control mode watches the pane; built once.
        self._policies: dict[tuple[int, bool], Policy] = {}

    def classify(self, tracked: Tracked, raw: str, styled: bool = False,
                 cursor: Cursor | None = None) -> None:
        """Normalise a captured screen and (re)classify it with the pane's pack; ``styled``: the
        capture kept its colours (``capture-pane -e``); ``cursor``: where the capture left the
        terminal's cursor."""
        screen = tracked.screen
        text = normalise(raw)
        text_hash = screen_hash(text)
        if text_hash == screen.text_hash and screen.verdict is not None and \
                screen.verdict.rule_id == "pattern-timeout":
            return  # the same screen would only run out of time again
        pane = tracked.pane
        program = "" if tracked.cli_forced else plain_program(self.packs, pane.current_command)
        rejudge = screen.verdict is None or program != screen.program
        try:
            with time_limit(CLASSIFY_BUDGET_S):
                if screen.pack is None or screen.pack_command != pane.current_command or (
                    screen.pack.name in (GENERIC_PACK, "shell")
                    and text_hash != screen.detected_hash
                    and time.monotonic() - screen.detected_at >= REDETECT_S
                ):
                    chosen = self._choose_pack(tracked, text)
                    if program and chosen.name == GENERIC_PACK and screen.pack is not None \
                            and screen.pack.detect.weak:
                        # `sleep 30` typed at a shell prompt: still a shell pane, now running a
                        # program.
                        chosen = screen.pack
                    rejudge = rejudge or chosen is not screen.pack
                    screen.pack = chosen
                    screen.detected_at, screen.detected_hash = time.monotonic(), text_hash
                    screen.pack_command = pane.current_command
                screen.program = program
                judge, program = judge_for(self.packs, screen.pack, pane.current_command)
                if judge.reads_cursor and cursor != screen.cursor:
                    rejudge = True
                screen.cursor = cursor
                if text_hash != screen.text_hash or rejudge:
                    screen.verdict = judge.classify(text, program, cursor)
                screen.stability_hash = (screen.pack.fingerprint(text)
                                         if screen.pack.volatile else text_hash)
        except PatternTimeout as exc:
            log.warning("pane %s (%s): %s on its screen; it is UNKNOWN until the screen changes",
                        pane.pane_id, tracked.name, exc)
            screen.verdict = Verdict(
                state=State.UNKNOWN, confidence=0, reasons=("pattern_timeout",),
                rule_id="pattern-timeout", classifier=f"pack:{screen.pack.name}"
                if screen.pack else "pack", summary=f"classification took over "
                f"{CLASSIFY_BUDGET_S:g}s: {exc}"[:200])
            screen.stability_hash = text_hash
        screen.text, screen.text_hash = text, text_hash
        working = screen.pack.working_prompt if screen.pack is not None else None
        screen.prompt_at_rest = working.at_rest(raw) if styled and working is not None else None

    @staticmethod
    def _redrawing(tracked: Tracked, now: float) -> bool:
        """Whether the pane was resized within REDRAW_S: tmux rewraps its lines and the program
        redraws for the new size, a changed screen that says nothing new."""
        screen, size = tracked.screen, (tracked.pane.width, tracked.pane.height)
        if screen.size is not None and size != screen.size:
            screen.resized_at = now
        screen.size = size
        return bool(screen.resized_at) and now - screen.resized_at <= REDRAW_S

    def _choose_pack(self, tracked: Tracked, text: str) -> Pack:
        if tracked.cli_forced and tracked.cli_forced in self.packs:
            return self.packs[tracked.cli_forced]
        pane = tracked.pane
        return detect_pack(self.packs, text, command=pane.current_command, title=pane.title)

    def assess(self, tracked: Tracked, now: float) -> Transition | None:
        """Fold the latest verdict and signals into the pane's assessment; the transition, if
        the reported state changed."""
        pane = tracked.pane
        verdict = tracked.verdict
        if pane.dead:
            verdict = dead_pane_verdict(pane.dead_status, tracked.text)
        if verdict is None or tracked.text_hash is None or tracked.stability_hash is None:
            return None
        pack_verdict = verdict
        if self.llm is not None and not pane.dead:
            verdict = merge(pack_verdict, self.llm.result(tracked.worker_id, tracked.text_hash))
        if tracked.pack is not None and tracked.pack.name not in PLAIN_PACKS:
            # Only an agent waits for its subagents and teammates: a shell left behind by an
            # agent that died mid-subagent, or a person's shell `create` was run from, does not.
            verdict = hold_for_background(verdict, tracked.signals.subagents,
                                          tracked.teammates)
        pack_polls = tracked.pack.stable_polls if tracked.pack else 3
        events = tracked.mode == EVENTS
        policy = self._policies.get((pack_polls, events))
        if policy is None:
            policy = Policy.from_settings(self.settings, pack_polls)
            if events:
                # Control mode reports every byte the pane prints, so a screen is known to be
                # still without counting polls: one look after it went quiet plus
                # ready_min_s of silence make it stable.
                policy = replace(policy, stable_polls=min(policy.stable_polls, 2))
            self._policies[(pack_polls, events)] = policy
        stable_polls = policy.stable_polls
        previous = tracked.assessment
        signals = tracked.signals
        if tracked.pack is not None and tracked.pack.stopped_titles:
            signals = replace(signals, title_stopped=tracked.pack.title_says_stopped(
                tracked.terminal.title, pane.cwd))
        if tracked.screen.prompt_at_rest:
            signals = replace(signals, prompt_at_rest=True)
        tracked.assessment = assess(previous, verdict, tracked.stability_hash, now,
                                    stable_polls, policy=policy, signals=signals,
                                    redrawing=self._redrawing(tracked, now))
        if (self.llm is not None and tracked.pack is not None and not pane.dead
                and tracked.assessment.stable_count >= stable_polls
                and worth_asking(pack_verdict)):
            # Only a settled screen the packs cannot call for sure, once per screen hash.
            self.llm.request(tracked.worker_id, tracked.text_hash, tracked.text,
                             tracked.pack.name, tracked.pack,
                             names=(tracked.name, tracked.worker_id, pane.pane_id,
                                    f"{pane.session_name}:{pane.window_name}"))
        before = previous.state if previous is not None and previous.screen_hash else None
        if previous is not None and previous.state is State.UNKNOWN and \
                previous.reasons[-1:] == ("settling",):
            # Only settling after first sight: nothing was known before, so a start-up is not
            # reported (or notified) as a pane "finishing".
            before = None
        a = tracked.assessment
        if a.state is before or (before is None and a.state is State.UNKNOWN):
            return None
        # What is reported, which may differ from the raw verdict (a READY screen still moving
        # is reported BUSY).
        reported = Verdict(
            state=a.state, confidence=a.confidence, reasons=a.reasons, rule_id=verdict.rule_id,
            summary=a.summary, actions_needed=a.actions_needed, classifier=verdict.classifier,
            matched_lines=verdict.matched_lines,
        )
        lasted = previous.seconds_in_state(now) if previous is not None and before else 0.0
        return Transition(tracked.worker_id, now, before, a.state, reported, lasted)
