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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.base.errors import ConductorError
from app.base.model import Pane
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


_SHOWN = 8  # paths named in a refusal; the rest are counted


@dataclass(frozen=True)
class Losses:
    """What removing a worktree would take with it, besides its committed files."""

    programs: tuple[str, ...] = ()  # "less in pane %3 (work:1.0)"
    changes: tuple[str, ...] = ()  # tracked files changed but not committed
    files: tuple[str, ...] = ()  # untracked and ignored ones (`.env`, `build/`): git's own
    #                              `worktree remove --force` deletes them without a word

    def __bool__(self) -> bool:
        return bool(self.programs or self.changes or self.files)

    def words(self) -> str:
        parts = []
        if self.programs:
            parts.append(f"{_listed(self.programs)} running in it")
        if self.changes:
            parts.append(f"uncommitted changes ({_listed(self.changes)})")
        if self.files:
            parts.append(f"untracked or ignored files that would go with it "
                         f"({_listed(self.files)})")
        return "; ".join(parts)


def losses(folder: Path, panes: Sequence[Pane], is_shell: Callable[[str], bool]) -> Losses:
    """What would be lost with ``folder``: programs other than a shell in the foreground of a
    pane whose current folder is in it (an agent would go on writing into a deleted tree), and
    files git does not hold (``git status --ignored``)."""
    programs = tuple(f"{pane.current_command or '?'} in pane {pane.pane_id} "
                     f"({pane.session_name}:{pane.window_index}.{pane.pane_index})"
                     for pane in panes
                     if not pane.dead and _inside(pane.cwd, folder)
                     and not is_shell(pane.current_command))
    status = _git(folder, "status", "--porcelain", "--ignored", what="git status").stdout
    changes: list[str] = []
    files: list[str] = []
    for line in status.splitlines():
        code, path = line[:2], line[3:]
        (files if code in ("??", "!!") else changes).append(path)
    return Losses(programs, tuple(changes), tuple(files))


def remove_worktree(folder: Path, panes: Sequence[Pane] = (),
                    is_shell: Callable[[str], bool] = lambda command: True,
                    force: bool = False) -> Losses:
    """Remove a worktree made by :func:`add_worktree`; what went with it. Without ``force``,
    refuse (one line, nothing removed) while anything but committed files would be lost: a
    program running in it, uncommitted changes, untracked or ignored files."""
    if not folder.is_dir():
        raise ConductorError(f"worktree {folder} no longer exists; nothing removed")
    lost = losses(folder, panes, is_shell)
    if lost and not force:
        raise ConductorError(f"worktree {folder} not removed: {lost.words()}; stop or keep "
                             "them first, or --force removes it all the same")
    top = _main_worktree(folder)
    extra = ("--force",) if lost else ()
    _git(top, "worktree", "remove", *extra, "--", str(folder), what="git worktree remove")
    return lost


def _inside(path: str, folder: Path) -> bool:
    if not path:
        return False
    try:
        Path(path).resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


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
