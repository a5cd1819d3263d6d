"""Pure formatting of workers for people, status lines and programs. Stdlib only: the status line
imports this on every refresh."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

TYPE_CHECKING = False  # typing costs ~5 ms; this is on the status-line path
if TYPE_CHECKING:
    from typing import Any

# Plain strings rather than app.model.State: importing the model (enum, dataclasses) would cost
# the status line several ms per refresh.
_ATTENTION = {"NEEDS_CONFIRMATION": 0, "ERROR": 1, "READY": 2, "BUSY": 3, "UNKNOWN": 4}
_SHORT = {"NEEDS_CONFIRMATION": "NEEDS_CONF"}
_TMUX_COLOUR = {
    "NEEDS_CONFIRMATION": "#[fg=black,bg=yellow,bold]",
    "ERROR": "#[fg=white,bg=red,bold]",
    "READY": "#[fg=green]",
    "BUSY": "#[fg=cyan]",
    "UNKNOWN": "#[fg=colour244]",
}


def by_attention(workers: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Panes needing a human first; longest-waiting first within a state."""
    return sorted(workers, key=lambda w: (_ATTENTION.get(w.get("state") or "UNKNOWN", 9),
                                          w.get("state_entered_ts") or 0.0))


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def short_line(workers: Sequence[Mapping[str, Any]], colour: bool = False) -> str:
    """``[worker-a: READY] [api: NEEDS_CONF]`` for tmux's status-right."""
    parts = []
    for w in by_attention(workers):
        state = w.get("state") or "UNKNOWN"
        # '#' would start a tmux format in status-right; double it to print it literally.
        name = str(w.get("name") or w.get("id")).replace("#", "##")
        text = f"[{name}: {_SHORT.get(state, state)}]"
        parts.append(f"{_TMUX_COLOUR[state]}{text}#[default]" if colour and state in _TMUX_COLOUR
                     else text)
    return " ".join(parts)


WAITING_STATES = ("READY", "NEEDS_CONFIRMATION")


def waiting(worker: Mapping[str, Any], now: float, grace_s: float) -> tuple[float | None, bool]:
    """How long a pane has waited for a person (READY or NEEDS_CONFIRMATION), and whether that
    is past the grace ("waiting long"); (None, False) for a pane that is not waiting."""
    entered = worker.get("state_entered_ts")
    if worker.get("state") not in WAITING_STATES or not entered:
        return None, False
    seconds = max(0.0, now - entered)
    return seconds, seconds >= grace_s


def table(workers: Sequence[Mapping[str, Any]], now: float, grace_s: float = 120.0) -> str:
    # The CYCLE column only once some pane has a post-report cycle: most never do.
    cycles = any(w.get("cycle") for w in workers)
    rows = [("ID", "NAME", "CLI", "STATE", *(("CYCLE",) if cycles else ()), "SINCE", "WAITING",
             "SUMMARY")]
    for w in by_attention(workers):
        entered = w.get("state_entered_ts")
        waited, long_wait = waiting(w, now, grace_s)
        rows.append((
            str(w.get("id") or ""),
            str(w.get("name") or ""),
            str(w.get("cli_type") or "-"),
            str(w.get("state") or "UNKNOWN"),
            *((str(w.get("cycle") or "-"),) if cycles else ()),
            _clock(entered, now) if entered else "-",
            "-" if waited is None else duration(waited) + (" long" if long_wait else ""),
            _one_line(str(w.get("summary") or "")),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _clock(ts: float, now: float) -> str:
    """Time of day for today, with the date for anything older."""
    fmt = "%H:%M:%S" if now - ts < 20 * 3600 else "%Y-%m-%d %H:%M"
    return time.strftime(fmt, time.localtime(ts))


def _one_line(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def as_json(workers: Sequence[Mapping[str, Any]], now: float, grace_s: float = 120.0) -> str:
    import json

    out = []
    for w in by_attention(workers):
        waited, long_wait = waiting(w, now, grace_s)
        changed = w.get("last_change_ts")
        out.append({**w, "waiting_s": None if waited is None else round(waited, 1),
                    "waiting_long": long_wait,
                    "inactive_s": round(max(0.0, now - changed), 1) if changed else None})
    return json.dumps(out, indent=2, ensure_ascii=False)


def history_line(ts_text: str, state: str, previous: str | None, summary: str,
                 reasons: Sequence[str]) -> str:
    arrow = f"{previous or '-'} -> {state}"
    tail = f"  {_one_line(summary)}" if summary else ""
    why = f"  [{', '.join(reasons)}]" if reasons else ""
    return f"{ts_text}  {arrow}{tail}{why}"
