"""`worktree remove` never pulls a tree from under a running program nor deletes files git does
not hold without saying so (issue 32): real tmux panes, a real git repository. `--force`
removes it all the same and says what went."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from tests.conftest import conductor
from tests.front.test_daily_use import a_repository, git, in_folder, worktrees_listed
from tests.support.waiting import retry_until


def agent_tree(server: Any, tmp_path: Path, gitignore: str = "") -> tuple[Path, Path, Any]:
    """A repository, and a pane made by `create --worktree` at its shell in the new tree."""
    (tmp_path / "config.toml").write_text('[create]\nworktrees = "trees/{repo}"\n')
    repo = a_repository(tmp_path / "proj")
    if gitignore:
        (repo / ".gitignore").write_text(gitignore)
        git(repo, "add", ".gitignore")
        git(repo, "commit", "-q", "-m", "ignore")
    done = conductor("-L", server.socket_name, "pty", "create", str(repo), "--name", "agent",
                     "--worktree", "work")
    assert done.returncode == 0, done.stderr
    folder = repo / "trees" / "proj" / "work"
    pane = server.windows.get(window_name="agent").active_pane
    retry_until(functools.partial(in_folder, pane, folder), 15, interval=0.1)
    return repo, folder, pane


def remove(server: Any, *extra: str) -> Any:
    return conductor("-L", server.socket_name, "pty", "worktree", "remove", "agent", *extra)


def foreground(pane: Any) -> str:
    return str(pane.display_message("#{pane_current_command}", get_text=True)[0])


def where(pane: Any) -> str:
    target = pane.display_message("#{session_name}:#{window_index}.#{pane_index}", get_text=True)
    return f"pane {pane.pane_id} ({target[0]})"


def test_a_program_running_in_the_tree_refuses_removal_until_forced(
        server: Any, session: Any, tmp_path: Path) -> None:
    repo, folder, pane = agent_tree(server, tmp_path)
    pane.send_keys("sleep 300", enter=True)
    retry_until(lambda: foreground(pane) == "sleep", 15, interval=0.1)

    refused = remove(server)
    assert refused.returncode == 1
    [line] = refused.stderr.splitlines()
    assert line == (f"Error: worktree {folder} not removed: sleep in {where(pane)} running in "
                    "it; stop or keep them first, or --force removes it all the same"), line
    assert folder.is_dir() and worktrees_listed(repo) == {str(repo), str(folder)}

    forced = remove(server, "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.strip() == (f"removed worktree {folder} with sleep in {where(pane)} "
                                     "running in it")
    assert not folder.exists() and worktrees_listed(repo) == {str(repo)}


def test_a_shell_at_its_prompt_in_the_tree_is_no_reason_to_refuse(
        server: Any, session: Any, tmp_path: Path) -> None:
    _, folder, _ = agent_tree(server, tmp_path)
    done = remove(server)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"removed worktree {folder}"
    assert not folder.exists()


def test_ignored_and_untracked_files_are_listed_and_kept_until_forced(
        server: Any, session: Any, tmp_path: Path) -> None:
    repo, folder, _ = agent_tree(server, tmp_path, gitignore=".env\nbuild/\n")
    (folder / ".env").write_text("TOKEN=secret\n")
    (folder / "build").mkdir()
    (folder / "build" / "out.o").write_text("object\n")
    (folder / "draft.md").write_text("notes\n")

    refused = remove(server)
    assert refused.returncode == 1
    [line] = refused.stderr.splitlines()
    assert "untracked or ignored files that would go with it (" in line, line
    for name in (".env", "build/", "draft.md"):
        assert name in line, line
    assert (folder / ".env").is_file() and (folder / "build" / "out.o").is_file()

    forced = remove(server, "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.startswith(f"removed worktree {folder} with untracked or ignored "
                                    "files that would go with it (")
    assert ".env" in forced.stdout and "build/" in forced.stdout
    assert not folder.exists() and worktrees_listed(repo) == {str(repo)}
