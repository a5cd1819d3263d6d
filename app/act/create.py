"""Creating and registering worker windows."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from app.act.worktree import DEFAULT_WORKTREES, add_worktree, remove_worktree
from app.adapters.store import StoreWriter
from app.adapters.tmux import PANE_ID, Tmux
from app.base.errors import ConductorError
from app.observe.pane import worker_id


@dataclass(frozen=True)
class Created:
    id: str
    name: str
    pane_id: str
    session: str
    worktree: str | None = None


def create_worker(tmux: Tmux, workers_dir: Path, directory: Path, name: str | None = None,
                  cli: str | None = None, command: str | None = None,
                  remain_on_exit: bool = True, worktree_branch: str | None = None,
                  worktrees: str = DEFAULT_WORKTREES,
                  caller_env: Mapping[str, str] | None = None) -> Created:
    """A new tmux window rooted in ``directory``, registered in the store at once so ``status``
    lists it before the watcher's next cycle. With ``worktree_branch``, the window is rooted in a
    new git worktree of ``directory``'s repository on that branch (placed by ``worktrees``),
    removed again when the window cannot be made. ``caller_env``: the environment of whoever
    asked; run from a pane of the same tmux server, that pane is recorded as the new one's lead
    (:func:`lead_of_caller`)."""
    if name is not None and (not name.strip() or not name.isprintable() or len(name) > 200):
        # The name is how every table and message names the pane, on one line. (What it holds
        # for tmux, "#(" included, is safe: new_window passes it as literal text.)
        raise ConductorError("--name must be printable text of at most 200 characters, with no "
                             "newline or other control character; nothing created")
    if len(str(directory)) > 4096:
        raise ConductorError(f"directory path is too long ({len(str(directory))} characters); "
                             "nothing created")
    try:
        is_dir = directory.is_dir()
    except OSError as exc:  # a component too long, a loop of links
        raise ConductorError(f"cannot use that directory: {exc.strerror or exc}; nothing "
                             "created") from None
    if not is_dir:
        what = "is not a directory" if directory.exists() else "does not exist"
        raise ConductorError(f"{directory} {what}; nothing created")
    if cli is not None:
        from app.observe.pack_loading import load_packs

        known = load_packs()
        if cli not in known:
            raise ConductorError(f"unknown --cli {cli!r}; known: {', '.join(sorted(known))}")
    window_name = name or f"worker-{secrets.token_hex(2)}"
    store = StoreWriter(workers_dir)  # before the window: a broken store creates nothing
    try:
        folder = directory.resolve()
        if worktree_branch is not None:
            folder = add_worktree(folder, worktree_branch, worktrees)
        try:
            pane = tmux.new_window(str(folder), window_name, command,
                                   remain_on_exit=remain_on_exit)
        except ConductorError:
            if worktree_branch is not None:
                with contextlib.suppress(ConductorError):  # the window's error is the one to show
                    remove_worktree(folder)
            raise
        server_pid = tmux.list_panes().server_pid
        wid = worker_id(tmux.label, server_pid, pane.pane_id)
        with store.transaction() as conn:
            store.upsert_pty(conn, {
                "id": wid, "name": window_name, "socket": tmux.label, "server_pid": server_pid,
                "pane_id": pane.pane_id, "tmux_session": pane.session_name,
                "tmux_window": pane.window_name, "window_index": pane.window_index,
                "pane_index": pane.pane_index, "cwd": str(folder),
                # What the watcher's first look calls it (a shell, or the placeholder shell a
                # command starts from) until an agent is seen: never "-" first, then "shell".
                "cli_type": cli or "shell",
                "cli_forced": cli, "command": command, "created_by": "create",
                "first_seen_ts": time.time(), "last_seen_ts": time.time(),
                "worktree": str(folder) if worktree_branch is not None else None,
                "lead": lead_of_caller(tmux.label, server_pid, caller_env or {}),
            })
    finally:
        store.close()
    return Created(wid, window_name, pane.pane_id, pane.session_name,
                   str(folder) if worktree_branch is not None else None)


def lead_of_caller(label: str, server_pid: int, env: Mapping[str, str]) -> str | None:
    """The worker id of the pane ``create`` was run from, when that pane is on the server the
    new window opens on: tmux sets ``$TMUX`` ("<socket path>,<server pid>,<session>") and
    ``$TMUX_PANE`` in every pane, and an agent's shell commands inherit both. A pane id of
    another server would name a stranger's pane, so none is taken then."""
    pid = env.get("TMUX", "").split(",")[1:2]
    pane = env.get("TMUX_PANE", "").strip()
    if not pid or not pid[0].isdigit() or int(pid[0]) != server_pid \
            or not PANE_ID.fullmatch(pane):
        return None
    return worker_id(label, server_pid, pane)
