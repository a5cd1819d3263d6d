"""A dead pane's exit status, with real tmux (remain-on-exit, as `create` sets it) and a real
watcher and notifier: 0 is an ordinary end, 126/127 say what the shell said, others are ERROR."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from app.adapters.notify import Notifier
from app.adapters.store_read import StoreReader
from app.run.watcher import Watcher
from tests.conftest import conductor, read_jsonl
from tests.support.waiting import retry_until, wait_for_dead_summary, wait_for_exit_status


def row_named(workers_dir: Path, name: str) -> dict[str, Any]:
    reader = StoreReader(workers_dir)
    try:
        return next((w for w in reader.workers() if w["name"] == name), {})
    finally:
        reader.close()


def created(server: Any, folder: Path, name: str, command: str) -> Any:
    done = conductor("-L", server.socket_name, "pty", "create", str(folder), "--name", name,
                     "--cmd", command)
    assert done.returncode == 0, done.stderr
    return server.windows.get(window_name=name).active_pane


def tick_until_state(watcher: Watcher, workers_dir: Path, name: str, state: str) -> None:
    def reached() -> bool:
        watcher.tick(time.time())
        return row_named(workers_dir, name).get("state") == state

    retry_until(reached, 20, interval=0.1, message=f"{name}: {row_named(workers_dir, name)}")


def tick_until_settled(watcher: Watcher, workers_dir: Path, name: str) -> None:
    """Past the pane's first seconds, whose news is held back: what follows is told at once."""
    def settled() -> bool:
        watcher.tick(time.time())
        tracked = watcher.tracked.get(row_named(workers_dir, name).get("id", ""))
        return tracked is not None and tracked.news.settled

    retry_until(settled, 20, interval=0.1, message=f"{name} never settled")


def notes_about(out: Path, name: str) -> list[str]:
    return [f"{n['env']['CONDUCTOR_STATE']}: {n['env']['CONDUCTOR_SUMMARY']}"
            for n in read_jsonl(out) if n["env"].get("CONDUCTOR_NAME") == name]


def test_exit_status_0_is_exited_normally_with_no_alert_even_once_the_pane_is_closed(
        server: Any, session: Any, notified: tuple[Watcher, Notifier, Path],
        isolated_env: Path, tmp_path: Path) -> None:
    watcher, notifier, out = notified
    pane = created(server, tmp_path, "side", "sh -c 'read x; exit 0'")
    tick_until_settled(watcher, isolated_env, "side")
    pane.send_keys("", enter=True)
    wait_for_exit_status(server, pane, 0)
    tick_until_state(watcher, isolated_env, "side", "EXITED")
    row = row_named(isolated_env, "side")
    assert row["summary"] == "Exited normally (status 0)"
    assert row["actions_needed"] == ""
    # Still a pane: waiting for its end is over at once; typing into it is refused.
    waited = conductor("-L", server.socket_name, "pty", "wait", "side", "--until", "EXITED",
                       "--timeout", "20")
    assert waited.returncode == 0, waited.stderr
    sent = conductor("-L", server.socket_name, "pty", "send", "side", "hello")
    assert sent.returncode == 1 and "status 0" in sent.stderr, sent.stderr
    # Closing the dead pane is no second end.
    server.cmd("kill-pane", "-t", pane.pane_id)
    watcher.tick(time.time())
    assert notifier.close()
    assert notes_about(out, "side") == []


@pytest.mark.parametrize(("command", "said"), [
    ("no-such-program-xq --flag", "not found (status 127)"),
    ("./not-executable", "ermission denied (status 126)"),
])
def test_status_126_and_127_say_what_the_shell_said(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path, tmp_path: Path,
        command: str, said: str) -> None:
    script = tmp_path / "not-executable"
    script.write_text("echo hi\n")
    script.chmod(0o644)
    pane = created(server, tmp_path, "quick", command)
    wait_for_exit_status(server, pane, 127 if "127" in said else 126)
    tick_until_state(watcher, isolated_env, "quick", "ERROR")

    wait_for_dead_summary(watcher, server, pane.pane_id,
                          lambda: row_named(isolated_env, "quick")["summary"],
                          ("no-such-program-xq", "not-executable"),
                          ("command not found (status 127)", "permission denied (status 126)"))
    assert str(row_named(isolated_env, "quick")["summary"]).endswith(said)


def test_any_other_status_is_error_and_alerts_once(
        server: Any, session: Any, notified: tuple[Watcher, Notifier, Path],
        isolated_env: Path, tmp_path: Path) -> None:
    watcher, notifier, out = notified
    pane = created(server, tmp_path, "crash", "sh -c 'read x; exit 4'")
    tick_until_settled(watcher, isolated_env, "crash")
    pane.send_keys("", enter=True)
    wait_for_exit_status(server, pane, 4)
    tick_until_state(watcher, isolated_env, "crash", "ERROR")
    for _ in range(3):
        watcher.tick(time.time())
    assert notifier.close()
    assert notes_about(out, "crash") == ["ERROR: Process exited (status 4)"]
