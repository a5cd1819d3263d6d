"""`worktree remove` under the real Claude Code (issue 32): with the agent running in the tree,
removal exits 1, names the agent and its pane, and removes nothing (before, git removed the
tree under it and every later turn failed with `posix_spawn '/bin/sh' ENOENT`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import conductor
from tests.support.agents import ClaudeInTmux, Install
from tests.support.waiting import retry_until

pytestmark = [pytest.mark.slow, pytest.mark.agent]


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                           "-C", str(cwd), *args], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_worktree_remove_under_a_live_claude_exits_1_and_removes_nothing(
        claude_install: Install, tmp_path: Path, isolated_env: Path) -> None:
    lab = ClaudeInTmux(tmp_path / "agent", claude_install.binary,
                       env={"CONDUCTOR_WORKERS_DIR": str(isolated_env)})
    with lab:
        git(lab.project, "add", "README.md")
        git(lab.project, "commit", "-q", "-m", "first")
        made = conductor("-L", lab.socket_name, "pty", "create", str(lab.project), "--name",
                         "tree", "--worktree", "work")
        assert made.returncode == 0, made.stderr
        [row] = [w for w in json.loads(conductor("-L", lab.socket_name, "pty", "status",
                                                 "--json").stdout) if w["name"] == "tree"]
        folder, pane = Path(row["worktree"]), row["pane_id"]
        # Claude Code started in the new tree, from the shell `create` put there.
        lab.tmux("send-keys", "-t", pane, "-l", str(lab.binary))
        lab.tmux("send-keys", "-t", pane, "Enter")

        def runs_claude() -> bool:
            command = lab.tmux("display-message", "-p", "-t", pane,
                               "#{pane_current_command}").strip()
            screen = lab.tmux("capture-pane", "-p", "-t", pane)
            return command not in ("sh", "bash", "") and "Claude Code" in screen
        retry_until(runs_claude, 60, interval=0.2)

        refused = conductor("-L", lab.socket_name, "pty", "worktree", "remove", "tree")
        assert refused.returncode == 1, refused.stdout
        [line] = refused.stderr.splitlines()
        assert f"worktree {folder} not removed: " in line and f"in pane {pane} (" in line, line
        assert folder.is_dir() and (folder / "README.md").is_file()
        assert f"worktree {folder}\n" in git(lab.project, "worktree", "list", "--porcelain")
        print(line)
