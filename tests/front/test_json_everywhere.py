"""Every `--json` document is what design/json.md and design/schema/*.json publish: real
commands on a real tmux server, their outputs validated against the schema files (jsonschema
comes with the MCP SDK the tests already install)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; a test-only import

from app.run.watcher import Watcher
from tests.conftest import REPO, conductor
from tests.support.waiting import retry_until

SCHEMAS = REPO / "design" / "schema"
FLIP = f"exec {sys.executable} {REPO / 'tests' / 'support' / 'flip_dialog.py'}"


def check(name: str, document: Any) -> Any:
    schema = json.loads((SCHEMAS / f"{name}.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)
    rows = document if isinstance(document, list) else [document]
    assert all(row["schema_version"] == 1 for row in rows)
    return document


def pty(server: Any, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    done = conductor("-L", server.socket_name, "pty", *args, timeout=60)
    assert done.returncode == code, (args, done.stdout, done.stderr)
    return done


def one(server: Any, name: str, *args: str, code: int = 0) -> Any:
    return check(name, json.loads(pty(server, *args, "--json", code=code).stdout))


def lines(server: Any, name: str, *args: str) -> list[Any]:
    return [check(name, json.loads(line))
            for line in pty(server, *args, "--json").stdout.splitlines()]


def state_of(server: Any, name: str) -> str | None:
    rows = json.loads(pty(server, "status", "--json").stdout)
    return next((row["state"] for row in rows if row["name"] == name), None)


def test_reading_and_acting_commands_print_their_published_documents(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path) -> None:
    created = one(server, "create", "create", str(tmp_path), "--name", "jsonpane")
    assert created["name"] == "jsonpane" and created["worktree"] is None
    retry_until(lambda: watcher.tick(time.time()) is not None and
                state_of(server, "jsonpane") == "READY", 20, interval=0.2)
    rows = one(server, "status", "status")
    assert created["id"] in {row["id"] for row in rows}

    sent = one(server, "send", "send", "jsonpane", "echo json-sent")
    assert (sent["id"], sent["sent"], sent["queued"]) == (created["id"], True, False)
    waited = one(server, "wait", "wait", "jsonpane", "--timeout", "30")
    assert waited["reached"] and waited["state"] == "READY"
    timed_out = one(server, "wait", "wait", "jsonpane", "--until", "NEEDS_CONFIRMATION",
                    "--timeout", "0.5", code=124)
    assert timed_out["reached"] is False

    watcher.tick(time.time())
    history = lines(server, "tail", "tail", "jsonpane")
    assert "READY" in {row["state"] for row in history}
    explained = one(server, "explain", "explain", "jsonpane")
    assert explained["pane"]["id"] == created["id"] and explained["live"]["state"] == "READY"
    hosts = lines(server, "hosts", "hosts")
    assert hosts[0]["name"] == "local" and hosts[0]["reachable"]
    assert one(server, "queue", "queue", "--all") == []
    assert one(server, "herd-list", "herd", "list") == []
    assert lines(server, "herd-log", "herd", "log") == []

    goal = one(server, "goal", "goal", "jsonpane", "make json everywhere")
    assert goal["goal"] == "make json everywhere" and goal["check"] is None
    reported = one(server, "report", "report", "jsonpane", "done with json")
    assert reported["id"] == created["id"] and reported["job"] > 0
    for command in ("pause", "resume"):
        assert one(server, "acted", command, "jsonpane")["done"]
    herded = one(server, "herd-on-off", "herd", "on", "jsonpane", "--dry-run")
    assert herded["herded"] and herded["dry_run"] and herded["not_an_agent"]  # a shell
    assert one(server, "herd-on-off", "herd", "off", "jsonpane")["herded"] is False
    dispatched = one(server, "acted", "dispatch", "jsonpane", "echo dispatched", "--timeout",
                     "30")
    assert dispatched["id"] == created["id"]

    screen_file = tmp_path / "screen.txt"
    screen_file.write_text("Continue? (y/N) \n")
    assert lines(server, "classify", "classify", str(screen_file))[0]["state"] == \
        "NEEDS_CONFIRMATION"

    log = tmp_path / "keys.log"
    dialog = session.new_window(window_name="dialog", attach=False,
                                window_shell=f"{FLIP} {log}").active_pane
    retry_until(lambda: "Do you want to proceed?" in "\n".join(dialog.capture_pane()), 10)
    answered = one(server, "answer", "answer", dialog.pane_id, "1")
    assert answered["answered"] == "Yes" and "ls -la" in answered["subject"]


def test_a_worktree_created_and_removed_with_json(
        server: Any, session: Any, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for argv in (["init", "-q"], ["-c", "user.name=t", "-c", "user.email=t@example.com",
                                  "commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True)
    created = one(server, "create", "create", str(repo), "--worktree", "feature-json",
                  "--name", "treepane")
    assert created["branch"] == "feature-json" and Path(created["worktree"]).is_dir()
    session.windows.get(window_name="treepane").kill()
    removed = one(server, "worktree-remove", "worktree", "remove", created["id"])
    assert removed["removed"] == created["worktree"]
    assert not Path(created["worktree"]).exists()


def test_errors_under_json_are_one_json_line_on_stderr_with_the_exit_status(
        server: Any, session: Any) -> None:
    missing = pty(server, "tail", "no-such-pane", "--json", code=1)
    usage = pty(server, "tail", "no-such-pane", "-n", "0", "--json", code=2)
    for done, code in ((missing, 1), (usage, 2)):
        assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
        error = check("error", json.loads(done.stderr))
        assert error["code"] == code and error["error"]
    # Text typed after `--` is text: a literal "--json" there asks for no JSON.
    plain = pty(server, "send", "no-such-pane", "--", "--json", code=1)
    assert plain.stderr.startswith("Error: ")
