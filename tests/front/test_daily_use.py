"""Living with it every day: exited panes stay readable, `create` keeps crashed screens, the
next pane that needs you, completion, and `--version` where people type it."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from app.adapters.store_read import StoreReader
from app.run.watcher import Watcher
from tests.conftest import REPO, conductor, conductor_in_process
from tests.support.waiting import retry_until, wait_for_dead_summary, wait_for_exit_status

QUESTION = "bash --norc --noprofile -c \"read -p 'Overwrite? (y/N) ' a; sleep 60\""


def by_name(workers_dir: Path) -> dict[str, dict[str, Any]]:
    reader = StoreReader(workers_dir)
    try:
        return {w["name"]: w for w in reader.workers()}
    finally:
        reader.close()


def settle(watcher: Watcher, expected: dict[str, str], workers_dir: Path) -> None:
    def reached() -> bool:
        watcher.tick(time.time())
        states = {n: w["state"] for n, w in by_name(workers_dir).items()}
        return all(states.get(n) == s for n, s in expected.items())

    retry_until(reached, 15, interval=0.1, message=f"states: {by_name(workers_dir)}")


def names_listed(*args: str, leaving_out: Collection[str] = ()) -> list[str]:
    """The names `status --json` lists, leaving out the fixtures' own panes (by id: their names
    follow tmux's automatic rename, which can lag under load, `tmux` before `sh`)."""
    done = conductor("pty", "status", "--json", *args)
    assert done.returncode == 0, done.stderr
    return [w["name"] for w in json.loads(done.stdout) if w["pane_id"] not in leaving_out]


def test_an_exited_pane_stays_in_tail_and_explain_and_leaves_status_after_a_while(
    session: Any, watcher: Watcher, isolated_env: Path, tmp_path: Path
) -> None:
    window = session.new_window(window_name="api", attach=False)
    settle(watcher, {"api": "READY"}, isolated_env)
    api = by_name(isolated_env)["api"]
    window.kill()
    watcher.tick(time.time())

    tail = conductor("pty", "tail", "api")
    assert tail.returncode == 0, tail.stderr
    assert tail.stdout.splitlines()[-1].split("  ")[1:3] == ["READY -> EXITED",
                                                             "the shell exited"]
    explain = conductor("pty", "explain", api["id"])
    assert explain.returncode == 0, explain.stderr
    assert explain.stdout.startswith(f"api ({api['id']}, pane {api['pane_id']}): EXITED")
    assert "live screen: the pane is gone" in explain.stdout

    # Shown for states.exited_shown seconds (default 600); --all shows it until it is pruned.
    own = {pane.pane_id for pane in session.server.panes}  # api is gone: the fixtures' shells
    assert names_listed(leaving_out=own) == ["api"]
    (tmp_path / "config.toml").write_text("[states]\nexited_shown = 0\n")
    assert names_listed(leaving_out=own) == []
    assert names_listed("--all", leaving_out=own) == ["api"]
    assert "api" not in conductor("pty", "status").stdout
    # The status line is for panes you can act on.
    assert conductor("pty", "status", "--short").stdout.strip() in (
        "[conductor: watcher stopped]", "[conductor: no panes]")


def test_send_and_wait_refuse_an_exited_pane_and_a_reused_name_means_the_live_one(
    server: Any, session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    window = session.new_window(window_name="api", attach=False)
    settle(watcher, {"api": "READY"}, isolated_env)  # its shell known as one (slow under load)
    gone = by_name(isolated_env)["api"]["id"]
    window.kill()
    watcher.tick(time.time())

    done = conductor("-L", server.socket_name, "pty", "send", gone, "hello")
    assert done.returncode == 1
    assert done.stderr.strip() == (f"Error: pane '{gone}' has exited (the shell exited); see "
                                   f"`conductor pty tail {gone}`")

    live = session.new_window(window_name="api", attach=False).active_pane.pane_id
    settle(watcher, {"api": "READY"}, isolated_env)
    waited = conductor("-L", server.socket_name, "pty", "wait", "api", "--timeout", "20")
    assert waited.returncode == 0, waited.stderr
    assert waited.stdout.startswith(f"api ({live}): READY")


def test_create_keeps_a_crashed_program_on_screen_as_error_with_its_status(
    server: Any, session: Any, watcher: Watcher, isolated_env: Path, tmp_path: Path
) -> None:
    done = conductor("-L", server.socket_name, "pty", "create", str(tmp_path), "--name", "crash",
                     "--cmd", "sh -c 'read x; echo boom; exit 4'")
    assert done.returncode == 0, done.stderr
    pane = server.windows.get(window_name="crash").active_pane
    assert server.cmd("show-options", "-w", "-v", "-t", pane.pane_id,
                      "remain-on-exit").stdout == ["on"]
    # Only that window: the user's own windows keep tmux's default.
    assert server.cmd("show-options", "-g", "-w", "-v", "remain-on-exit").stdout == ["off"]
    pane.send_keys("", enter=True)
    wait_for_exit_status(server, pane, 4)
    settle(watcher, {"crash": "ERROR"}, isolated_env)
    assert by_name(isolated_env)["crash"]["summary"] == "Process exited (status 4)"


@pytest.mark.parametrize(("command", "status"), [('sh -c "echo boom; exit 3"', 3),
                                                  ("no-such-program-xq --flag", 127)])
def test_create_of_a_program_that_exits_at_once_keeps_its_dead_pane_as_error(
    server: Any, session: Any, watcher: Watcher, isolated_env: Path, tmp_path: Path,
    command: str, status: int,
) -> None:
    done = conductor("-L", server.socket_name, "pty", "create", str(tmp_path), "--name", "quick",
                     "--cmd", command)
    assert done.returncode == 0, done.stderr
    created_id = done.stdout.strip()
    assert created_id and "\n" not in created_id
    pane = server.windows.get(window_name="quick").active_pane
    wait_for_exit_status(server, pane, status)
    settle(watcher, {"quick": "ERROR"}, isolated_env)
    row = by_name(isolated_env)["quick"]
    assert row["id"] == created_id
    if status == 127:
        wait_for_dead_summary(watcher, server, pane.pane_id,
                              lambda: by_name(isolated_env)["quick"]["summary"],
                              ("no-such-program-xq",), ("command not found (status 127)",))
        assert by_name(isolated_env)["quick"]["summary"].endswith("not found (status 127)")
    else:
        assert row["summary"] == "Process exited (status 3)", row["summary"]
    if status == 3:
        # tmux 3.3a scrolls the last screen into the history as it writes "Pane is dead"; it may
        # report the pane dead before it has drawn the program's last output.
        def history() -> list[str]:
            return list(server.cmd("capture-pane", "-p", "-S", "-", "-t", pane.pane_id).stdout)

        retry_until(lambda: "boom" in history(), 10, message=f"{history()}")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                           "-C", str(cwd), *args], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def a_repository(folder: Path) -> Path:
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    (folder / "README").write_text("hello\n")
    git(folder, "add", "README")
    git(folder, "commit", "-q", "-m", "first")
    git(folder, "branch", "existing")
    return folder.resolve()


def in_folder(pane: Any, folder: Path) -> bool:
    return bool(pane.display_message("#{pane_current_path}", get_text=True) == [str(folder)])


def worktrees_listed(repo: Path) -> set[str]:
    return {line.removeprefix("worktree ") for line in
            git(repo, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")}


def test_create_worktree_on_a_new_and_an_existing_branch_roots_the_window_there(
    server: Any, session: Any, tmp_path: Path
) -> None:
    repo = a_repository(tmp_path / "proj")
    made: dict[str, Path] = {}
    for name, branch, folder in (("fresh", "feat/new", "feat-new"),
                                 ("older", "existing", "existing")):
        done = conductor("-L", server.socket_name, "pty", "create", str(repo), "--name", name,
                         "--worktree", branch)
        assert done.returncode == 0, done.stderr
        made[name] = tmp_path / "proj-worktrees" / folder
        assert git(made[name], "branch", "--show-current") == branch
        assert (made[name] / "README").read_text() == "hello\n"
        pane = server.windows.get(window_name=name).active_pane
        retry_until(functools.partial(in_folder, pane, made[name]), 15, interval=0.1)
    assert worktrees_listed(repo) == {str(repo), *(str(p) for p in made.values())}

    rows = {w["name"]: w for w in json.loads(conductor("pty", "status", "--json").stdout)}
    assert rows["fresh"]["worktree"] == str(made["fresh"])
    assert rows["older"]["worktree"] == str(made["older"])
    assert rows["fresh"]["cwd"] == str(made["fresh"])


def test_create_worktree_errors_are_one_line_and_create_nothing(
    server: Any, session: Any, tmp_path: Path
) -> None:
    repo = a_repository(tmp_path / "proj")
    plain = tmp_path / "plain"
    plain.mkdir()
    windows_before = len(server.windows)
    cases = ((repo, "main", "git worktree add: 'main' is already checked out at"),
             (plain, "feat", f"{plain.resolve()} is not inside a git repository; nothing "
                             "created"),
             (repo, "bad..name", "'bad..name' is not a valid branch name; nothing created"),
             (repo, "--force", "'--force' is not a valid branch name; nothing created"),
             (repo, "@{-1}", "'@{-1}' is not a valid branch name; nothing created"))
    for folder, branch, says in cases:
        done = conductor("-L", server.socket_name, "pty", "create", str(folder), "--worktree",
                         f"{branch}")
        assert done.returncode == 1, done.stdout
        [line] = done.stderr.splitlines()
        assert line.startswith(f"Error: {says}"), line
    (tmp_path / "config.toml").write_text('[create]\nworktrees = "../{branch}"\n')
    done = conductor("-L", server.socket_name, "pty", "create", str(repo), "--worktree", "x")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.endswith("create.worktrees may use only {repo}, got '../{branch}'"), line
    assert worktrees_listed(repo) == {str(repo)}
    assert len(server.windows) == windows_before


def test_worktree_remove_refuses_a_dirty_tree_and_removes_a_clean_one(
    server: Any, session: Any, tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text('[create]\nworktrees = "trees/{repo}"\n')
    repo = a_repository(tmp_path / "proj")
    done = conductor("-L", server.socket_name, "pty", "create", str(repo), "--name", "agent",
                     "--worktree", "work")
    assert done.returncode == 0, done.stderr
    folder = repo / "trees" / "proj" / "work"
    assert folder.is_dir()
    (folder / "notes.txt").write_text("unsaved\n")

    refused = conductor("-L", server.socket_name, "pty", "worktree", "remove", "agent")
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        f"Error: worktree {folder} not removed: untracked or ignored files that would go with "
        "it (notes.txt); stop or keep them first, or --force removes it all the same"]
    assert (folder / "notes.txt").is_file()

    (folder / "notes.txt").unlink()
    done = conductor("-L", server.socket_name, "pty", "worktree", "remove", "agent")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"removed worktree {folder}"
    assert not folder.exists()
    assert worktrees_listed(repo) == {str(repo)}
    assert git(repo, "branch", "--list", "work") == "work"  # the branch and its commits stay
    [row] = [w for w in json.loads(conductor("pty", "status", "--json").stdout)
             if w["name"] == "agent"]
    assert row["worktree"] is None
    again = conductor("-L", server.socket_name, "pty", "worktree", "remove", "agent")
    assert again.returncode == 1
    assert again.stderr.splitlines() == [
        "Error: pane agent has no worktree (only `create --worktree` makes one); nothing removed"]


def test_create_leaves_remain_on_exit_alone_when_the_setting_is_off(
    server: Any, session: Any, tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text("[create]\nremain_on_exit = false\n")
    done = conductor("-L", server.socket_name, "pty", "create", str(tmp_path), "--name", "plain")
    assert done.returncode == 0, done.stderr
    pane = server.windows.get(window_name="plain").active_pane
    assert server.cmd("show-options", "-w", "-v", "-t", pane.pane_id,
                      "remain-on-exit").stdout == []


def test_switch_next_goes_to_the_question_then_the_error_then_the_longest_waiting_ready(
    server: Any, session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    session.new_window(window_name="older", attach=False)
    for window in server.windows:  # the fixtures' own idle shells would be READY too
        if window.window_name != "older":
            window.kill()
    settle(watcher, {"older": "READY"}, isolated_env)
    session.new_window(window_name="newer", attach=False)
    server.cmd("set-option", "-g", "remain-on-exit", "on")
    crashed = session.new_window(window_name="crashed", window_shell="sh -c 'exit 3'",
                                 attach=False)
    wait_for_exit_status(server, crashed.active_pane, 3)
    session.new_window(window_name="question", window_shell=QUESTION, attach=False)
    settle(watcher, {"newer": "READY", "crashed": "ERROR", "question": "NEEDS_CONFIRMATION"},
           isolated_env)
    panes = {n: w["pane_id"] for n, w in by_name(isolated_env).items()}

    def switch_next(current: str | None = None) -> str:
        extra = ["--from", current] if current else []
        done = conductor("-L", server.socket_name, "pty", "switch", "--next", *extra)
        assert done.returncode == 0, done.stderr
        return done.stdout.split(" ")[0]

    assert switch_next() == "question"
    assert switch_next(panes["question"]) == "crashed"
    session.windows.get(window_name="question").kill()
    session.windows.get(window_name="crashed").kill()
    settle(watcher, {"question": "EXITED", "crashed": "EXITED"}, isolated_env)
    assert switch_next() == "older"
    assert switch_next(panes["older"]) == "newer"
    active = server.cmd("display-message", "-p", "-t", session.session_id, "#{window_name}")
    assert active.stdout == ["newer"]

    both = conductor("-L", server.socket_name, "pty", "switch", "--next", "older")
    assert (both.returncode, both.stderr.strip()) == (
        2, "Error: give a pane ID|NAME or --next, not both (see `conductor pty switch --help`)")


def test_switch_next_with_nobody_waiting_says_so(
    server: Any, session: Any, watcher: Watcher, isolated_env: Path
) -> None:
    session.new_window(window_name="loop", attach=False,
                       window_shell="sh -c 'while :; do date +%N; sleep 0.05; done'")
    for window in server.windows:
        if window.window_name != "loop":
            window.kill()
    settle(watcher, {"loop": "BUSY"}, isolated_env)
    states = {w["state"] for w in by_name(isolated_env).values()}
    assert states <= {"BUSY", "EXITED"}
    done = conductor("-L", server.socket_name, "pty", "switch", "--next")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no pane needs you: none is NEEDS_CONFIRMATION, ERROR or READY"
    # From the key binding (--from): also said on the attached client's status line.
    loop = by_name(isolated_env)["loop"]["pane_id"]
    client = subprocess.Popen(
        ["script", "-qfc", f"tmux -L {server.socket_name} attach -t {session.session_id}",
         "/dev/null"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        env={**os.environ, "TERM": "xterm", "LC_ALL": "C.UTF-8"})
    try:
        retry_until(lambda: server.cmd("list-clients").stdout != [], 10)
        assert conductor("-L", server.socket_name, "pty", "switch", "--next", "--from",
                         loop).returncode == 0
        name = server.cmd("list-clients", "-F", "#{client_name}").stdout[0]
        retry_until(lambda: any("conductor: no pane needs you" in line for line in
                                server.cmd("show-messages", "-t", name).stdout), 10)
    finally:
        client.kill()
        client.wait(timeout=10)


def test_version_on_pty_too() -> None:
    top = conductor_in_process("--version")
    sub = conductor_in_process("pty", "--version")
    assert top.returncode == sub.returncode == 0
    assert sub.stdout == top.stdout and "conductor" in sub.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_offers_pane_names_and_ids_from_the_store(
    session: Any, watcher: Watcher, isolated_env: Path, shell: str
) -> None:
    session.new_window(window_name="api-server", attach=False)
    session.new_window(window_name="web", attach=False)
    watcher.tick(time.time())
    api = by_name(isolated_env)["api-server"]["id"]
    line = "conductor pty tail a"
    env = {"_CONDUCTOR_COMPLETE": f"{shell}_complete", "COMP_WORDS": line, "COMP_CWORD": "3"}
    if shell == "fish":
        env["COMP_CWORD"] = "a"  # fish hands over the word itself, bash and zsh its index
    done = conductor_in_process(env=env)
    assert done.returncode == 0, done.stderr
    # bash: `plain,VALUE` lines; zsh: type, value and help lines; fish: `plain,VALUE<TAB>help`.
    assert "api-server" in done.stdout and "web" not in done.stdout
    env_id = {**env, "COMP_WORDS": f"conductor pty tail {api[:4]}",
              "COMP_CWORD": api[:4] if shell == "fish" else "3"}
    assert api in conductor_in_process(env=env_id).stdout


def test_completion_with_no_store_completes_nothing_quietly(tmp_path: Path) -> None:
    env = {"_CONDUCTOR_COMPLETE": "bash_complete", "COMP_WORDS": "conductor pty tail ",
           "COMP_CWORD": "3", "CONDUCTOR_WORKERS_DIR": str(tmp_path / "none")}
    done = conductor_in_process(env=env)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "", "")


def test_completion_scripts_are_printed_for_each_shell() -> None:
    for shell, marker in (("bash", "complete -o"), ("zsh", "compdef"), ("fish", "complete ")):
        done = conductor_in_process(env={"_CONDUCTOR_COMPLETE": f"{shell}_source"})
        assert done.returncode == 0 and marker in done.stdout, (shell, done.stdout)


@pytest.mark.parametrize("cli", ["claude", "gemini"])
def test_hooks_uninstall_removes_only_ours_from_json_settings(tmp_path: Path, cli: str) -> None:
    settings = tmp_path / "settings.json"
    theirs = {"type": "command", "command": "my-logger --event"}
    original = {"model": "x", "hooks": {"Notification": [{"hooks": [theirs]}],
                                        "Custom": []}}
    settings.write_text(json.dumps(original))
    installed = conductor_in_process("pty", "hooks", "install", "--cli", cli, "--path",
                                     str(settings))
    assert installed.returncode == 0, installed.stderr
    assert "pty hook" in settings.read_text()

    done = conductor_in_process("pty", "hooks", "uninstall", "--cli", cli, "--path",
                                str(settings))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"removed conductor pty hooks for {cli} from {settings}")
    assert json.loads(settings.read_text()) == original
    again = conductor_in_process("pty", "hooks", "uninstall", "--cli", cli, "--path",
                                 str(settings))
    assert again.stdout.strip() == f"no conductor pty hooks for {cli} in {settings}"


def test_hooks_uninstall_codex_keeps_comments_and_another_notify(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('# mine\nmodel = "o3"\n\n[tui]\nx = 1\n')
    assert conductor_in_process("pty", "hooks", "install", "--cli", "codex", "--path",
                                str(config)).returncode == 0
    assert conductor_in_process("pty", "hooks", "uninstall", "--cli", "codex", "--path",
                                str(config)).returncode == 0
    assert config.read_text() == '# mine\nmodel = "o3"\n\n[tui]\nx = 1\n'

    config.write_text('notify = ["their-notifier"]\n')
    done = conductor_in_process("pty", "hooks", "uninstall", "--cli", "codex", "--path",
                                str(config))
    assert done.stdout.strip() == f"no conductor pty hooks for codex in {config}"
    assert config.read_text() == 'notify = ["their-notifier"]\n'


def test_hooks_uninstall_of_a_broken_file_is_one_line(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text("{oops")
    done = conductor_in_process("pty", "hooks", "uninstall", "--cli", "claude", "--path",
                                str(settings))
    assert done.returncode == 1
    assert done.stderr.strip() == (f"Error: {settings}:1: not valid JSON: Expecting property "
                                   "name enclosed in double quotes")
    assert settings.read_text() == "{oops"


def test_status_line_styles_accept_tmux_style_words_only() -> None:
    from app.base.render import TMUX_STYLE, short_line, styles

    assert styles("ready=fg=black,bg=white; NEEDS_CONF=fg=red,bg=black")["READY"] == \
        "fg=black,bg=white"
    assert styles("NEEDS_CONF=fg=red,bg=black")["NEEDS_CONFIRMATION"] == "fg=red,bg=black"
    assert styles("READY=fg=red]#(touch x);BOGUS=fg=red") == TMUX_STYLE
    line = short_line([{"name": "a#b", "state": "READY"}, {"name": "c", "state": "EXITED"}],
                      colour=True)
    assert line == "#[fg=white,bg=blue,bold][a##b: READY]#[default]"


def test_a_pane_closed_while_the_store_fails_still_gets_its_final_row(
        session: Any, watcher: Watcher, isolated_env: Path) -> None:
    from app.base.errors import StoreError

    notified: list[str] = []
    watcher.on_transition = lambda t, tracked: notified.append(f"{tracked.name}:{t.state.value}")
    window = session.new_window(window_name="api", attach=False)
    watcher.tick(time.time())
    writer = watcher.store
    # A real failing write: a trigger refuses every status row while "disk_full" holds a row.
    writer.conn.executescript(
        "CREATE TABLE disk_full (x); INSERT INTO disk_full VALUES (1);"
        "CREATE TRIGGER full_u BEFORE UPDATE ON status WHEN (SELECT COUNT(*) FROM disk_full) "
        "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;")
    window.kill()
    with pytest.raises(StoreError, match="disk is full"):
        watcher.tick(time.time())
    assert by_name(isolated_env)["api"]["state"] != "EXITED"
    assert "api:EXITED" not in notified

    writer.conn.execute("DELETE FROM disk_full")
    report = watcher.tick(time.time())

    api = by_name(isolated_env)["api"]
    assert report.exited == [api["id"]] and api["state"] == "EXITED"
    assert notified.count("api:EXITED") == 1


def test_wait_until_exited_returns_when_the_pane_ends_and_plain_wait_says_it_ended(
        server: Any, session: Any) -> None:
    window = session.new_window(window_name="job", attach=False,
                                window_shell="sh -c 'read x; sleep 60'")
    pane = window.active_pane

    def wait_for(until: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "app", "-L", server.socket_name, "pty", "wait", pane.pane_id,
             "--until", until, "--timeout", "60", "-v"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)

    waiters = [wait_for("EXITED"), wait_for("NEEDS_CONFIRMATION")]
    try:
        for proc in waiters:  # -v: a first line once it has looked at the pane
            assert proc.stderr is not None
            assert "still waiting" in proc.stderr.readline()
        window.kill()
        results = [(proc.communicate(timeout=60), proc.returncode) for proc in waiters]
    finally:
        for proc in waiters:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    ((out, _), code), ((_, err), plain_code) = results
    assert code == 0 and out.startswith(f"job ({pane.pane_id}): EXITED after ")
    assert plain_code == 1
    assert err.strip().splitlines()[-1] == f"Error: pane job ({pane.pane_id}) exited while waiting"


def test_the_status_table_shows_a_goal_column_only_when_a_pane_has_a_goal() -> None:
    from app.base.render import GOAL_WIDTH, table

    now = 1_000_000.0
    plain = {"id": "a1", "name": "api", "cli_type": "claude", "state": "BUSY",
             "state_entered_ts": now - 5, "summary": "working"}
    assert "GOAL" not in table([plain], now)
    goal = "make every test in the parser module pass, then open a pull request"
    lines = table([plain, {**plain, "id": "b2", "name": "web", "goal": goal}], now).splitlines()
    assert lines[0].split() == ["ID", "NAME", "CLI", "STATE", "SINCE", "WAITING", "GOAL",
                                "SUMMARY"]
    web = next(line for line in lines if "web" in line)
    assert goal[:GOAL_WIDTH - 1] + "…" in web and "working" in web
    api = next(line for line in lines if "api" in line)
    assert " - " in api  # no goal: a dash, so the columns stay aligned


# --- the status views: the tmux segment in the room it has, a narrow side pane, one server's
# panes with -L, and the panes of a tmux server that ended -----------------------------------

PRINTER = "sh -c 'while :; do date +%N; sleep 0.1; done'"
ITEM = re.compile(r"\[[^\]]*\]")


def claim_watcher(watcher: Watcher) -> None:
    """The in-process watcher as the store's running watcher (this process), so readers take its
    states as current; each full tick keeps its last cycle fresh."""
    with watcher.store.transaction() as conn:
        watcher.store.heartbeat(conn, pid=os.getpid(), socket=watcher.tmux.label, interval=1.0,
                                started_ts=time.time(), stopped_ts=None, problem=None)
    watcher.tick(time.time())


def ten_panes(server: Any, session: Any, watcher: Watcher, workers_dir: Path) -> None:
    """A question, a crashed program, five idle shells and three busy printers, nothing else."""
    server.cmd("set-option", "-g", "remain-on-exit", "on")
    session.new_window(window_name="question", window_shell=QUESTION, attach=False)
    crashed = session.new_window(window_name="crashed", window_shell="sh -c 'exit 3'",
                                 attach=False)
    for name in ("idle-a", "idle-b", "idle-c", "idle-d", "idle-e"):
        session.new_window(window_name=name, attach=False)
    for name in ("busy-a", "busy-b", "busy-c"):
        session.new_window(window_name=name, window_shell=PRINTER, attach=False)
    wait_for_exit_status(server, crashed.active_pane, 3)
    for window in list(server.windows):  # the fixtures' own shells
        if window.window_name not in TEN:
            window.kill()
    settle(watcher, TEN, workers_dir)


TEN = {"question": "NEEDS_CONFIRMATION", "crashed": "ERROR",
       **dict.fromkeys(("idle-a", "idle-b", "idle-c", "idle-d", "idle-e"), "READY"),
       **dict.fromkeys(("busy-a", "busy-b", "busy-c"), "BUSY")}


RANK = {"NEEDS_CONFIRMATION": 0, "ERROR": 1, "READY": 2, "BUSY": 3, "UNKNOWN": 4}


def attention_order(workers_dir: Path) -> list[tuple[str, str]]:
    """(name, item) of the ten panes as the status line must put them: the question, the error,
    the idle shells by how long they have waited, then the rest by state and name; ties by
    name. From the store as it is now (a printer a loaded machine starved may read UNKNOWN)."""
    live = [w for n, w in by_name(workers_dir).items() if n in TEN]
    live.sort(key=lambda w: (RANK[w["state"]], w["state_entered_ts"] if RANK[w["state"]] < 3
                             else 0.0, w["name"]))
    short = {"NEEDS_CONFIRMATION": "NEEDS_CONF"}
    return [(w["name"], f"[{w['name']}: {short.get(w['state'], w['state'])}]") for w in live]


def test_status_short_in_a_given_width_shows_whole_items_the_panes_needing_you_first(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> None:
    ten_panes(server, session, watcher, isolated_env)

    def line(*extra: str) -> tuple[str, list[str]]:
        """The line, and the items it must take from (the store it read, no tick since)."""
        watcher.tick(time.time())
        done = conductor("-L", server.socket_name, "pty", "status", "--short", *extra)
        assert done.returncode == 0, done.stderr
        return done.stdout.rstrip("\n"), [item for _, item in attention_order(isolated_env)]

    claim_watcher(watcher)
    everything, order = line()
    assert ITEM.findall(everything) == order  # no width: all of them, in that order
    assert [name for name, _ in attention_order(isolated_env)][:2] == ["question", "crashed"]
    for width in (60, 120):
        shown, order = line("--width", str(width))
        print(f"--width {width} ({len(shown)} characters): {shown}")
        assert len(shown) <= width
        items = ITEM.findall(shown)
        assert items == order[:len(items)]
        assert shown == " ".join([*items, f"+{len(order) - len(items)}"])
        # As many as fit: one more would not, with what would still be left counted.
        rest = len(order) - len(items) - 1
        longer = " ".join(order[:len(items) + 1]) + (f" +{rest}" if rest else "")
        assert len(longer) > width
        # The same line again (stable), and through the full command line (click) too.
        again, now = line("--width", str(width))
        assert again == shown or now[:len(items)] != order[:len(items)]
        clicked, now = line("--width", str(width), "--all")
        assert clicked == shown or now[:len(items)] != order[:len(items)]
        coloured, now = line("--colour", "--width", str(width))
        assert re.sub(r"#\[[a-z0-9=,]+\]", "", coloured) == shown or \
            now[:len(items)] != order[:len(items)]
    assert line("--width", "3")[0] == "+10"
    assert line("--width", "2")[0] == ""


def test_status_in_a_70_column_side_pane_keeps_name_state_waiting_and_summary(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> None:
    session.new_window(window_name="question", window_shell=QUESTION, attach=False)
    session.new_window(window_name="printer", window_shell=PRINTER, attach=False)
    settle(watcher, {"question": "NEEDS_CONFIRMATION", "printer": "BUSY"}, isolated_env)
    claim_watcher(watcher)
    side = server.new_session(session_name="side", x=70, y=20, start_directory=str(REPO))
    pane = side.active_pane
    retry_until(lambda: pane.display_message("#{pane_width}", get_text=True) == ["70"], 10)
    # The test servers' global environment holds COLUMNS=80, which would beat the pane's size.
    pane.send_keys(f"unset COLUMNS LINES; clear; {sys.executable} -m app pty status", enter=True)

    def screen() -> list[str]:
        return [line for line in pane.capture_pane() if line.strip()]

    retry_until(lambda: any(line.startswith("printer ") for line in screen()), 20)
    lines = screen()[:-1]  # the table, then the prompt
    print("\n".join(lines))
    assert lines[0].split() == ["NAME", "STATE", "WAITING", "SUMMARY"]
    question = next(line for line in lines if line.startswith("question "))
    assert "NEEDS_CONFIRMATION" in question and "Overwrite? (y/N)" in question
    assert all(len(line) <= 70 for line in lines)


def test_the_table_leaves_out_columns_with_nothing_to_say() -> None:
    from app.base.render import table

    now = 1_000_000.0
    rows = [{"id": "a1", "name": "api", "cli_type": "claude", "state": "BUSY", "cycle": "",
             "goal": "", "state_entered_ts": now - 5, "summary": "working"},
            {"id": "b2", "name": "web", "cli_type": "codex", "state": "BUSY", "cycle": "-",
             "state_entered_ts": now - 9, "summary": ""}]
    assert table(rows, now).splitlines()[0].split() == [
        "ID", "NAME", "CLI", "STATE", "SINCE", "WAITING", "SUMMARY"]
    rows[1]["cycle"] = "WAITING"
    assert "CYCLE" in table(rows, now).splitlines()[0].split()
    narrow = table(rows, now, width=40).splitlines()
    assert narrow[0].split() == ["NAME", "STATE", "CYCLE", "WAITING", "SUMMARY"]
    assert all(len(line) <= 40 for line in narrow)


def test_L_scopes_every_reader_to_that_servers_panes(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path,
        TestServer: Any) -> None:
    from app.adapters.tmux import Tmux
    from app.base.settings import WatchSettings
    from app.observe.pack_loading import load_packs

    mine, theirs = server.socket_name, TestServer()
    theirs.new_session(session_name="theirs", window_name="their-api")
    session.new_window(window_name="mine-api", attach=False)
    settle(watcher, {"mine-api": "READY"}, isolated_env)
    # One store, two servers: their watcher ran here once too (one at a time, as the lock wants).
    other = Watcher(Tmux(socket_name=theirs.socket_name), watcher.store, watcher.packs,
                    WatchSettings(interval_s=1, ready_min_s=0))
    settle(other, {"their-api": "READY", "mine-api": "READY"}, isolated_env)
    assert load_packs()  # both watchers judged with the shipped packs
    claim_watcher(watcher)
    ids = {n: w["id"] for n, w in by_name(isolated_env).items()}

    def names(*args: str, env: dict[str, str] | None = None) -> set[str]:
        done = conductor(*args, "pty", "status", "--json", env=env)
        assert done.returncode == 0, done.stderr
        return {w["name"] for w in json.loads(done.stdout)}

    assert "mine-api" in names("-L", mine) and "their-api" not in names("-L", mine)
    assert names("-L", theirs.socket_name) == {"their-api"}
    assert names(env={"CONDUCTOR_TMUX_SOCKET": theirs.socket_name}) == {"their-api"}
    assert {"mine-api", "their-api"} <= names()  # without -L: every server in the store

    def run(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
        watcher.tick(time.time())
        return conductor("-L", socket, "pty", *args)

    assert "[mine-api: READY]" in run(mine, "status", "--short").stdout
    assert "their-api" not in run(mine, "status", "--short").stdout
    assert run(theirs.socket_name, "status", "--short").stdout.strip() == \
        f"[conductor: watching {mine}]"
    fast = conductor("pty", "status", "--short", env={"CONDUCTOR_TMUX_SOCKET": mine})
    assert "[mine-api: READY]" in fast.stdout and "their-api" not in fast.stdout
    table = run(theirs.socket_name, "status")
    assert "their-api" in table.stdout and "mine-api" not in table.stdout
    assert f"this store's watcher watches tmux server {mine}, not this one" in table.stderr

    for command in ("tail", "explain", "switch"):
        refused = run(theirs.socket_name, command, "mine-api")
        assert (refused.returncode, refused.stderr.strip()) == (
            1, "Error: no pane with id or name 'mine-api'; see `conductor pty status`")
    assert run(mine, "tail", "mine-api").returncode == 0
    # Without -L, explain reads the live screen from the pane's own server.
    explained = conductor("pty", "explain", "their-api")
    assert "live screen, pack shell: READY" in explained.stdout, explained.stdout

    # A report (a queued message would be refused: the pane is a shell, and prose is for agents).
    assert run(mine, "report", "mine-api", "done").returncode == 0
    assert run(theirs.socket_name, "queue").stdout.startswith("no jobs waiting")
    assert "mine-api" in run(mine, "queue").stdout

    assert run(mine, "herd", "on", "mine-api").returncode == 0
    assert run(theirs.socket_name, "herd", "list").stdout.startswith("no pane is herded")
    assert "mine-api" in run(mine, "herd", "list").stdout
    with watcher.store.transaction() as conn:
        for name in ("mine-api", "their-api"):
            watcher.store.herd.add_nudge(conn, {"id": ids[name], "ts": time.time(), "name": name,
                                                "eligible": 0, "outcome": "blocked",
                                                "reason": "no_rule", "state": "READY"})
    assert [line.split()[2] for line in run(mine, "herd", "log").stdout.splitlines()] == \
        ["mine-api"]
    assert [line.split()[2] for line in
            run(theirs.socket_name, "herd", "log").stdout.splitlines()] == ["their-api"]


@pytest.mark.parametrize("restart", ["after_a_tick_without_it", "before_the_next_tick"])
def test_the_panes_of_an_ended_tmux_server_say_so_and_fold_into_one_status_line(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path, restart: str) -> None:
    socket = server.socket_name
    for name in ("api", "web", "db"):
        session.new_window(window_name=name, attach=False)
    settle(watcher, {"api": "READY", "web": "READY", "db": "READY"}, isolated_env)
    old = {w["id"]: w for w in all_rows(isolated_env)}
    old_pid = next(iter(old.values()))["server_pid"]
    notified: list[str] = []
    watcher.on_transition = lambda t, tracked: notified.append(f"{tracked.name}:{t.state.value}")

    server.kill()
    if restart == "after_a_tick_without_it":
        def all_ended() -> bool:
            watcher.tick(time.time())
            return all(w["state"] == "EXITED" for w in all_rows(isolated_env))

        retry_until(all_ended, 15, interval=0.1)
    # A server that is still going away refuses the new session: again until one starts.
    retry_until(lambda: subprocess.run(
        ["tmux", "-L", socket, "new-session", "-d", "-s", "reborn", "-n", "api"],
        capture_output=True, check=False, timeout=30).returncode == 0, 15, interval=0.1)

    def live_api() -> dict[str, Any] | None:
        watcher.tick(time.time())
        return next((w for w in all_rows(isolated_env) if w["name"] == "api"
                     and w["state"] == "READY" and w["id"] not in old), None)

    retry_until(live_api, 15, interval=0.1)
    api = live_api()
    assert api is not None
    for row in all_rows(isolated_env):
        if row["id"] in old:
            assert (row["state"], row["summary"], row["reasons"]) == (
                "EXITED", "tmux server ended", ["server_ended"])
    # A server's end is one fact, not a notification per pane.
    assert [n for n in notified if n.endswith(":EXITED")] == []

    table = conductor("-L", socket, "pty", "status")
    assert table.returncode == 0, table.stderr
    print(table.stdout)
    lines = table.stdout.splitlines()
    assert [line.split()[1] for line in lines[1:] if line.startswith(api["id"])] == ["api"]
    folded = [line for line in lines if "of tmux server" in line]
    assert len(folded) == 1 and len(lines) == 3  # the header, the live api, the fold
    assert folded[0].startswith(f"{len(old)} panes of tmux server {socket} (pid {old_pid}) "
                                "ended ")
    assert folded[0].endswith(f"({', '.join(sorted(w['name'] for w in old.values()))})")

    tail = conductor("-L", socket, "pty", "tail", "api")
    assert tail.returncode == 0 and "EXITED" not in tail.stdout
    explained = conductor("-L", socket, "pty", "explain", "api")
    assert explained.stdout.startswith(f"api ({api['id']}, pane {api['pane_id']}): READY")
    waited = conductor("-L", socket, "pty", "wait", "api", "--timeout", "20")
    assert waited.returncode == 0 and waited.stdout.startswith(f"api ({api['pane_id']}): READY")


def all_rows(workers_dir: Path) -> list[dict[str, Any]]:
    reader = StoreReader(workers_dir)
    try:
        return reader.workers()
    finally:
        reader.close()
