"""Shell panes on a real tmux server (issue 20): a failed command above the prompt reads ERROR
(a Python traceback, `ls` on a missing path, a prompt showing a non-zero exit status), and a
command line typed at the prompt is never a question, nor a critical notification, before it
runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from app.adapters.notify import Notifier
from app.run.watcher import Watcher
from tests.conftest import read_jsonl
from tests.observe.test_shells_and_plain_programs import row, screen, shell_pane, tick_until
from tests.support.waiting import retry_until


def run(pane: Any, command: str, until: str) -> None:
    pane.send_keys(command, enter=True)
    retry_until(lambda: until in screen(pane), 15, message=f"{until!r} never shown: {screen(pane)}")
    retry_until(lambda: screen(pane).rstrip().endswith("$"), 15)


def test_a_python_traceback_above_the_prompt_is_an_error(
        server: Any, session: Any, tmp_path: Path, watcher: Watcher, isolated_env: Path) -> None:
    pane = shell_pane(session, tmp_path / "py")
    tick_until(watcher, isolated_env, pane.pane_id, "READY")

    run(pane, "python3 -c 'import json; json.loads(\"{oops\")'", "JSONDecodeError")
    failed = tick_until(watcher, isolated_env, pane.pane_id, "ERROR")

    assert failed["summary"].startswith("json.decoder.JSONDecodeError: Expecting property name")
    assert failed["rule_id"] == "error-above-prompt" and failed["cli_type"] == "shell"
    run(pane, "echo fine", "\nfine")
    assert tick_until(watcher, isolated_env, pane.pane_id, "READY")["summary"] == "Shell prompt"


def test_ls_on_a_missing_path_is_an_error(
        server: Any, session: Any, tmp_path: Path, watcher: Watcher, isolated_env: Path) -> None:
    pane = shell_pane(session, tmp_path / "ls")
    tick_until(watcher, isolated_env, pane.pane_id, "READY")

    run(pane, "ls /nonexistent", "No such file or directory")
    failed = tick_until(watcher, isolated_env, pane.pane_id, "ERROR")

    assert "ls: cannot access '/nonexistent': No such file or directory" in failed["summary"]


def test_a_prompt_showing_the_exit_status_decides(
        server: Any, session: Any, tmp_path: Path, watcher: Watcher, isolated_env: Path) -> None:
    """PS1 with `[$?]`: `false` prints nothing, yet the prompt says it failed; a later `[0]`
    overrules an error-looking line of output."""
    pane = shell_pane(session, tmp_path / "st")
    pane.send_keys("PS1='dev@host:\\w [$?]$ '", enter=True)
    retry_until(lambda: screen(pane).rstrip().endswith("[0]$"), 10)
    tick_until(watcher, isolated_env, pane.pane_id, "READY")

    run(pane, "false", "[1]$")
    failed = tick_until(watcher, isolated_env, pane.pane_id, "ERROR")
    assert failed["summary"] == "The last command failed (exit status 1)"

    run(pane, "echo 'Error: none, all good'", "[0]$")
    assert tick_until(watcher, isolated_env, pane.pane_id, "READY")["rule_id"] == "shell-prompt"


def test_a_question_typed_at_the_prompt_asks_nothing_before_it_runs(
        server: Any, session: Any, tmp_path: Path, notified: tuple[Watcher, Notifier, Path],
        isolated_env: Path) -> None:
    watcher, notifier, out = notified
    pane = shell_pane(session, tmp_path / "typed")
    tick_until(watcher, isolated_env, pane.pane_id, "READY")

    pane.send_keys('echo "continue? [y/N]"', enter=False)
    retry_until(lambda: screen(pane).rstrip().endswith('[y/N]"'), 10)
    seen = []
    for _ in range(8):
        watcher.tick(time.time())
        seen.append(row(isolated_env, pane.pane_id)["state"])
        time.sleep(0.2)
    assert "NEEDS_CONFIRMATION" not in seen and seen[-1] == "UNKNOWN", seen

    pane.send_keys("", enter=True)  # run it: its output is above a prompt, no question either
    retry_until(lambda: screen(pane).rstrip().endswith("$"), 10)
    tick_until(watcher, isolated_env, pane.pane_id, "READY")
    run(pane, "ls /nonexistent", "No such file")  # news the receiver must be told

    def told_error() -> bool:
        watcher.tick(time.time())
        return any(c["env"]["CONDUCTOR_STATE"] == "ERROR" for c in read_jsonl(out))
    retry_until(told_error, 20, interval=0.3, message=f"no ERROR notification: {read_jsonl(out)}")
    assert notifier.close()
    states = [call["env"]["CONDUCTOR_STATE"] for call in read_jsonl(out)]
    urgencies = {call["env"].get("CONDUCTOR_URGENCY") for call in read_jsonl(out)}
    assert "NEEDS_CONFIRMATION" not in states and "critical" not in urgencies, read_jsonl(out)
