"""What a dead pane (its program ended, tmux kept it: remain-on-exit) reports, by exit status.

Status 0 is an ordinary end (``/exit``, Ctrl-C in a program that exits cleanly): EXITED, nothing
to act on. 126 and 127 are the shell's own "could not run it": the words the shell printed say
more than the number, so they are the summary. Any other status is a failure: ERROR.
"""

from __future__ import annotations

import re

from app.base.model import State, Verdict

EXITED_NORMALLY = "exited_normally"
# The shell's two "could not run it" statuses (POSIX: 126 found but not executable, 127 not
# found), and what to say when the screen shows no line of the shell's about it.
_SHELL_SAID = {126: "permission denied", 127: "command not found"}
SHELL_COULD_NOT_RUN = frozenset(_SHELL_SAID)
# tmux 3.3a scrolls a dead pane's last screen into its history as it writes "Pane is dead": the
# shell's words are read from this many lines of history.
HISTORY_LINES = 10
# The line tmux writes under a dead pane's last screen; never the shell's words.
_TMUX_DEAD_LINE = re.compile(r"^Pane is dead\b")
_SHELL_COMPLAINT = re.compile(
    r"(command not found|not found|permission denied|no such file or directory"
    r"|cannot execute|is a directory)", re.IGNORECASE)
# How far up from the bottom the shell's complaint may be (a usage text may follow it).
_LOOK_BACK_LINES = 8
_SUMMARY_MAX = 200


def dead_pane_verdict(status: int | None, screen_text: str) -> Verdict:
    """The verdict of a pane whose program ended with ``status`` (None: tmux did not say)."""
    if status == 0:
        return Verdict(state=State.EXITED, confidence=100, reasons=("pane_dead", EXITED_NORMALLY),
                       rule_id="pane-exited", summary="Exited normally (status 0)",
                       classifier="tmux")
    summary = f"Process exited (status {status})" if status is not None else "Process exited"
    if status in _SHELL_SAID:
        said = shell_complaint(screen_text) or _SHELL_SAID[status]
        summary = f"{said} (status {status})"[:_SUMMARY_MAX]
    return Verdict(state=State.ERROR, confidence=100, reasons=("pane_dead",), rule_id="pane-dead",
                   summary=summary, actions_needed="Restart or close the pane", classifier="tmux")


def shell_complaint(screen_text: str) -> str:
    """The shell's last "not found" / "permission denied" line near the bottom of the screen,
    in one line ("" if none): ``sh: 1: no-such-program: not found``."""
    lines = [line.strip() for line in screen_text.splitlines() if line.strip()
             and not _TMUX_DEAD_LINE.match(line.strip())]
    for line in reversed(lines[-_LOOK_BACK_LINES:]):
        if _SHELL_COMPLAINT.search(line):
            return " ".join(line.split())
    return ""
