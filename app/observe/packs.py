"""Classifier packs: per-CLI YAML files of regex rules; the model and its evaluation live here.

A pack is data (see ``design/classifier_packs/README.md`` for the format), read and validated by
:mod:`app.observe.pack_loading`; :mod:`app.observe.pack_detection` picks the pack for a pane.
Evaluation is pure: it takes the normalised screen text and returns a
:class:`~app.base.model.Verdict` (or, with :meth:`Pack.draft`, the text typed but not sent in the
CLI's input box); it never touches tmux or the store. Rules are evaluated by state in
:data:`EVALUATION_ORDER`, then in file order.
"""

from __future__ import annotations

import functools
import itertools
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from app.base.model import Option, RuleTrace, State, Verdict
from app.base.screen import (
    DEFAULT_COLOUR,
    Cursor,
    first_lines,
    is_grey,
    last_lines,
    normalise,
    screen_hash,
    styled_lines,
)
from app.observe.options import hint, read_options
from app.observe.signals import STOPPED, title_phase

# Neutral screens first (they stop evaluation with UNKNOWN), then what must never be missed.
EVALUATION_ORDER: tuple[State, ...] = (
    State.UNKNOWN,
    State.NEEDS_CONFIRMATION,
    State.BUSY,
    State.ERROR,
    State.READY,
)

DEFAULT_REASON: dict[State, str] = {
    State.UNKNOWN: "neutral_screen",
    State.NEEDS_CONFIRMATION: "confirmation_prompt",
    State.BUSY: "busy_marker",
    State.ERROR: "error_marker",
    State.READY: "prompt_visible",
}

GENERIC_PACK = "generic"
DRAFT_GROUP = "draft"
# The generic layer under every pack may only say NEEDS_CONFIRMATION or BUSY: it can tell that
# something waits or works, never that a CLI it does not know is idle or failed.
LAYER_CONFIDENCE = 60


@dataclass(frozen=True)
class Region:
    """Which part of the screen a condition looks at: all of it, the first/last N non-blank
    lines (terminals pad the bottom with blank lines, which carry nothing), or a part placed
    by one of the pack's anchors: the N non-blank lines ``above`` it, everything ``below`` it,
    the anchor itself (``at``), or ``from`` N lines above it down to the bottom of the screen.
    An anchored region of a screen where its anchor is not found is empty."""

    kind: str = "all"  # "all" | "last" | "first" | "above" | "below" | "at" | "from"
    count: int = 0
    anchor: str = ""

    def select(self, text: str) -> str:
        if self.kind == "last":
            return last_lines(text, self.count)
        if self.kind == "first":
            return first_lines(text, self.count)
        return text

    def select_keeping_blanks(self, text: str) -> str:
        """Like :meth:`select`, but blank lines inside the region stay: an input box is often
        closed by a blank line (Codex puts one between the draft and its status line)."""
        if self.kind == "all":
            return text
        lines = text.split("\n")
        filled = [i for i, line in enumerate(lines) if line.strip()]
        if not filled:
            return ""
        if self.kind == "last":
            return "\n".join(lines[filled[max(0, len(filled) - self.count)]:])
        return "\n".join(lines[: filled[min(len(filled), self.count) - 1] + 1])

    def pick(self, view: ScreenView, keep_blanks: bool = False) -> str:
        """This region of a screen whose anchors ``view`` finds."""
        if not self.anchor:
            return self.select_keeping_blanks(view.text) if keep_blanks else self.select(view.text)
        return view.join(view.rows_of(self), keep_blanks)

    def __str__(self) -> str:
        if self.anchor:
            return f"{self.kind} {self.anchor}" + (f" ({self.count} lines)" if self.count else "")
        return "all" if self.kind == "all" else f"{self.kind} {self.count}"


@dataclass(frozen=True)
class Anchor:
    """A landmark of a CLI's screen found by its structure (its input box, a dialog's option
    block), wherever it sits: the lowest match of ``pattern`` in ``region``. Regions placed by
    it follow it up and down the screen, so a status line or a task list does not move them."""

    name: str
    pattern: re.Pattern[str]
    region: Region
    line: int = 0

    def locate(self, view: ScreenView) -> tuple[int, int] | None:
        """The raw line numbers of the match's first and last line, or None."""
        rows = view.rows_of(self.region)
        area = "\n".join(view.lines[r] for r in rows)
        lowest = None
        for found in self.pattern.finditer(area):
            lowest = found
        if lowest is None:
            return None
        end = lowest.end()
        if end > lowest.start() and area[end - 1] == "\n":
            end -= 1
        return rows[area.count("\n", 0, lowest.start())], rows[area.count("\n", 0, end)]


class ScreenView:
    """One normalised screen as a pack's rules see it: its lines, and its anchors, each looked
    for once and only when a rule asks for it."""

    def __init__(self, text: str, anchors: Mapping[str, Anchor] | None = None) -> None:
        self.text = text
        self.lines = text.split("\n")
        self.filled = [i for i, line in enumerate(self.lines) if line.strip()]
        self._anchors: Mapping[str, Anchor] = anchors or {}
        self._spots: dict[str, tuple[int, int] | None] = {}

    def spot(self, name: str) -> tuple[int, int] | None:
        if name not in self._spots:
            anchor = self._anchors.get(name)
            self._spots[name] = None  # an anchor placed by itself finds nothing
            self._spots[name] = anchor.locate(self) if anchor is not None else None
        return self._spots[name]

    def rows_of(self, region: Region) -> list[int]:
        """The raw line numbers a region covers (all lines for ``all``, else non-blank ones)."""
        if region.kind == "all":
            return list(range(len(self.lines)))
        if region.kind == "last":
            return self.filled[max(0, len(self.filled) - region.count):]
        if region.kind == "first":
            return self.filled[: region.count]
        spot = self.spot(region.anchor)
        if spot is None:
            return []
        top, bottom = spot
        above = [r for r in self.filled if r < top]
        above = above[max(0, len(above) - region.count):] if region.count else []
        inside = [r for r in self.filled if top <= r <= bottom]
        below = [r for r in self.filled if r > bottom]
        return {"above": above, "below": below, "at": inside,
                "from": above + inside + below}[region.kind]

    def join(self, rows: Sequence[int], keep_blanks: bool) -> str:
        if not rows:
            return ""
        if keep_blanks:
            return "\n".join(self.lines[rows[0]: rows[-1] + 1])
        return "\n".join(self.lines[r] for r in rows)


@dataclass(frozen=True)
class Condition:
    pattern: re.Pattern[str]
    region: Region

    def search(self, view: ScreenView) -> re.Match[str] | None:
        return self.pattern.search(self.region.pick(view))


@dataclass(frozen=True)
class Rule:
    id: str
    state: State
    match: tuple[Condition, ...]
    unless: tuple[Condition, ...]
    reason: str
    summary: str
    actions_needed: str
    confidence: int
    line: int
    # Only when a plain program (no pack's own CLI) is in the pane's foreground and its process
    # name matches this in full: `less`, `vim`, `sleep` after a shell prompt.
    program: re.Pattern[str] | None = None
    # Only when the terminal's cursor, read with the screen, is there (CURSOR_PLACES); never on
    # a screen read without it (a file, a capture of someone else's).
    cursor: str | None = None


@dataclass(frozen=True)
class Example:
    name: str
    state: State
    screen: str
    rule: str | None
    line: int
    # ``draft`` is what Pack.draft must return; ``checks_draft`` tells "expects no draft" (null)
    # apart from "says nothing about the draft".
    draft: str | None = None
    checks_draft: bool = False
    program: str = ""
    cursor: Cursor | None = None


@dataclass(frozen=True)
class InputBox:
    """Where a CLI's input box is and how to read the text typed into it but not sent.

    ``match`` patterns are tried in order on the region; the first that matches decides, and its
    ``draft`` group is the box's content (``None`` or blank: the box is empty). ``trim`` patterns
    are deleted from every line of that content (box borders, a sidebar drawn beside the box);
    the lines left are stripped and joined with one space, since a terminal wraps a long draft
    over several lines. A result that ``placeholder`` matches in full is the CLI's hint text in an
    empty box, not something a person typed.
    """

    region: Region
    match: tuple[re.Pattern[str], ...]
    trim: tuple[re.Pattern[str], ...] = ()
    placeholder: tuple[re.Pattern[str], ...] = ()
    line: int = 0
    # Where the cursor is once the line was accepted (CURSOR_PLACES): read with the cursor
    # there, the text is no draft (aider leaves a sent line as drawn, the cursor under it).
    cursor_when_sent: str | None = None

    def visible(self, view: ScreenView) -> bool:
        """Whether the box is on a normalised screen at all (empty or not)."""
        area = self.region.pick(view, keep_blanks=True)
        return any(pattern.search(area) for pattern in self.match)

    def read(self, view: ScreenView) -> str | None:
        """The unsent text in the box of a normalised screen, or None (empty box, hint, no box)."""
        area = self.region.pick(view, keep_blanks=True)
        for pattern in self.match:
            found = pattern.search(area)
            if found is None:
                continue
            content = found.group(DRAFT_GROUP)
            if content is None:
                return None
            typed = " ".join(part for part in (self._trimmed(line) for line in content.split("\n"))
                             if part)
            if not typed or any(p.fullmatch(typed) for p in self.placeholder):
                return None
            return typed
        return None

    def _trimmed(self, line: str) -> str:
        for pattern in self.trim:
            line = pattern.sub("", line)
        return line.strip()


_MATCHED_KEPT = 1024


def command_name(command: str) -> str:
    """The last part of a process name or path (``/usr/bin/node`` -> ``node``)."""
    return "" if command.strip() in (".", "") else command.strip().rstrip("/").rpartition("/")[2]


@dataclass(frozen=True)
class Detect:
    """How a pane is recognised as running this pack's CLI.

    ``weak`` marks packs whose process names say little about what is on screen (a shell may be
    the parent of a wrapper script that runs an agent): their command match yields to another
    pack's screen marks found nearer the bottom of the screen.
    """

    commands: frozenset[str] = frozenset()
    command_patterns: tuple[re.Pattern[str], ...] = ()
    titles: tuple[re.Pattern[str], ...] = ()
    screen: tuple[re.Pattern[str], ...] = ()
    weak: bool = False
    # Answers already given: a process name matches or not for the life of the pack, and the
    # watcher asks for every pane on every capture.
    _matched: dict[str, bool] = field(default_factory=dict, compare=False, hash=False,
                                      repr=False)

    def matches_command(self, name: str) -> bool:
        known = self._matched.get(name)
        if known is None:
            base = command_name(name)
            known = bool(base) and (base in self.commands
                                    or any(p.fullmatch(base) for p in self.command_patterns))
            if len(self._matched) < _MATCHED_KEPT:
                self._matched[name] = known
        return known

    def screen_position(self, text: str) -> int:
        """Where this pack's marks end lowest on the screen (-1: none). Live marks sit at the
        bottom; scrollback from an agent that has since exited sits above the shell prompt."""
        best = -1
        for pattern in self.screen:
            for found in pattern.finditer(text):
                best = max(best, found.end())
        return best


# Where a rule's ``cursor`` key may ask the terminal's cursor to be: on the screen's last
# non-blank line (a line editor taking input there), or on a row below it (the line was accepted).
CURSOR_PLACES = ("on_last_line", "below_last_line")


def cursor_place(text: str, cursor: Cursor | None) -> str | None:
    """Where ``cursor`` is against a normalised screen (rows from the top; its trailing blank
    lines dropped): one of CURSOR_PLACES, "above_last_line", or None when it is not known."""
    if cursor is None:
        return None
    last = text.count("\n")
    if cursor.y == last:
        return CURSOR_PLACES[0]
    return CURSOR_PLACES[1] if cursor.y > last else "above_last_line"


@dataclass(frozen=True)
class WorkingPrompt:
    """The input box's prompt glyph as a witness of the turn: some CLIs draw it in a dim colour
    exactly while a turn runs, where the plain text of a paused reply and a finished one is the
    same (Claude Code, design/release_sweep.md). Read on a ``capture-pane -e`` screen only."""

    rule: re.Pattern[str]  # the line right above the glyph's: the box's top rule
    glyph: re.Pattern[str]  # matched at the start of the box's first line; its last character

    def at_rest(self, styled: str) -> bool | None:
        """Whether the lowest box's glyph is drawn at rest: not dim, in the terminal's default
        colour or the rule's own where that is a hue (bash mode's magenta box). None when no
        box is on screen, or its rule has no colour: a terminal without colours shows neither.

        A dim colour is a grey in every theme measured, so a glyph in the rule's colour counts
        only when that colour is not a grey: a theme not measured errs to "at work"."""
        found: bool | None = None
        for above, line in itertools.pairwise(styled_lines(styled)):
            glyph = self.glyph.match("".join(cell.char for cell in line))
            if glyph is None or not glyph.end() \
                    or self.rule.match("".join(cell.char for cell in above)) is None:
                continue
            cell = line[glyph.end() - 1]
            rule_colour = next((c.colour for c in above if not c.char.isspace()), DEFAULT_COLOUR)
            if rule_colour == DEFAULT_COLOUR:
                found = None
                continue
            found = not cell.dim and (cell.colour == DEFAULT_COLOUR
                                      or (cell.colour == rule_colour and not is_grey(rule_colour)))
        return found


@dataclass(frozen=True)
class Pack:
    name: str
    path: str
    description: str
    detect: Detect
    stable_polls: int
    rules: tuple[Rule, ...]
    examples: tuple[Example, ...] = field(default=(), compare=False)
    # Parts of an idle screen that change by themselves (a hint that fades after a turn, a clock):
    # blanked before hashing so they do not hold READY back.
    volatile: tuple[re.Pattern[str], ...] = ()
    # Parts placed by anchors that change by themselves (a status line with a clock under the
    # box): their lines are left out of the fingerprint.
    volatile_regions: tuple[Region, ...] = ()
    input: InputBox | None = None
    # The generic pack, whose NEEDS_CONFIRMATION and BUSY rules run beneath this pack's (see
    # _ordered): dialogs a CLI's pack has not learned yet (set by load_packs).
    layer: Pack | None = field(default=None, compare=False, repr=False)
    # The CLI releases whose real screens the pack was measured on (documentation, not a gate).
    checked_versions: tuple[str, ...] = field(default=(), compare=False)
    # What starts a fresh conversation in this CLI (`/clear`), for `dispatch --clear`.
    clear_command: str = ""
    # Landmarks found by structure (the input box), by name, for regions placed by them.
    anchors: Mapping[str, Anchor] = field(default_factory=dict, compare=False)
    # The titles this CLI gives its pane when it is not working (regex templates; ``{project}``
    # stands for the pane's folder name): with them a still reply with no end mark is finished.
    stopped_titles: tuple[str, ...] = field(default=(), compare=False)
    # The box's prompt glyph that is dim while a turn runs (None: this CLI draws no such sign).
    working_prompt: WorkingPrompt | None = field(default=None, compare=False)

    def title_says_stopped(self, title: str, cwd: str) -> bool:
        """Whether ``title`` is this CLI's own title for "not working" in a pane whose current
        folder is ``cwd``. Never for an empty title, tmux's default (the host name) or a title
        with a spinner frame or a question; a ``{project}`` template never matches when the
        folder is unknown or the file system's root."""
        title = title.strip()
        if not title or not self.stopped_titles or len(title) > _TITLE_MAX \
                or title_phase(title) != STOPPED or title in _host_names():
            return False
        project = cwd.rstrip("/").rpartition("/")[2]
        for template in self.stopped_titles:
            found = _title_pattern(template).search(title)
            if found is None:
                continue
            named = found.groupdict().get("project")
            if named is None or _same_project(named, project):
                return True
        return False

    def draft(self, screen: str, cursor: Cursor | None = None) -> str | None:
        """Text typed into the CLI's input box but not sent yet (stripped, wrapped lines joined).

        None when the box is empty or shows only the CLI's hint text, when no box is on screen (a
        dialog has replaced it), when the cursor read with the screen says the line was accepted
        (``InputBox.cursor_when_sent``), and when the pack has no ``input`` rule: then nobody
        can tell, and callers that must not type over a person's draft have to say so.
        """
        if self.input is None:
            return None
        text = normalise(screen)
        sent = self.input.cursor_when_sent
        if sent is not None and cursor_place(text, cursor) == sent:
            return None
        return self.input.read(ScreenView(text, self.anchors))

    def input_visible(self, screen: str) -> bool | None:
        """Whether the input box is on screen; None when the pack has no ``input`` rule."""
        if self.input is None:
            return None
        return self.input.visible(ScreenView(normalise(screen), self.anchors))

    def fingerprint(self, screen: str) -> str:
        """Hash of the screen for the stability check, with this pack's volatile parts blanked.

        The watcher compares fingerprints of consecutive polls; use this instead of hashing the
        raw screen so READY is not delayed by text that changes on its own.
        """
        text = normalise(screen)
        if self.volatile_regions:
            view = ScreenView(text, self.anchors)
            drop = {row for region in self.volatile_regions for row in view.rows_of(region)}
            text = "\n".join(line for i, line in enumerate(view.lines) if i not in drop)
        for pattern in self.volatile:
            text = pattern.sub("", text)
        return screen_hash(text)

    def classify(self, screen: str, program: str = "", cursor: Cursor | None = None) -> Verdict:
        """Classify a screen (raw or normalised) with this pack's rules.

        ``program`` is the pane's foreground process when it is a plain program that no pack's
        CLI claims (``less``, ``sleep``), else empty; rules with a ``program`` key need it.
        ``cursor`` is the terminal's cursor read with the screen; rules with a ``cursor`` key
        need it.
        """
        return self.explain(screen, program, cursor)[0]

    @functools.cached_property
    def reads_cursor(self) -> bool:
        """Whether a rule of this pack looks at the cursor (a moved cursor is news)."""
        return any(rule.cursor is not None for rule in self.rules)

    def explain(self, screen: str, program: str = "",
                cursor: Cursor | None = None) -> tuple[Verdict, list[RuleTrace]]:
        text = normalise(screen)
        place = cursor_place(text, cursor)
        view = ScreenView(text, self.anchors)
        # The layer's rules place their regions by the layer's own anchors.
        layer_view = ScreenView(text, self.layer.anchors) if self.layer is not None else view
        traces: list[RuleTrace] = []
        for rule, layered in self._ordered():
            verdict, trace = self._try(rule, layer_view if layered else view, program, place)
            if layered:
                trace = replace(trace, rule_id=f"{GENERIC_PACK}:{trace.rule_id}")
            traces.append(trace)
            if verdict is None:
                continue
            if layered:
                verdict = replace(
                    verdict, rule_id=trace.rule_id,
                    confidence=min(verdict.confidence, LAYER_CONFIDENCE),
                    reasons=(*verdict.reasons, "generic_layer"),
                    classifier=f"pack:{self.name}+{GENERIC_PACK}",
                )
            return verdict, traces
        # Say what is on screen even when nothing is recognised: a person scanning the table
        # learns more from "less" than from a blank.
        return (
            Verdict(
                state=State.UNKNOWN,
                confidence=20,
                reasons=("no_rule_matched",),
                classifier=f"pack:{self.name}",
                summary=f"{program or self.name}: screen not recognised",
                tried=tuple(t.rule_id for t in traces),
            ),
            traces,
        )

    def _ordered(self) -> list[tuple[Rule, bool]]:
        """This pack's rules, with the generic layer's (flagged True) slotted in: its dialogs
        right after the pack's own, before anything could call the screen busy or idle (a
        missed question costs more than a wrong one); its busy marks only after all of the
        pack's rules failed."""
        own = [(r, False) for r in self.rules]
        if self.layer is None:
            return own
        asks = [(r, True) for r in self.layer.rules if r.state is State.NEEDS_CONFIRMATION]
        works = [(r, True) for r in self.layer.rules if r.state is State.BUSY]
        cut = next((i for i, (r, _) in enumerate(own)
                    if r.state not in (State.UNKNOWN, State.NEEDS_CONFIRMATION)), len(own))
        return own[:cut] + asks + own[cut:] + works

    def _try(self, rule: Rule, view: ScreenView, program: str = "",
             place: str | None = None) -> tuple[Verdict | None, RuleTrace]:
        text = view.text
        if rule.program is not None and not (program and rule.program.fullmatch(program)):
            detail = f"needs a foreground program matching /{rule.program.pattern}/"
            return None, RuleTrace(rule.id, rule.state, False, detail)
        if rule.cursor is not None and place != rule.cursor:
            detail = f"needs the cursor {rule.cursor} (it is {place or 'not known'})"
            return None, RuleTrace(rule.id, rule.state, False, detail)
        groups: dict[str, str] = {}
        lines: list[str] = []
        for condition in rule.match:
            found = condition.search(view)
            if found is None:
                detail = f"no match for /{condition.pattern.pattern}/ in {condition.region}"
                return None, RuleTrace(rule.id, rule.state, False, detail)
            groups.update({k: _tidy(v) for k, v in found.groupdict().items() if v is not None})
            lines.append(_line_at(found))
        for condition in rule.unless:
            vetoed = condition.search(view)
            if vetoed is not None:
                detail = f"vetoed by /{condition.pattern.pattern}/: {_line_at(vetoed).strip()}"
                return None, RuleTrace(rule.id, rule.state, False, detail)
        groups.setdefault("line", _tidy(lines[0]) if lines else "")
        groups["program"] = program
        options: tuple[Option, ...] = ()
        if rule.state is State.NEEDS_CONFIRMATION:
            dialog = read_options(text)
            options = dialog.options if dialog is not None else ()
            groups["options"] = hint(dialog)
        verdict = Verdict(
            state=rule.state,
            confidence=rule.confidence,
            reasons=(rule.reason,),
            rule_id=rule.id,
            summary=_fill(rule.summary, groups),
            actions_needed=_fill(rule.actions_needed, groups),
            classifier=f"pack:{self.name}",
            matched_lines=tuple(line.strip() for line in lines),
            options=options,
        )
        return verdict, RuleTrace(rule.id, rule.state, True, "; ".join(verdict.matched_lines))


# Some TUIs leave a stray border cell far right of an old line (Claude Code 2.1.330): not part
# of a captured command or question.
_STRAY_BORDER_RE = re.compile(r"\s{2,}[│┃]\s*$")


def _tidy(value: str) -> str:
    return _STRAY_BORDER_RE.sub("", value).strip()


def _line_at(found: re.Match[str]) -> str:
    text = found.string
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.end())
    return text[start : end if end >= 0 else len(text)]


class _Blank(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return ""


def _fill(template: str, groups: Mapping[str, str]) -> str:
    if not template:
        return ""
    return " ".join(template.format_map(_Blank(groups)).split())



PROJECT_FIELD = "{project}"
_TITLE_MAX = 300  # a title longer than this is no CLI's status: not read


_SHORTENED = ("...", "…")  # how a CLI cuts a long folder name short in its title (Codex: "...")
_SHORTEST_CUT = 8  # fewer characters of the name than this prove nothing


@functools.lru_cache(maxsize=64)
def _title_pattern(template: str) -> re.Pattern[str]:
    return re.compile(template.replace(PROJECT_FIELD, "(?P<project>[^\n]+?)", 1))


def _same_project(named: str, project: str) -> bool:
    """The title names the folder: in full, or its start cut short with an ellipsis
    (``proj-status-line-colo...`` for ``proj-status-line-colour-vim``)."""
    if not project:
        return False
    if named == project:
        return True
    for mark in _SHORTENED:
        if named.endswith(mark):
            start = named[:-len(mark)]
            return len(start) >= min(len(project), _SHORTEST_CUT) and project.startswith(start) \
                and start != project
    return False


@functools.lru_cache(maxsize=1)
def _host_names() -> frozenset[str]:
    """tmux titles a pane with the host name until a program sets one (both forms)."""
    full = socket.gethostname()
    return frozenset({full, full.partition(".")[0]})
