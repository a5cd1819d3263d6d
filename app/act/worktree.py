"""A git worktree per agent: `create DIR --worktree BRANCH` and `worktree remove ID`.

Each agent `create` starts with ``--worktree`` gets its own checkout of BRANCH (made from the
current HEAD when the branch is new), placed by the ``[create] worktrees`` setting: a folder
relative to the repository's top (``{repo}`` is the repository folder's name), the default one
beside the repository, so agents never share files. Git runs as an argument list, never through a
shell; its failures become one line.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from app.base.errors import ConductorError
from app.base.settings_table import default

DEFAULT_WORKTREES = default("create.worktrees", str)
_GIT_TIMEOUT_S = 60.0


def check_worktrees_pattern(pattern: str) -> str:
    """The pattern, or a one-line :class:`ConductorError` saying why it cannot place folders."""
    if not pattern.strip():
        raise ConductorError("create.worktrees must name a folder, e.g. "
                             f"{DEFAULT_WORKTREES!r}")
    rest = pattern.replace("{repo}", "")
    if "{" in rest or "}" in rest:
        raise ConductorError(f"create.worktrees may use only {{repo}}, got {pattern!r}")
    return pattern


def add_worktree(directory: Path, branch: str, pattern: str = DEFAULT_WORKTREES) -> Path:
    """A new worktree of the repository holding ``directory``, on ``branch`` (created from HEAD
    when it does not exist); returns its folder."""
    _check_branch_name(branch, directory)
    top = _main_worktree(directory)
    base = Path(pattern.replace("{repo}", top.name)).expanduser()
    folder = (top / base / branch.replace("/", "-")).resolve()
    exists = _git(top, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}",
                  check=False).returncode == 0
    if exists:
        _git(top, "worktree", "add", "--", str(folder), branch, what="git worktree add")
    else:
        _git(top, "worktree", "add", "-b", branch, "--", str(folder), what="git worktree add")
    return folder


def remove_worktree(folder: Path) -> None:
    """Remove a worktree made by :func:`add_worktree`; refuse one with uncommitted changes or
    untracked files (one line, nothing removed)."""
    if not folder.is_dir():
        raise ConductorError(f"worktree {folder} no longer exists; nothing removed")
    changes = _git(folder, "status", "--porcelain", what="git status").stdout.splitlines()
    if changes:
        raise ConductorError(f"worktree {folder} has uncommitted changes ({len(changes)} "
                             f"file{'s' if len(changes) != 1 else ''}); commit or discard them "
                             "first, nothing removed")
    top = _main_worktree(folder)
    _git(top, "worktree", "remove", "--", str(folder), what="git worktree remove")


def _check_branch_name(branch: str, directory: Path) -> None:
    if branch.startswith("-"):
        valid = False
    else:
        done = _git(directory if directory.is_dir() else Path.cwd(), "check-ref-format",
                    "--branch", branch, check=False)
        # `--branch` expands shorthands such as @{-1}: only a name that stays itself is taken.
        valid = done.returncode == 0 and done.stdout.strip() == branch
    if not valid:
        raise ConductorError(f"{branch!r} is not a valid branch name; nothing created")


def _main_worktree(directory: Path) -> Path:
    """The repository's main worktree (its top folder), also when ``directory`` is inside a
    linked worktree."""
    done = _git(directory, "rev-parse", "--path-format=absolute", "--git-common-dir",
                check=False)
    if done.returncode != 0:
        raise ConductorError(f"{directory} is not inside a git repository; nothing created")
    common = Path(done.stdout.strip())
    if common.name == ".git":
        return common.parent
    raise ConductorError(f"{directory} is in a bare repository; worktrees need a checkout")


def _git(cwd: Path, *args: str, check: bool = True, what: str = "git"
         ) -> subprocess.CompletedProcess[str]:
    # No prompt for credentials and no pager: this runs unattended, its output is read by us.
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "LC_ALL": "C"}
    try:
        done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                              errors="replace", stdin=subprocess.DEVNULL, env=env,
                              timeout=_GIT_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise ConductorError("git is not installed (no 'git' on PATH)") from None
    except subprocess.TimeoutExpired:
        raise ConductorError(f"{what} did not finish within {_GIT_TIMEOUT_S:.0f} s") from None
    if check and done.returncode != 0:
        raise ConductorError(f"{what}: {_first_line(done.stderr)}")
    return done


def _first_line(stderr: str) -> str:
    """Git's reason: its ``fatal:``/``error:`` line without the prefix, else its first line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return line.removeprefix(prefix)
    return lines[0] if lines else "failed"
