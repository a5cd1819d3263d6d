"""``conductor pty herd …`` and ``conductor pty goal``: parse, call the store, print.

Registered on the ``pty`` group by ``app.front.cli.main``. Opting in validates the rule set at
once, so a
broken file is one line here and never a surprise in the watcher.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from app.base import render
from app.front.cli.context import MAX_ROWS, Context, echo_clean, friendly_errors, read_config
from app.front.cli.output import emit, emit_line, emit_rows

if TYPE_CHECKING:
    from app.adapters.store import StoreWriter


def _worker(obj: Context, ident: str) -> dict[str, Any]:
    from app.adapters.status import find_worker
    from app.adapters.store_read import StoreReader

    reader = StoreReader(obj.workers_dir)
    try:
        return find_worker(reader.workers(obj.socket_name), ident)
    finally:
        reader.close()


@contextmanager
def _writer(obj: Context) -> Iterator[StoreWriter]:
    from app.adapters.store import StoreWriter

    store = StoreWriter(obj.workers_dir)
    try:
        yield store
    finally:
        store.close()


@click.group()
def herd() -> None:
    """Keep opted-in agents moving: nudge a stalled pane when every safety gate agrees."""


@herd.command("on")
@click.argument("ident", metavar="ID|NAME")
@click.option("--rules", "rules_spec", default=None, metavar="NAME|FILE",
              help="Rule set: conservative, persistent, one in herd_rules/ next to the config, "
                   "or a .yml file (default: the config's herd.rules).")
@click.option("--dry-run", is_flag=True, help="Decide and log, never type.")
@click.option("--json", "as_json", is_flag=True, help="The opt-in as a JSON object.")
@click.pass_obj
@friendly_errors
def herd_on(obj: Context, ident: str, rules_spec: str | None, dry_run: bool,
            as_json: bool) -> None:
    """Opt a pane in to herding (again: new rules, counters back to zero)."""
    from app.act.herd import rules

    settings = read_config().herd
    spec = rules_spec or settings.rules
    loaded = rules.load(spec)  # a broken set is refused here, with file:line
    stored = str(rules.locate(spec)) if "/" in spec or spec.endswith((".yml", ".yaml")) \
        else spec
    worker = _worker(obj, ident)
    program = _not_an_agent(obj, worker)
    with _writer(obj) as store, store.transaction() as conn:
        store.herd.upsert_herd(conn, {"id": worker["id"], "enabled": 1, "rules": stored,
                                      "dry_run": int(dry_run), "nudges": 0, "turn": 0,
                                      "updated_ts": time.time()})
    if as_json:
        # not_an_agent: what runs there instead; nothing is typed until an agent CLI does.
        emit({"id": worker["id"], "name": worker["name"], "herded": True, "rules": loaded.name,
              "dry_run": dry_run, "not_an_agent": program or None})
        return
    mode = "dry run: decisions logged, nothing typed" if dry_run else "nudges typed"
    if program:
        # Opted in all the same: once an agent CLI runs at its prompt, it is herded.
        click.echo(f"not nudging {worker['name']} ({worker['id']}): it runs {program}, not an "
                   f"agent CLI, and nothing is typed into it until one runs there (opted in "
                   f"with rules {loaded.name}; `herd off {worker['id']}` to undo)")
        return
    click.echo(f"herding {worker['name']} ({worker['id']}) with rules {loaded.name} "
               f"({len(loaded.rules)} rules; {mode}); stalled after "
               f"{settings.stall_after_s:g}s, at most {settings.max_nudges} nudges "
               f"{settings.cooldown_s:g}s apart until you act on it")


def _not_an_agent(obj: Context, worker: dict[str, Any]) -> str:
    """What the pane runs ("a shell (bash)") when the watcher last saw it run something other
    than an agent CLI; "" for an agent CLI or a pane not classified yet."""
    from app.act.herd.step import agent_cli
    from app.adapters.store_read import StoreReader
    from app.observe.pack_loading import load_packs

    cli = worker.get("cli_type")
    if not cli:
        return ""
    pack = load_packs().get(cli)
    if agent_cli(pack):
        return ""
    reader = StoreReader(obj.workers_dir)
    try:
        command = render.clean_text(str((reader.pty(worker["id"]) or {}).get("command") or ""))
    finally:
        reader.close()
    if cli == "conductor":
        return "conductor's own view"
    what = "a shell" if pack is not None and pack.detect.weak else "a program"
    return f"{what} ({command})" if command else what


@herd.command("off")
@click.argument("ident", metavar="ID|NAME")
@click.option("--json", "as_json", is_flag=True, help="The opt-out as a JSON object.")
@click.pass_obj
@friendly_errors
def herd_off(obj: Context, ident: str, as_json: bool) -> None:
    """Stop herding a pane (its goal and log stay)."""
    worker = _worker(obj, ident)
    with _writer(obj) as store, store.transaction() as conn:
        store.herd.upsert_herd(conn, {"id": worker["id"], "enabled": 0, "updated_ts": time.time()})
    if as_json:
        emit({"id": worker["id"], "name": worker["name"], "herded": False})
        return
    click.echo(f"no longer herding {worker['name']} ({worker['id']})")


@herd.command("list")
@click.option("--json", "as_json", is_flag=True, help="A JSON list.")
@click.pass_obj
@friendly_errors
def herd_list(obj: Context, as_json: bool) -> None:
    """Panes opted in to herding, with their rules, counters and what blocks a nudge now."""
    from app.adapters.store_read import StoreReader

    reader = StoreReader(obj.workers_dir)
    try:
        workers = {w["id"]: w for w in reader.workers(obj.socket_name)}
        rows = [r for r in reader.herd().values() if r.get("enabled") and r["id"] in workers]
        # The log holds every change of verdict, the rule step's too (`no_rule`), which the
        # status row (the eligibility gate only) cannot: its newest line is what holds now.
        latest = {r["id"]: next(iter(reader.nudges(r["id"], limit=1)), None) for r in rows}
    finally:
        reader.close()
    items = [{
        "id": r["id"], "name": workers[r["id"]]["name"], "state": workers[r["id"]]["state"],
        "rules": r.get("rules") or "", "dry_run": bool(r.get("dry_run")),
        "nudges": r.get("nudges") or 0, "last_nudge_ts": r.get("last_nudge_ts") or None,
        "eligible_for_herd": workers[r["id"]]["eligible_for_herd"],
        "herd_reason": workers[r["id"]]["herd_reason"], "goal": r.get("goal") or "",
        "now": _verdict_now(workers[r["id"]], latest[r["id"]]),
        "sees": _regions_seen(str(r.get("rules") or read_config().herd.rules)),
    } for r in rows]
    if as_json:
        emit_rows(items)
        return
    if not items:
        click.echo("no pane is herded; opt one in with `conductor pty herd on ID`")
        return
    now = time.time()
    table: list[tuple[str, ...]] = [
        ("ID", "NAME", "STATE", "RULES", "SEES", "NUDGES", "LAST", "NOW", "GOAL")]
    for i in items:
        last = i["last_nudge_ts"]
        table.append((
            i["id"], i["name"], i["state"], i["rules"] + (" (dry run)" if i["dry_run"] else ""),
            "; ".join(i["sees"]) or "-", str(i["nudges"]),
            f"{render.duration(now - last)} ago" if last else "-",
            i["now"], i["goal"] or "-",
        ))
    echo_clean(render.columns(table))


def _regions_seen(spec: str) -> list[str]:
    """The screen regions a rule set's rules look at ("8 lines above the box", "last
    message"), so a rule that never sees the agent's question can be told from one that does."""
    from app.act.herd import rules
    from app.base.errors import ConductorError

    try:
        loaded = rules.load(spec)
    except ConductorError:
        return []  # the log says why it cannot load; the list stays readable
    seen = [str(r.region) if r.type == "regex" else "the screen (LLM)" for r in loaded.rules]
    return list(dict.fromkeys(seen))


def _verdict_now(worker: Mapping[str, Any], logged: Mapping[str, Any] | None) -> str:
    """What holds for the pane now, in the log's words (``blocked [no_rule]``): the gate's
    reason when it is shut; when it is open, the rule step's newest decision, which only the log
    holds (a decision of an earlier shut gate means the rules have not had their turn yet)."""
    from app.act.herd.step import BLOCKED  # here: the herd's modules are heavy for every command

    if not worker["eligible_for_herd"]:
        reason = worker["herd_reason"]
        return f"{BLOCKED} [{reason}]" if reason else "-"
    if logged is None or not logged.get("eligible"):
        return "eligible"
    return str(logged["outcome"]) + (f" [{logged['reason']}]" if logged.get("reason") else "")


@herd.command("log")
@click.argument("ident", metavar="[ID|NAME]", required=False)
@click.option("-n", "lines", type=click.IntRange(min=1, max=MAX_ROWS), default=20,
              show_default=True,
              help="How many decisions to show.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new decisions.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.pass_obj
@friendly_errors
def herd_log(obj: Context, ident: str | None, lines: int, follow: bool, as_json: bool) -> None:
    """Every herding decision: what was typed, or the gate or rule step that said no."""
    from app.adapters.store_read import StoreReader
    from app.observe.views import mark_own_pane

    worker_id = _worker(obj, ident)["id"] if ident else None
    reader = StoreReader(obj.workers_dir)
    unmark = mark_own_pane("herd log -f", follow)
    try:
        # With -L and no pane named: that server's panes only (the rest of the log is skipped).
        scope = None if worker_id or obj.socket_name is None else \
            {w["id"] for w in reader.workers(obj.socket_name)}
        last = 0
        rows = reader.nudges(worker_id) if scope is not None else \
            reader.nudges(worker_id, limit=lines)
        shown = [r for r in rows if scope is None or r["id"] in scope][-lines:]
        for row in shown:
            _print_log_line(row, as_json)
        if not shown and not as_json:
            whose = f" for {ident}" if ident else ""
            click.echo(f"no herding decisions logged{whose} yet; `conductor pty herd on ID` "
                       "opts a pane in" + ("; waiting for new ones" if follow else ""))
        last = rows[-1]["seq"] if rows else 0
        while follow:
            time.sleep(1.0)
            for row in reader.nudges(worker_id, after_seq=last):
                last = row["seq"]
                if scope is None or row["id"] in scope:
                    _print_log_line(row, as_json)
    except KeyboardInterrupt:
        pass
    finally:
        unmark()
        reader.close()


def _print_log_line(row: dict[str, Any], as_json: bool) -> None:
    if as_json:  # data for programs, as `status --json` is: the rows as stored
        emit_line({**row, "eligible": bool(row.get("eligible"))})
    else:
        echo_clean(_log_line(row))


def _log_line(row: dict[str, Any]) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row["ts"]))
    what = row["outcome"] + (f" [{row['reason']}]" if row.get("reason") else "")
    rule = f" rule {row['rule_id']}" if row.get("rule_id") else ""
    text = f" {row['text']!r}" if row.get("text") else ""
    detail = f"  ({row['detail']})" if row.get("detail") else ""
    return f"{stamp}  {row.get('name') or row['id']}  {row.get('state') or '-'}  {what}{rule}" \
           f"{text}{detail}"


@click.command()
@click.argument("ident", metavar="ID|NAME")
@click.argument("text")
@click.option("--check", "check", default=None, metavar="CMD",
              help="The pane's declared check: what the cycle runs after a report (sh -c, in "
                   "the pane's folder), and the one command an agent's MCP report may ask for "
                   "there. \"\" removes it; without --check it stays as it was.")
@click.option("--json", "as_json", is_flag=True, help="What was done as a JSON object.")
@click.pass_obj
@friendly_errors
def goal(obj: Context, ident: str, text: str, check: str | None, as_json: bool) -> None:
    """Set what a pane is working towards ("" clears it); herd rules and the LLM use it."""
    from app.front import commands

    worker = _worker(obj, ident)
    done = commands.goal(obj.workers_dir, worker["id"], text, check)
    if as_json:
        emit({"id": worker["id"], "name": worker["name"], "goal": done["goal"] or "",
              "check": done["check"]})
        return
    shown = render.clean_text(done["goal"] or "(none)")
    declared = f"; check: {render.clean_text(done['check'])}" if done["check"] else ""
    click.echo(f"goal of {worker['name']} ({worker['id']}): {shown}{declared}")



