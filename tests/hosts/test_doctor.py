"""`conductor pty doctor` against the real parts: a tmux server, a running watcher, Claude Code's
settings file as `hooks install` writes it, and a host behind a real sshd on loopback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; a test-only import
import pytest

from app.adapters.status import read_beat
from tests.conftest import REPO, conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.support.waiting import retry_until

SCHEMA = json.loads((REPO / "design" / "schema" / "doctor.json").read_text())


def test_doctor_passes_then_names_a_missing_hook_and_an_unreachable_host_in_one_line_each(
        server: Any, session: Any, watcher_process: Callable[..., Any],
        ssh_host: Callable[..., SshHost], isolated_env: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)  # Claude Code in use here; Codex and Gemini not
    monkeypatch.setenv("HOME", str(home))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(name, raising=False)
    alpha = ssh_host("alpha")
    # Desktop notifications need a D-Bus session bus this test has none of: turned off, as a
    # person on an ssh box would after doctor told them.
    write_hosts(tmp_path / "config.toml", alpha, extra="\n[notify.desktop]\nenabled = false\n")
    assert conductor("pty", "hooks", "install", "--cli", "claude").returncode == 0
    watcher_process("--interval", "0.5")
    retry_until(lambda: read_beat(isolated_env) is not None, 30, message="no watcher beat")

    def doctor(*extra: str) -> Any:
        return conductor("-L", server.socket_name, "pty", "doctor", *extra, timeout=60)

    healthy = doctor("--json")
    report = json.loads(healthy.stdout)
    jsonschema.validate(report, SCHEMA)
    assert healthy.returncode == 0 and report["ok"], [
        c for c in report["checks"] if not c["ok"]]
    areas = {(c["area"], c["name"]) for c in report["checks"]}
    assert {("tmux", "version"), ("tmux", "allow-passthrough"), ("store", "database"),
            ("watcher", "health"), ("hooks", "claude"), ("mcp", "claude"),
            ("hosts", "alpha"), ("notifications", "desktop")} <= areas
    assert ("hooks", "codex") not in areas  # no ~/.codex, no codex on PATH: not in use

    settings_file = home / ".claude" / "settings.json"
    settings = json.loads(settings_file.read_text())
    del settings["hooks"]["Stop"]
    settings_file.write_text(json.dumps(settings))
    alpha.stop()

    sick = doctor()
    assert sick.returncode == 1, sick.stdout + sick.stderr
    failed = [line for line in sick.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 2, sick.stdout
    assert failed[0].startswith("FAIL  hooks claude: missing event Stop in ")
    assert failed[0].endswith("(`conductor pty hooks install --cli claude`)")
    assert failed[1].startswith("FAIL  hosts alpha: alpha unreachable: "), failed[1]
    assert sick.stdout.splitlines()[-1] == "2 checks failed"


def test_a_notifier_that_cannot_run_and_a_missing_store_are_one_line_each(
        server: Any, session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "nobody"))  # no agent CLI in use: no hook lines
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config.toml").write_text(
        '[notify.desktop]\nenabled = false\n[notify.command]\nargv = ["/nonexistent/notifier"]\n')
    done = conductor("-L", server.socket_name, "pty", "doctor", timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert [line.split(":")[0] for line in failed] == [
        "FAIL  store database", "FAIL  notifications command"], done.stdout
    assert "'/nonexistent/notifier' not found" in failed[1]
