"""``conductor pty worktree remove ID``: remove the git worktree ``create --worktree`` made.

Registered on the ``pty`` group by ``app.front.cli.main``. A tree with uncommitted changes or
untracked files is refused in one line, so an agent's unsaved work is never thrown away.
"""

from __future__ import annotations

from pathlib import Path

import click

from app.base.errors import ConductorError
from app.front.cli.context import Context, echo_clean, friendly_errors
from app.front.cli.output import emit


@click.group()
def worktree() -> None:
    """The git worktrees `create --worktree BRANCH` makes for agents."""


@worktree.command("remove")
@click.argument("ident", metavar="ID|NAME")
@click.option("--json", "as_json", is_flag=True, help="What was removed as a JSON object.")
@click.pass_obj
@friendly_errors
def worktree_remove(obj: Context, ident: str, as_json: bool) -> None:
    """Remove the pane's worktree (git worktree remove); refuses a tree with changes."""
    from app.act.worktree import remove_worktree
    from app.adapters.status import find_worker
    from app.adapters.store import StoreWriter
    from app.adapters.store_read import StoreReader

    reader = StoreReader(obj.workers_dir)
    try:
        worker = find_worker(reader.workers(obj.socket_name), ident)
    finally:
        reader.close()
    folder = worker.get("worktree")
    if not folder:
        raise ConductorError(f"pane {worker['name']} has no worktree (only `create --worktree` "
                             "makes one); nothing removed")
    remove_worktree(Path(folder))
    store = StoreWriter(obj.workers_dir)
    try:
        with store.transaction() as conn:
            store.set_worktree(conn, worker["id"], None)
    finally:
        store.close()
    if as_json:
        emit({"id": worker["id"], "name": worker["name"], "removed": folder})
        return
    echo_clean(f"removed worktree {folder}")
