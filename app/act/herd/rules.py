"""Herd rule sets: YAML files of ordered rules, loaded and validated here (file:line on error).

A rule set is data; evaluation is pure (the screen text and the status context in, a match with
its rendered command out). The first rule that applies and matches wins. Format and examples:
``design/herd_rules/README.md``.

A command is a template over the status context (:data:`CONTEXT_VARIABLES`), the rule's regex
named groups or, for an ``llm`` rule, the variables it declares and the model's ``command``. A
name nothing provides is a load error, so a typo never reaches a pane at run time.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.act.herd.eligibility import WHENS
from app.base.errors import PackError
from app.base.model import State
from app.observe.conversation import conversation
from app.observe.pack_loading import _check_keys, _compile, _line, _parse_region, load_yaml
from app.observe.packs import Pack, Region

CONTEXT_VARIABLES = frozenset({
    "state", "summary", "actions_needed", "waiting_s", "inactive_s", "confidence", "reasons",
    "cli", "cwd", "name", "nudges", "goal",
})
LLM_COMMAND = "command"  # what an llm rule's model proposes; its default template
MAX_COMMAND_CHARS = 2000
_SET_KEYS = {"description", "rules"}
_RULE_KEYS = {"id", "description", "when", "states", "type", "region", "match", "unless",
              "command", "approve", "needs", "prompt", "variables"}
_TYPES = ("regex", "llm")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_VARIABLE = re.compile(r"[a-z][a-z0-9_]*")


class RuleError(PackError):
    """A herd rule set cannot be loaded; the message starts with ``file:line``."""


MESSAGE = "message"  # the region that is the agent's last message


@dataclass(frozen=True)
class Sight:
    """What part of a pane's screen a rule sees. Lines are counted from above the CLI's input
    box and the footer block over it (status lines, a task list, the turn's end mark), never
    from the screen's bottom, whose chrome each user sizes differently; ``message`` is the
    agent's last message. With no input box found, the screen's own last lines, said so."""

    region: Region = field(default_factory=Region)
    message: bool = False

    def see(self, text: str, pack: Pack | None) -> tuple[str, str]:
        """The text this rule looks at on ``text``, and which region that was, in words."""
        if self.region.kind == "all" and not self.message:
            return text, "the whole screen"
        talk = conversation(text, pack)
        if self.message:
            return talk.last_message(), "last message" if talk.boxed else \
                "last message (no input box found)"
        n = self.region.count
        if self.region.kind == "first":
            return talk.first(n), f"first {n} lines"
        if talk.boxed:
            return talk.last(n), f"{n} lines above the box"
        return talk.last(n), f"last {n} lines (no input box found)"

    def __str__(self) -> str:
        if self.message:
            return "last message"
        if self.region.kind == "last":
            return f"{self.region.count} lines above the box"
        return "the whole screen" if self.region.kind == "all" else str(self.region)


@dataclass(frozen=True)
class Rule:
    id: str
    when: frozenset[str]
    states: frozenset[State]
    type: str
    command: str
    line: int
    region: Sight = field(default_factory=Sight)
    match: re.Pattern[str] | None = None
    unless: tuple[re.Pattern[str], ...] = ()
    approve: bool = False
    needs: tuple[str, ...] = ()
    prompt: str = ""  # llm: the question put to the model
    variables: tuple[str, ...] = ()  # llm: the names the model may fill

    def applies(self, state: State, when: str, context: Mapping[str, object]) -> bool:
        """Whether this rule may be tried at all: its state, its moment, its needed variables,
        and a dialog only for a rule that says ``approve: true``."""
        if state not in self.states or when not in self.when:
            return False
        if state is State.NEEDS_CONFIRMATION and not self.approve:
            return False
        return all(str(context.get(name, "")).strip() for name in self.needs)

    def search(self, text: str, pack: Pack | None = None) -> dict[str, str] | None:
        """A regex rule's named groups when it matches the screen of a pane judged by ``pack``
        (``None``: no match)."""
        return self.look(text, pack)[0]

    def look(self, text: str, pack: Pack | None) -> tuple[dict[str, str] | None, str]:
        """:meth:`search`, and the region it saw, in words (for the decisions log)."""
        area, seen = self.region.see(text, pack)
        if self.match is None:
            return None, seen
        found = self.match.search(area)
        if found is None or any(p.search(area) for p in self.unless):
            return None, seen
        return {k: v.strip() for k, v in found.groupdict().items() if v is not None}, seen


@dataclass(frozen=True)
class RuleSet:
    name: str
    path: str
    description: str
    rules: tuple[Rule, ...]

    @property
    def uses_llm(self) -> bool:
        return any(rule.type == "llm" for rule in self.rules)


def render(template: str, variables: Mapping[str, object]) -> str:
    """The command for a pane: ``{name}`` fields filled, surrounding blanks stripped.

    Load-time validation guarantees every field exists; a missing one here is a bug, so it
    raises ``KeyError`` instead of typing a half-filled command.
    """
    out = string.Formatter().vformat(template, (), {k: _text(v) for k, v in variables.items()})
    return out.strip()


def _text(value: object) -> str:
    if isinstance(value, float):
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


# --- finding -------------------------------------------------------------------------------------


def bundled_dir() -> Path | None:
    """The shipped sets: in the installed package (``app/herd_rules``), or in a source checkout
    ``design/herd_rules``."""
    here = Path(__file__).resolve().parents[2]  # the app package
    for folder in (here / "herd_rules", here.parent / "design" / "herd_rules"):
        if folder.is_dir() and any(folder.glob("*.yml")):
            return folder
    return None


def user_dir() -> Path:
    """The user's own sets: ``herd_rules/`` next to the config file."""
    from app.base.settings import config_path

    return config_path().parent / "herd_rules"


def locate(spec: str) -> Path:
    """A rule set by name (the user's folder first, then the bundled sets) or by file path."""
    spec = spec.strip()
    if not spec:
        raise RuleError("(rules)", None, "empty rule set name")
    if "/" in spec or spec.endswith((".yml", ".yaml")):
        path = Path(spec).expanduser()
        if not path.is_file():
            raise RuleError(str(path), None, "no such rule file")
        return path.resolve()
    if not _NAME.fullmatch(spec):
        raise RuleError(spec, None, "a rule set name is a word such as 'conservative'")
    folders = [user_dir(), *([b] if (b := bundled_dir()) else [])]
    for folder in folders:
        path = folder / f"{spec}.yml"
        if path.is_file():
            return path
    known = sorted({p.stem for f in folders if f.is_dir() for p in f.glob("*.yml")})
    raise RuleError(spec, None, f"no rule set named {spec!r}; known: {', '.join(known) or '-'}")


def load(spec: str) -> RuleSet:
    path = locate(spec)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleError(str(path), None, f"cannot read: {exc}") from None
    return parse(text, str(path), name=path.stem)


# --- parsing -------------------------------------------------------------------------------------


def parse(text: str, where: str, name: str = "") -> RuleSet:
    data = load_yaml(text, where, RuleError)
    if not isinstance(data, dict):
        raise RuleError(where, 1, "a rule set must be a mapping with 'rules'")
    top = _line(data)
    _check_keys(data, _SET_KEYS, where, "rule set", top, RuleError)
    raw_rules = data.get("rules")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise RuleError(where, top, "'rules' must be a non-empty list")
    rules = [_parse_rule(raw, where, top) for raw in raw_rules]
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise RuleError(where, rule.line, f"rule '{rule.id}': duplicate rule id")
        seen.add(rule.id)
    return RuleSet(name=name or Path(where).stem, path=where,
                   description=str(data.get("description") or ""), rules=tuple(rules))


def _names(raw: Any, where: str, line: int | None, what: str) -> list[str]:
    items = raw if isinstance(raw, list) else [raw] if isinstance(raw, str) else None
    if items is None or not items or not all(isinstance(i, str) and i for i in items):
        raise RuleError(where, line, f"{what} must be a name or a non-empty list of names")
    return list(items)


def _parse_rule(raw: Any, where: str, top: int | None) -> Rule:
    if not isinstance(raw, dict):
        raise RuleError(where, top, f"each rule must be a mapping, got {raw!r}")
    line = _line(raw, top)
    rule_id = raw.get("id")
    if not isinstance(rule_id, str) or not _NAME.fullmatch(rule_id):
        raise RuleError(where, line, "rule without an 'id' (a word such as 'keep-going')")
    what = f"rule '{rule_id}'"
    _check_keys(raw, _RULE_KEYS, where, what, line, RuleError)

    when = _names(raw.get("when"), where, line, f"{what}: 'when'")
    for item in when:
        if item not in WHENS:
            raise RuleError(where, line, f"{what}: 'when' {item!r} is not one of "
                            f"{', '.join(WHENS)}")
    states: set[State] = set()
    for item in _names(raw.get("states"), where, line, f"{what}: 'states'"):
        try:
            state = State(item)
        except ValueError:
            raise RuleError(where, line, f"{what}: unknown state {item!r}; use READY, "
                            "NEEDS_CONFIRMATION or ERROR") from None
        if state in (State.BUSY, State.UNKNOWN):
            raise RuleError(where, line, f"{what}: a {state.value} pane is never nudged")
        states.add(state)
    approve = raw.get("approve", False)
    if not isinstance(approve, bool):
        raise RuleError(where, line, f"{what}: 'approve' must be true or false")
    if (State.NEEDS_CONFIRMATION in states) != approve:
        # Answering a dialog must be said twice, so neither half can be a slip.
        raise RuleError(where, line, f"{what}: a rule answers NEEDS_CONFIRMATION only when it "
                        "names that state and sets 'approve: true', and 'approve: true' only "
                        "with that state")

    kind = raw.get("type", "regex")
    if kind not in _TYPES:
        raise RuleError(where, line, f"{what}: 'type' must be regex or llm, got {kind!r}")
    region = _sight(raw.get("region"), where, line, what)
    provided = set(CONTEXT_VARIABLES)
    match: re.Pattern[str] | None = None
    unless: tuple[re.Pattern[str], ...] = ()
    prompt: Any = ""
    variables: tuple[str, ...] = ()
    if kind == "regex":
        for key in ("prompt", "variables"):
            if key in raw:
                raise RuleError(where, line, f"{what}: '{key}' is for llm rules")
        match = _regex(raw.get("match"), where, line, f"{what} match")
        unless = tuple(_regex(p, where, line, f"{what} unless")
                       for p in _patterns(raw.get("unless")))
        provided |= set(match.groupindex)
        command = raw.get("command")
    else:
        for key in ("match", "unless"):
            if key in raw:
                raise RuleError(where, line, f"{what}: '{key}' is for regex rules; an llm rule "
                                "asks its 'prompt'")
        prompt = raw.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise RuleError(where, line, f"{what}: an llm rule needs a 'prompt' (the question "
                            "put to the model)")
        raw_vars = raw.get("variables") or []
        if not isinstance(raw_vars, list) or not all(
                isinstance(v, str) and _VARIABLE.fullmatch(v) for v in raw_vars):
            raise RuleError(where, line, f"{what}: 'variables' must be a list of lowercase names")
        variables = tuple(raw_vars)
        provided |= {*variables, LLM_COMMAND}
        command = raw.get("command", f"{{{LLM_COMMAND}}}")
    if not isinstance(command, str) or not command.strip():
        raise RuleError(where, line, f"{what}: 'command' must be non-empty text")
    _check_template(command, provided, where, line, what)
    needs = tuple(_names(raw["needs"], where, line, f"{what}: 'needs'")) if "needs" in raw \
        else ()
    for name in needs:
        if name not in provided:
            raise RuleError(where, line, f"{what}: 'needs' names {name!r}, which nothing provides")
    return Rule(id=rule_id, when=frozenset(when), states=frozenset(states), type=kind,
                command=command, line=line or 0, region=region, match=match, unless=unless,
                approve=approve, needs=needs, prompt=prompt.strip() if prompt else "",
                variables=variables)


def _sight(raw: Any, where: str, line: int | None, what: str) -> Sight:
    if raw == MESSAGE:
        return Sight(message=True)
    try:
        region = _parse_region(raw, where, line, what)
    except PackError:
        raise RuleError(where, line, f"{what}: region must be 'all', 'message' (the agent's last "
                        f"message), {{last: N}} (lines above the input box) or {{first: N}}, "
                        f"got {raw!r}") from None
    return Sight(region)


def _patterns(raw: Any) -> Sequence[Any]:
    if raw is None:
        return ()
    return raw if isinstance(raw, list) else [raw]


def _regex(pattern: Any, where: str, line: int | None, what: str) -> re.Pattern[str]:
    try:
        return _compile(pattern, where, line, what)
    except PackError as exc:
        raise RuleError(where, line, str(exc).split(": ", 1)[-1]) from None


def _check_template(template: str, provided: set[str], where: str, line: int | None,
                    what: str) -> None:
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise RuleError(where, line, f"{what}: bad command template: {exc} (write {{{{ and "
                        "}} for literal braces)") from None
    for name in fields:
        if name not in provided:
            raise RuleError(where, line, f"{what}: command uses {{{name}}}, which is not a "
                            f"variable (known: {', '.join(sorted(provided))})")
