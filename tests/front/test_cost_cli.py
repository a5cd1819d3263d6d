"""`conductor pty cost`, the COST column and `usage` of `status`, `[prices."MODEL"]` in the
config file and `budget reset`, through the real CLI on a store holding known usage."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from app.adapters.store import StoreWriter
from tests.conftest import conductor

DAY = "2026-11-27"
OTHER_DAY = "2026-11-28"


def _usage(worker_id: str, day: str, model: str, host: str = "local", **tokens: int
           ) -> dict[str, Any]:
    return {"id": worker_id, "day": day, "model": model, "name": f"name-{worker_id}",
            "host": host, "input": 0, "output": 0, "cache_read": 0, "cache_write": 0,
            **tokens, "updated_ts": time.time()}


@pytest.fixture
def spent(isolated_env: Path) -> Path:
    """Pane w1 on claude-opus-4-5 ($5 / $25 / $6.25 / $0.50 per million) over two days, pane
    w2 on a model with no price, pane w3 on host gpu."""
    store = StoreWriter(isolated_env)
    try:
        now = time.time()
        with store.transaction() as conn:
            for wid, name, host in (("w1", "api", "local"), ("w2", "web", "local"),
                                    ("w3", "train", "gpu")):
                store.upsert_pty(conn, {"id": wid, "name": name, "host": host,
                                        "socket": "s", "pane_id": "%1", "last_seen_ts": now})
                store.upsert_status(conn, [{"id": wid, "state": "READY", "summary": "idle",
                                            "state_entered_ts": now, "last_change_ts": now}])
            store.usage.add(conn, _usage("w1", DAY, "claude-opus-4-5", input=1_000_000,
                                         output=100_000))
            store.usage.add(conn, _usage("w1", OTHER_DAY, "claude-opus-4-5",
                                         cache_read=2_000_000, cache_write=400_000))
            store.usage.add(conn, _usage("w1", OTHER_DAY, "claude-opus-4-5", input=10))
            store.usage.add(conn, _usage("w2", OTHER_DAY, "mystery-1", input=4000, output=1000))
            store.usage.add(conn, _usage("w3", DAY, "gpt-5-codex", host="gpu", input=800_000,
                                         output=100_000))
    finally:
        store.close()
    return isolated_env


def _json(*args: str) -> Any:
    done = conductor("pty", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_cost_by_pane_day_and_host_adds_up_and_prices_known_models(spent: Path) -> None:
    by_pane = {row["pane"]: row for row in _json("cost", "--json")}
    # 1M in at $5, 100k out at $25, 2M cache reads at $0.50, 400k cache writes at $6.25, 10 in.
    assert by_pane["w1"]["cost_usd"] == pytest.approx(5 + 2.5 + 1 + 2.5 + 10 * 5 / 1e6)
    assert (by_pane["w1"]["input"], by_pane["w1"]["cache_read"]) == (1_000_010, 2_000_000)
    assert by_pane["w2"] == {"pane": "w2", "name": "name-w2", "host": "local", "input": 4000,
                             "output": 1000, "cache_read": 0, "cache_write": 0,
                             "cost_usd": None}
    assert by_pane["w3"]["cost_usd"] == pytest.approx(0.8 * 1.25 + 0.1 * 10)
    by_day = {row["day"]: row for row in _json("cost", "--by", "day", "--json")}
    assert by_day[DAY]["cost_usd"] == pytest.approx(7.5 + 2.0)
    assert by_day[OTHER_DAY]["input"] == 4010
    by_host = {row["host"]: row["output"] for row in _json("cost", "--by", "host", "--json")}
    assert by_host == {"local": 101_000, "gpu": 100_000}

    table = conductor("pty", "cost")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["PANE", "NAME", "INPUT", "OUTPUT", "CACHE", "READ", "CACHE",
                                "WRITE", "COST"]
    assert lines[1].split()[:2] == ["w1", "name-w1"] and lines[1].endswith("$11.00")
    assert lines[-2].startswith("total")
    assert "5.0k tokens of models without a price" in lines[-1]


def test_status_shows_cost_and_its_json_the_usage(spent: Path) -> None:
    rows = {row["id"]: row["usage"] for row in _json("status", "--json")}
    assert rows["w2"] == {"input": 4000, "output": 1000, "cache_read": 0, "cache_write": 0,
                          "cost_usd": None}
    assert rows["w1"]["cost_usd"] == pytest.approx(11.00005)
    table = conductor("pty", "status", "--width", "200")
    assert table.returncode == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert "COST" in header.split()
    cells = {line.split()[0]: line for line in lines}
    assert "$11.00" in cells["w1"] and "5.0k tok" in cells["w2"]


def test_status_has_no_cost_column_without_usage(isolated_env: Path) -> None:
    store = StoreWriter(isolated_env)
    try:
        with store.transaction() as conn:
            store.upsert_pty(conn, {"id": "w1", "name": "api", "socket": "s", "pane_id": "%1"})
            store.upsert_status(conn, [{"id": "w1", "state": "READY", "summary": "idle"}])
    finally:
        store.close()
    table = conductor("pty", "status", "--width", "200")
    assert table.returncode == 0, table.stderr
    assert "COST" not in table.stdout
    assert _json("status", "--json")[0]["usage"] is None


def test_the_config_prices_a_model_and_a_bad_price_is_one_line(spent: Path,
                                                              tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[prices."mystery-1"]\ninput = 2.0\noutput = 10.0\n')
    w2 = next(row for row in _json("cost", "--json") if row["pane"] == "w2")
    assert w2["cost_usd"] == pytest.approx(4000 * 2 / 1e6 + 1000 * 10 / 1e6)
    config.write_text('[prices."mystery-1"]\ninput = -1\n')
    done = conductor("pty", "cost")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "input must be a number ≥ 0" in done.stderr and str(config) in done.stderr


def test_budget_reset_counts_a_pane_from_its_spend_now(spent: Path) -> None:
    done = conductor("pty", "budget", "reset", "w1")
    assert done.returncode == 0, done.stderr
    assert "budget reset for pane w1" in done.stdout
    store = StoreWriter(spent)
    try:
        resets = store.usage.resets()
    finally:
        store.close()
    assert set(resets) == {"w1"}
    assert resets["w1"]["usd"] == pytest.approx(11.00005)
    assert resets["w1"]["tokens"] == 1_000_010 + 100_000 + 400_000
    missing = conductor("pty", "budget", "reset", "nope")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1


@pytest.mark.slow
def test_the_daemon_stops_nudging_a_pane_past_its_budget_and_a_person_still_sends(
        server: Any, session: Any, watcher_process: Any, tmp_path: Path,
        isolated_env: Path) -> None:
    """The [budget] of the config file reaches the running watcher's herding: nudged once while
    within it, then (its agent's spend past it) not again, reason "budget"; `send` types."""
    from tests.front.test_herding_cli import (
        NUDGE,
        QUESTION,
        decisions,
        herd_sends,
        pty,
        screen,
        start_agent,
        workers,
        write_config,
    )
    from tests.support.waiting import retry_until, stays_false

    write_config(tmp_path, cooldown=0.5, max_nudges=10)
    with (tmp_path / "config.toml").open("a") as f:
        f.write("\n[budget]\npane_usd = 1.0\n")
    agent = start_agent(session)
    watcher_process("-v")
    retry_until(lambda: workers(server).get("agent", {}).get("state") == "READY", 20,
                interval=0.2)
    assert pty(server, "herd", "on", "agent").returncode == 0
    assert pty(server, "send", "agent", QUESTION).returncode == 0
    retry_until(lambda: herd_sends(isolated_env) == 1, 20, interval=0.2,
                message=f"no nudge: {decisions(isolated_env)}")
    retry_until(lambda: f"❯ {NUDGE}" in screen(agent), 10)

    worker_id = workers(server)["agent"]["id"]
    store = StoreWriter(isolated_env)
    try:
        with store.transaction() as conn:  # what the reader stores from a transcript
            store.usage.add(conn, _usage(worker_id, time.strftime("%Y-%m-%d"),
                                         "claude-opus-4-5", input=100_000, output=40_000))
    finally:
        store.close()
    assert pty(server, "send", "agent", QUESTION).returncode == 0
    retry_until(lambda: workers(server)["agent"]["herd_reason"] == "budget", 20, interval=0.2)
    assert stays_false(lambda: herd_sends(isolated_env) > 1, 3.0, interval=0.2)
    assert ("blocked", "budget") in [(d[0], d[1]) for d in decisions(isolated_env)]
    assert "$1.50" in pty(server, "status").stdout

    assert pty(server, "send", "agent", "say A person asks.").returncode == 0
    retry_until(lambda: "A person asks." in screen(agent), 10)
