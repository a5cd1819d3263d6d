"""`conductor pty restore` (issue 33): after the tmux server is gone, each pane comes back with its
name, folder and row id, each agent in its own conversation (or fresh, saying why)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from app.act.create import create_worker
from app.act.restore import PANE_GONE
from app.adapters.store import StoreWriter, db_path
from app.adapters.store_read import StoreReader
from app.adapters.tmux import Tmux
from app.base.model import Job, JobKind, JobState, State
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.run.watcher import Watcher
from tests.conftest import conductor, conductor_in_process
from tests.support.waiting import STARTS_WITHIN_S, retry_until

FIRST = "7f1c2a4e-0d3b-4c55-9a61-3e2f8b9c0d11"
ENDED = "b2d5c1e0-5b8e-4a63-8d3a-6b1f0c2e9a77"
CODEX = "019a0b6c-1d2e-7f30-8a4b-5c6d7e8f9a0b"

# A stand-in agent: it writes how it was started, then stays (its process name is the CLI's).
# Asked for its help, it lists the flags of a current Codex, as a CLI does, and exits.
FAKE_AGENT = """#!/bin/sh
case " $* " in *" --help "*) echo "      --no-daemon"; exit 0;; esac
printf '%s\\n' "$(basename "$0") $* @ $(pwd)" >> "{log}"
while :; do sleep 1; done
"""


def _fake_agents(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir, log = tmp_path / "bin", tmp_path / "agents.log"
    bin_dir.mkdir()
    for name in ("claude", "codex"):
        script = bin_dir / name
        script.write_text(FAKE_AGENT.format(log=log))
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir, log


def _hook(server_pid: str, pane_id: str, cli: str, payload: dict[str, Any]) -> None:
    text = json.dumps(payload)
    args = ["pty", "hook", "--cli", cli, *([text] if cli == "codex" else [])]
    done = conductor(*args, input_text=None if cli == "codex" else text,
                     env={"TMUX_PANE": pane_id, "TMUX": f"/tmp/x,{server_pid},0"})
    assert done.returncode == 0, done.stderr


def _populated(server: Any, watcher: Watcher, tmp_path: Path) -> dict[str, str]:
    """Five panes and their hooks' sessions; then the server is killed. Names to row ids."""
    tmux = Tmux(socket_name=server.socket_name)
    repo, other = tmp_path / "repo", tmp_path / "other"
    repo.mkdir()
    other.mkdir()
    ids = {}
    panes = {}
    for name, folder, cli in (("ann", repo, "claude"), ("bob", repo, "claude"),
                              ("cal", repo, "claude"), ("cod", other, "codex"),
                              ("term", other, None)):
        created = create_worker(tmux, watcher.workers_dir, folder, name=name, cli=cli,
                                command="cat" if cli else None)
        ids[name], panes[name] = created.id, created.pane_id
    watcher.tick()
    server_pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    _hook(server_pid, panes["ann"], "claude", {"hook_event_name": "SessionStart",
                                               "session_id": FIRST, "source": "startup"})
    _hook(server_pid, panes["cal"], "claude", {"hook_event_name": "SessionEnd",
                                               "session_id": ENDED,
                                               "reason": "prompt_input_exit"})
    _hook(server_pid, panes["cod"], "codex", {"type": "agent-turn-complete", "thread-id": CODEX,
                                              "input-messages": ["hi"]})
    # bob's agent never named its session: it must not get ann's, which shares its folder.
    server.kill()
    return ids


def _dump(workers_dir: Path) -> list[Any]:
    conn = sqlite3.connect(db_path(workers_dir))
    try:
        return [list(conn.execute(f"SELECT * FROM {table} ORDER BY 1"))
                for table in ("ptys", "status", "status_history", "events", "herd", "jobs")]
    finally:
        conn.close()


def test_dry_run_prints_the_plan_and_changes_nothing(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path, isolated_env: Path) -> None:
    ids = _populated(server, watcher, tmp_path)
    worktree = tmp_path / "worktrees" / "bob-branch"  # what `create --worktree` made for bob
    worktree.mkdir(parents=True)
    store = StoreWriter(isolated_env)
    try:
        with store.transaction() as conn:
            store.upsert_pty(conn, {"id": "0123456789", "name": "far", "host": "gpu",
                                    "cwd": "/srv", "cli_type": "claude", "tmux_session": "w"})
            store.set_worktree(conn, ids["bob"], str(worktree))
    finally:
        store.close()
    before = _dump(isolated_env)

    done = conductor_in_process("-L", server.socket_name, "pty", "restore", "--dry-run")
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    assert f"resume claude session {FIRST}" in lines["ann"]
    assert lines["bob"].endswith(f"fresh claude (its session id is unknown)  in {worktree}")
    assert f"fresh claude (its session {ENDED} had ended)" in lines["cal"]
    assert f"resume codex session {CODEX}" in lines["cod"]
    assert "shell (was a shell)" in lines["term"]
    assert "skipped: host gpu: no host 'gpu' in the config file" in lines["far"]

    planned = json.loads(conductor_in_process("-L", server.socket_name, "pty", "restore",
                                              "--dry-run", "--json", "ann").stdout)
    assert [(p["id"], p["how"], p["command"]) for p in planned] == [
        (ids["ann"], "resume", f"claude --resume {FIRST}")]
    assert _dump(isolated_env) == before
    assert not Tmux(socket_name=server.socket_name).is_running()


def test_restore_brings_each_pane_back_in_its_own_conversation_keeping_its_row(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path, isolated_env: Path) -> None:
    ids = _populated(server, watcher, tmp_path)
    watcher.tick()  # the watcher sees the server gone: every row gets its final EXITED row
    # A watcher started between the crash and the restore reads those EXITED rows at its start.
    store = StoreWriter(isolated_env)
    restarted = Watcher(Tmux(socket_name=server.socket_name), store, load_packs(),
                        WatchSettings(interval_s=1, ready_min_s=0))
    bin_dir, log = _fake_agents(tmp_path)
    path = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}

    done = conductor("-L", server.socket_name, "pty", "restore", env=path)
    assert done.returncode == 0, done.stderr
    # The test session's own shells were on the server too: they come back as well.
    assert done.stdout.startswith("restored 7 panes:")

    def started() -> list[str]:
        return sorted(log.read_text().splitlines()) if log.exists() else []

    retry_until(lambda: len(started()) == 4, STARTS_WITHIN_S, interval=0.2)
    repo, other = tmp_path / "repo", tmp_path / "other"
    assert started() == sorted([f"claude --resume {FIRST} @ {repo}", f"claude  @ {repo}",
                                f"claude  @ {repo}",
                                f"codex resume --no-daemon {CODEX} @ {other}"])
    windows = server.cmd("list-windows", "-a", "-F",
                         "#{window_name} #{pane_current_path} #{@conductor-id}").stdout
    ours = sorted(w for w in windows if w.split()[0] in ids)
    assert ours == sorted([f"ann {repo} {ids['ann']}", f"bob {repo} {ids['bob']}",
                           f"cal {repo} {ids['cal']}", f"cod {other} {ids['cod']}",
                           f"term {other} {ids['term']}"])

    # The watcher keeps each row's id: its history continues, nothing new appears; the same
    # for the one started in between, which must not take the EXITED rows for the panes' states.
    watcher.tick()
    try:
        restarted.tick()
        assert set(ids.values()) <= set(restarted.tracked)
        judged = [restarted.tracked[i].assessment for i in ids.values()]
        assert all(a is None or a.state is not State.EXITED for a in judged)
        restarted.close()
    finally:
        store.close()
    status = conductor_in_process("-L", server.socket_name, "pty", "status", "--json")
    listed = json.loads(status.stdout)
    rows = {w["name"]: w for w in listed}
    assert {name: rows[name]["id"] for name in ids} == ids
    assert all(rows[name]["state"] != "EXITED" for name in ids)
    assert rows["ann"]["session"]["id"] == FIRST
    assert rows["bob"]["session"] is None
    assert len(listed) == 7  # the same rows as before: none new for a recreated pane

    again = conductor("-L", server.socket_name, "pty", "restore", env=path)
    assert (again.returncode, again.stdout.strip()) == (0, "nothing to restore")


def test_goal_herd_opt_in_queued_messages_and_a_running_cycle_come_back_with_the_pane(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path, isolated_env: Path) -> None:
    ids = _populated(server, watcher, tmp_path)
    now = time.time()
    store = StoreWriter(isolated_env)
    try:
        with store.transaction() as conn:
            store.herd.upsert_herd(conn, {"id": ids["ann"], "enabled": 1, "rules": "default",
                                     "dry_run": 0, "goal": "ship the parser", "updated_ts": now})
            # What the watcher does when the panes go (app/act/herd, app/act/cycle).
            store.herd.forget_herd(conn, [ids["ann"]])
            for text, detail in (("run the tests", PANE_GONE), ("old idea", "dropped by hand")):
                store.jobs.add_job(conn, Job(0, ids["bob"], JobKind.MESSAGE, JobState.DROPPED, text,
                                        origin="send", created_ts=now, state_ts=now,
                                        done_ts=now, detail=detail))
            store.jobs.add_job(conn, Job(0, ids["cal"], JobKind.CYCLE, JobState.DROPPED, "done: A",
                                    origin="report", created_ts=now, state_ts=now, done_ts=now,
                                    detail=PANE_GONE))
    finally:
        store.close()

    plan = conductor_in_process("-L", server.socket_name, "pty", "restore", "--dry-run")
    lines = {line.split()[0]: line for line in plan.stdout.splitlines()[1:]}
    assert lines["ann"].endswith("with herd on, goal")
    assert lines["bob"].endswith("with 1 queued")
    assert lines["cal"].endswith("with cycle paused (needs you)")

    bin_dir, _ = _fake_agents(tmp_path)
    done = conductor("-L", server.socket_name, "pty", "restore",
                     env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    reader = StoreReader(isolated_env)
    try:
        herd = reader.herd()[ids["ann"]]
        assert (herd["enabled"], herd["goal"]) == (1, "ship the parser")
        assert [(j.state, j.text) for j in reader.jobs(ids["bob"], open_only=True)] == [
            (JobState.QUEUED, "run the tests")]
        assert [(j.state, j.text) for j in reader.jobs(ids["cal"], open_only=True)] == [
            (JobState.PAUSED, "done: A")]
        assert (reader.status(ids["cal"]) or {}).get("cycle") == "PAUSED"
        assert reader.kept_herd(ids["ann"]) is None
    finally:
        reader.close()
    # Every pane is back: nothing is left to restore.
    again = conductor_in_process("-L", server.socket_name, "pty", "restore", "--dry-run")
    assert "nothing to restore" in again.stdout


def test_an_agent_whose_pane_tmux_kept_dead_starts_again_in_place(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path) -> None:
    tmux = Tmux(socket_name=server.socket_name)
    created = create_worker(tmux, watcher.workers_dir, tmp_path, name="ann", cli="claude",
                            command="cat")
    watcher.tick()
    server_pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    _hook(server_pid, created.pane_id, "claude", {"hook_event_name": "SessionStart",
                                                   "session_id": FIRST})
    server.cmd("send-keys", "-t", created.pane_id, "C-d")  # the agent exits; tmux keeps the pane

    def dead() -> bool:
        shown: list[str] = server.cmd("display-message", "-p", "-t", created.pane_id,
                                      "#{pane_dead}").stdout
        return shown == ["1"]

    retry_until(dead, STARTS_WITHIN_S, interval=0.1)
    watcher.tick()
    bin_dir, log = _fake_agents(tmp_path)
    # tmux starts the agent with the PATH of the client asking: restore's own.
    done = conductor("-L", server.socket_name, "pty", "restore", "ann",
                     env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    retry_until(lambda: log.exists() and log.read_text() != "", STARTS_WITHIN_S, interval=0.1)
    assert log.read_text() == f"claude --resume {FIRST} @ {tmp_path}\n"
    assert not dead()
    again = conductor("-L", server.socket_name, "pty", "restore", "ann")
    assert (again.returncode, again.stderr.count("\n")) == (1, 1)
    assert "is running; nothing restored" in again.stderr


def test_hostile_names_and_folders_arrive_as_themselves_and_run_nothing(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    hostile = f"w;$(touch {canary})#(touch {canary})'\""
    folder = tmp_path / "f #(id) #{pane_id} $(id) `id`"  # arrives as itself, or the path differs
    folder.mkdir()
    tmux = Tmux(socket_name=server.socket_name)
    created = create_worker(tmux, watcher.workers_dir, folder, name=hostile)
    watcher.tick()
    server.kill()

    done = conductor("-L", server.socket_name, "pty", "restore", created.id)
    assert done.returncode == 0, done.stderr
    assert server.cmd("list-panes", "-a", "-F", "#{@conductor-id}").stdout == [created.id]
    assert server.cmd("list-windows", "-a", "-F", "#{window_name}").stdout == [hostile]
    path = server.cmd("list-panes", "-a", "-F", "#{pane_current_path}").stdout
    retry_until(lambda: server.cmd("list-panes", "-a", "-F", "#{pane_current_path}").stdout
                == [str(folder)], STARTS_WITHIN_S, interval=0.1)
    assert path in ([str(folder)], [""])
    assert not canary.exists()


def test_codex_is_resumed_as_the_panes_own_process_when_its_release_knows_how(
        tmp_path: Path) -> None:
    """--no-daemon where the installed release lists it (0.169: no shared background server to
    wait on at "Resuming session…"); an older release that refuses it is resumed without."""
    from app.act.restore import AGENT_COMMANDS, agent_command

    started = tmp_path / "started"
    codex = tmp_path / "codex"
    command = agent_command("codex", AGENT_COMMANDS["codex"][1] or (), CODEX)
    for listed, expected in (("      --no-daemon  Run without the shared background server",
                              f"resume --no-daemon {CODEX}"), ("  --last", f"resume {CODEX}")):
        codex.write_text(f'#!/bin/sh\ncase " $* " in *" --help "*) echo "{listed}"; exit 0;; '
                         f'esac\nprintf "%s" "$*" > "{started}"\n')
        codex.chmod(0o755)
        env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
        done = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True,
                              timeout=30, check=False)
        assert done.returncode == 0, done.stderr
        assert started.read_text() == expected


def test_a_row_the_watcher_wrote_for_the_new_pane_first_is_not_written_over(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path, isolated_env: Path,
        monkeypatch: Any) -> None:
    """The watcher may judge a recreated pane before restore writes its rows (over control mode,
    or on a host where each restore step is an ssh call): its row stays the truth. An UNKNOWN
    written after it would stay too, since the watcher writes a row only when it changes."""
    from app.act import restore

    tmux = Tmux(socket_name=server.socket_name)
    created = create_worker(tmux, watcher.workers_dir, tmp_path, name="term")
    retry_until(lambda: _ticked_to_ready(watcher, created.id), STARTS_WITHIN_S, interval=0.1)
    server.kill()
    retry_until(lambda: _ticked_state(watcher, created.id) == "EXITED", STARTS_WITHIN_S,
                interval=0.1)
    record = restore._record

    def watcher_first(*args: Any) -> None:
        retry_until(lambda: _ticked_to_ready(watcher, created.id), STARTS_WITHIN_S, interval=0.1)
        record(*args)

    monkeypatch.setattr(restore, "_record", watcher_first)
    done = conductor_in_process("-L", server.socket_name, "pty", "restore", "term")
    assert done.returncode == 0, done.stderr
    row = watcher.store.statuses()[created.id]
    assert (row["state"], row["rule_id"]) != ("UNKNOWN", "restore")
    assert row["state"] == "READY"


def _ticked_to_ready(watcher: Watcher, wid: str) -> bool:
    watcher.tick()
    tracked = watcher.tracked.get(wid)
    return tracked is not None and tracked.assessment is not None \
        and tracked.assessment.state is State.READY


def _ticked_state(watcher: Watcher, wid: str) -> str:
    watcher.tick()
    return str(watcher.store.statuses()[wid]["state"])


def test_a_pane_the_watcher_saw_before_restore_marked_it_is_one_row(
        server: Any, session: Any, watcher: Watcher, tmp_path: Path, isolated_env: Path,
        monkeypatch: Any) -> None:
    """tmux lists a recreated pane between the command that makes it and the one that marks it
    with its row's id: the watcher may give it an id of its own meanwhile. Once marked, the
    pane is its row's: the passing id is dropped, not ended (an EXITED twin in `status`, and a
    second `restore` of the same pane)."""
    tmux = Tmux(socket_name=server.socket_name)
    created = create_worker(tmux, watcher.workers_dir, tmp_path, name="term")
    retry_until(lambda: _ticked_to_ready(watcher, created.id), STARTS_WITHIN_S, interval=0.1)
    server.kill()
    retry_until(lambda: _ticked_state(watcher, created.id) == "EXITED", STARTS_WITHIN_S,
                interval=0.1)
    run = Tmux.run
    seen_unmarked: list[str] = []

    def watcher_looks_first(self: Tmux, *args: str, **kwargs: Any) -> Any:
        if args[:2] == ("set-option", "-p") and "@conductor-id" in args and not seen_unmarked:
            pane_id = args[3]
            retry_until(lambda: _ticked_pane(watcher, pane_id), STARTS_WITHIN_S, interval=0.1)
            seen_unmarked.extend(w for w, t in watcher.tracked.items()
                                 if t.pane.pane_id == pane_id)
        return run(self, *args, **kwargs)

    monkeypatch.setattr(Tmux, "run", watcher_looks_first)
    done = conductor_in_process("-L", server.socket_name, "pty", "restore", "term")
    assert done.returncode == 0, done.stderr
    monkeypatch.setattr(Tmux, "run", run)
    [passing] = seen_unmarked
    assert passing != created.id
    retry_until(lambda: _ticked_to_ready(watcher, created.id), STARTS_WITHIN_S, interval=0.1)
    watcher.tick()
    rows = watcher.store.statuses()
    assert passing not in rows and watcher.store.pty(passing) is None
    assert [wid for wid, row in rows.items() if row["state"] != "EXITED"] == [created.id]
    assert not (isolated_env / passing).exists()


def _ticked_pane(watcher: Watcher, pane_id: str) -> bool:
    watcher.tick()
    return any(t.pane.pane_id == pane_id and t.stored.status_row is not None
               for t in watcher.tracked.values())
