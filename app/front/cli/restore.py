"""``conductor pty restore [--dry-run] [--json] [ID…]``: bring back the panes a dead tmux server
or an exit took, each agent in its own conversation (app.act.restore).

Registered on the ``pty`` group by ``app.front.cli.main``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from app.base.errors import ConductorError
from app.front.cli.context import Context, echo_clean, friendly_errors
from app.front.cli.output import emit_rows

if TYPE_CHECKING:
    from app.act.restore import Planned
    from app.adapters.tmux import Tmux


@click.command()
@click.argument("idents", metavar="[ID|NAME]...", nargs=-1)
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="The plan (or what was done) as JSON.")
@click.pass_obj
@friendly_errors
def restore(obj: Context, idents: tuple[str, ...], dry_run: bool, as_json: bool) -> None:
    """Recreate the panes that are gone (every one, or the IDs given) with their names, folders
    and worktrees; each agent resumes its own conversation, or starts fresh when its session is
    unknown or had ended (the plan says which)."""
    from app.act import restore as restoring
    from app.adapters.status import find_worker
    from app.adapters.store_read import StoreReader

    local = obj.tmux()
    reader = StoreReader(obj.workers_dir)
    try:
        workers = reader.workers(obj.socket_name)
        if idents:
            chosen = {find_worker(workers, ident)["id"] for ident in idents}
            workers = [w for w in workers if w["id"] in chosen]
        planned: list[Planned] = []
        servers: dict[str, Tmux] = {}
        for host, rows in _by_host(workers).items():
            try:
                tmux = local if host == "local" else _host_tmux(local, host)
                live = restoring.live_ids(tmux)
                dead = restoring.dead_ids(tmux)
            except ConductorError as exc:
                planned += [restoring.skipped(row, f"host {host}: {exc}") for row in rows]
                continue
            servers[host] = tmux
            asked_live = sorted({w["id"] for w in rows} & live) if idents else []
            if asked_live:
                raise ConductorError(f"pane {asked_live[0]} is running; nothing restored")
            planned += restoring.plan(reader, rows, live, dead)
    finally:
        reader.close()
    if not planned or dry_run or all(p.how == restoring.SKIP for p in planned):
        heading = "would restore" if dry_run else "nothing can be restored"
        _show(planned, as_json, heading if planned else "nothing to restore")
        return
    done: list[Planned] = []
    failed: list[Planned] = []
    for host, tmux in servers.items():
        came, went = restoring.carry_out(tmux, obj.workers_dir,
                                         [p for p in planned if p.host == host])
        done += [d.planned for d in came]
        failed += went
    _show(done + failed + [p for p in planned if p.how == restoring.SKIP], as_json,
          f"restored {len(done)} pane{'s' if len(done) != 1 else ''}")
    if failed:
        raise ConductorError(f"{len(failed)} pane{'s' if len(failed) != 1 else ''} could not be "
                             "recreated (see above)")


def _by_host(workers: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in workers:
        groups.setdefault(str(row.get("host") or "local"), []).append(row)
    return groups


def _host_tmux(local: Tmux, host: str) -> Tmux:
    from app.front.cli.context import read_config
    from app.run.hosts import host_tmux

    return host_tmux(local, read_config().hosts, host)


def _show(planned: list[Planned], as_json: bool, heading: str) -> None:
    from app.act.restore import as_json_rows

    if as_json:
        emit_rows(as_json_rows(planned))
        return
    echo_clean(f"{heading}:" if planned else heading)
    for entry in planned:
        echo_clean(f"  {entry.line()}")
