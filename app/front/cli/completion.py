"""Shell completion of pane names and ids from the store (click's ``shell_complete``).

Runs on every Tab press, so it reads the store with the stdlib reader and never raises: a
missing or locked store completes nothing rather than printing a traceback into the shell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click
    from click.shell_completion import CompletionItem


def complete_panes(ctx: click.Context, param: click.Parameter, incomplete: str
                   ) -> list[CompletionItem]:
    """Names, then ids, of the panes in the store that start with ``incomplete``; live panes
    before exited ones. Each carries its state as help (zsh and fish show it)."""
    from click.shell_completion import CompletionItem

    from app.adapters.store_read import StoreReader
    from app.base import settings
    from app.base.errors import ConductorError

    # Completion parses without running the group callbacks, so the root's own parameters are
    # read here rather than the Context object they would have built.
    workers_dir = ctx.find_root().params.get("workers_dir") or settings.workers_dir()
    try:
        reader = StoreReader(workers_dir)
        try:
            workers = reader.workers()
        finally:
            reader.close()
    except (ConductorError, OSError):
        return []
    workers.sort(key=lambda w: w.get("state") == "EXITED")
    items: list[CompletionItem] = []
    seen: set[str] = set()
    for key in ("name", "id"):
        for w in workers:
            value = str(w.get(key) or "")
            if value and value.startswith(incomplete) and value not in seen:
                seen.add(value)
                items.append(CompletionItem(value, help=f"{w['state']} {w['id']}"))
    return items
