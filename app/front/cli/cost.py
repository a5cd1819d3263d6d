"""``conductor pty cost`` (what the agents spent, by pane, day or host) and ``conductor pty
budget`` (what is left of the [budget], and the person's reset).

Registered on the ``pty`` group by ``app.front.cli.main``. The figures are the watcher's
(app.observe.usage), priced with the config's prices (app.base.prices).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import click

from app.base import render
from app.base.prices import Budget, money, tokens_text
from app.front.cli.context import Context, echo_clean, friendly_errors, read_config

_KEYS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "pane": lambda row: str(row["id"]),
    "day": lambda row: str(row["day"]),
    "host": lambda row: str(row.get("host") or "local"),
}


def _usage_rows(obj: Context) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    from app.adapters.store_read import StoreMissing, StoreReader

    try:
        reader = StoreReader(obj.workers_dir)
    except StoreMissing:
        return [], {}
    try:
        return reader.usage(), reader.budget_resets()
    finally:
        reader.close()


@click.command("cost")
@click.option("--by", "by", type=click.Choice(sorted(_KEYS)), default="pane", show_default=True,
              help="Add the figures up per pane, per day or per host.")
@click.option("--json", "as_json", is_flag=True, help="One JSON list, one object per line of "
                                                        "the table.")
@click.pass_obj
@friendly_errors
def cost(obj: Context, by: str, as_json: bool) -> None:
    """Tokens and cost of every pane's agent, from the agents' own usage records."""
    from app.observe.spend import totals

    rows, _ = _usage_rows(obj)
    prices = read_config().budget.table()
    found = totals(rows, prices, _KEYS[by])
    names = {str(r["id"]): str(r.get("name") or "") for r in rows}
    hosts = {str(r["id"]): str(r.get("host") or "local") for r in rows}
    ordered = sorted(found.items(), key=lambda item: (-(item[1].cost_usd or 0.0), item[0]))
    if as_json:
        out = []
        for key, figures in ordered:
            entry: dict[str, Any] = {by: key}
            if by == "pane":
                entry.update(name=names.get(key, ""), host=hosts.get(key, "local"))
            out.append({**entry, **figures.public()})
        click.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    if not ordered:
        click.echo("no usage recorded yet (the watcher reads it from each agent's own "
                   "transcript; see design/cost.md)")
        return
    head = ("PANE", "NAME") if by == "pane" else (by.upper(),)
    table = [(*head, "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "COST")]
    for key, f in ordered:
        first = (key, render.clean_text(names.get(key, ""))) if by == "pane" else (key,)
        table.append((*first, tokens_text(f.input), tokens_text(f.output),
                      tokens_text(f.cache_read), tokens_text(f.cache_write), money(f.cost_usd)))
    everything = totals(rows, prices, lambda row: "total")["total"]
    table.append(("total", *([""] if by == "pane" else []), tokens_text(everything.input),
                  tokens_text(everything.output), tokens_text(everything.cache_read),
                  tokens_text(everything.cache_write), money(everything.cost_usd)))
    echo_clean(render.columns(table))
    if everything.unpriced:
        echo_clean(f"{tokens_text(everything.unpriced)} tokens of models without a price are "
                   f"not in the cost (add [prices.\"MODEL\"] to the config file)")


@click.group()
def budget() -> None:
    """The [budget] automation obeys: past it, herding and the report cycle leave a pane alone."""


@budget.command("reset")
@click.argument("ident", metavar="[ID|NAME]", required=False)
@click.pass_obj
@friendly_errors
def budget_reset(obj: Context, ident: str | None) -> None:
    """Count a pane's budget from now (without ID: every pane's, and today's)."""
    from app.adapters.store import StoreWriter
    from app.observe.spend import totals
    from app.observe.usage import day_of

    config_budget = read_config().budget
    rows, _ = _usage_rows(obj)
    prices = config_budget.table()
    now = time.time()
    by_pane = totals(rows, prices, _KEYS["pane"])
    if ident is not None:
        worker_id = _worker_id(obj, ident)
        scopes = {worker_id: by_pane.get(worker_id)}
    else:
        today = day_of(now)
        scopes = {**by_pane,
                  f"day:{today}": totals([r for r in rows if r["day"] == today], prices,
                                         lambda row: "day").get("day")}
    store = StoreWriter(obj.workers_dir)
    try:
        with store.transaction() as conn:
            for scope, figures in scopes.items():
                store.usage.reset(conn, scope, (figures.cost_usd or 0.0) if figures else 0.0,
                                  figures.budget_tokens if figures else 0, now)
    finally:
        store.close()
    what = f"pane {ident}" if ident is not None else "every pane and today"
    click.echo(f"budget reset for {what}: counted from now{_limits(config_budget)}")


def _worker_id(obj: Context, ident: str) -> str:
    from app.adapters.status import find_worker
    from app.adapters.store_read import StoreReader

    reader = StoreReader(obj.workers_dir)
    try:
        return str(find_worker(reader.workers(obj.socket_name), ident)["id"])
    finally:
        reader.close()


def _limits(limits: Budget) -> str:
    parts = [f"{label} {shown}" for label, value, shown in (
        ("per pane", limits.pane_usd, money(limits.pane_usd)),
        ("per pane", limits.pane_tokens, f"{tokens_text(limits.pane_tokens)} tokens"),
        ("per day", limits.day_usd, money(limits.day_usd)),
        ("per day", limits.day_tokens, f"{tokens_text(limits.day_tokens)} tokens")) if value]
    return f" (limits: {', '.join(parts)})" if parts else " (no [budget] limit is set)"


def spend_line(obj: Context, worker_id: str) -> str:
    """One line for ``explain``: what the pane's agent spent, and where it stands against the
    [budget]."""
    from app.observe.spend import Figures, over_budget, totals
    from app.observe.usage import day_of

    rows, resets = _usage_rows(obj)
    limits = read_config().budget
    figures = totals(rows, limits.table(), _KEYS["pane"]).get(worker_id) or Figures()
    if not (figures.input or figures.output or figures.cache_read or figures.cache_write):
        spent = "none on record (its agent named no usage file we read)"
    else:
        priced = money(figures.cost_usd) if figures.cost_usd is not None else \
            "no price for its model"
        spent = (f"{priced} (input {tokens_text(figures.input)}, output "
                 f"{tokens_text(figures.output)}, cache read {tokens_text(figures.cache_read)}, "
                 f"cache write {tokens_text(figures.cache_write)})")
    if not limits.limited:
        return f"  spend: {spent}; no [budget] limit"
    why = over_budget(worker_id, rows, resets, limits, day_of(time.time()))
    state = f"budget: over, {why}; herding and the cycle leave it alone until `budget reset`" \
        if why else "within its budget"
    return f"  spend: {spent}; {state}"
