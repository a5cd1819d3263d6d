"""Reading classifier packs: finding the shipped and the user's pack files, parsing their YAML,
and validating every part, with errors that name the file and line (:class:`PackError`)."""

from __future__ import annotations

import os
import re
import string
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import regex
import yaml

from app.base.errors import PackError
from app.base.model import SCREEN_STATES, State
from app.base.screen import Cursor
from app.observe.pack_patterns import BoundedPattern
from app.observe.packs import (
    CURSOR_PLACES,
    DEFAULT_REASON,
    DRAFT_GROUP,
    EVALUATION_ORDER,
    GENERIC_PACK,
    PROJECT_FIELD,
    Anchor,
    Condition,
    Detect,
    Example,
    InputBox,
    Pack,
    Region,
    Rule,
    WorkingPrompt,
)

DEFAULT_STABLE_POLLS = 3
_LINE_KEY = "__line__"

_PACK_KEYS = {"name", "description", "detect", "stable_polls", "volatile", "input", "rules",
              "anchors", "examples", "checked_versions", "clear_command", "stopped_titles",
              "working_prompt"}
_DETECT_KEYS = {"commands", "command_patterns", "titles", "screen", "weak"}
_RULE_KEYS = {"id", "state", "region", "match", "unless", "reason", "summary", "actions_needed",
              "confidence", "description", "program", "cursor"}
_CONDITION_KEYS = {"pattern", "region"}
_EXAMPLE_KEYS = {"name", "state", "screen", "rule", "draft", "program", "cursor"}
_INPUT_KEYS = {"region", "match", "trim", "placeholder", "cursor_when_sent"}
_ANCHOR_KEYS = {"pattern", "region"}
_WORKING_PROMPT_KEYS = {"rule", "glyph"}
# Template fields every rule may use besides its own named groups: the first matched line, the
# hint computed from the dialog's options on screen, the plain program in the foreground.
_BUILTIN_FIELDS = frozenset({"line", "options", "program"})


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
        working_prompt=_parse_working_prompt(data.get("working_prompt"), where, top),
    )
    _check_examples(pack)
    return pack


def _line(raw: Any, fallback: int | None = None) -> int | None:
    if isinstance(raw, dict):
        value = raw.get(_LINE_KEY)
        if isinstance(value, int):
            return value
    return fallback



def _parse_stopped_titles(raw: Any, where: str, top: int | None) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(t, str) and t for t in raw):
        raise PackError(where, top, "'stopped_titles' must be a list of regexes")
    for template in raw:
        try:
            re.compile(template.replace(PROJECT_FIELD, "(?P<project>x)", 1))
        except re.error as exc:
            raise PackError(where, top, f"stopped_titles: invalid regex /{template}/: {exc}") \
                from None
    return tuple(raw)


def _parse_working_prompt(raw: Any, where: str, top: int | None) -> WorkingPrompt | None:
    if raw is None:
        return None
    line = _line(raw, top)
    if not isinstance(raw, dict) or set(raw) - {_LINE_KEY} != _WORKING_PROMPT_KEYS:
        raise PackError(where, line, "'working_prompt' must have exactly 'rule' and 'glyph'")
    compiled: dict[str, re.Pattern[str]] = {}
    for key in sorted(_WORKING_PROMPT_KEYS):
        value = raw[key]
        if not isinstance(value, str) or not value:
            raise PackError(where, line, f"working_prompt: '{key}' must be a regex")
        try:
            compiled[key] = re.compile(value)
        except re.error as exc:
            raise PackError(where, line, f"working_prompt: invalid regex /{value}/: {exc}") \
                from None
    return WorkingPrompt(rule=compiled["rule"], glyph=compiled["glyph"])


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
    return cast("re.Pattern[str]", BoundedPattern(compiled))


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
    cursor = raw.get("cursor")
    if cursor is not None and cursor not in CURSOR_PLACES:
        raise PackError(where, line, f"{what}: cursor must be one of {', '.join(CURSOR_PLACES)}")
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
        cursor=cursor,
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
        if DRAFT_GROUP not in pattern.groupindex:
            raise PackError(where, line, f"input.match: /{pattern.pattern}/ has no "
                            f"(?P<{DRAFT_GROUP}>…) group for the typed text")
    sent = raw.get("cursor_when_sent")
    if sent is not None and sent not in CURSOR_PLACES:
        raise PackError(where, line,
                        f"input: cursor_when_sent must be one of {', '.join(CURSOR_PLACES)}")
    return InputBox(
        region=_parse_region(raw.get("region"), where, line, "input", anchors),
        match=match,
        trim=patterns("trim"),
        placeholder=patterns("placeholder"),
        line=line or 0,
        cursor_when_sent=sent,
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
    cursor = raw.get("cursor")
    if cursor is not None and not (isinstance(cursor, list) and len(cursor) == 2
                                   and all(isinstance(n, int) and n >= 0 for n in cursor)):
        raise PackError(where, line, f"example '{name}': 'cursor' must be [column, row]")
    return Example(
        name=name,
        state=_parse_state(raw.get("state"), where, line, f"example '{name}'"),
        screen=screen,
        rule=str(rule) if rule is not None else None,
        line=line,
        draft=draft,
        checks_draft="draft" in raw,
        program=str(raw.get("program") or ""),
        cursor=Cursor(*cursor) if cursor is not None else None,
    )


def _check_examples(pack: Pack) -> None:
    """A pack whose own examples fail is rejected, so a broken rule never reaches the daemon."""
    rule_ids = {r.id for r in pack.rules}
    for example in pack.examples:
        if example.rule is not None and example.rule not in rule_ids:
            raise PackError(pack.path, example.line,
                            f"example '{example.name}' names unknown rule '{example.rule}'")
        verdict = pack.classify(example.screen, example.program, example.cursor)
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
