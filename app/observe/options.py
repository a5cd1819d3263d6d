"""Read the options a dialog shows, so hints (and any key a later rule presses) come from the
screen, not from memory of one CLI version.

Pure text in, data out: :func:`read_options` finds the option list at the bottom of a normalised
screen (numbered or bare rows under a selection marker, a row of labels side by side, or a
``[y/N]`` / ``(Y)es/(N)o`` question) and tells which option approves and which refuses by its
label. :func:`hint` turns that into the ``actions_needed`` text. A new release that reorders its
options ("No, exit" first) or inserts one ("Yes, and switch to auto mode" before "No") changes the
hint with it; a dialog whose options cannot be read gets a hint that names no key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.base.model import Option

APPROVE = "approve"
REFUSE = "refuse"
OTHER = "other"

# By the label's first words. Refusal is checked first: "No, and tell Codex what to do
# differently" and "Don't trust" refuse although they go on with other words.
_REFUSE_RE = re.compile(
    r"(?i)^(?:no\b|reject|deny|decline|don'?t\b|do not\b|cancel|abort|exit\b|quit\b|back\b|"
    r"never\b|skip\b|disallow|refuse)")
_APPROVE_RE = re.compile(
    r"(?i)^(?:yes\b|y\b|allow\b|approve|accept|proceed|continue\b|trust\b|ok\b|okay\b|confirm|"
    r"run\b|always allow|update now|install now)")
_ESC_REFUSES_RE = re.compile(r"(?i)\besc(?:ape)?\b[^\n]{0,12}?\b(?:to )?(?:cancel|reject|deny|"
                             r"exit|back|decline)\b")
# Selection markers in front of an option row. A bare row (no number) needs one of the arrow-like
# markers: a `●` or `>` in front of free text is a message or a prompt, not a menu.
_NUMBERED_RE = re.compile(
    r"^(?P<indent>\s*)(?:(?P<marker>[❯›>●▶►→➜])\s*)?(?P<num>\d{1,2})[.)]\s+(?P<label>\S.*?)\s*$")
_BARE_MARKED_RE = re.compile(r"^(?P<indent>\s*)(?P<marker>[❯›▶►→➜])[ \xa0]+(?P<label>\S.*?)\s*$")
_SHORTCUT_RE = re.compile(r"\s+\((?P<key>[A-Za-z]|esc)\)$")
# Box edges and scroll bars drawn beside the options (Gemini's `│`, Qwen Code's `█`).
_BORDER_RE = re.compile(r"^\s*[│┃║|](?=\s)|\s[│┃║|█▐▌]\s*$")
_RULE_RE = re.compile(r"^\s*[─━═╌-]{10,}\s*$")
# `(y/N)`, `[Y/n]`, `[yes/no]` near the end of the last line, and aider's `(Y)es/(N)o/(D)on't ask
# again [Yes]:`. The capital letter (or the bracketed word) is what Enter answers.
_SLASH_RE = re.compile(r"[(\[]\s*(?P<opts>[A-Za-z]{1,4}(?:\s*/\s*[A-Za-z]{1,4}){1,3})\s*[)\]]"
                       r"[^\n]{0,20}\Z")
_PAREN_LETTER_RE = re.compile(r"\((?P<key>[A-Za-z])\)(?P<rest>[\w' ]*?)(?=/|\s*\[|\s*:|\s*\Z)")
_DEFAULT_WORD_RE = re.compile(r"\[(?P<word>[A-Za-z' ]+)\]:?\s*\Z")
_SIDE_BY_SIDE_RE = re.compile(r"\S(?:[^\s]| (?! ))*")


def role_of(label: str) -> str:
    if _REFUSE_RE.match(label):
        return REFUSE
    if _APPROVE_RE.match(label):
        return APPROVE
    return OTHER


@dataclass(frozen=True)
class Dialog:
    """What a dialog lets a person do, as read from the screen."""

    options: tuple[Option, ...]
    esc_refuses: bool = False
    # Whether the options' keys are known. Side-by-side buttons in plain text show no highlight,
    # so nobody can say which key reaches which of them.
    keys_known: bool = True

    def first(self, role: str) -> Option | None:
        return next((o for o in self.options if o.role == role), None)

    @property
    def highlighted(self) -> Option | None:
        return next((o for o in self.options if o.highlighted), None)


def _clean(line: str) -> str:
    return _BORDER_RE.sub("", line).rstrip()


def read_options(text: str, lines: int = 20) -> Dialog | None:
    """The dialog at the bottom of a normalised screen, or None when no options can be read."""
    rows = [_clean(line) for line in text.split("\n") if line.strip()][-lines:]
    rows = [r for r in rows if r.strip()]
    if not rows:
        return None
    esc = bool(_ESC_REFUSES_RE.search("\n".join(rows[-4:])))
    return (_question(rows[-1], esc) or _numbered(rows, esc) or _bare(rows, esc)
            or _side_by_side(rows, esc))


def _question(last: str, esc: bool) -> Dialog | None:
    """A `[y/N]`-style question on the last line."""
    letters = list(_PAREN_LETTER_RE.finditer(last))
    if len(letters) >= 2:
        default = _DEFAULT_WORD_RE.search(last)
        chosen = default.group("word").strip().lower() if default else ""
        options = []
        for found in letters:
            label = found.group("key") + found.group("rest").strip()
            key = found.group("key").lower()
            options.append(Option(label=label, keys=(key, "Enter"), role=role_of(label),
                                  highlighted=bool(chosen) and label.lower() == chosen))
        return Dialog(tuple(options), esc)
    slashed = _SLASH_RE.search(last)
    if slashed is None:
        return None
    words = [w.strip() for w in slashed.group("opts").split("/")]
    capitals = [w for w in words if w[:1].isupper()]
    preset = capitals[0] if len(capitals) == 1 and len(words) > 1 else None
    names = {"y": "yes", "n": "no", "a": "all", "q": "quit"}
    return Dialog(tuple(
        Option(label=w, keys=(w.lower(), "Enter"), highlighted=w is preset,
               role=role_of(names.get(w.lower(), w)))
        for w in words), esc)


def _shortcut(label: str) -> tuple[str, str | None]:
    found = _SHORTCUT_RE.search(label)
    if found is None:
        return label, None
    key = found.group("key")
    return label[: found.start()], "Escape" if key.lower() == "esc" else key.lower()


def _numbered(rows: Sequence[str], esc: bool) -> Dialog | None:
    found = [(i, _NUMBERED_RE.match(r)) for i, r in enumerate(rows)]
    numbered = [(i, m) for i, m in found if m is not None]
    marked = [(i, m) for i, m in numbered if m.group("marker")]
    if not marked:
        return None
    at = marked[-1][0]
    by_row = dict(numbered)
    # The options around the marked row number 1..n in order; description lines (and, in Claude
    # Code's question dialog, a rule) may sit between them.
    chain = [at]
    expect = int(by_row[at].group("num")) - 1
    for i in range(at - 1, -1, -1):
        m = by_row.get(i)
        if m is not None:
            if int(m.group("num")) != expect:
                break
            chain.insert(0, i)
            expect -= 1
    expect = int(by_row[at].group("num")) + 1
    for i in range(at + 1, len(rows)):
        m = by_row.get(i)
        if m is not None:
            if int(m.group("num")) != expect:
                break
            chain.append(i)
            expect += 1
    if len(chain) < 2 or int(by_row[chain[0]].group("num")) != 1:
        return None
    options = []
    for i in chain:
        m = by_row[i]
        label, shortcut = _shortcut(m.group("label"))
        options.append(Option(label=label, keys=(m.group("num"),), role=role_of(label),
                              highlighted=i == at, shortcut=shortcut or ""))
    return Dialog(tuple(options), esc or any(o.shortcut == "Escape" for o in options))


def _bare(rows: Sequence[str], esc: bool) -> Dialog | None:
    """Options without numbers: a marked row and rows whose text starts in the same column."""
    for at in range(len(rows) - 1, max(-1, len(rows) - 10), -1):
        m = _BARE_MARKED_RE.match(rows[at])
        if m is None:
            continue
        if _is_input_box(rows, at):
            return None
        column = m.start("label")
        start = at
        while start > 0 and _sibling(rows[start - 1], column):
            start -= 1
        end = at
        while end + 1 < len(rows) and _sibling(rows[end + 1], column):
            end += 1
        if end == start:
            return None
        labels = [rows[i].strip() if i != at else m.group("label") for i in range(start, end + 1)]
        options = []
        for offset, label in enumerate(labels):
            moves = start + offset - at
            arrows = ("Down",) * moves if moves > 0 else ("Up",) * -moves
            label, shortcut = _shortcut(label)
            options.append(Option(label=label, keys=(*arrows, "Enter"), role=role_of(label),
                                  highlighted=moves == 0, shortcut=shortcut or ""))
        return Dialog(tuple(options), esc)
    return None


def _sibling(row: str, column: int) -> bool:
    """Another bare option: its text starts in the marked row's label column."""
    lead = len(row) - len(row.lstrip())
    return lead == column and not _RULE_RE.match(row)


def _is_input_box(rows: Sequence[str], at: int) -> bool:
    """Claude Code's input box (its prompt line right under a full-width rule), not a menu."""
    above = rows[at - 1] if at > 0 else ""
    return bool(_RULE_RE.match(above))


def _side_by_side(rows: Sequence[str], esc: bool) -> Dialog | None:
    """Buttons on one line (`Allow once   Allow always   Reject`): plain text shows no highlight,
    so the labels are known and the keys are not."""
    for row in reversed(rows[-6:]):
        # A narrow pane leaves two spaces between the last button and the hints after it
        # (opencode at 80 columns: `Reject  ctrl+f fullscreen  ⇆ select`).
        parts = [p if len(p.split()) <= 4 else re.split(r"\s{2}", p)[0]
                 for p in re.split(r"\s{3,}", row.strip())]
        labels = [p for p in parts if len(p.split()) <= 4]
        roles = [role_of(p) for p in labels]
        if len(labels) >= 2 and APPROVE in roles[:3] and REFUSE in roles[:4]:
            cut = max(i for i, r in enumerate(roles) if r != OTHER) + 1
            options = tuple(Option(label=p, keys=(), role=r)
                            for p, r in zip(labels[:cut], roles[:cut], strict=True))
            return Dialog(options, esc, keys_known=False)
    return None


def _keys(option: Option) -> str:
    if option.shortcut:
        return option.shortcut
    return ", ".join(option.keys)


def hint(dialog: Dialog | None, fallback: str = "Answer it in the pane") -> str:
    """The ``actions_needed`` text: which key approves and which refuses, named by label.

    Without readable options (or with options whose keys are unknown) the text names no key.
    """
    if dialog is None or not dialog.options:
        return f"{fallback} (its options could not be read)"
    approve, refuse = dialog.first(APPROVE), dialog.first(REFUSE)
    parts: list[str] = []
    if not dialog.keys_known:
        parts = [f"choose '{o.label}' to {o.role}" for o in (approve, refuse) if o is not None]
        return "; ".join(parts) + " (the highlighted option cannot be read from the screen)"
    if approve is not None:
        parts.append(f"approve: {_keys(approve)} ({approve.label})")
    if refuse is not None:
        tail = " or Esc" if dialog.esc_refuses and refuse.shortcut != "Escape" else ""
        parts.append(f"refuse: {_keys(refuse)} ({refuse.label}){tail}")
    elif dialog.esc_refuses:
        parts.append("refuse: Esc")
    if approve is None and refuse is None:
        shown = ", ".join(f"{_keys(o)} ({o.label})" for o in dialog.options[:6])
        parts.insert(0, f"choose: {shown}")
    chosen = dialog.highlighted
    if chosen is not None:
        parts.append(f"Enter picks the highlighted '{chosen.label}'")
    return "; ".join(parts)
