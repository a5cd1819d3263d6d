"""A minute of everything at once (issue 28): the real watcher over local panes and two real sshd
hosts, while other processes send, answer, dispatch, fire bursts of hooks and read the status,
and one host goes down and comes back. Afterwards every transition the watcher logged is in the
store, the watcher holds no deleted file of the store, no live pane reads stale, the database is
whole, and nothing of ours is left running on either host once the watcher stops."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.adapters.store import db_path
from tests.conftest import REPO, conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.hosts.test_watch_hosts import AGENT, agent_on, rows
from tests.support.processes import deleted_store_files
from tests.support.waiting import STARTS_WITHIN_S, retry_until, stop_process

SOAK_S = 60.0
HOOK_BURST = 100
# What a hook, `send` or `answer` does to the store from its own process: open, write, close.
_BURST = """
import sys, time
from app.adapters.store import record_event
for n in range(int(sys.argv[2])):
    record_event(sys.argv[1], {"ts": time.time(), "kind": "hook", "event": "other",
                               "pane_id": "%999", "detail": f"burst {n}"})
"""
_TRANSITION = re.compile(r"\((?P<key>[0-9a-f]{10})\): \S+ -> (?P<state>[A-Z_]+) after ")


def _integrity(workers: Path) -> str:
    conn = sqlite3.connect(db_path(workers))
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()




def ours_on(host: SshHost) -> list[str]:
    """Processes started for conductor on the host: everything whose environment names the
    host's tmux folder (sshd sets it for every session), but its tmux server and the panes'
    programs."""
    server = host.tmux("display-message", "-p", "#{pid}").stdout.strip()
    spared = {int(server)} | set(_descendants(int(server))) if server.isdigit() else set()
    marker = f"TMUX_TMPDIR={host.tmux_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in spared:
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


def _nothing_left_on(host: SshHost, before: list[str]) -> None:
    retry_until(lambda: ours_on(host) == before, 15, interval=0.3,
                message=f"left on {host.name}: {ours_on(host)}")


def _descendants(root: int) -> list[int]:
    from tests.hosts.sshd import descendants

    return descendants(root)


class Traffic:
    """Other processes at the store and the panes, each kind in its own thread, until stopped;
    every CLI failure that is not a refusal (a traceback, a store error) is kept."""

    def __init__(self, server: Any, workers: Path) -> None:
        self.server = server
        self.workers = workers
        self.stop = threading.Event()
        self.faults: list[str] = []
        self.counts: dict[str, int] = {}

    def _pty(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = conductor("-L", self.server.socket_name, "pty", *args, timeout=120)
        if "Traceback" in done.stderr or "status store" in done.stderr:
            self.faults.append(f"{args[0]}: {done.stderr.strip()[-300:]}")
        self.counts[args[0]] = self.counts.get(args[0], 0) + 1
        return done

    def _loop(self, body: Callable[[int], object], pause: float) -> None:
        n = 0
        while not self.stop.is_set():
            body(n)
            n += 1
            self.stop.wait(pause)

    def start(self) -> list[threading.Thread]:
        bodies: list[tuple[Callable[[int], object], float]] = [
            (lambda n: self._pty("send", "local:agent", f"say sent {n}"), 1.0),
            (lambda n: self._pty("dispatch", "alpha:agent", f"say dispatched {n}",
                                 "--timeout", "15"), 2.0),
            (self._ask_and_answer, 1.0),
            (lambda n: self._pty("status", "--json"), 0.2),
            (lambda n: self._pty("status", "--short"), 0.3),
            (self._hooks, 2.0),
        ]
        threads = [threading.Thread(target=self._loop, args=b, daemon=True) for b in bodies]
        for thread in threads:
            thread.start()
        return threads

    def _ask_and_answer(self, n: int) -> None:
        self._pty("send", "local:agent", "ask")
        self._pty("answer", "local:agent", "approve" if n % 2 else "refuse")

    def _hooks(self, n: int) -> None:
        done = subprocess.run([sys.executable, "-c", _BURST, str(self.workers), str(HOOK_BURST)],
                              capture_output=True, text=True, timeout=120, cwd=REPO,
                              check=False)
        if done.returncode != 0:
            self.faults.append(f"hook burst: {done.stderr.strip()[-300:]}")
        self.counts["hooks"] = self.counts.get("hooks", 0) + HOOK_BURST
        payload = json.dumps({"hook_event_name": "Stop", "session_id": f"s{n}"})
        hook = conductor("pty", "hook", "--cli", "claude", input_text=payload,
                         env={"TMUX_PANE": "%999", "TMUX": "/tmp/none,1,0"})
        if hook.returncode != 0:
            self.faults.append(f"hook: {hook.stderr.strip()[-300:]}")


def _logged_transitions(workers: Path) -> set[tuple[str, str]]:
    text = "".join(p.read_text(encoding="utf-8") for p in sorted(workers.glob("watch.log*")))
    return {(m["key"], m["state"]) for m in _TRANSITION.finditer(text)}


def _stored_transitions(workers: Path) -> tuple[set[tuple[str, str]], set[str]]:
    conn = sqlite3.connect(db_path(workers))
    try:
        history = {(r[0], r[1]) for r in conn.execute("SELECT id, state FROM status_history")}
        ids = {r[0] for r in conn.execute("SELECT id FROM ptys")}
    finally:
        conn.close()
    return history, ids


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_minute_of_sends_answers_hooks_readers_and_a_host_lost_leaves_the_store_true(
        ssh_host: Callable[[str], SshHost], session: Any, server: Any, tmp_path: Path,
        watcher_process: Any, isolated_env: Path) -> None:
    alpha, beta = ssh_host("alpha"), ssh_host("beta")
    agent_on(alpha)
    agent_on(beta)
    session.new_window(window_name="agent", window_shell=AGENT, attach=False)
    write_hosts(tmp_path / "config.toml", alpha, beta)
    before = {h.name: ours_on(h) for h in (alpha, beta)}
    proc = watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: {"local:agent", "alpha:agent", "beta:agent"} <= rows(server).keys(),
                STARTS_WITHIN_S, interval=0.5)

    traffic = Traffic(server, isolated_env)
    threads = traffic.start()
    started = time.monotonic()
    time.sleep(SOAK_S / 3)
    beta.stop()
    retry_until(lambda: rows(server)["beta:agent"].get("stale"), 30, interval=0.5)
    assert not rows(server)["alpha:agent"].get("stale")
    assert not rows(server)["local:agent"].get("stale")
    time.sleep(max(0.0, started + SOAK_S * 2 / 3 - time.monotonic()))
    beta.start()
    time.sleep(max(0.0, started + SOAK_S - time.monotonic()))
    traffic.stop.set()
    for thread in threads:
        thread.join(120)

    assert traffic.faults == []
    assert traffic.counts.get("hooks", 0) >= HOOK_BURST
    retry_until(lambda: not any(w.get("stale") for w in rows(server).values()), 60,
                interval=0.5, message=f"stale rows: {rows(server)}")
    assert deleted_store_files(proc.pid) == []
    logged = _logged_transitions(isolated_env)
    history, ids = _stored_transitions(isolated_env)
    assert logged, "the soak made no transition at all"
    assert {t for t in logged if t[0] in ids} <= history

    stop_process(proc, seconds=15)
    assert proc.returncode == 0
    assert _integrity(isolated_env) == "ok"
    for host in (alpha, beta):
        _nothing_left_on(host, before[host.name])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_watcher_killed_mid_burst_leaves_a_whole_store_and_starts_again(
        session: Any, server: Any, watcher_process: Any, isolated_env: Path) -> None:
    session.new_window(window_name="agent", window_shell=AGENT, attach=False)
    proc = watcher_process("--interval", "0.5", "--no-notify")
    retry_until(lambda: "local:agent" in rows(server), STARTS_WITHIN_S, interval=0.3)
    burst = subprocess.Popen([sys.executable, "-c", _BURST, str(isolated_env), "400"], cwd=REPO)
    retry_until(lambda: _events(isolated_env) >= 50, STARTS_WITHIN_S, interval=0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert burst.wait(120) == 0
    assert _integrity(isolated_env) == "ok"

    again = watcher_process("--interval", "0.5", "--no-notify")
    retry_until(lambda: rows(server).get("local:agent", {}).get("state") == "READY"
                and not rows(server)["local:agent"].get("stale"), STARTS_WITHIN_S,
                interval=0.3)
    stop_process(again, seconds=15)
    assert _integrity(isolated_env) == "ok"
    assert _events(isolated_env) == 400


def _events(workers: Path) -> int:
    try:
        conn = sqlite3.connect(db_path(workers))
    except sqlite3.Error:
        return 0
    try:
        return int(conn.execute("SELECT COUNT(*) FROM events WHERE pane_id = '%999'").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()
