"""The status table at a narrow width and what `create` says, with real tmux and a real watcher:
HOST goes before SUMMARY is squeezed, the CLI column has one word from the start, and
`create --worktree` names the worktree and its branch."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from app.run.watcher import Watcher
from tests.conftest import conductor
from tests.front.test_daily_use import a_repository
from tests.front.test_mcp_status_rows import a_remote_row


def cli_of(name: str) -> str:
    done = conductor("pty", "status", "--json")
    assert done.returncode == 0, done.stderr
    return str(next(w["cli_type"] for w in json.loads(done.stdout) if w["name"] == name))


def test_at_width_50_the_host_column_goes_and_names_say_their_host(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> None:
    session.new_window(window_name="near", attach=False)
    watcher.tick(time.time())
    a_remote_row(isolated_env)
    wide = conductor("pty", "status", "--width", "200").stdout.splitlines()
    assert wide[0].split()[:3] == ["ID", "NAME", "HOST"]
    narrow = conductor("pty", "status", "--width", "50").stdout.splitlines()
    print("\n".join(narrow))
    # (The remote row's STATE says why it is stale, which leaves SUMMARY little room.)
    assert narrow[0].split()[:3] == ["NAME", "STATE", "WAITING"] and "HOST" not in narrow[0]
    assert any(line.startswith("far@gpu ") for line in narrow)
    assert all(len(line) <= 50 for line in narrow)


def test_a_created_window_has_its_cli_word_before_and_after_the_watcher_looks(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path) -> None:
    done = conductor("-L", server.socket_name, "pty", "create", str(tmp_path), "--name", "sh")
    assert done.returncode == 0, done.stderr
    assert cli_of("sh") == "shell"
    for _ in range(3):
        watcher.tick(time.time())
        assert cli_of("sh") == "shell"


def test_create_worktree_prints_the_id_then_the_worktree_and_its_branch(
        server: Any, session: Any, tmp_path: Path) -> None:
    repo = a_repository(tmp_path / "proj")
    done = conductor("-L", server.socket_name, "pty", "create", str(repo), "--name", "wt",
                     "--worktree", "feat/x")
    assert done.returncode == 0, done.stderr
    created_id = done.stdout.strip()
    assert created_id and "\n" not in created_id  # `id=$(conductor pty create ...)` still works
    folder = tmp_path / "proj-worktrees" / "feat-x"
    assert done.stderr.strip() == f"{created_id}: worktree {folder} on branch feat/x"
