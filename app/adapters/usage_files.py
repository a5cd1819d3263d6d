"""The agents' own usage records, read a little at a time: Claude Code's transcript, Codex's
rollout file, Gemini CLI's and Qwen Code's chat records, all JSON lines that only ever grow.

A :class:`Tail` remembers where it stopped (the file's inode and byte offset) and reads only
the complete lines written since; a caught-up file costs one ``stat``. A file that was replaced
(another inode) or cut shorter than the offset is read again from its start, with the parser's
memory cleared. Every line is the agent's data: a line that is not the JSON we expect is
skipped, never an error.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A line longer than this is no usage record (a pasted file in a user message): skipped whole.
_MAX_LINE = 4 << 20
# Bytes read per call at most: a huge transcript met for the first time is caught up over a few
# ticks instead of stalling one.
_MAX_READ = 8 << 20
# Claude Code writes one line per content block of a message, each carrying the message's
# usage: the ids recently counted, so the copies are not.
_REMEMBERED_IDS = 64


@dataclass(frozen=True)
class Usage:
    """Tokens of one model response, by kind. ``input`` excludes cached input."""

    model: str
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    ts: float = 0.0  # when the agent wrote it (epoch seconds), 0 when the line did not say


@dataclass
class Tail:
    """Where reading one pane's usage file stopped, and what its parser must remember."""

    path: str
    kind: str  # the parser: a key of PARSERS
    inode: int = 0
    offset: int = 0
    memo: dict[str, Any] = field(default_factory=dict)

    def read_new(self) -> list[Usage]:
        """The usage of the complete lines written since the last call ([] when none)."""
        try:
            st = Path(self.path).stat()
        except OSError:
            return []
        if st.st_ino != self.inode or st.st_size < self.offset:
            self.inode, self.offset, self.memo = st.st_ino, 0, {}
        if st.st_size == self.offset:
            return []
        try:
            with Path(self.path).open("rb") as f:
                f.seek(self.offset)
                chunk = f.read(min(st.st_size - self.offset, _MAX_READ))
        except OSError:
            return []
        return take_chunk(self, st.st_ino, self.offset, chunk)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _ts(record: dict[str, Any]) -> float:
    from datetime import datetime

    text = record.get("timestamp")
    if not isinstance(text, str):
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def claude_usage(record: dict[str, Any], memo: dict[str, Any]) -> list[Usage]:
    """An assistant line's ``message.usage``, once per message id."""
    if record.get("type") != "assistant":
        return []
    message = record.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("usage"), dict):
        return []
    message_id = str(message.get("id") or "")
    seen: list[str] = memo.setdefault("ids", [])
    if message_id:
        if message_id in seen:
            return []
        seen.append(message_id)
        del seen[:-_REMEMBERED_IDS]
    usage = message["usage"]
    found = Usage(str(message.get("model") or ""), _count(usage.get("input_tokens")),
                  _count(usage.get("output_tokens")),
                  _count(usage.get("cache_read_input_tokens")),
                  _count(usage.get("cache_creation_input_tokens")), _ts(record))
    return [found] if found.input or found.output or found.cache_read or found.cache_write \
        else []


_CODEX_KINDS = ("input_tokens", "cached_input_tokens", "output_tokens",
                "cache_write_input_tokens")


def codex_usage(record: dict[str, Any], memo: dict[str, Any]) -> list[Usage]:
    """What a ``token_count`` event added to the thread's running total (the model from the
    newest ``turn_context``). The total, not ``last_token_usage``: Codex repeats an event (a
    rate-limit update) without a new response, and a repeat adds nothing to the total."""
    payload = record.get("payload")
    if not isinstance(payload, dict):
        return []
    if record.get("type") == "turn_context":
        memo["model"] = str(payload.get("model") or "")
        return []
    if record.get("type") != "event_msg" or payload.get("type") != "token_count":
        return []
    info = payload.get("info")
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    if not isinstance(total, dict):
        return []
    now = [_count(total.get(kind)) for kind in _CODEX_KINDS]
    before = memo.get("total") or [0] * len(_CODEX_KINDS)
    memo["total"] = now
    added = [max(0, a - b) for a, b in zip(now, before, strict=False)]
    if not any(added):
        return []
    new_input, cached, output, cache_write = added
    # OpenAI counts cached input inside input_tokens.
    return [Usage(str(memo.get("model") or ""), max(0, new_input - cached), output, cached,
                  cache_write, _ts(record))]


def _once(memo: dict[str, Any], record_id: str) -> bool:
    """Whether ``record_id`` is met for the first time (an empty id always is)."""
    if not record_id:
        return True
    seen: list[str] = memo.setdefault("ids", [])
    if record_id in seen:
        return False
    seen.append(record_id)
    del seen[:-_REMEMBERED_IDS]
    return True


def gemini_usage(record: dict[str, Any], memo: dict[str, Any]) -> list[Usage]:
    """A ``gemini`` message's ``tokens``, once per message id. Gemini CLI 0.61 writes a message
    again when its tool calls are added (the same id), and a ``$set`` of the whole message list
    on resume: only top-level message lines count. ``input`` is Gemini's ``promptTokenCount``,
    which holds the cached tokens, and thoughts are billed as output."""
    if record.get("type") != "gemini" or not isinstance(record.get("tokens"), dict):
        return []
    if not _once(memo, str(record.get("id") or "")):
        return []
    tokens = record["tokens"]
    cached = _count(tokens.get("cached"))
    found = Usage(str(record.get("model") or ""),
                  max(0, _count(tokens.get("input")) - cached) + _count(tokens.get("tool")),
                  _count(tokens.get("output")) + _count(tokens.get("thoughts")), cached, 0,
                  _ts(record))
    return [found] if found.input or found.output or found.cache_read else []


def qwen_usage(record: dict[str, Any], memo: dict[str, Any]) -> list[Usage]:
    """An ``assistant`` line's ``usageMetadata``, once per line uuid. Qwen Code keeps Gemini's
    names with OpenAI's meaning: ``promptTokenCount`` holds the cached tokens, and
    ``candidatesTokenCount`` the thoughts (``thoughtsTokenCount`` is part of it)."""
    usage = record.get("usageMetadata")
    if record.get("type") != "assistant" or not isinstance(usage, dict):
        return []
    if not _once(memo, str(record.get("uuid") or "")):
        return []
    cached = _count(usage.get("cachedContentTokenCount"))
    found = Usage(str(record.get("model") or ""),
                  max(0, _count(usage.get("promptTokenCount")) - cached),
                  _count(usage.get("candidatesTokenCount")), cached, 0, _ts(record))
    return [found] if found.input or found.output or found.cache_read else []


PARSERS = {"claude": claude_usage, "codex": codex_usage, "gemini": gemini_usage,
           "qwen": qwen_usage}
# Bytes every line a parser wants holds (JSON may space its colons, so the key alone).
MARKERS = {"claude": (b'"usage"',), "codex": (b'"token_count"', b'"turn_context"'),
           "gemini": (b'"tokens"',), "qwen": (b'"usageMetadata"',)}


def codex_rollout(codex_home: str, thread_id: str) -> str:
    """The rollout file of one Codex thread under ``codex_home`` ("" when there is none): its
    name ends in the thread id, so no other conversation of the folder can be taken for it.
    ``thread_id`` must be checked (app.observe.sessions.SESSION_ID) before it comes here."""
    sessions = Path(codex_home) / "sessions"
    # Only the thread id is a pattern's part: checked, it holds no glob character.
    found = sorted(str(p) for p in sessions.glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
    return found[-1] if found else ""


def take_chunk(tail: Tail, inode: int, start: int, chunk: bytes) -> list[Usage]:
    """What :meth:`Tail.read_new` does with the bytes it read, for bytes read elsewhere (another
    host's file, app.adapters.remote_tails): ``chunk`` begins at byte ``start`` of the file of
    inode ``inode``. Start 0 for a tail that had stopped further on means the reader found the
    file replaced or cut, and began again, as read_new would."""
    if start != tail.offset or inode != tail.inode:
        if start != 0:
            return []  # not where this tail stopped, nor a new beginning: not ours to count
        tail.inode, tail.offset, tail.memo = inode, 0, {}
    end = chunk.rfind(b"\n")
    if end < 0:
        if len(chunk) >= _MAX_LINE:
            tail.offset += len(chunk)  # one giant unfinished line: not ours to hold
        return []
    tail.offset += end + 1
    # A new memo, not the old one changed: a caller that keeps the Tail as it was (to read
    # again after a failed store write) keeps its memo too.
    memo = copy.deepcopy(tail.memo)
    parse, markers = PARSERS[tail.kind], MARKERS[tail.kind]
    found: list[Usage] = []
    for line in chunk[:end].split(b"\n"):
        # Most lines are prose and tool output: not parsed at all.
        if len(line) > _MAX_LINE or not any(marker in line for marker in markers):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            found.extend(parse(record, memo))
    tail.memo = memo
    return found
