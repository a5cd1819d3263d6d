"""Pure formatting of workers for people, status lines and programs. Stdlib only: the status line
imports this on every refresh."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

TYPE_CHECKING = False  # typing costs ~5 ms; this is on the status-line path
if TYPE_CHECKING:
    from typing import Any

    from app.base.model import RuleTrace

# Plain strings rather than app.base.model.State: importing the model (enum, dataclasses) would cost
# the status line several ms per refresh.
_ATTENTION = {"NEEDS_CONFIRMATION": 0, "ERROR": 1, "READY": 2, "BUSY": 3, "UNKNOWN": 4,
              "EXITED": 5}
_SHORT = {"NEEDS_CONFIRMATION": "NEEDS_CONF"}
DONE = "DONE"  # READY, and the person has not looked at the pane since its turn ended
# Why a pane of another host is not current (app.adapters.status.host_staleness), in few words.
_STALE_SHORT = {"host_unreachable": "host unreachable", "host_not_watched": "host not watched"}
# Every style that colours sets both fg and bg, so it reads the same on tmux's default green bar
# and on a dark theme; BUSY and UNKNOWN ask nothing of you and keep the bar's own colours.
TMUX_STYLE = {
    "NEEDS_CONFIRMATION": "fg=black,bg=yellow,bold",
    "ERROR": "fg=white,bg=red,bold",
    "READY": "fg=white,bg=blue,bold",
    "BUSY": "default",
    "UNKNOWN": "default",
}
# `NAME=STYLE;NAME=STYLE`, e.g. `READY=fg=black,bg=white`: the tmux plugin's @conductor-colour-*.
ENV_STYLE = "CONDUCTOR_STATUS_STYLE"
_STYLE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789,=#-")


# Bidirectional overrides and isolates reorder what a terminal shows (a summary could display
# one command and hold another).
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")


def clean_text(text: str) -> str:
    """``text`` without terminal escape sequences (CSI, OSC, DCS...), control characters or
    bidi overrides: summaries come from screens and from an LLM, and are printed to terminals.
    Tabs and newlines become spaces; nothing else is changed."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        code = ord(char)
        if char == "\x1b" or code == 0x9B or code == 0x9D:
            kind = "[" if code == 0x9B else "]" if code == 0x9D else text[i + 1:i + 2]
            i += 1 if code != 0x1B else 2
            if kind == "[":  # CSI: parameters, then one final byte in @-~
                while i < n and not ("@" <= text[i] <= "~"):
                    i += 1
                i += 1
            elif kind in ("]", "P", "X", "^", "_"):  # OSC, DCS, SOS, PM, APC: up to ST or BEL
                while i < n and text[i] not in ("\x07", "\x9c") and text[i:i + 2] != "\x1b\\":
                    i += 1
                i += 2 if text[i:i + 2] == "\x1b\\" else 1
            continue
        if char in "\t\n\r":
            out.append(" ")
        elif code >= 0x20 and not (0x7F <= code <= 0x9F) and char not in _BIDI:
            out.append(char)
        i += 1
    return "".join(out)


def printable(text: str) -> str:
    """``text`` cleaned as :func:`clean_text` cleans it, line by line, so its line breaks stay:
    for whatever is printed to a person's terminal (tables, log lines) that someone else wrote
    (an agent's report or check command, a pane's name, a screen)."""
    return "\n".join(clean_text(line) for line in text.split("\n"))


def columns(rows: Sequence[Sequence[str]]) -> str:
    """Rows as aligned columns, the last one ragged; every cell cleaned (:func:`clean_text`)
    before it is measured, so a cell's escapes can neither reach the terminal nor skew the
    alignment."""
    cleaned = [[clean_text(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cleaned) for i in range(len(cleaned[0]) - 1)]
    return "\n".join("  ".join([cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
                                + [row[-1]]).rstrip() for row in cleaned)


# The states that wait for a person: ordered by how long they have waited.
_WAITING_ORDER = frozenset(("NEEDS_CONFIRMATION", "ERROR", "READY"))


def _attention(w: Mapping[str, Any]) -> tuple[float, float, str, str]:
    state = w.get("state") or "UNKNOWN"
    waited = (w.get("state_entered_ts") or 0.0) if state in _WAITING_ORDER else 0.0
    # A finished turn not yet seen comes before panes idle since the person last looked.
    rank = _ATTENTION.get(state, 9) - (0.5 if unseen_done(w) else 0.0)
    return rank, waited, str(w.get("name") or ""), str(w.get("id") or "")


def unseen_done(w: Mapping[str, Any]) -> bool:
    """READY from a turn that ended while the person was not looking (app/run/seen.py)."""
    return w.get("state") == "READY" and w.get("seen") == 0


def shown_state(w: Mapping[str, Any]) -> str:
    """The state as `status` and the status line show it: DONE for a finished turn nobody has
    seen yet (it is READY to scripts and `wait`)."""
    return DONE if unseen_done(w) else str(w.get("state") or "UNKNOWN")


# What is not an agent: a shell or a plain program, whose READY is an idle prompt that asks
# nothing of anyone (a status line or `switch --next` puts it after every agent).
_NOT_AGENTS = frozenset(("", "shell", "conductor"))


def _urgency(w: Mapping[str, Any]) -> tuple[int, float, float, str, str]:
    state, rest = w.get("state") or "UNKNOWN", _attention(w)
    shell = str(w.get("cli_type") or "") in _NOT_AGENTS
    # A question or an error needs the person whatever asks; an idle shell does not.
    return (0 if state in ("NEEDS_CONFIRMATION", "ERROR") or not shell else 1, *rest)


def by_urgency(workers: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The order of the status line and ``switch --next``: :func:`by_attention`, but a READY
    shell (or plain program) after every agent, so an agent that just finished is not pushed
    off the line by shells idle for an hour."""
    return sorted(workers, key=_urgency)


def by_attention(workers: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Panes needing a human first (NEEDS_CONFIRMATION, ERROR, READY), longest-waiting first
    within those; the rest by state, then name and id, so panes that only change between BUSY
    and UNKNOWN keep their places."""
    return sorted(workers, key=_attention)


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def coarse(seconds: float) -> str:
    """One unit, for the status line: ``45s``, ``2m``, ``3h``, ``2d``."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def styles(spec: str | None) -> dict[str, str]:
    """The status-line styles, with ``spec`` (:data:`ENV_STYLE`'s format) overriding the
    defaults; a part that is not a state name and a plain tmux style is ignored, so a typo cannot
    break the status line nor smuggle in a tmux format."""
    out = dict(TMUX_STYLE)
    for part in (spec or "").split(";"):
        state, _, style = part.strip().partition("=")
        state = state.strip().upper()
        style = style.strip().lower()
        if state == "NEEDS_CONF":
            state = "NEEDS_CONFIRMATION"
        if state in out and style and set(style) <= _STYLE_CHARS:
            out[state] = style
    return out


def short_line(workers: Sequence[Mapping[str, Any]], colour: bool = False,
               style_spec: str | None = None, width: int | None = None) -> str:
    """``[worker-a: READY] [api: NEEDS_CONF]`` for tmux's status-right; exited panes and
    conductor's own views are left out (the line is for the panes you can act on).

    With ``width``, the line shows at most that many columns: whole items only, in urgency
    order (:func:`by_urgency`), and ``+N`` for the N panes that did not fit."""
    style = styles(style_spec) if colour else {}
    items: list[tuple[str, int]] = []  # (text as printed, columns it shows)
    for w in by_urgency(workers):
        state = w.get("state") or "UNKNOWN"
        if state == "EXITED" or w.get("cli_type") == "conductor":  # nothing to act on there
            continue
        if w.get("host_removed_ts"):  # its host left the config: nothing to act on there
            continue
        name = clean_text(str(w.get("name") or w.get("id")) + _at_host(w))
        # A pane whose host is not current shows why instead of a state that may be over.
        why = _STALE_SHORT.get(str(w.get("stale_reason") or ""))
        shown = f"[{name}: {why or _SHORT.get(state, shown_state(w))}]"
        # '#' would start a tmux format in status-right; double it to print it literally.
        text = shown.replace("#", "##")
        items.append((f"#[{style[state]}]{text}#[default]" if state in style else text,
                      display_width(shown)))
    if width is None:
        return " ".join(text for text, _ in items)
    return _fit_items(items, width)


def _fit_items(items: Sequence[tuple[str, int]], width: int) -> str:
    """The longest run of leading items that fits in ``width`` with ``+N`` for the rest."""
    used = 0
    for count, (_, size) in enumerate(items):
        rest = len(items) - count - 1
        need = used + (1 if count else 0) + size
        room_for_rest = len(f" +{rest}") if rest else 0
        if need + room_for_rest > width:
            break
        used = need
    else:
        return " ".join(text for text, _ in items)
    # The items before ``count`` were taken only with room for this ``+N`` after them.
    more = f"+{len(items) - count}"
    return " ".join([*(text for text, _ in items[:count]), more]) if len(more) <= width else ""


def fit(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` columns, with an ellipsis where it was cut."""
    if width is None or display_width(text) <= width:
        return text
    if width <= 0:
        return ""
    out, used = [], 0
    for char in text:
        size = display_width(char)
        if used + size > width - 1:
            break
        out.append(char)
        used += size
    return "".join(out) + "…"


def display_width(text: str) -> int:
    """How many terminal columns ``text`` takes: East Asian wide and full-width characters two,
    combining marks none."""
    if text.isascii():
        return len(text)
    import unicodedata  # only for names that are not plain ASCII

    return sum(0 if unicodedata.combining(c) else
               2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


WAITING_STATES = ("READY", "NEEDS_CONFIRMATION")


def waiting(worker: Mapping[str, Any], now: float, grace_s: float) -> tuple[float | None, bool]:
    """How long a pane has waited for a person (READY or NEEDS_CONFIRMATION), and whether that
    is past the grace ("waiting long"); (None, False) for a pane that is not waiting."""
    entered = worker.get("state_entered_ts")
    if worker.get("state") not in WAITING_STATES or not entered:
        return None, False
    seconds = max(0.0, now - entered)
    return seconds, seconds >= grace_s


GOAL_WIDTH = 30  # the whole goal is in `explain`, `herd list` and --json
# A narrow terminal loses these columns first, in this order, until the summary has at least
# SUMMARY_MIN columns: NAME, STATE, WAITING and SUMMARY stay (with HOST gone, another host's
# pane is NAME@HOST). A column with nothing to say
# (every cell empty or "-") is left out, except these three always shown.
_DROP_ORDER = ("SINCE", "CLI", "COST", "GOAL", "ID", "CYCLE", "HOST")
_ALWAYS = ("NAME", "STATE", "WAITING")
SUMMARY_MIN = 30
# The reason code of the final row of a pane whose tmux server ended (not the pane itself).
SERVER_ENDED = "server_ended"
# This machine's name among hosts (app.adapters.tmux.LOCAL_HOST, which render may not import).
LOCAL_HOST = "local"


def table(workers: Sequence[Mapping[str, Any]], now: float, grace_s: float = 120.0,
          width: int | None = None) -> str:
    """The status table; with ``width``, columns go (``_DROP_ORDER``) until the summary has
    room, and every line is cut to it. A column with nothing to say (every cell empty or ``-``)
    is left out, and the panes of a tmux server that ended are one line each server."""
    shown, ended = fold_ended(with_teammates(workers), now)
    rows = [_table_row(w, now, grace_s) for w in by_attention(shown)]
    header = ["ID", "NAME", "CLI", "STATE", "CYCLE", "SINCE", "WAITING", "GOAL", "SUMMARY"]
    if any(_at_host(w) for w in workers):
        # Several hosts: each pane's machine, "local" included.
        header.insert(2, "HOST")
        for row, w in zip(rows, by_attention(shown), strict=True):
            row.insert(2, clean_text(str(w.get("host") or LOCAL_HOST)))
    if any(w.get("usage") for w in workers):
        # Only when some pane's agent told us its usage (app.observe.usage).
        at = header.index("SUMMARY")
        header.insert(at, "COST")
        for row, w in zip(rows, by_attention(shown), strict=True):
            row.insert(at, cost_cell(w.get("usage")))
    keep = [i for i, name in enumerate(header)
            if name in _ALWAYS or any(row[i] not in ("", "-") for row in rows)]
    widths = {i: max(len(row[i]) for row in [header, *rows]) for i in keep}
    summary = header.index("SUMMARY")
    if width is not None:
        room = min(SUMMARY_MIN, widths.get(summary, 0))
        for name in _DROP_ORDER:
            fixed = sum(widths[i] + 2 for i in keep if i != summary)
            if fixed + room <= width:
                break
            keep = [i for i in keep if header[i] != name]
    if "HOST" in header and header.index("HOST") not in keep:
        named = header.index("NAME")
        for row, w in zip(rows, by_attention(shown), strict=True):
            row[named] += clean_text(_at_host(w))
        widths[named] = max(len(row[named]) for row in [header, *rows])
    lines = []
    for row in [header, *rows] if rows else []:
        cells = [row[i] if i == keep[-1] else row[i].ljust(widths[i]) for i in keep]
        lines.append(fit("  ".join(cells).rstrip(), width))
    return "\n".join(lines + [fit(line, width) for line in ended])


def _at_host(w: Mapping[str, Any]) -> str:
    """``@HOST`` for a pane of another host, "" for this machine's."""
    host = w.get("host") or LOCAL_HOST
    return "" if host == LOCAL_HOST else f"@{host}"


def _table_row(w: Mapping[str, Any], now: float, grace_s: float) -> list[str]:
    entered = w.get("state_entered_ts")
    waited, long_wait = waiting(w, now, grace_s)
    state = shown_state(w)
    return [
        str(w.get("id") or ""),
        # Window names are set by programs (through escapes of their own): printable only.
        clean_text(str(w.get("name") or "")),
        clean_text(str(w.get("cli_type") or "-")),
        # Its host is not current: the state seen last may be over by now.
        f"{state} ({_STALE_SHORT.get(str(w['stale_reason']), 'stale')})"
        if w.get("stale_reason") else state,
        str(w.get("cycle") or "-"),
        _clock(entered, now) if entered else "-",
        "-" if waited is None else duration(waited) + (" long" if long_wait else ""),
        _one_line(str(w.get("goal") or "-"), GOAL_WIDTH),
        summary_cell(w),
    ]


def cost_cell(usage: Mapping[str, Any] | None) -> str:
    """Dollars, else (its model has no price) the tokens, else "-"."""
    from app.base.prices import money, tokens_text  # not for the status line, which shows none

    if not usage:
        return "-"
    if usage.get("cost_usd") is not None:
        return money(float(usage["cost_usd"]))
    count = sum(int(usage.get(kind) or 0)
                for kind in ("input", "output", "cache_read", "cache_write"))
    return f"{tokens_text(count)} tok" if count else "-"


def summary_cell(w: Mapping[str, Any], limit: int = 80) -> str:
    """The SUMMARY column: the verdict's summary, and what runs in the background after it,
    kept when the summary is cut (``Waiting for 2 background agents… · 2 background
    agents``); a lead's teammates too."""
    from app.base.background import background_in, plural

    notes = []
    background = background_in(w.get("reasons") or (), str(w.get("summary") or ""))
    if background is not None:
        notes.append(background.note())
    if w.get("teammates"):
        notes.append(plural(int(w["teammates"]), "teammate"))
    tail = "".join(f" · {note}" for note in notes)
    return _one_line(str(w.get("summary") or ""), max(20, limit - len(tail))) + tail


def fold_ended(workers: Sequence[Mapping[str, Any]], now: float
               ) -> tuple[list[Mapping[str, Any]], list[str]]:
    """The panes to list one by one, and one line per tmux server that ended (its panes'
    final rows say so), e.g. ``2 panes of tmux server default (pid 4242) ended 14:03:10 (api,
    web)``."""
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    kept: list[Mapping[str, Any]] = []
    for w in workers:
        if w.get("state") == "EXITED" and SERVER_ENDED in (w.get("reasons") or ()):
            groups.setdefault((str(w.get("socket") or "?"), int(w.get("server_pid") or 0)),
                              []).append(w)
        else:
            kept.append(w)
    lines = []
    for (socket, pid), panes in sorted(groups.items(), key=lambda g: _ended_at(g[1])):
        names = sorted(clean_text(str(w.get("name") or w.get("id"))) for w in panes)
        what = f"{len(panes)} pane{'s' if len(panes) != 1 else ''}"
        lines.append(f"{what} of tmux server {clean_text(socket)} (pid {pid}) ended "
                     f"{_clock(_ended_at(panes), now)} ({', '.join(names)})")
    return kept, lines


def _ended_at(panes: Sequence[Mapping[str, Any]]) -> float:
    return max(float(w.get("state_entered_ts") or 0.0) for w in panes)


def _clock(ts: float, now: float) -> str:
    """Time of day for today, with the date for anything older."""
    fmt = "%H:%M:%S" if now - ts < 20 * 3600 else "%Y-%m-%d %H:%M"
    return time.strftime(fmt, time.localtime(ts))


def _one_line(text: str, limit: int = 80) -> str:
    text = " ".join(clean_text(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def with_teammates(workers: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Each row with ``teammates`` (the listed panes that name it their ``lead``, not EXITED)
    and ``teammates_working`` (those of them BUSY)."""
    counts: dict[str, list[int]] = {}
    for w in workers:
        if w.get("lead") and w.get("state") != "EXITED":
            count = counts.setdefault(str(w["lead"]), [0, 0])
            count[0] += 1
            count[1] += w.get("state") == "BUSY"
    return [{**w, "teammates": counts.get(str(w.get("id")), [0, 0])[0],
             "teammates_working": counts.get(str(w.get("id")), [0, 0])[1]} for w in workers]


def as_json(workers: Sequence[Mapping[str, Any]], now: float, grace_s: float = 120.0,
            stale_s: float | None = None) -> str:
    """``stale_s``: how old the states are when the watcher stopped or fell behind (None:
    fresh); each row then says ``"stale": true`` and ``"stale_s"``."""
    import json

    from app.base.background import background_in

    out = []
    for w in by_attention(with_teammates(workers)):
        background = background_in(w.get("reasons") or (), str(w.get("summary") or ""))
        waited, long_wait = waiting(w, now, grace_s)
        changed = w.get("last_change_ts")
        out.append({**w, "waiting_s": None if waited is None else round(waited, 1),
                    "waiting_long": long_wait,
                    "inactive_s": round(max(0.0, now - changed), 1) if changed else None,
                    "stale": stale_s is not None or bool(w.get("stale_reason")),
                    "stale_s": None if stale_s is None else round(stale_s, 1),
                    # False: a finished turn the person has not looked at yet (DONE).
                    "seen": not unseen_done(w),
                    # Work the agent started that will resume its turn (a BUSY rule said so).
                    "background": background.as_dict() if background else None})
    return json.dumps(out, indent=2, ensure_ascii=False)


def history_line(ts_text: str, state: str, previous: str | None, summary: str,
                 reasons: Sequence[str]) -> str:
    arrow = f"{previous or '-'} -> {state}"
    tail = f"  {_one_line(summary)}" if summary else ""
    why = f"  [{', '.join(reasons)}]" if reasons else ""
    return f"{ts_text}  {arrow}{tail}{why}"


def watch_mode(signals: Sequence[str]) -> str:
    """How the watcher watches a pane, from the ``watch=`` entry of its signals."""
    if "watch=events" in signals:
        return "on output (tmux control mode), with the poll as a safety net"
    if "watch=poll" in signals:
        return "by polling only (control mode off or unavailable for this pane)"
    return "unknown (written by an older watcher)"


def stored_assessment(worker: Mapping[str, Any], now: float) -> list[str]:
    """``explain``'s account of what the watcher last stored for a pane: its state and since
    when, what decided it, how the pane is watched, and whether herding may act on it."""
    entered = worker.get("state_entered_ts")
    since = f" for {duration(now - entered)}" if entered else ""
    lines = [
        clean_text(f"{worker['name']} ({worker['id']}, pane {worker['pane_id']}): "
                   f"{worker['state']}{since}"),
        f"  reasons: {', '.join(worker['reasons']) or '-'}; confidence "
        f"{worker.get('confidence') or 0}; decided by {worker.get('classifier') or '-'} "
        f"rule {worker.get('rule_id') or '-'}",
        f"  signals: {', '.join(worker.get('signals') or []) or 'screen only'}",
        f"  watched: {watch_mode(worker.get('signals') or [])}",
    ]
    if worker.get("summary"):
        lines.append(f"  summary: {clean_text(worker['summary'])}")
    lines += background_evidence(worker)
    if worker.get("actions_needed"):
        lines.append(f"  actions: {clean_text(worker['actions_needed'])}")
    lines.append(f"  herding: {'eligible' if worker.get('eligible_for_herd') else 'not eligible'}"
                 f"{' (' + worker['herd_reason'] + ')' if worker.get('herd_reason') else ''}; "
                 f"goal: {clean_text(worker.get('goal') or '-')}")
    return lines


def background_evidence(worker: Mapping[str, Any]) -> list[str]:
    """``explain``'s lines on background work: what runs, and what said so (the screen's line,
    the hooks' count), and the pane's lead and teammates."""
    from app.base.background import BACKGROUND_NOTE, background_in

    reasons = worker.get("reasons") or ()
    background = background_in(reasons, str(worker.get("summary") or ""))
    lines = []
    if background is not None:
        what = "does not resume the turn: READY, with a note" if BACKGROUND_NOTE in reasons \
            else "resumes the turn when it ends: not READY until then"
        lines.append(f"  background: {background.note()}, which {what}")
        if "subagent_hooks" in reasons:
            lines.append("    evidence: Claude Code's hooks, SubagentStart events without their "
                         "SubagentStop")
        lines.append(f"    evidence: {clean_text(background.evidence)}")
    if worker.get("lead"):
        lines.append(f"  lead: {clean_text(str(worker['lead']))} (this pane was started for it)")
    if worker.get("teammates"):
        lines.append(f"  teammates: {worker['teammates']} pane(s) name this one their lead, "
                     f"{worker.get('teammates_working') or 0} working")
    return lines


def rule_trace(trace: RuleTrace) -> str:
    """One rule of a pack and how it fared on a screen (``explain``, ``classify --explain``)."""
    mark = "✓" if trace.matched else "·"
    return f"  {mark} {trace.state.value:<18} {trace.rule_id:<28} {trace.detail}"


# The fields MCP's `status` gives each pane.
MCP_FIELDS = ("id", "name", "host", "pane_id", "cli_type", "state", "cycle", "summary", "goal")


def mcp_rows(workers: Sequence[Mapping[str, Any]], include_exited: bool = False
             ) -> list[dict[str, Any]]:
    """MCP's ``status``: the live panes (EXITED too with ``include_exited``), each with its host;
    a pane of another host has its tmux id qualified (``gpu:%3``), since each tmux server
    numbers its panes from ``%0``. The row ``id`` is unique everywhere."""
    rows = []
    for w in by_attention(workers):
        if w.get("state") == "EXITED" and not include_exited:
            continue
        row = {k: w.get(k) for k in MCP_FIELDS}
        row["host"] = host = str(w.get("host") or "local")
        if host != "local" and row["pane_id"]:
            row["pane_id"] = f"{host}:{row['pane_id']}"
        rows.append(row)
    return rows
