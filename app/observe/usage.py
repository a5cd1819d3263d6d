"""Tokens per pane: each tick, the new lines of the usage file of every pane's agent, added to
the store by pane, day and model.

Which file is the pane's own comes from its session identity (app.observe.sessions): the
transcript its hooks named (Claude Code), or the rollout file of the thread Codex's notify named
(the hook found it in the agent's own CODEX_HOME). A pane whose agent named none has no usage,
never another conversation's. The session events are read incrementally too (only those after
the last one seen), so a caught-up pane costs one ``stat`` per tick.

Local panes only: a remote pane's file is on its host.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from app.adapters.store import StoreWriter
from app.adapters.usage_files import PARSERS, Tail, Usage
from app.observe.pane import Tracked
from app.observe.sessions import identity

log = logging.getLogger(__name__)


class UsageReader:
    def __init__(self, store: StoreWriter) -> None:
        self.store = store
        self._seq = 0
        # (pane id, server pid) -> its newest session-naming event.
        self._sessions: dict[tuple[str, int | None], dict[str, Any]] = {}
        self._tails: dict[str, Tail] = {}
        self._loaded = False

    def read(self, panes: Mapping[str, Tracked], now: float) -> int:
        """Read what every pane's agent wrote since the last call and store it; the number of
        usage records stored. Never raises for a pane: a fault is logged and the tick goes on."""
        self._load()
        for event in self.store.usage.session_events_after(self._seq):
            self._seq = event["seq"]
            self._sessions[(event["pane_id"], event["server_pid"])] = event
        news: list[tuple[Tracked, Tail, list[Usage]]] = []
        before: dict[str, Tail] = {}
        for wid, tracked in panes.items():
            try:
                tail = self._tail(wid, tracked)
                if tail is None:
                    continue
                kept = replace(tail)  # read_new replaces the memo, never changes it
                found = tail.read_new()
                if (tail.inode, tail.offset) != (kept.inode, kept.offset):
                    news.append((tracked, tail, found))
                    before[wid] = kept
            except Exception:  # one pane's file must never stop the others
                log.exception("usage: pane %s skipped", wid)
        if news:
            try:
                self._write(news, now)
            except BaseException:
                self._tails.update(before)  # not stored: read again with the next tick
                raise
        return sum(len(found) for _, _, found in news)

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for wid, row in self.store.usage.tails().items():
            if row.get("kind") in PARSERS:
                self._tails[wid] = Tail(row["path"], row["kind"], int(row["inode"] or 0),
                                        int(row["offset"] or 0), json.loads(row["memo"] or "{}"))

    def _tail(self, wid: str, tracked: Tracked) -> Tail | None:
        pty = tracked.pty_row
        if not pty or (pty.get("host") or "local") != "local":
            return None
        event = self._sessions.get((tracked.pane.pane_id, pty.get("server_pid")))
        found = identity(pty, event)
        if found is None or not found.transcript or found.cli not in PARSERS:
            return self._tails.get(wid)  # keep reading the file it had (its agent may be gone)
        tail = self._tails.get(wid)
        if tail is None or tail.path != found.transcript:
            tail = self._tails[wid] = Tail(found.transcript, found.cli)
        return tail

    def _write(self, news: list[tuple[Tracked, Tail, list[Usage]]], now: float) -> None:
        with self.store.transaction() as conn:
            for tracked, tail, found in news:
                pty = tracked.pty_row or {}
                for day, model, tokens in _by_day_and_model(found, now):
                    self.store.usage.add(conn, {
                        "id": tracked.worker_id, "day": day, "model": model,
                        "name": tracked.name, "host": pty.get("host") or "local",
                        **tokens, "updated_ts": now})
                self.store.usage.set_tail(conn, {
                    "id": tracked.worker_id, "path": tail.path, "kind": tail.kind,
                    "inode": tail.inode, "offset": tail.offset,
                    "memo": json.dumps(tail.memo), "updated_ts": now})


def day_of(ts: float) -> str:
    """The local calendar day of an epoch time: budgets per day follow the person's clock."""
    return time.strftime("%Y-%m-%d", time.localtime(ts))


def _by_day_and_model(found: list[Usage], now: float
                      ) -> list[tuple[str, str, dict[str, int]]]:
    sums: dict[tuple[str, str], dict[str, int]] = {}
    for usage in found:
        key = (day_of(usage.ts or now), usage.model)
        total = sums.setdefault(key, {"input": 0, "output": 0, "cache_read": 0,
                                      "cache_write": 0})
        total["input"] += usage.input
        total["output"] += usage.output
        total["cache_read"] += usage.cache_read
        total["cache_write"] += usage.cache_write
    return [(day, model, tokens) for (day, model), tokens in sums.items()]
