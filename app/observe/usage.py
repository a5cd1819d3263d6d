"""Tokens per pane: each tick, the new lines of the usage file of every pane's agent, added to
the store by pane, day and model.

Which file is the pane's own comes from its session identity (app.observe.sessions): the
transcript its hooks named (Claude Code), or the rollout file of the thread Codex's notify named
(the hook found it in the agent's own CODEX_HOME). A pane whose agent named none has no usage,
never another conversation's. The session events are read incrementally too (only those after
the last one seen), so a caught-up pane costs one ``stat`` per tick.

A watcher reads the panes of its own host: this machine's files directly, another host's through
its ssh connection (app.adapters.remote_tails), all of that host's files in one call per tick.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from app.adapters.store import StoreWriter
from app.adapters.tmux import LOCAL_HOST
from app.adapters.usage_files import PARSERS, Tail, Usage
from app.observe.pane import Tracked
from app.observe.sessions import identity

log = logging.getLogger(__name__)

# Reads the new lines of each tail's file, one list per tail, in order (the tails are moved on).
ReadTails = Callable[[Sequence[Tail]], list[list[Usage]]]


def read_local(tails: Sequence[Tail]) -> list[list[Usage]]:
    found: list[list[Usage]] = []
    for tail in tails:
        try:
            found.append(tail.read_new())
        except Exception:  # one pane's file must never stop the others
            log.exception("usage: %s skipped", tail.path)
            found.append([])
    return found


class UsageReader:
    def __init__(self, store: StoreWriter, host: str = LOCAL_HOST,
                 read_tails: ReadTails = read_local) -> None:
        """The usage of ``host``'s panes (the watcher's own), their files read by
        ``read_tails``."""
        self.store = store
        self.host = host
        self.read_tails = read_tails
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
        wanted: list[tuple[str, Tracked, Tail]] = []
        for wid, tracked in panes.items():
            try:
                tail = self._tail(wid, tracked)
            except Exception:  # one pane's file must never stop the others
                log.exception("usage: pane %s skipped", wid)
                continue
            if tail is not None:
                wanted.append((wid, tracked, tail))
        # Reading replaces a tail's memo, never changes it: the copies are the tails as they were.
        kept = {wid: replace(tail) for wid, _, tail in wanted}
        try:
            founds = self.read_tails([tail for _, _, tail in wanted])
        except Exception as exc:  # a host gone away: its figures stay, read again next tick
            log.warning("usage: host %s not read: %s", self.host, exc)
            self._tails.update(kept)
            return 0
        news: list[tuple[Tracked, Tail, list[Usage]]] = []
        before: dict[str, Tail] = {}
        for (wid, tracked, tail), found in zip(wanted, founds, strict=True):
            if (tail.inode, tail.offset) != (kept[wid].inode, kept[wid].offset):
                news.append((tracked, tail, found))
                before[wid] = kept[wid]
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
        if not pty or (pty.get("host") or LOCAL_HOST) != self.host:
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
