"""`restore` on another host (issue 33): a pane whose remote tmux server went away comes back
on that host, through its ssh connection, keeping its row."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.act.create import create_worker
from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from tests.act.test_restore import CODEX, ENDED, FIRST, _dump, _hook
from tests.conftest import conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.hosts.test_watch_hosts import rows
from tests.support.waiting import retry_until, stop_process

pytestmark = pytest.mark.slow  # an sshd, its tmux server and a watcher
SHELL = "env -i PATH=/usr/bin:/bin HOME=/tmp PS1='lab$ ' bash --norc --noprofile"


def test_a_remote_pane_comes_back_on_its_host_with_its_row(
        ssh_host: Callable[[str], SshHost], server: Any, session: Any, tmp_path: Path,
        watcher_process: Any) -> None:
    alpha = ssh_host("alpha")
    made = alpha.tmux("new-session", "-d", "-s", "work", "-n", "term", "-c", str(tmp_path),
                      SHELL)
    assert made.returncode == 0, made.stderr
    write_hosts(tmp_path / "config.toml", alpha)
    watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: rows(server).get("alpha:term", {}).get("cli_type") == "shell", 60,
                interval=0.3)
    wid = rows(server)["alpha:term"]["id"]
    alpha.kill_tmux()
    retry_until(lambda: rows(server)["alpha:term"]["state"] == "EXITED", 60, interval=0.3)

    plan = conductor("-L", server.socket_name, "pty", "restore", "--dry-run", "alpha:term")
    assert plan.returncode == 0, plan.stderr
    assert f"term ({wid})  alpha:work:term  shell (was a shell)  in {tmp_path}" in plan.stdout

    done = conductor("-L", server.socket_name, "pty", "restore", "alpha:term", timeout=60)
    assert done.returncode == 0, done.stderr
    listed = alpha.tmux("list-panes", "-a", "-F",
                        "#{session_name} #{window_name} #{pane_current_path} #{@conductor-id}")
    assert listed.stdout.split("\n")[0] == f"work term {tmp_path} {wid}"
    retry_until(lambda: rows(server)["alpha:term"]["state"] not in ("EXITED", "UNKNOWN"), 60,
                interval=0.3, message=f"rows: {_named(server, 'term')}")
    # One row for the pane: no twin with an id of its own from before restore marked it.
    assert [w["id"] for w in _named(server, "term")] == [wid]


def _named(server: Any, name: str) -> list[dict[str, Any]]:
    done = conductor("-L", server.socket_name, "pty", "status", "--json")
    return [w for w in json.loads(done.stdout) if w["name"] == name] if done.returncode == 0 \
        else []


def _tmux_state(server: Any, alpha: SshHost) -> tuple[str, str]:
    listing = "#{session_name} #{window_name} #{pane_id} #{pane_dead} #{@conductor-id}"
    here = server.cmd("list-panes", "-a", "-F", listing).stdout
    there = alpha.tmux("list-panes", "-a", "-F", listing)
    return "\n".join(here), f"{there.returncode} {there.stdout}"


def test_dry_run_on_ten_panes_here_and_on_a_host_prints_the_plan_and_changes_nothing(
        ssh_host: Callable[[str], SshHost], server: Any, session: Any, tmp_path: Path,
        isolated_env: Path, watcher_process: Any) -> None:
    """Agents (resumable, never named, ended), shells, a worktree and a remote host's panes:
    the plan names each one's way back; tmux here and there, and the store, stay as they were."""
    alpha = ssh_host("alpha")
    for made in (alpha.tmux("new-session", "-d", "-s", "work", "-n", "far", "-c",
                            str(tmp_path), SHELL),
                 alpha.tmux("new-window", "-d", "-t", "work:", "-n", "farlog", "-c",
                            str(tmp_path), SHELL)):
        assert made.returncode == 0, made.stderr
    write_hosts(tmp_path / "config.toml", alpha)
    tmux = Tmux(socket_name=server.socket_name)
    repo, other = tmp_path / "repo", tmp_path / "other"
    repo.mkdir()
    other.mkdir()
    ids, panes = {}, {}
    for name, folder, cli in (("ann", repo, "claude"), ("bob", repo, "claude"),
                              ("cal", repo, "claude"), ("dan", other, "claude"),
                              ("cod", other, "codex"), ("term", other, None),
                              ("fay", repo, None), ("ed", repo, None)):
        created = create_worker(tmux, isolated_env, folder, name=name, cli=cli,
                                command="cat" if cli else None)
        ids[name], panes[name] = created.id, created.pane_id
    server_pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    _hook(server_pid, panes["ann"], "claude", {"hook_event_name": "SessionStart",
                                               "session_id": FIRST, "source": "startup"})
    _hook(server_pid, panes["cal"], "claude", {"hook_event_name": "SessionEnd",
                                               "session_id": ENDED,
                                               "reason": "prompt_input_exit"})
    _hook(server_pid, panes["cod"], "codex", {"type": "agent-turn-complete", "thread-id": CODEX,
                                              "input-messages": ["hi"]})
    watching = watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: {"alpha:far", "alpha:farlog"} <= set(rows(server)), 60, interval=0.3)
    gone = [name for name in ids if name != "ed"]  # ed stays running: not in the plan
    for name in gone:
        server.cmd("kill-pane", "-t", panes[name])
    alpha.kill_tmux()

    def all_exited() -> bool:
        found = rows(server)
        return all(found[f"local:{n}"]["state"] == "EXITED" for n in gone) and \
            all(found[f"alpha:{n}"]["state"] == "EXITED" for n in ("far", "farlog"))

    retry_until(all_exited, 60, interval=0.3)
    stop_process(watching, seconds=10)
    worktree = tmp_path / "worktrees" / "bob-branch"  # what `create --worktree` made for bob
    worktree.mkdir(parents=True)
    store = StoreWriter(isolated_env)
    try:
        with store.transaction() as conn:
            store.set_worktree(conn, ids["bob"], str(worktree))
    finally:
        store.close()
    assert len(rows(server)) >= 10
    before, tmux_before = _dump(isolated_env), _tmux_state(server, alpha)

    plan = conductor("-L", server.socket_name, "pty", "restore", "--dry-run", timeout=60)
    assert plan.returncode == 0, plan.stderr
    lines = {line.split()[0]: line for line in plan.stdout.splitlines()[1:]}
    assert f"resume claude session {FIRST}  in {repo}" in lines["ann"]
    assert lines["bob"].endswith(f"fresh claude (its session id is unknown)  in {worktree}")
    assert f"fresh claude (its session {ENDED} had ended)  in {repo}" in lines["cal"]
    assert "fresh claude (its session id is unknown)" in lines["dan"]
    assert f"resume codex session {CODEX}  in {other}" in lines["cod"]
    assert f"shell (was a shell)  in {other}" in lines["term"]
    assert f"shell (was a shell)  in {repo}" in lines["fay"]
    assert "ed" not in lines
    for name in ("far", "farlog"):
        assert f"alpha:work:{name}  shell (was a shell)  in {tmp_path}" in lines[name]
    assert _dump(isolated_env) == before
    assert _tmux_state(server, alpha) == tmux_before
