"""Read one hook call's JSON payload (Claude Code, Codex ``notify``, Gemini CLI) into a HookEvent.

This runs inside every hook call, and the agent waits for Claude's and Gemini's hooks: stdlib only,
no ``typing`` at run time, and the secret filter is imported only when there is text to clean.
Which event means what, and where each fact was learned: ``design/hooks.md``.
"""

from __future__ import annotations

import json

# typing costs ~5 ms to import; the agent waits for every hook call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CLIS = ("claude", "codex", "gemini", "qwen")
KINDS = ("turn_start", "working", "turn_end", "permission", "idle", "session_end", "other")
DETAIL_MAX = 200

# Claude Code's events. Codex's own lifecycle hooks reuse these names and payload fields, so a
# ``--cli codex`` payload that has ``hook_event_name`` is read with this table too.
_CLAUDE_KINDS = {
    "UserPromptSubmit": "turn_start",
    "PreToolUse": "working",
    "PostToolUse": "working",
    "PostToolUseFailure": "working",
    "PostToolBatch": "working",
    "SubagentStart": "working",
    "SubagentStop": "working",
    # The auto-mode classifier refused one tool call; the model carries on.
    "PermissionDenied": "working",
    "PermissionRequest": "permission",
    "Stop": "turn_end",
    # The turn ended on an API error (rate limit, overload...): the prompt is back.
    "StopFailure": "turn_end",
    "SessionEnd": "session_end",
}

_GEMINI_KINDS = {
    "BeforeAgent": "turn_start",
    "BeforeModel": "working",
    "AfterModel": "working",
    "BeforeToolSelection": "working",
    "BeforeTool": "working",
    "AfterTool": "working",
    "AfterAgent": "turn_end",
    "SessionEnd": "session_end",
}

_CODEX_TITLE_PROMPT = "Generate a concise, single-line task title"
_CODEX_NOTIFY_KINDS = {
    "agent-turn-complete": "turn_end",
    # Sent by some Codex versions only; the name says what it means.
    "agent-turn-start": "turn_start",
}

# Names both Claude and Gemini use; only these need the payload's shape to tell the CLI apart.
_SHARED_NAMES = frozenset({"Notification", "SessionStart", "SessionEnd"})
_GEMINI_ONLY = (frozenset(_GEMINI_KINDS) | {"PreCompress"}) - _SHARED_NAMES
_CLAUDE_ONLY = (frozenset(_CLAUDE_KINDS) | {"PreCompact", "PostCompact"}) - _SHARED_NAMES

# Claude's ``notification_type`` values (2.1.x). An elicitation is an MCP server's question in a
# dialog the turn cannot pass without an answer, like a permission prompt.
_CLAUDE_PERMISSION_TYPES = frozenset({
    "permission_prompt", "worker_permission_prompt", "elicitation_dialog", "elicitation_url_dialog",
})
_CLAUDE_IDLE_TYPES = frozenset({"idle_prompt"})

_TOOL_EVENTS = frozenset({
    "PreToolUse", "PostToolUse", "PermissionRequest", "PermissionDenied", "BeforeTool", "AfterTool",
})

# C0 and C1 controls (escape sequences included) become spaces: detail lands on a status line.
_CONTROLS = dict.fromkeys((*range(0x20), *range(0x7F, 0xA0)), " ")


class HookEvent:
    """What one hook call says about its agent.

    ``kind`` is one of KINDS; ``name`` is the CLI's own event name; ``detail`` is at most
    DETAIL_MAX characters of one line with secrets masked; ``session_id`` is "" when unknown;
    ``transcript`` is the path of the agent's own conversation file its payload names ("" when
    it names none). Both are the agent's data: only ever stored and shown, checked before use.
    ``fired`` is when the CLI fired the event by its own word (epoch seconds; 0: it gave none).
    """

    __slots__ = ("cli", "detail", "fired", "kind", "name", "session_id", "transcript")

    def __init__(
        self, cli: str, name: str, kind: str, detail: str = "", session_id: str = "",
        transcript: str = "", fired: float = 0.0,
    ) -> None:
        self.cli = cli
        self.name = name
        self.kind = kind
        self.detail = detail
        self.session_id = session_id
        self.transcript = transcript
        self.fired = fired

    def as_dict(self) -> dict[str, str]:
        return {
            "cli": self.cli, "name": self.name, "kind": self.kind, "detail": self.detail,
            "session_id": self.session_id,
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HookEvent):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value!r}" for key, value in self.as_dict().items())
        return f"HookEvent({fields})"


def parse_event(cli: str | None, payload_text: str) -> HookEvent:
    """Read one payload; ``cli`` None (or not one of CLIS) means guess it from the payload.

    Raises ValueError with a one-line message when the text is not a JSON object. An event this
    module does not know is not an error: it comes back with kind "other".
    """
    payload = _load(payload_text)
    name = _text(payload.get("hook_event_name"))
    notify_type = _text(payload.get("type")) if not name else ""
    known = cli.strip().lower() if cli else ""
    if known not in CLIS:
        known = _detect(payload, name, notify_type)

    if known == "codex" and not name:
        kind = _CODEX_NOTIFY_KINDS.get(notify_type, "other")
        thread = _text(payload.get("thread-id")) or _text(payload.get("thread_id"))
        if _codex_title_turn(payload):
            # Codex's own side turn naming the thread, not the user's turn; its thread is not
            # the conversation either, and must never be taken for the pane's session.
            kind, thread = "other", ""
        return HookEvent("codex", notify_type, kind, _codex_detail(payload, notify_type),
                         thread)
    session_id = _text(payload.get("session_id"))
    transcript = _one_path(_text(payload.get("transcript_path")))
    if known == "gemini":
        kind = _gemini_kind(name, payload)
        if name == "SessionStart" and _text(payload.get("source")) == "resume":
            # Gemini CLI 0.61 names a new file here that gets only a header: the resumed turns
            # go on in the session's first file, which BeforeAgent names.
            transcript = ""
    elif known in ("claude", "codex", "qwen"):
        kind = _claude_kind(name, payload)
    else:
        kind = "other"
    return HookEvent(known, name, kind, _detail(name, payload), session_id, transcript,
                     _fired(payload))


def _fired(payload: dict[str, Any]) -> float:
    """The payload's own ``timestamp`` (Gemini CLI: ISO 8601 in UTC, when it fired the event)
    as epoch seconds; 0.0 when it has none that reads as a moment with its zone."""
    stamp = payload.get("timestamp")
    if not isinstance(stamp, str) or not 0 < len(stamp) <= 40:
        return 0.0
    from datetime import datetime

    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return 0.0
    # A time without its zone would be read in ours: a guess, not the CLI's word.
    return moment.timestamp() if moment.tzinfo is not None else 0.0


def _load(payload_text: str) -> dict[str, Any]:
    if not payload_text.strip():
        raise ValueError("hook payload is empty")
    try:
        payload = json.loads(payload_text)
    except ValueError as error:
        # JSONDecodeError's own text can quote the payload; keep to position and reason.
        where = getattr(error, "lineno", None), getattr(error, "colno", None)
        reason = getattr(error, "msg", "cannot be decoded")
        raise ValueError(
            f"hook payload is not valid JSON: {reason} (line {where[0]}, column {where[1]})"
        ) from None
    if not isinstance(payload, dict):
        raise ValueError(f"hook payload is a JSON {_json_type(payload)}, not an object")
    return payload


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, list):
        return "array"
    return "string" if isinstance(value, str) else "number"


def _detect(payload: dict[str, Any], name: str, notify_type: str) -> str:
    if not name:
        # Codex notify JSON is the only payload without hook_event_name; its ``type`` is kebab-case.
        if notify_type.startswith("agent-turn") or "thread-id" in payload:
            return "codex"
        return "unknown"
    if name in _GEMINI_ONLY:
        return "gemini"
    if name in _CLAUDE_ONLY:
        # Qwen Code fires Claude's events with Gemini's ISO ``timestamp``; Claude's carry none.
        return "qwen" if "timestamp" in payload else "claude"
    if name in _SHARED_NAMES:
        # Gemini's base input carries an ISO ``timestamp``; Claude's has none.
        return "gemini" if "timestamp" in payload else "claude"
    return "unknown"


def _claude_kind(name: str, payload: dict[str, Any]) -> str:
    if name != "Notification":
        return _CLAUDE_KINDS.get(name, "other")
    notification_type = _text(payload.get("notification_type"))
    if notification_type in _CLAUDE_PERMISSION_TYPES:
        return "permission"
    if notification_type in _CLAUDE_IDLE_TYPES:
        return "idle"
    if notification_type:
        return "other"
    # Before notification_type existed (Claude Code < 1.0.x) only the message told them apart.
    message = _text(payload.get("message")).lower()
    if "permission" in message:
        return "permission"
    if "waiting for your input" in message:
        return "idle"
    return "other"


def _gemini_kind(name: str, payload: dict[str, Any]) -> str:
    if name == "Notification":
        # ToolPermission is the only notification type Gemini CLI 0.61 sends.
        permission = _text(payload.get("notification_type")) == "ToolPermission"
        return "permission" if permission else "other"
    return _GEMINI_KINDS.get(name, "other")


def _detail(name: str, payload: dict[str, Any]) -> str:
    tool = _text(payload.get("tool_name"))
    if name == "PostToolUseFailure":
        return _clean(f"{tool} failed" if tool else "tool failed")
    if name in _TOOL_EVENTS:
        return _clean(tool)
    if name == "StopFailure":
        return _clean(f"error: {_text(payload.get('error')) or 'unknown'}")
    if name in ("SubagentStart", "SubagentStop"):
        return _clean(_text(payload.get("agent_type")))
    for field in ("message", "prompt_response", "last_assistant_message", "prompt", "reason"):
        value = _text(payload.get(field))
        if value:
            return _clean(value)
    return ""


def _codex_title_turn(payload: dict[str, Any]) -> bool:
    """Codex 0.169 also runs ``notify`` for the hidden turn that titles a new thread, about
    0.1 s after the user's first prompt, while the real turn has only begun."""
    inputs = payload.get("input-messages")
    first = inputs[0] if isinstance(inputs, list) and inputs else ""
    return isinstance(first, str) and first.startswith(_CODEX_TITLE_PROMPT)


def _codex_detail(payload: dict[str, Any], notify_type: str) -> str:
    if notify_type == "agent-turn-complete":
        return _clean(_text(payload.get("last-assistant-message")))
    inputs = payload.get("input-messages")
    if isinstance(inputs, list) and inputs:
        return _clean(_text(inputs[-1]))
    return ""


def _one_path(text: str) -> str:
    """A transcript path as it was given, when it is one plausible absolute path; else ""."""
    if not text.startswith("/") or len(text) > 4096 or not text.isprintable():
        return ""
    return text


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _clean(text: str) -> str:
    """One line, secrets masked, at most DETAIL_MAX characters."""
    if not text:
        return ""
    # Masking before cutting, so a key cut in half cannot slip past the patterns; the first
    # few thousand characters are all that can end up in DETAIL_MAX.
    line = " ".join(text[: DETAIL_MAX * 10].translate(_CONTROLS).split())
    from app.base.redact import redact

    line = redact(line)
    if len(line) > DETAIL_MAX:
        line = line[: DETAIL_MAX - 1].rstrip() + "…"
    return line
