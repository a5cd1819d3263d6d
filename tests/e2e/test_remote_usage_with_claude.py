"""The remote hook line with the real Claude Code (issue 33): the lines ``hooks install --host``
writes, in Claude Code's settings, get its real payloads; the pane option then names its real
session and transcript (app.run.hosts.record_hooks), and that transcript read over a real sshd
on loopback (app.adapters.remote_tails) gives the tokens the fake model reported. The agent runs
in a tmux server here, the file is read through ssh as another host's would be: what matters
is the payload's shape and the transcript's, both Claude Code's own."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.adapters.remote_tails import RemoteTails
from app.adapters.ssh import HostConfig
from app.adapters.store import StoreWriter, db_path
from app.adapters.usage_files import Tail
from app.install.remote_hooks import merged
from app.run.hosts import record_hooks
from tests.hosts.conftest import ssh_host  # noqa: F401  # a fixture
from tests.hosts.sshd import SshHost
from tests.support.agents import ClaudeInTmux
from tests.support.scripted_model import Say
from tests.support.waiting import retry_until

pytestmark = [pytest.mark.slow, pytest.mark.agent]

TURNS = 2


def _option(lab: ClaudeInTmux) -> str:
    """The hook option as control mode reports it, the server's pid first."""
    return lab.tmux("display-message", "-p", "-t", lab.pane_id,
                    "#{pid} #{@conductor-hook}").strip()


def test_claude_codes_own_payload_names_its_transcript_read_over_ssh(
        claude: ClaudeInTmux, ssh_host: Callable[[str], SshHost],  # noqa: F811
        isolated_env: Path) -> None:
    text, _ = merged("claude", str(claude.settings_path), None)
    assert text is not None
    claude.settings_path.write_text(text, encoding="utf-8")
    alpha = ssh_host("alpha")
    via = HostConfig("alpha", "alpha", tuple(alpha.ssh_options)).via()
    with claude:
        for turn in range(1, TURNS + 1):
            claude.server.queue(Say(f"Answer {turn}."))
            before = _option(claude)
            question = f"Question {turn}"
            claude.type_text(question)

            def typed(question: str = question) -> bool:
                return question in claude.capture()

            def stopped(before: str = before) -> bool:  # the Stop hook's new value
                now = _option(claude)
                return now != before and " Stop " in now

            retry_until(typed, 30, interval=0.1)
            claude.send_keys("Enter")
            claude.server.wait_for_turn_end(turn, seconds=90)
            retry_until(stopped, 30, interval=0.2)
        value = _option(claude)
        store = StoreWriter(isolated_env)
        try:
            record_hooks(store, [(claude.pane_id, value, time.time())], "alpha:default")
        finally:
            store.close()
        with sqlite3.connect(db_path(isolated_env)) as conn:
            session_id, transcript = conn.execute(
                "SELECT session_id, transcript FROM events WHERE kind = 'hook' "
                "ORDER BY seq DESC LIMIT 1").fetchone()
        assert transcript.startswith(str(claude.home / ".claude" / "projects"))
        assert transcript.endswith(f"/{session_id}.jsonl") and Path(transcript).is_file()
        main = [r.usage for r in claude.server.responses if r.main]
        assert len(main) == TURNS
        try:
            read = RemoteTails(via)
            found = read([Tail(transcript, "claude")])[0]
        finally:
            via.close()
        assert (sum(u.input for u in found), sum(u.output for u in found),
                sum(u.cache_read for u in found), sum(u.cache_write for u in found)) == (
            sum(u["input_tokens"] for u in main), sum(u["output_tokens"] for u in main),
            sum(u["cache_read_input_tokens"] for u in main),
            sum(u["cache_creation_input_tokens"] for u in main))
