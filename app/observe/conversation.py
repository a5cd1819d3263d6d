"""The conversation part of an agent's screen: what sits above its input box and footer block.

A CLI's bottom lines are chrome, and their height is the user's choice: Claude Code draws one
to three status lines under its box, and a task list under its turn line above the box. A
region counted from the bottom of the screen ("the last 8 lines") therefore sees the agent's
closing question on one setup and only chrome on another. These helpers count from the box
up instead, with the footer block above it (the turn line and the rows indented under it: an
end mark such as `✻ Brewed for 42s`, a task list) taken away too, or pick the agent's last
message. The box is found as the pane's pack finds it for drafts (its ``input`` region and
patterns); where it is not found, callers fall back to the screen's last lines and say so.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.observe.packs import Pack, ScreenView

# How the CLIs start a message of the agent in column 0: Claude Code `●`, Codex `•`, Gemini `✦`.
MESSAGE_MARKS = frozenset("●•✦")
# Column-0 marks that are the person's own lines (a sent prompt), never a footer.
PROMPT_MARKS = frozenset("❯›>!")


@dataclass(frozen=True)
class Conversation:
    """The non-blank lines above the box and its footer block, top to bottom; ``boxed`` is
    False when no input box was found and the lines are the whole screen's."""

    lines: tuple[str, ...]
    boxed: bool

    def last(self, count: int) -> str:
        return "\n".join(self.lines[max(0, len(self.lines) - count):])

    def first(self, count: int) -> str:
        return "\n".join(self.lines[:count])

    def last_message(self) -> str:
        """The agent's newest message: its lowest line in column 0 that starts with a message
        mark, and the indented lines under it ("" when there is none)."""
        for start in range(len(self.lines) - 1, -1, -1):
            if self.lines[start][:1] in MESSAGE_MARKS:
                end = start + 1
                while end < len(self.lines) and _indented(self.lines[end]):
                    end += 1
                return "\n".join(self.lines[start:end])
        return ""


def box_top(text: str, pack: Pack | None) -> int | None:
    """The screen line where the pack's input box starts, or None (no box known or seen)."""
    if pack is None or pack.input is None:
        return None
    view = ScreenView(text, pack.anchors)
    region = pack.input.region
    rows = view.rows_of(region)
    if not rows:
        return None
    if region.anchor:  # the anchor is the box itself (Claude Code's `{at: box}`)
        return rows[0]
    area = view.join(rows, keep_blanks=True)
    for pattern in pack.input.match:
        found = pattern.search(area)
        if found is not None:
            return rows[0] + area.count("\n", 0, found.start())
    return None


def conversation(text: str, pack: Pack | None) -> Conversation:
    """The screen's conversation: above the input box and the footer block over it."""
    lines = text.split("\n")
    top = box_top(text, pack)
    if top is None:
        return Conversation(tuple(line for line in lines if line.strip()), boxed=False)
    above = [line for line in lines[:top] if line.strip()]
    return Conversation(tuple(_without_footer(above)), boxed=True)


def _without_footer(lines: list[str]) -> list[str]:
    """``lines`` without the block right above the box that is no message: the lowest line in
    column 0 when it starts with neither a word, a message mark nor a prompt mark (a spinner or
    an end mark), with the indented rows under it (tips, a task list)."""
    for start in range(len(lines) - 1, -1, -1):
        if _indented(lines[start]):
            continue
        head = lines[start][:1]
        # A border (`╰──╯`, `│`) closes drawn content such as a tool's box, no turn line.
        if head.isalnum() or head in MESSAGE_MARKS or head in PROMPT_MARKS or \
                "\u2500" <= head <= "\u257f":
            return lines
        return lines[:start]
    return lines


def _indented(line: str) -> bool:
    return line[:1] in (" ", "\xa0")
