"""Each pane's agent session (issue 33): hook payloads go through the real `conductor pty hook`
into the store a real watcher keeps, and `status --json` / `explain` show the newest one."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from app.act.create import create_worker
from app.adapters.store import StoreWriter, db_path
from app.adapters.store_read import StoreReader
from app.adapters.tmux import Tmux
from app.observe.sessions import SESSION_ID, identity
from app.run.watcher import Watcher
from tests.conftest import conductor
from tests.support.waiting import retry_until

FIRST = "7f1c2a4e-0d3b-4c55-9a61-3e2f8b9c0d11"
SECOND = "b2d5c1e0-5b8e-4a63-8d3a-6b1f0c2e9a77"


def _pane(server: Any, watcher: Watcher, tmp_path: Path, cli: str, name: str) -> str:
    """A registered pane whose CLI is ``cli`` (a stand-in process: only hooks matter here)."""
    tmux = Tmux(socket_name=server.socket_name)
    created = create_worker(tmux, watcher.workers_dir, tmp_path, name=name, cli=cli,
                            command="cat")
    watcher.tick()
    return created.pane_id


def _hook(server: Any, pane_id: str, payload: dict[str, Any], cli: str,
          as_argument: bool = False) -> None:
    server_pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    text = json.dumps(payload)
    args = ["pty", "hook", "--cli", cli, *([text] if as_argument else [])]
    done = conductor(*args, input_text=None if as_argument else text,
                     env={"TMUX_PANE": pane_id, "TMUX": f"/tmp/x,{server_pid},0"})
    assert (done.returncode, done.stdout) == (0, ""), done.stderr


def _sessions(server: Any) -> dict[str, Any]:
    done = conductor("-L", server.socket_name, "pty", "status", "--json")
    assert done.returncode == 0, done.stderr
    return {w["name"]: w["session"] for w in json.loads(done.stdout)}


def test_claude_session_start_names_the_session_and_the_newest_one_wins(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path) -> None:
    pane = _pane(server, watcher, tmp_path, "claude", "ann")
    _pane(server, watcher, tmp_path, "claude", "bob")  # same folder, no hook yet
    _hook(server, pane, {"hook_event_name": "SessionStart", "source": "startup",
                         "session_id": FIRST, "transcript_path": f"/home/u/.claude/{FIRST}.jsonl",
                         "cwd": str(tmp_path)}, "claude")
    found = _sessions(server)
    assert {name: found[name] for name in ("ann", "bob")} == {
        "ann": {"id": FIRST, "transcript": f"/home/u/.claude/{FIRST}.jsonl", "cli": "claude",
                "ended": False},
        "bob": None,  # never guessed from the folder's newest conversation
    }

    # /clear: Claude ends the old session and starts another in the same process.
    _hook(server, pane, {"hook_event_name": "SessionEnd", "reason": "clear",
                         "session_id": FIRST}, "claude")
    _hook(server, pane, {"hook_event_name": "SessionStart", "source": "clear",
                         "session_id": SECOND, "transcript_path": f"/t/{SECOND}.jsonl"}, "claude")
    assert _sessions(server)["ann"]["id"] == SECOND

    explained = conductor("-L", server.socket_name, "pty", "explain", "ann", "-n", "0")
    assert explained.returncode == 0, explained.stderr
    assert f"session: claude {SECOND}, transcript /t/{SECOND}.jsonl" in explained.stdout


def test_a_session_the_person_ended_is_marked_ended(server: Any, session: Any, watcher: Watcher,
                                                     tmp_path: Path) -> None:
    pane = _pane(server, watcher, tmp_path, "claude", "ann")
    _hook(server, pane, {"hook_event_name": "UserPromptSubmit", "session_id": FIRST,
                         "prompt": "hi"}, "claude")
    _hook(server, pane, {"hook_event_name": "SessionEnd", "reason": "prompt_input_exit",
                         "session_id": FIRST}, "claude")
    assert _sessions(server)["ann"] == {"id": FIRST, "transcript": None, "cli": "claude",
                                        "ended": True}


def test_codex_notify_names_its_thread(server: Any, session: Any, watcher: Watcher,
                                       tmp_path: Path) -> None:
    pane = _pane(server, watcher, tmp_path, "codex", "cod")
    # What Codex passes its notify program, as the last argument.
    _hook(server, pane, {"type": "agent-turn-complete", "thread-id": SECOND, "turn-id": "1",
                         "cwd": str(tmp_path), "input-messages": ["hi"],
                         "last-assistant-message": "hello"}, "codex", as_argument=True)
    assert _sessions(server)["cod"] == {"id": SECOND, "transcript": None, "cli": "codex",
                                        "ended": False}


def test_gemini_names_its_session_at_start_and_after_clear(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path) -> None:
    """Gemini CLI's SessionStart (installed with its hooks) carries the session id and chat
    file before any prompt; /clear starts another, which replaces it; restore resumes by id."""
    from app.act.restore import AGENT_COMMANDS, agent_command
    from app.install.hooks import GEMINI_EVENTS

    assert "SessionStart" in GEMINI_EVENTS
    pane = _pane(server, watcher, tmp_path, "gemini", "gem")
    chats = "/home/u/.gemini/tmp/0a1b/chats"
    _hook(server, pane, {"hook_event_name": "SessionStart", "source": "startup",
                         "session_id": FIRST, "transcript_path": f"{chats}/session-1.json",
                         "cwd": str(tmp_path), "timestamp": "2026-11-28T03:00:00.000Z"},
          "gemini")
    assert _sessions(server)["gem"] == {"id": FIRST, "transcript": f"{chats}/session-1.json",
                                        "cli": "gemini", "ended": False}
    _hook(server, pane, {"hook_event_name": "SessionEnd", "reason": "clear",
                         "session_id": FIRST, "timestamp": "2026-11-28T03:01:00.000Z"},
          "gemini")
    _hook(server, pane, {"hook_event_name": "SessionStart", "source": "clear",
                         "session_id": SECOND, "timestamp": "2026-11-28T03:01:00.100Z"},
          "gemini")
    assert _sessions(server)["gem"]["id"] == SECOND
    assert agent_command("gemini", AGENT_COMMANDS["gemini"][1] or (), SECOND) == \
        f"gemini --resume {SECOND}"


def test_clis_that_name_no_session_are_unknown_beside_one_that_does(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path) -> None:
    """A Qwen Code pane whose hooks named nothing yet and an opencode pane (no hooks at all)
    stay unknown, even in a folder where another pane's session is known (never "the newest
    of the folder")."""
    named = _pane(server, watcher, tmp_path, "claude", "ann")
    _pane(server, watcher, tmp_path, "qwen", "qwe")
    _pane(server, watcher, tmp_path, "opencode", "ope")
    _hook(server, named, {"hook_event_name": "SessionStart", "source": "startup",
                          "session_id": FIRST}, "claude")
    found = _sessions(server)
    assert (found["ann"] or {}).get("id") == FIRST
    assert (found["qwe"], found["ope"]) == (None, None)
    explained = conductor("-L", server.socket_name, "pty", "explain", "qwe", "-n", "0")
    assert "session: unknown" in explained.stdout, explained.stderr


def test_a_pane_whose_program_changed_forgets_the_old_session() -> None:
    event = {"session_id": FIRST, "cli": "claude", "event": "other", "ts": 1.0}
    assert identity({"cli_type": "shell"}, event) is None
    found = identity({"cli_type": "claude"}, event)
    assert found is not None and found.resumable


def test_ids_that_could_be_anything_but_an_id_are_never_resumable() -> None:
    for hostile in ("$(reboot)", "--help", "a b", "x;y", "", "a" * 200, "-x"):
        found = identity({"cli_type": "claude"},
                         {"session_id": hostile, "cli": "claude", "event": "other"})
        assert found is None or not found.resumable, hostile
    assert SESSION_ID.fullmatch(FIRST)


def test_a_hook_on_a_store_from_before_transcripts_brings_it_up_to_date(
        isolated_env: Path) -> None:
    StoreWriter(isolated_env).close()
    conn = sqlite3.connect(db_path(isolated_env))
    conn.execute("ALTER TABLE events DROP COLUMN transcript")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm009_session_identity'")
    conn.commit()
    conn.close()
    payload = json.dumps({"hook_event_name": "SessionStart", "session_id": FIRST,
                          "transcript_path": "/t/x.jsonl"})
    done = conductor("pty", "hook", "--cli", "claude", input_text=payload,
                     env={"TMUX_PANE": "%7", "TMUX": "/tmp/x,4242,0"})
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    reader = StoreReader(isolated_env)
    try:
        found = reader.newest_session_event("%7", 4242)
    finally:
        reader.close()
    assert found is not None and (found["session_id"], found["transcript"]) == (
        FIRST, "/t/x.jsonl")


def _respawned(server: Any, pane: str, after: float) -> None:
    """The pane's program replaced by a new process that starts after ``after`` (tmux's
    respawn-pane, as a person quitting the agent and starting it again would)."""
    retry_until(lambda: time.time() > after + 0.1, message="the clock did not move")
    server.cmd("respawn-pane", "-k", "-t", pane, "cat")


def _pane_pid(server: Any, pane: str) -> int:
    return int(server.cmd("display-message", "-p", "-t", pane, "#{pane_pid}").stdout[0])


def test_a_new_codex_process_in_the_pane_is_unknown_until_it_names_its_thread(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path) -> None:
    pane = _pane(server, watcher, tmp_path, "codex", "cod")
    _hook(server, pane, {"type": "agent-turn-complete", "thread-id": SECOND, "turn-id": "1",
                         "cwd": str(tmp_path), "input-messages": ["hi"],
                         "last-assistant-message": "hello"}, "codex", as_argument=True)
    named_at = time.time()
    watcher.tick()
    assert _sessions(server)["cod"]["id"] == SECOND  # the process that named it goes on
    before = _pane_pid(server, pane)
    _respawned(server, pane, named_at)
    assert _pane_pid(server, pane) != before
    watcher.tick()
    # Codex names a thread only when a turn ends: the new process's is not known yet, and the
    # old one is no longer the pane's (restore must not resume it, usage not read from it).
    assert _sessions(server)["cod"] is None
    watcher.tick()
    store = StoreReader(watcher.workers_dir)
    try:
        starts = [e for e in store.events(pane, int(server.cmd(
            "display-message", "-p", "#{pid}").stdout[0]), 0) if e["kind"] == "agent_start"]
    finally:
        store.close()
    assert len(starts) == 1  # said once, not every tick
    explained = conductor("-L", server.socket_name, "pty", "explain", "cod", "-n", "0")
    assert f"session: unknown (process {_pane_pid(server, pane)} started after session " \
           f"{SECOND} was named; its agent has not named the new one yet)" in explained.stdout
    _hook(server, pane, {"type": "agent-turn-complete", "thread-id": FIRST, "turn-id": "1",
                         "cwd": str(tmp_path), "input-messages": ["hi"],
                         "last-assistant-message": "hello"}, "codex", as_argument=True)
    watcher.tick()
    assert _sessions(server)["cod"]["id"] == FIRST


def _usage(server: Any) -> dict[str, Any]:
    done = conductor("-L", server.socket_name, "pty", "status", "--json")
    assert done.returncode == 0, done.stderr
    return {w["name"]: w["usage"] for w in json.loads(done.stdout)}


def test_qwen_and_gemini_chat_files_their_hooks_name_are_counted(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path) -> None:
    """Each hook names its chat file (Qwen Code's SessionStart, Gemini CLI's too); the watcher
    reads the usage the file records: the fake model's 100 prompt tokens per request and one
    output token per word (Qwen Code 0.24.4, Gemini CLI 0.61.0 lines, trimmed)."""
    qwen_pane = _pane(server, watcher, tmp_path, "qwen", "qwe")
    gemini_pane = _pane(server, watcher, tmp_path, "gemini", "gem")
    qwen_file = tmp_path / f"{FIRST}.jsonl"
    qwen_file.write_text("".join(json.dumps({
        "uuid": uuid, "sessionId": FIRST, "timestamp": "2026-11-28T12:48:27.206Z",
        "type": "assistant", "model": "labb-model", "message": {"role": "model", "parts": []},
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": out,
                          "cachedContentTokenCount": 0, "totalTokenCount": 100 + out}}) + "\n"
        for uuid, out in (("e4cf", 1), ("fbce", 3))))
    gemini_file = tmp_path / "session-2026-11-28T12-47-b2d5c1e0.jsonl"
    gemini_file.write_text(json.dumps({
        "id": "b1eb", "timestamp": "2026-11-28T12:47:29.127Z", "type": "gemini",
        "content": "Running.", "model": "gemini-3.1-pro-preview",
        "tokens": {"input": 100, "output": 10, "cached": 0, "thoughts": 0, "tool": 0,
                   "total": 110}}) + "\n")
    _hook(server, qwen_pane, {"hook_event_name": "SessionStart", "source": "startup",
                              "session_id": FIRST, "transcript_path": str(qwen_file),
                              "cwd": str(tmp_path), "timestamp": "2026-11-28T12:58:14.488Z"},
          "qwen")
    _hook(server, gemini_pane, {"hook_event_name": "SessionStart", "source": "startup",
                                "session_id": SECOND, "transcript_path": str(gemini_file),
                                "cwd": str(tmp_path), "timestamp": "2026-11-28T12:47:28.390Z"},
          "gemini")
    watcher.tick()
    assert _sessions(server)["qwe"] == {"id": FIRST, "transcript": str(qwen_file),
                                        "cli": "qwen", "ended": False}
    found = _usage(server)
    assert {k: found["qwe"][k] for k in ("input", "output", "cache_read")} == \
        {"input": 200, "output": 4, "cache_read": 0}
    assert {k: found["gem"][k] for k in ("input", "output", "cache_read")} == \
        {"input": 100, "output": 10, "cache_read": 0}


def test_codex_new_conversation_sent_by_dispatch_clear_forgets_the_old_thread(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path) -> None:
    """Codex's /new names nothing until the new thread's first turn ends: once conductor has
    sent it (``dispatch --clear``), the pane's session is unknown; Claude Code's /clear names
    its new session itself (SessionStart), so its pane keeps what its hook says."""
    from app.act.cycle.jobs import _forget_session
    from app.observe.one_pane import resolve

    tmux = Tmux(socket_name=server.socket_name)
    codex_pane = _pane(server, watcher, tmp_path, "codex", "cod")
    claude_pane = _pane(server, watcher, tmp_path, "claude", "cla")
    _hook(server, codex_pane, {"type": "agent-turn-complete", "thread-id": SECOND,
                               "turn-id": "1", "cwd": str(tmp_path), "input-messages": ["hi"],
                               "last-assistant-message": "hello"}, "codex", as_argument=True)
    _hook(server, claude_pane, {"hook_event_name": "SessionStart", "source": "clear",
                                "session_id": FIRST}, "claude")
    _forget_session(tmux, resolve(tmux, watcher.workers_dir, "cod"), "codex", "/new",
                    watcher.workers_dir)
    _forget_session(tmux, resolve(tmux, watcher.workers_dir, "cla"), "claude", "/clear",
                    watcher.workers_dir)
    found = _sessions(server)
    assert found["cod"] is None
    assert found["cla"]["id"] == FIRST


def test_qwen_and_opencode_resume_by_id_as_their_clis_take_it() -> None:
    """Both checked against the lab's fake server: the resumed turn's request carried the
    earlier turns (Qwen Code 0.24.4 `qwen --resume ID`, opencode 1.18.33 `--session ID`)."""
    from app.act.restore import AGENT_COMMANDS, agent_command

    assert agent_command("qwen", AGENT_COMMANDS["qwen"][1] or (), FIRST) == \
        f"qwen --resume {FIRST}"
    opencode_id = "ses_dddcc2780ffenwIiJJnfUkf2Cp"
    assert SESSION_ID.fullmatch(opencode_id)
    assert agent_command("opencode", AGENT_COMMANDS["opencode"][1] or (), opencode_id) == \
        f"opencode --session {opencode_id}"


def test_a_session_whose_conversation_file_is_gone_is_restored_fresh(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path) -> None:
    """Gemini CLI 0.61 deletes a resumed session's files at its next start in the folder (its
    session cleanup takes the header-only file `--resume` leaves for the session's own):
    `gemini --resume ID` would then exit with an error, so the plan starts it fresh and says
    why. While the file is there, the pane is resumed."""
    from app.act.restore import FRESH, RESUME, plan

    pane = _pane(server, watcher, tmp_path, "gemini", "gem")
    chat = tmp_path / "session-2026-11-28T13-17-50d77921.jsonl"
    chat.write_text("{}\n")
    _hook(server, pane, {"hook_event_name": "BeforeAgent", "prompt": "hi", "session_id": FIRST,
                         "transcript_path": str(chat), "cwd": str(tmp_path),
                         "timestamp": "2026-11-28T13:17:53.952Z"}, "gemini")

    def planned() -> tuple[str, str]:
        reader = StoreReader(watcher.workers_dir)
        try:
            rows = [w for w in reader.workers(server.socket_name) if w["name"] == "gem"]
            found = plan(reader, rows, live=set())
        finally:
            reader.close()
        return found[0].how, found[0].why

    assert planned() == (RESUME, "")
    chat.unlink()
    assert planned() == (FRESH, f"its conversation file {chat} is gone")


def test_gemini_resume_names_no_file_of_its_own() -> None:
    """Gemini CLI 0.61's SessionStart on `--resume` names a new file that only gets a header;
    the turns go on in the session's first file, which BeforeAgent names (seen live)."""
    from app.observe.hookevents import parse_event

    base = {"session_id": FIRST, "cwd": "/p", "timestamp": "2026-11-28T13:18:00.262Z"}
    resumed = parse_event("gemini", json.dumps({
        **base, "hook_event_name": "SessionStart", "source": "resume",
        "transcript_path": "/h/.gemini/tmp/p/chats/session-2026-11-28T13-18-50d77921.jsonl"}))
    assert (resumed.session_id, resumed.transcript) == (FIRST, "")
    prompt = parse_event("gemini", json.dumps({
        **base, "hook_event_name": "BeforeAgent", "prompt": "again",
        "transcript_path": "/h/.gemini/tmp/p/chats/session-2026-11-28T13-17-50d77921.jsonl"}))
    assert prompt.transcript.endswith("13-17-50d77921.jsonl")
