"""Issue 33 for Gemini CLI and Qwen Code: the real CLIs (from npm) against the lab's fake model
server, in a pane of a real tmux server with our hooks installed. Their SessionStart hook names
the session and its chat file, and the tokens the watcher stores for the pane are what the fake
reported for the pane's model responses (two: a shell tool call, then the answer). Run headless
(``-p``): the hooks and the chat file are the same as in the TUI."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.act.create import create_worker
from app.adapters.tmux import Tmux
from app.run.watcher import Watcher
from tests.conftest import conductor
from tests.support.agents import AgentUnavailable, _npm_install
from tests.support.waiting import retry_until, stop_process

pytestmark = [pytest.mark.slow, pytest.mark.agent]

FAKE = Path(__file__).resolve().parents[2] / "scripts" / "lab" / "fake_openai_gemini_server.py"
VERSIONS = {"gemini": ("Gemini CLI", "@google/gemini-cli", "0.61.0", "gemini-cli"),
            "qwen": ("Qwen Code", "@qwen-code/qwen-code", "0.24.4", "qwen-code")}
DONE = "AGENT-RUN-OVER"


class Fake:
    def __init__(self, logs: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.logs = logs
        self.proc = subprocess.Popen(
            [sys.executable, str(FAKE), "--port", str(self.port), "--logdir", str(logs)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        retry_until(self._healthy, 20, message="the fake model server did not start")

    def _healthy(self) -> bool:
        import urllib.request

        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_control/health", timeout=1)
        except OSError:
            return False
        return True

    def queue(self, actions: list[dict[str, Any]]) -> None:
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{self.port}/_control/queue", data=json.dumps(actions).encode(),
            method="POST"), timeout=5)

    def main_responses(self) -> list[dict[str, Any]]:
        """The turns' own model responses (not the CLIs' side requests), each with the words
        it streamed: the usage the fake reports follows from them."""
        path = self.logs / "events.jsonl"
        events = [json.loads(line) for line in path.read_text().splitlines()] \
            if path.exists() else []
        main = {e["rid"]: e for e in events if e["event"] == "request" and e.get("why") != "aux"}
        return [{**main[e["rid"]], "n_words": e["n_words"]} for e in events
                if e["event"] == "stream_start" and e["rid"] in main]

    def close(self) -> None:
        stop_process(self.proc)


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Fake]:
    server = Fake(tmp_path / "fake-logs")
    yield server
    server.close()


def _install(cli: str) -> Path:
    label, package, version, folder = VERSIONS[cli]
    try:
        return _npm_install(label, package, version, folder, cli, None).binary
    except AgentUnavailable as exc:
        pytest.skip(str(exc))


def _settings(cli: str, home: Path) -> Path:
    quiet = {"general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False,
                         "disableAutoUpdate": True, "disableUpdateNag": True},
             "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}
    if cli == "gemini":
        path = home / ".gemini" / "settings.json"
        settings = {**quiet, "security": {"auth": {"selectedType": "gemini-api-key"},
                                          "folderTrust": {"enabled": False}}}
    else:
        path = home / ".qwen" / "settings.json"
        settings = {**quiet, "security": {"auth": {"selectedType": "openai"}}}
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(settings))
    return path


def _script(cli: str, binary: Path, home: Path, port: int, workers: Path) -> str:
    url = f"http://127.0.0.1:{port}"
    env = {"HOME": str(home), "CONDUCTOR_WORKERS_DIR": str(workers),
           "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"}
    if cli == "gemini":
        env |= {"GEMINI_API_KEY": "fake-key", "GOOGLE_GEMINI_BASE_URL": url}
    else:
        env |= {"OPENAI_API_KEY": "fake-key", "OPENAI_BASE_URL": f"{url}/v1",
                "OPENAI_MODEL": "labb-model", "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    run = shlex.join([str(binary), "--yolo", "-p", "run the check"])
    return f"export {exports}; {run} >/dev/null 2>&1; echo {DONE}; exec cat"


@pytest.mark.parametrize("cli", ["gemini", "qwen"])
def test_tokens_stored_for_the_pane_are_what_the_fake_reported(
        cli: str, fake: Fake, server: Any, session: Any, watcher: Watcher, tmp_path: Path,
        isolated_env: Path) -> None:
    binary = _install(cli)
    home = tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    settings = _settings(cli, home)
    installed = conductor("pty", "hooks", "install", "--cli", cli, "--path", str(settings))
    assert installed.returncode == 0, installed.stderr
    fake.queue([{"type": "shell", "command": "echo hi", "pre_text": "Running the check."},
                {"type": "text", "text": "All done now, the check passed."}])
    tmux = Tmux(socket_name=server.socket_name)
    created = create_worker(tmux, watcher.workers_dir, project, name="agent", cli=cli,
                            command=_script(cli, binary, home, fake.port, isolated_env))
    pane = created.pane_id
    watcher.tick()  # the watcher knows the pane's row before its agent's file has usage

    def over() -> bool:
        return DONE in "\n".join(server.cmd("capture-pane", "-p", "-t", pane).stdout)

    retry_until(over, 120, interval=0.2, message=f"{cli} did not finish its run")
    watcher.tick()
    done = conductor("-L", server.socket_name, "pty", "status", "--json")
    assert done.returncode == 0, done.stderr
    row = next(w for w in json.loads(done.stdout) if w["name"] == "agent")
    assert row["session"] is not None and row["session"]["cli"] == cli
    assert Path(row["session"]["transcript"]).is_file()
    responses = fake.main_responses()
    assert [r["action"]["type"] for r in responses] == ["shell", "text"]
    # The fake's usage: Gemini's API 100 prompt and 10 candidate tokens a response; the OpenAI
    # one 100 prompt tokens and one completion token per word streamed.
    per_output = (lambda r: 10) if cli == "gemini" else (lambda r: r["n_words"])
    assert {k: row["usage"][k] for k in ("input", "output", "cache_read", "cache_write")} == {
        "input": 100 * len(responses), "output": sum(per_output(r) for r in responses),
        "cache_read": 0, "cache_write": 0}
