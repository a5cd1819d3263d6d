"""``conductor pty restore [--dry-run] [--json] [ID…]``: bring back the panes a dead tmux server
or an exit took, each agent in its own conversation (app.act.restore).

Registered on the ``pty`` group by ``app.front.cli.main``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from app.base.errors import ConductorError
from app.front.cli.context import Context, echo_clean, friendly_errors

if TYPE_CHECKING:
    from app.act.restore import Planned


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
    from app.adapters.store import StoreReader

    tmux = obj.tmux()
    live = restoring.live_ids(tmux)
    reader = StoreReader(obj.workers_dir)
    try:
        workers = reader.workers(obj.socket_name)
        if idents:
            chosen = {find_worker(workers, ident)["id"] for ident in idents}
            asked_live = sorted(chosen & live)
            if asked_live:
                raise ConductorError(f"pane {asked_live[0]} is running; nothing restored")
            workers = [w for w in workers if w["id"] in chosen]
        planned = restoring.plan(reader, workers, live, restoring.dead_ids(tmux))
    finally:
        reader.close()
    if dry_run or not planned:
        _show(planned, as_json, "would restore" if planned else "nothing to restore")
        return
    done = restoring.carry_out(tmux, obj.workers_dir, planned)
    _show([d.planned for d in done] + [p for p in planned if p.how == restoring.SKIP], as_json,
          f"restored {len(done)} pane{'s' if len(done) != 1 else ''}")


def _show(planned: list[Planned], as_json: bool, heading: str) -> None:
    from app.act.restore import as_json_rows

    if as_json:
        click.echo(json.dumps(as_json_rows(planned), indent=2, ensure_ascii=False))
        return
    echo_clean(f"{heading}:" if planned else heading)
    for entry in planned:
        echo_clean(f"  {entry.line()}")
