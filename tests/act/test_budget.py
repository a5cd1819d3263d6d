"""Budgets automation obeys (issue 33), on a real tmux server and a real store: a herded pane past
its [budget] is not nudged again (reason "budget", in the log and one notification), a cycle
directive is not typed, a person's own `send` goes through, and `budget reset` lets them act
again. The pane runs tests/support/fake_agent.py; its usage is put in the store as the watcher's
reader would (the reading itself: tests/e2e/test_usage_with_agents.py)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.act.cycle import jobs
from app.act.cycle.jobs import CycleSettings
from app.act.cycle.step import CycleStep
from app.act.herd.eligibility import HerdSettings
from app.act.herd.step import HerdStep
from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.model import Note, State
from app.base.prices import Budget
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.observe.pane import Tracked
from app.observe.usage import day_of
from app.run.watcher import Watcher
from tests.conftest import REPO, conductor
from tests.support.waiting import retry_until

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"
LATER = 30.0  # past stall_after and stability without waiting for them
# claude-opus-4-5 at $5 / $25 per million: 100k in and 40k out are $1.50.
SPENT = {"input": 100_000, "output": 40_000, "cache_read": 0, "cache_write": 0}
PANE_LIMIT = Budget(pane_usd=1.0)


class Lab:
    def __init__(self, socket_name: str, store: StoreWriter, pane: Any,
                 steps: list[Any] | None = None) -> None:
        self.socket_name = socket_name
        self.store = store
        self.pane = pane
        self.tmux = Tmux(socket_name=socket_name)
        self.notes: list[Note] = []
        self.watcher = Watcher(self.tmux, store, load_packs(),
                               WatchSettings(interval_s=0.2, ready_min_s=0), steps=steps or [])

    def settle(self) -> Tracked:
        def ready() -> bool:
            self.watcher.tick()
            t = self.tracked()
            return t is not None and t.assessment is not None and \
                t.assessment.state is State.READY
        retry_until(ready, 20, interval=0.1)
        tracked = self.tracked()
        assert tracked is not None
        return tracked

    def tracked(self) -> Tracked | None:
        return next((t for t in self.watcher.tracked.values()
                     if t.pane.pane_id == self.pane.pane_id), None)

    def spend(self, worker_id: str, tokens: dict[str, int] = SPENT) -> None:
        now = time.time()
        with self.store.transaction() as conn:
            self.store.usage.add(conn, {"id": worker_id, "day": day_of(now),
                                        "model": "claude-opus-4-5", "name": "agent",
                                        "host": "local", **tokens, "updated_ts": now})

    def screen(self) -> str:
        return "\n".join(self.pane.capture_pane())

    def sends(self, name: str) -> int:
        return int(self.store.conn.execute(
            "SELECT COUNT(*) FROM events WHERE kind = 'send' AND name = ?", (name,)).fetchone()[0])

    def pty(self, *args: str) -> Any:
        done = conductor("-L", self.socket_name, "pty", *args)
        assert done.returncode == 0, done.stderr
        return done


@pytest.fixture
def agent_pane(server: Any, session: Any) -> Any:
    window = session.new_window(window_name="agent", window_shell=AGENT, attach=False)
    pane = window.active_pane
    retry_until(lambda: "? for shortcuts" in "\n".join(pane.capture_pane()), 10)
    return pane


@pytest.fixture
def store(isolated_env: Path) -> Iterator[StoreWriter]:
    writer = StoreWriter(isolated_env)
    yield writer
    writer.close()


def test_a_herded_pane_past_its_budget_is_not_nudged_until_a_person_resets_it(
        server: Any, agent_pane: Any, store: StoreWriter, tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[budget]\npane_usd = 1.0\n")  # for the CLI
    lab = Lab(server.socket_name, store, agent_pane)
    step = HerdStep(lab.tmux, store, load_packs(),
                    HerdSettings(stall_after_s=1, stability_s=0, cooldown_s=0, max_nudges=10,
                                 budget=PANE_LIMIT),
                    lab.watcher.settings, announce=lambda _, note: lab.notes.append(note))
    lab.pty("send", agent_pane.pane_id, "say Shall I continue?")
    tracked = lab.settle()
    with store.transaction() as conn:
        store.herd.upsert_herd(conn, {"id": tracked.worker_id, "enabled": 1,
                                      "rules": "conservative"})
    lab.spend(tracked.worker_id)

    for _ in range(3):  # decided again and again: one log row, one notification
        tracked = lab.settle()
        now = time.time() + LATER
        assert step.observe(tracked, now) == {"herd_eligible": 0, "herd_reason": "budget"}
        step.act({}, [], now)
    assert lab.sends("herd") == 0
    [(outcome, reason, detail)] = store.conn.execute(
        "SELECT outcome, reason, detail FROM nudges").fetchall()
    assert (outcome, reason) == ("blocked", "budget")
    assert detail == "pane spent $1.50 of its $1.00 budget"
    assert [(n.what, n.body) for n in lab.notes] == [
        ("budget", "herd stopped: pane spent $1.50 of its $1.00 budget")]
    assert any(json.loads(line)["reason"] == "budget"
               for line in lab.pty("herd", "log", "--json").stdout.splitlines())

    explained = lab.pty("explain", tracked.worker_id).stdout
    assert "spend: $1.50 (input 100.0k, output 40.0k, cache read 0, cache write 0); budget: " \
           "over, pane spent $1.50 of its $1.00 budget" in explained

    # A person's own send goes through.
    lab.pty("send", agent_pane.pane_id, "say Person here.")
    retry_until(lambda: "Person here." in lab.screen(), 10)

    lab.pty("budget", "reset", tracked.worker_id)
    tracked = lab.settle()
    now = time.time() + LATER
    assert step.observe(tracked, now)["herd_reason"] != "budget"
    assert "within its budget" in lab.pty("explain", tracked.worker_id).stdout


def test_a_cycle_directive_is_not_typed_past_the_budget(
        server: Any, agent_pane: Any, store: StoreWriter) -> None:
    settings = CycleSettings(wait_s=0.5, idle_s=0.5, spin_max_s=2.0, cmd_timeout_s=20.0,
                             output_chars=2000, transcript_entries=5,
                             budget=Budget(pane_tokens=1000))
    notes: list[Note] = []
    lab = Lab(server.socket_name, store, agent_pane)
    step = CycleStep(lab.tmux, store, load_packs(), settings, lab.watcher.settings,
                     announce=lambda _, note: notes.append(note))
    lab.watcher.steps = (step,)
    try:
        tracked = lab.settle()
        lab.spend(tracked.worker_id)
        seq = jobs.report(store.workers_dir, tracked.worker_id, "implemented the parser",
                          "echo 'FAILED tests/test_io.py'; exit 3", settings)

        def done() -> bool:
            lab.watcher.tick()
            return store.jobs.of(tracked.worker_id)[-1].state.shown in ("STANDBY", "PAUSED")

        retry_until(done, 30, interval=0.1)
    finally:
        step.close()
    job = next(j for j in store.jobs.of(tracked.worker_id) if j.seq == seq)
    assert job.state.shown == "PAUSED"
    assert "budget: pane used 140.0k tokens of its 1.0k budget" in (job.detail or "")
    assert lab.sends("cycle") == 0
    assert [n.what for n in notes] == ["needs_you"]
    assert "budget" in notes[0].body


def test_spend_counts_from_the_last_reset_and_a_day_limit_holds_every_pane() -> None:
    from app.observe.spend import over_budget

    today = "2026-11-28"
    rows = [{"id": "w1", "day": today, "model": "claude-opus-4-5", **SPENT},
            {"id": "w2", "day": today, "model": "claude-opus-4-5", **SPENT},
            {"id": "w2", "day": "2026-11-27", "model": "claude-opus-4-5", **SPENT},
            {"id": "w3", "day": today, "model": "no-such-model", "input": 10**9}]
    assert over_budget("w1", rows, {}, Budget(), today) == ""  # no limit set
    assert over_budget("w1", rows, {}, Budget(pane_usd=2.0), today) == ""
    assert over_budget("w2", rows, {}, Budget(pane_usd=2.0), today) == \
        "pane spent $3.00 of its $2.00 budget"
    assert over_budget("w2", rows, {"w2": {"usd": 1.5, "tokens": 140_000}},
                       Budget(pane_usd=2.0), today) == ""
    # A model without a price costs nothing, but its tokens count.
    assert over_budget("w3", rows, {}, Budget(pane_usd=0.01), today) == ""
    assert over_budget("w3", rows, {}, Budget(pane_tokens=10**6), today) == \
        "pane used 1000.00M tokens of its 1.00M budget"
    # Today: w1 and w2 together, $3.00; yesterday's spend of w2 is not today's.
    assert over_budget("w3", rows, {}, Budget(day_usd=3.0), today) == \
        "today spent $3.00 of its $3.00 budget"
    assert over_budget("w3", rows, {f"day:{today}": {"usd": 1.0, "tokens": 0}},
                       Budget(day_usd=3.0), today) == ""
