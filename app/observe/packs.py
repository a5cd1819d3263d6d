"""Classifier packs: per-CLI YAML files of regex rules, loaded, validated and evaluated here.

A pack is data (see ``design/classifier_packs/README.md`` for the format). Evaluation is pure: it
takes the normalised screen text and returns a :class:`~app.base.model.Verdict` (or, with
:meth:`Pack.draft`, the text typed but not sent in the CLI's input box); it never touches tmux or
the store. Rules are evaluated by state in :data:`EVALUATION_ORDER`, then in file order.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import string
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import regex
import yaml

from app.base.errors import ConductorError, PackError
from app.base.model import SCREEN_STATES, Option, RuleTrace, State, Verdict
from app.base.screen import first_lines, last_lines, normalise, screen_hash
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

DEFAULT_STABLE_POLLS = 3
GENERIC_PACK = "generic"
_LINE_KEY = "__line__"

_PACK_KEYS = {"name", "description", "detect", "stable_polls", "volatile", "input", "rules",
              "anchors", "examples", "checked_versions", "clear_command", "stopped_titles"}
_DETECT_KEYS = {"commands", "command_patterns", "titles", "screen", "weak"}
_RULE_KEYS = {"id", "state", "region", "match", "unless", "reason", "summary", "actions_needed",
              "confidence", "description", "program"}
_CONDITION_KEYS = {"pattern", "region"}
_EXAMPLE_KEYS = {"name", "state", "screen", "rule", "draft", "program"}
_INPUT_KEYS = {"region", "match", "trim", "placeholder"}
_ANCHOR_KEYS = {"pattern", "region"}
_DRAFT_GROUP = "draft"
# Template fields every rule may use besides its own named groups: the first matched line, the
# hint computed from the dialog's options on screen, the plain program in the foreground.
_BUILTIN_FIELDS = frozenset({"line", "options", "program"})
# The generic layer under every pack may only say NEEDS_CONFIRMATION or BUSY: it can tell that
# something waits or works, never that a CLI it does not know is idle or failed.
LAYER_CONFIDENCE = 60


# libyaml's parser when PyYAML was built with it: every CLI command loads all packs, and the
# pure-Python scanner alone took ~80 ms of a `wait` that should answer at once.
try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]


class _LineLoader(_SafeLoader):
    """Records the 1-based source line of every mapping, so errors can point at it."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep=deep)
        mapping[_LINE_KEY] = node.start_mark.line + 1
        return mapping


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
            content = found.group(_DRAFT_GROUP)
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

    def draft(self, screen: str) -> str | None:
        """Text typed into the CLI's input box but not sent yet (stripped, wrapped lines joined).

        None when the box is empty or shows only the CLI's hint text, when no box is on screen (a
        dialog has replaced it), and when the pack has no ``input`` rule: then nobody can tell,
        and callers that must not type over a person's draft have to say so.
        """
        if self.input is None:
            return None
        return self.input.read(ScreenView(normalise(screen), self.anchors))

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

    def classify(self, screen: str, program: str = "") -> Verdict:
        """Classify a screen (raw or normalised) with this pack's rules.

        ``program`` is the pane's foreground process when it is a plain program that no pack's
        CLI claims (``less``, ``sleep``), else empty; rules with a ``program`` key need it.
        """
        return self.explain(screen, program)[0]

    def explain(self, screen: str, program: str = "") -> tuple[Verdict, list[RuleTrace]]:
        text = normalise(screen)
        view = ScreenView(text, self.anchors)
        # The layer's rules place their regions by the layer's own anchors.
        layer_view = ScreenView(text, self.layer.anchors) if self.layer is not None else view
        traces: list[RuleTrace] = []
        for rule, layered in self._ordered():
            verdict, trace = self._try(rule, layer_view if layered else view, program)
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

    def _try(self, rule: Rule, view: ScreenView,
             program: str = "") -> tuple[Verdict | None, RuleTrace]:
        text = view.text
        if rule.program is not None and not (program and rule.program.fullmatch(program)):
            detail = f"needs a foreground program matching /{rule.program.pattern}/"
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


# --- loading -------------------------------------------------------------------------------------


def packs_dirs() -> list[Path]:
    """Where packs are looked up, later folders overriding earlier ones by pack name.

    The shipped packs sit in the installed package (``app/classifier_packs``) or, in a source
    checkout, in ``design/classifier_packs``; ``CONDUCTOR_PACKS_DIR`` (``os.pathsep``-separated)
    adds the user's own.
    """
    here = Path(__file__).resolve().parent.parent
    dirs: list[Path] = []
    for shipped in (here / "classifier_packs", here.parent / "design" / "classifier_packs"):
        if shipped.is_dir() and any(shipped.glob("*.yml")):
            dirs.append(shipped)
            break
    extra = os.environ.get("CONDUCTOR_PACKS_DIR", "")
    dirs.extend(Path(p).expanduser() for p in extra.split(os.pathsep) if p)
    return dirs


def load_packs(dirs: Sequence[Path] | None = None) -> dict[str, Pack]:
    """Load every ``*.yml`` pack; raise :class:`PackError` on the first bad one."""
    packs: dict[str, Pack] = {}
    for folder in packs_dirs() if dirs is None else dirs:
        if not folder.is_dir():
            raise PackError(str(folder), None, "packs folder does not exist")
        for path in sorted(folder.glob("*.yml")):
            pack = load_pack(path)
            packs[pack.name] = pack
    if not packs:
        raise PackError(", ".join(str(d) for d in (dirs or [])) or "(none)", None,
                        "no classifier packs found")
    return with_generic_layer(packs)


def with_generic_layer(packs: Mapping[str, Pack]) -> dict[str, Pack]:
    """Every pack but the generic one gets the generic pack's dialog and busy rules beneath its
    own (see :attr:`Pack.layer`)."""
    generic = packs.get(GENERIC_PACK)
    return {name: replace(pack, layer=generic) if generic is not None and name != GENERIC_PACK
            else pack for name, pack in packs.items()}


def load_pack(path: Path) -> Pack:
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PackError(where, None, f"cannot read: {exc}") from exc
    return parse_pack(text, where)


def load_yaml(text: str, where: str, error: type[PackError] = PackError) -> Any:
    """Safe YAML (no object tags) with every mapping's source line under ``_LINE_KEY``; broken
    YAML raises ``error`` naming the file and line. Packs and herd rule sets share it."""
    try:
        return yaml.load(text, Loader=_LineLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(where, line, f"invalid YAML: {problem}") from None


def parse_pack(text: str, where: str) -> Pack:
    data = load_yaml(text, where)
    if not isinstance(data, dict):
        raise PackError(where, 1, "a pack must be a mapping with 'name' and 'rules'")
    _check_keys(data, _PACK_KEYS, where, "pack")
    top = _line(data)

    name = data.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
        raise PackError(where, top, "'name' must be a lowercase word such as 'claude'")
    stable_polls = data.get("stable_polls", DEFAULT_STABLE_POLLS)
    if not isinstance(stable_polls, int) or isinstance(stable_polls, bool) or stable_polls < 1:
        raise PackError(where, top, "'stable_polls' must be a whole number of at least 1")
    checked = data.get("checked_versions", [])
    if not isinstance(checked, list) or not all(isinstance(v, str) for v in checked):
        raise PackError(where, top, "'checked_versions' must be a list of quoted version strings")

    raw_rules = data.get("rules")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise PackError(where, top, "'rules' must be a non-empty list")
    anchors = _parse_anchors(data.get("anchors"), where, top)
    rules = [_parse_rule(raw, where, top, anchors) for raw in raw_rules]
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise PackError(where, rule.line, f"rule '{rule.id}': duplicate rule id")
        seen.add(rule.id)
    ordered = tuple(r for state in EVALUATION_ORDER for r in rules if r.state is state)

    pack = Pack(
        name=name,
        path=where,
        description=str(data.get("description", "")),
        detect=_parse_detect(data.get("detect", {}), where, top),
        stable_polls=stable_polls,
        rules=ordered,
        volatile=_parse_volatile(data.get("volatile"), where, top),
        volatile_regions=_parse_volatile_regions(data.get("volatile"), where, top, anchors),
        input=_parse_input(data.get("input"), where, top, anchors),
        anchors=anchors,
        examples=tuple(_parse_example(raw, where, top) for raw in data.get("examples") or []),
        checked_versions=tuple(checked),
        clear_command=_parse_clear(data.get("clear_command", ""), where, top),
        stopped_titles=_parse_stopped_titles(data.get("stopped_titles"), where, top),
    )
    _check_examples(pack)
    return pack


def _line(raw: Any, fallback: int | None = None) -> int | None:
    if isinstance(raw, dict):
        value = raw.get(_LINE_KEY)
        if isinstance(value, int):
            return value
    return fallback


_PROJECT = "{project}"
_TITLE_MAX = 300  # a title longer than this is no CLI's status: not read


_SHORTENED = ("...", "…")  # how a CLI cuts a long folder name short in its title (Codex: "...")
_SHORTEST_CUT = 8  # fewer characters of the name than this prove nothing


@functools.lru_cache(maxsize=64)
def _title_pattern(template: str) -> re.Pattern[str]:
    return re.compile(template.replace(_PROJECT, "(?P<project>[^\n]+?)", 1))


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


def _parse_stopped_titles(raw: Any, where: str, top: int | None) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(t, str) and t for t in raw):
        raise PackError(where, top, "'stopped_titles' must be a list of regexes")
    for template in raw:
        try:
            re.compile(template.replace(_PROJECT, "(?P<project>x)", 1))
        except re.error as exc:
            raise PackError(where, top, f"stopped_titles: invalid regex /{template}/: {exc}") \
                from None
    return tuple(raw)


def _parse_clear(raw: Any, where: str, top: int | None) -> str:
    if not isinstance(raw, str) or "\n" in raw:
        raise PackError(where, top, "'clear_command' must be one line of text, e.g. /clear")
    return raw.strip()


def _check_keys(raw: dict[str, Any], allowed: set[str], where: str, what: str,
                line: int | None = None, error: type[PackError] = PackError) -> None:
    """Unknown keys are an error at the mapping's own line (else ``line``); herd rules share it."""
    unknown = sorted(str(k) for k in raw if k not in allowed and k != _LINE_KEY)
    if unknown:
        raise error(where, _line(raw, line), f"{what}: unknown key(s) {', '.join(unknown)}; "
                    f"allowed: {', '.join(sorted(allowed))}")


def _parse_state(value: Any, where: str, line: int | None, what: str) -> State:
    try:
        state = State(str(value))
        if state not in SCREEN_STATES:
            raise ValueError(state)
        return state
    except ValueError:
        names = ", ".join(s.value for s in SCREEN_STATES)
        raise PackError(where, line,
                        f"{what}: unknown state {value!r}; use one of {names}") from None


_ANCHORED_KINDS = ("above", "below", "at", "from")


def _parse_region(value: Any, where: str, line: int | None, what: str,
                  anchors: Collection[str] = ()) -> Region:
    if value is None or value == "all":
        return Region()
    if isinstance(value, dict):
        keys = sorted(k for k in value if k != _LINE_KEY)
        if len(keys) == 1 and keys[0] in ("last", "first"):
            count = value[keys[0]]
            if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                return Region(keys[0], count)
        kinds = [k for k in keys if k in _ANCHORED_KINDS]
        if len(kinds) == 1 and set(keys) <= {kinds[0], "lines"}:
            return _anchored_region(value, kinds[0], where, line, what, anchors)
    raise PackError(where, line, f"{what}: region must be 'all', {{last: N}}, {{first: N}} or "
                    f"placed by an anchor ({{above: NAME, lines: N}}, {{below: NAME}}, "
                    f"{{at: NAME}}, {{from: NAME, lines: N}}), got {value!r}")


def _anchored_region(value: dict[str, Any], kind: str, where: str, line: int | None, what: str,
                     anchors: Collection[str]) -> Region:
    name = value[kind]
    if not isinstance(name, str) or name not in anchors:
        known = ", ".join(sorted(anchors)) or "none defined before this point"
        raise PackError(where, line, f"{what}: region {kind}: unknown anchor {name!r} "
                        f"(anchors: {known})")
    count = value.get("lines", 0)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise PackError(where, line, f"{what}: region lines must be a whole number")
    if kind == "above" and count == 0:
        raise PackError(where, line, f"{what}: region above: needs lines: N (how many)")
    if kind in ("below", "at") and count:
        raise PackError(where, line, f"{what}: region {kind}: takes no lines")
    return Region(kind, count, name)


def _parse_anchors(raw: Any, where: str, top: int | None) -> dict[str, Anchor]:
    """Anchors in file order; each may be placed by the ones before it."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise PackError(where, top, "'anchors' must be a mapping of names to {pattern, region}")
    anchors: dict[str, Anchor] = {}
    for name, spec in raw.items():
        if name == _LINE_KEY:
            continue
        what = f"anchor '{name}'"
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise PackError(where, top, f"{what}: names are lowercase words")
        if not isinstance(spec, dict):
            raise PackError(where, top, f"{what}: must be a mapping with 'pattern'")
        _check_keys(spec, _ANCHOR_KEYS, where, what)
        line = _line(spec, top)
        anchors[name] = Anchor(
            name=name,
            pattern=_compile(spec.get("pattern"), where, line, what),
            region=_parse_region(spec.get("region"), where, line, what, anchors),
            line=line or 0,
        )
    return anchors


# A user's pack may hold a pattern that backtracks for hours on some screen (``(a|aa)+$``).
# Patterns therefore run on the ``regex`` engine, whose matching takes a timeout: every search
# gets what is left of the budget of the classification it belongs to (see ``time_limit``), or
# DEFAULT_MATCH_TIMEOUT_S outside one. Its V0 syntax is the ``re`` syntax the packs are written in.
DEFAULT_MATCH_TIMEOUT_S = 1.0
_budget = threading.local()


class PatternTimeout(ConductorError):
    """A pack pattern ran past its time budget on a screen."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Every pattern searched inside shares one budget of ``seconds`` (per thread)."""
    outer = getattr(_budget, "deadline", None)
    _budget.deadline = time.monotonic() + seconds
    try:
        yield
    finally:
        _budget.deadline = outer


class _BoundedPattern:
    """The part of ``re.Pattern``'s interface the packs use, with every match bounded in time."""

    __slots__ = ("_compiled", "groupindex", "pattern")

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled
        self.pattern: str = compiled.pattern
        self.groupindex: Mapping[str, int] = compiled.groupindex

    def _timeout(self) -> float:
        deadline: float | None = getattr(_budget, "deadline", None)
        if deadline is None:
            return DEFAULT_MATCH_TIMEOUT_S
        return max(0.001, deadline - time.monotonic())

    def _run(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._compiled, method)(*args, timeout=self._timeout())
        except TimeoutError:
            raise PatternTimeout(f"pattern /{self.pattern}/ ran out of time") from None

    def search(self, text: str) -> Any:
        return self._run("search", text)

    def fullmatch(self, text: str) -> Any:
        return self._run("fullmatch", text)

    def finditer(self, text: str) -> Any:
        # Materialised here: the timeout covers the whole scan, not only the first match.
        try:
            return iter(list(self._compiled.finditer(text, timeout=self._timeout())))
        except TimeoutError:
            raise PatternTimeout(f"pattern /{self.pattern}/ ran out of time") from None

    def sub(self, replacement: str, text: str) -> Any:
        return self._run("sub", replacement, text)


def _compile(pattern: Any, where: str, line: int | None, what: str) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise PackError(where, line, f"{what}: pattern must be a non-empty string")
    try:
        re.compile(pattern, re.MULTILINE)  # the documented syntax, and its error messages
        compiled = regex.compile(pattern, regex.MULTILINE | regex.VERSION0)
    except (re.error, regex.error) as exc:
        raise PackError(where, line, f"{what}: invalid regex /{pattern}/: {exc}") from None
    # Typed as re.Pattern so the rest of the module reads as plain ``re`` code; it offers the
    # methods used here (search, fullmatch, finditer, sub, pattern, groupindex).
    return cast("re.Pattern[str]", _BoundedPattern(compiled))


def _parse_conditions(raw: Any, region: Region, where: str, line: int | None,
                      what: str, anchors: Collection[str] = ()) -> tuple[Condition, ...]:
    if raw is None:
        return ()
    items = raw if isinstance(raw, list) else [raw]
    conditions: list[Condition] = []
    for item in items:
        if isinstance(item, dict):
            _check_keys(item, _CONDITION_KEYS, where, what)
            item_line = _line(item, line)
            conditions.append(Condition(
                _compile(item.get("pattern"), where, item_line, what),
                _parse_region(item.get("region", None), where, item_line, what, anchors)
                if "region" in item else region,
            ))
        else:
            conditions.append(Condition(_compile(item, where, line, what), region))
    return tuple(conditions)


def _parse_rule(raw: Any, where: str, top: int | None,
                anchors: Collection[str] = ()) -> Rule:
    if not isinstance(raw, dict):
        raise PackError(where, top, f"each rule must be a mapping, got {raw!r}")
    line = _line(raw, top)
    rule_id = raw.get("id")
    if not isinstance(rule_id, str) or not rule_id:
        raise PackError(where, line, "rule without an 'id'")
    what = f"rule '{rule_id}'"
    _check_keys(raw, _RULE_KEYS, where, what)
    state = _parse_state(raw.get("state"), where, line, what)
    region = _parse_region(raw.get("region"), where, line, what, anchors)
    match = _parse_conditions(raw.get("match"), region, where, line, f"{what} match", anchors)
    if not match:
        raise PackError(where, line, f"{what}: 'match' is required")
    unless = _parse_conditions(raw.get("unless"), region, where, line, f"{what} unless",
                               anchors)
    confidence = raw.get("confidence", 90)
    if not isinstance(confidence, int) or not 0 <= confidence <= 100:
        raise PackError(where, line, f"{what}: confidence must be 0-100")
    groups = {name for c in match for name in c.pattern.groupindex} | _BUILTIN_FIELDS
    for key in ("summary", "actions_needed"):
        template = str(raw.get(key, "") or "")
        for _, field_name, _, _ in string.Formatter().parse(template):
            if field_name is not None and field_name not in groups:
                raise PackError(where, line, f"{what}: {key} uses {{{field_name}}}, which no "
                                f"match pattern captures (named groups: {sorted(groups)})")
    return Rule(
        id=rule_id,
        state=state,
        match=match,
        unless=unless,
        reason=str(raw.get("reason") or DEFAULT_REASON[state]),
        summary=str(raw.get("summary", "") or ""),
        actions_needed=str(raw.get("actions_needed", "") or ""),
        confidence=confidence,
        line=line or 0,
        program=_compile(raw["program"], where, line, f"{what} program")
        if "program" in raw else None,
    )


def _parse_detect(raw: Any, where: str, top: int | None) -> Detect:
    if not isinstance(raw, dict):
        raise PackError(where, top, "'detect' must be a mapping")
    _check_keys(raw, _DETECT_KEYS, where, "detect")
    line = _line(raw, top)
    commands = raw.get("commands") or []
    if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands):
        raise PackError(where, line, "detect.commands must be a list of process names")
    weak = raw.get("weak", False)
    if not isinstance(weak, bool):
        raise PackError(where, line, "detect.weak must be true or false")

    def patterns(key: str) -> tuple[re.Pattern[str], ...]:
        items = raw.get(key) or []
        if not isinstance(items, list):
            raise PackError(where, line, f"detect.{key} must be a list of regexes")
        return tuple(_compile(p, where, line, f"detect.{key}") for p in items)

    return Detect(
        commands=frozenset(commands),
        command_patterns=patterns("command_patterns"),
        titles=patterns("titles"),
        screen=patterns("screen"),
        weak=weak,
    )


def _parse_volatile(raw: Any, where: str, top: int | None) -> tuple[re.Pattern[str], ...]:
    """The regexes of ``volatile``; its ``{region: …}`` items are read by the function below."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PackError(where, top, "'volatile' must be a list of regexes or {region: …}")
    return tuple(_compile(p, where, top, "volatile") for p in raw if not isinstance(p, dict))


def _parse_volatile_regions(raw: Any, where: str, top: int | None,
                            anchors: Collection[str]) -> tuple[Region, ...]:
    regions: list[Region] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict):
            _check_keys(item, {"region"}, where, "volatile")
            regions.append(_parse_region(item.get("region"), where, _line(item, top),
                                         "volatile", anchors))
    return tuple(regions)


def _parse_input(raw: Any, where: str, top: int | None,
                 anchors: Collection[str] = ()) -> InputBox | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise PackError(where, top, "'input' must be a mapping with 'match'")
    _check_keys(raw, _INPUT_KEYS, where, "input")
    line = _line(raw, top)

    def patterns(key: str) -> tuple[re.Pattern[str], ...]:
        items = raw.get(key)
        if items is None:
            return ()
        return tuple(_compile(p, where, line, f"input.{key}")
                     for p in (items if isinstance(items, list) else [items]))

    match = patterns("match")
    if not match:
        raise PackError(where, line, "input: 'match' is required")
    for pattern in match:
        if _DRAFT_GROUP not in pattern.groupindex:
            raise PackError(where, line, f"input.match: /{pattern.pattern}/ has no "
                            f"(?P<{_DRAFT_GROUP}>…) group for the typed text")
    return InputBox(
        region=_parse_region(raw.get("region"), where, line, "input", anchors),
        match=match,
        trim=patterns("trim"),
        placeholder=patterns("placeholder"),
        line=line or 0,
    )


def _parse_example(raw: Any, where: str, top: int | None) -> Example:
    if not isinstance(raw, dict):
        raise PackError(where, top, "each example must be a mapping with 'state' and 'screen'")
    line = _line(raw, top) or 0
    name = str(raw.get("name") or f"line {line}")
    _check_keys(raw, _EXAMPLE_KEYS, where, f"example '{name}'")
    screen = raw.get("screen")
    if not isinstance(screen, str) or not screen.strip():
        raise PackError(where, line, f"example '{name}': 'screen' must be non-empty text")
    rule = raw.get("rule")
    draft = raw.get("draft")
    if draft is not None and not isinstance(draft, str):
        raise PackError(where, line, f"example '{name}': 'draft' must be text or null")
    return Example(
        name=name,
        state=_parse_state(raw.get("state"), where, line, f"example '{name}'"),
        screen=screen,
        rule=str(rule) if rule is not None else None,
        line=line,
        draft=draft,
        checks_draft="draft" in raw,
        program=str(raw.get("program") or ""),
    )


def _check_examples(pack: Pack) -> None:
    """A pack whose own examples fail is rejected, so a broken rule never reaches the daemon."""
    rule_ids = {r.id for r in pack.rules}
    for example in pack.examples:
        if example.rule is not None and example.rule not in rule_ids:
            raise PackError(pack.path, example.line,
                            f"example '{example.name}' names unknown rule '{example.rule}'")
        verdict = pack.classify(example.screen, example.program)
        if verdict.state is not example.state or (
            example.rule is not None and verdict.rule_id != example.rule
        ):
            raise PackError(
                pack.path, example.line,
                f"example '{example.name}' expects {example.state.value}"
                f"{f' by rule {example.rule}' if example.rule else ''}, but the pack says "
                f"{verdict.state.value} (rule {verdict.rule_id or 'none'})",
            )
        if example.checks_draft:
            if pack.input is None:
                raise PackError(pack.path, example.line, f"example '{example.name}' states a "
                                "draft, but the pack has no 'input' rule to read one")
            got = pack.draft(example.screen)
            if got != example.draft:
                raise PackError(pack.path, example.line,
                                f"example '{example.name}' expects draft {example.draft!r}, "
                                f"but the pack reads {got!r}")


# --- choosing a pack for a pane ------------------------------------------------------------------


def plain_program(packs: Mapping[str, Pack], command: str) -> str:
    """The pane's foreground process name when no pack claims it (``less``, ``sleep``, ``top``
    started from a shell), else "". Agent CLIs and shells are claimed by their packs."""
    name = command_name(command)
    if not name or any(p.detect.matches_command(name) for p in packs.values()):
        return ""
    return name


def judge_for(packs: Mapping[str, Pack], pack: Pack, command: str) -> tuple[Pack, str]:
    """Which pack judges a pane's screen, and the plain program to tell its rules about.

    A plain program in the foreground of a shell (or of a pane no pack claims) is judged by the
    generic pack: the shell's prompt above it says nothing about it. An agent CLI's pack judges
    its own screens whatever the process is called (Gemini CLI runs as ``node``).
    """
    program = plain_program(packs, command)
    if program and (pack.detect.weak or pack.name == GENERIC_PACK):
        return packs.get(GENERIC_PACK, pack), program
    return pack, ""


def detect_pack(
    packs: Mapping[str, Pack],
    screen: str,
    command: str = "",
    title: str = "",
    child_commands: Iterable[str] = (),
) -> Pack:
    """Pick the pack for a pane.

    1. The foreground process name (``#{pane_current_command}``), then its children, matched
       against each pack's ``detect.commands`` / ``detect.command_patterns``. A match on a
       ``weak`` pack (a shell) only stands if no other pack's marks sit lower on the screen.
    2. The screen: the pack whose ``detect.screen`` marks end nearest the bottom wins, so an agent
       that exited back to the shell leaves the shell in charge.
    3. The pane title, then the generic pack.
    """
    candidates = [p for p in packs.values() if p.name != GENERIC_PACK]
    text = normalise(screen) if screen else ""
    names = [n for n in (command, *child_commands) if n]
    for name in names:
        for pack in candidates:
            if pack.detect.matches_command(name):
                if not pack.detect.weak:
                    return pack
                return _by_screen(candidates, text, prefer=pack) or pack
    found = _by_screen(candidates, text, prefer=None)
    if found is not None:
        return found
    if title:
        for pack in candidates:
            if any(p.search(title) for p in pack.detect.titles):
                return pack
    if GENERIC_PACK in packs:
        return packs[GENERIC_PACK]
    raise PackError("(packs)", None, f"no pack matches and no '{GENERIC_PACK}' pack is installed")


def _by_screen(candidates: Sequence[Pack], text: str, prefer: Pack | None) -> Pack | None:
    """The pack whose screen marks end lowest; ties go to ``prefer``, then to non-weak packs."""
    if not text:
        return None
    best: tuple[int, bool, bool] | None = None
    chosen: Pack | None = None
    for pack in candidates:
        position = pack.detect.screen_position(text)
        if position < 0:
            continue
        rank = (position, pack is prefer, not pack.detect.weak)
        if best is None or rank > best:
            best, chosen = rank, pack
    return chosen
