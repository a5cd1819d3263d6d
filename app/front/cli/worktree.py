"""``conductor pty worktree remove ID``: remove the git worktree ``create --worktree`` made.

Registered on the ``pty`` group by ``app.front.cli.main``. A tree where a program other than a
shell runs, or with uncommitted changes, untracked or ignored files, is refused in one line that
lists them, so an agent's work (and the agent) is never pulled from under it; ``--force``
removes it all the same and says what went.
"""

from __future__ import annotations

from pathlib import Path

import click

from app.base.errors import ConductorError
from app.base.model import Pane
from app.front.cli.context import Context, echo_clean, friendly_errors
from app.front.cli.output import emit


@click.group()
def worktree() -> None:
    """The git worktrees `create --worktree BRANCH` makes for agents."""


@worktree.command("remove")
@click.argument("ident", metavar="ID|NAME")
@click.option("--force", is_flag=True,
              help="Remove it even while a program runs there or files would be lost.")
@click.option("--json", "as_json", is_flag=True, help="What was removed as a JSON object.")
@click.pass_obj
@friendly_errors
def worktree_remove(obj: Context, ident: str, force: bool, as_json: bool) -> None:
    """Remove the pane's worktree (git worktree remove); refuses while a program runs in it or
    it holds changes, untracked or ignored files."""
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
    lost = remove_worktree(Path(folder), _panes(obj), _is_shell, force=force)
    store = StoreWriter(obj.workers_dir)
    try:
        with store.transaction() as conn:
            store.set_worktree(conn, worker["id"], None)
    finally:
        store.close()
    if as_json:
        emit({"id": worker["id"], "name": worker["name"], "removed": folder,
              "lost": lost.words() if lost else None})
        return
    echo_clean(f"removed worktree {folder}" + (f" with {lost.words()}" if lost else ""))


def _panes(obj: Context) -> list[Pane]:
    from app.base.errors import TmuxServerNotRunning

    try:
        return list(obj.tmux().list_panes().panes)
    except TmuxServerNotRunning:
        return []  # no pane, so nothing runs in the tree


def _is_shell(command: str) -> bool:
    from app.observe.pack_loading import load_packs

    packs = load_packs()
    return any(pack.detect.weak and pack.detect.matches_command(command)
               for pack in packs.values())
